/*
 * bootstrap_root.c: the root thread. It runs its own event loop so that a
 * silent or hostile connection never delays a rank: each connection
 * proves the job secret (handshake.c) within COLL_HANDSHAKE_TIMEOUT or is
 * dropped and logged once. Frames are length-capped before any
 * allocation. When every rank has sent its info the root sends each the
 * whole table; if a rank leaves early, the job cannot form and the root
 * tells everyone which rank it lost rather than let them wait.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bootstrap.h"
#include "error.h"
#include "evloop.h"
#include "handshake.h"
#include "log.h"
#include "param.h"

enum {
    CONN_HANDSHAKE,
    CONN_READ_HDR,
    CONN_READ_INFO,
    CONN_JOINED,  /* waiting for the others */
    CONN_REPLY,   /* writing the table or an error */
    CONN_DONE,
};

typedef struct root_conn {
    coll_list_t link;
    struct coll_root *root;
    int fd;
    coll_ev_source_t src;
    int state;
    coll_hs_t hs;
    int rank;
    uint8_t hdr[COLL_BOOT_HDR_BYTES];
    size_t off;
    uint8_t info[COLL_WIRE_PEERINFO_MAX];
    uint32_t info_len;
    const uint8_t *reply;
    size_t reply_len;
} root_conn_t;

struct coll_root {
    pthread_t thread;
    pthread_mutex_t lock;
    int detached;
    int finished;
    int cancel;           /* atomic: the owning rank's init failed */
    coll_evloop_t *ev;
    int listen_fd;
    coll_ev_source_t listen_src;
    coll_addr_t addr;
    char addr_str[COLL_ADDRSTR_LEN];
    uint8_t secret[COLL_SECRET_BYTES];
    uint32_t round;
    uint64_t deadline_ns;
    uint64_t handshake_ns;
    int nranks;           /* 0 until the first rank says */
    int joined;
    root_conn_t **by_rank;
    coll_list_t conns;
    uint8_t *reply;       /* the table or the error frame, shared by all */
    size_t reply_len;
    int failed;
    int accounted;        /* after a failure: ranks told, refused or lost */
};

/* ---- connections ----------------------------------------------------------- */

static void conn_free(root_conn_t *c)
{
    struct coll_root *root = c->root;
    coll_evloop_del(root->ev, &c->src);
    close(c->fd);
    if (c->rank >= 0 && root->by_rank && root->by_rank[c->rank] == c)
        root->by_rank[c->rank] = NULL;
    coll_list_del(&c->link);
    free(c);
}

static uint32_t root_validate(void *arg, const coll_hello_t *h)
{
    root_conn_t *c = arg;
    struct coll_root *root = c->root;

    if (h->round != root->round)
        return COLL_VERDICT_ROUND;
    if (h->nranks == 0 || h->nranks > COLL_WIRE_NRANKS_MAX ||
        (root->nranks && h->nranks != (uint32_t)root->nranks))
        return COLL_VERDICT_NRANKS;
    if (h->src_rank >= h->nranks)
        return COLL_VERDICT_RANK;
    if (!root->nranks) {
        root->by_rank = calloc(h->nranks, sizeof(*root->by_rank));
        if (!root->by_rank)
            return COLL_VERDICT_NRANKS;
        root->nranks = (int)h->nranks;
    }
    if (root->by_rank[h->src_rank])
        return COLL_VERDICT_RANK; /* two processes claim one rank */
    return COLL_VERDICT_OK;
}

/* Build the shared reply: an error frame with status and text. */
static void root_fail(struct coll_root *root, coll_status_t status, const char *fmt, ...)
    COLL_PRINTF(3, 4);

static void root_set_reply(struct coll_root *root, uint32_t type, const uint8_t *payload,
                           size_t len)
{
    free(root->reply);
    root->reply = malloc(COLL_BOOT_HDR_BYTES + len);
    root->reply_len = 0;
    if (!root->reply)
        return;
    coll_store_u32(root->reply, type);
    coll_store_u32(root->reply + 4, (uint32_t)len);
    memcpy(root->reply + COLL_BOOT_HDR_BYTES, payload, len);
    root->reply_len = COLL_BOOT_HDR_BYTES + len;
}

static void conn_start_reply(root_conn_t *c)
{
    if (c->root->failed && c->rank >= 0)
        c->root->accounted++;
    c->state = CONN_REPLY;
    c->reply = c->root->reply;
    c->reply_len = c->root->reply_len;
    c->off = 0;
    coll_evloop_mod(c->root->ev, &c->src, EPOLLOUT);
}

/* Connections still in their handshake are left alone: one that turns
 * out to be a rank gets the error once it is through (conn_after_handshake),
 * and none may be freed here, inside another connection's handler: their
 * events may be in the batch being dispatched. */
static void start_replies(struct coll_root *root)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, &root->conns) {
        root_conn_t *c = coll_container_of(pos, root_conn_t, link);
        if (c->state == CONN_JOINED || (root->failed && c->state != CONN_HANDSHAKE &&
                                        c->state != CONN_REPLY))
            conn_start_reply(c);
    }
}

static void root_fail(struct coll_root *root, coll_status_t status, const char *fmt, ...)
{
    uint8_t payload[4 + COLL_WIRE_ERRTEXT_MAX];
    char text[COLL_WIRE_ERRTEXT_MAX];
    va_list ap;

    if (root->failed)
        return;
    if (root->nranks && root->joined == root->nranks) {
        /* the table is out, or going out from the buffer an error frame
         * would replace: too late to tell the ranks anything */
        root->failed = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    COLL_WARN(COLL_SUBSYS_BOOT, "bootstrap root %s: %s", root->addr_str, text);
    root->failed = 1;
    coll_store_u32(payload, (uint32_t)(int32_t)status);
    size_t len = strlen(text);
    memcpy(payload + 4, text, len);
    root_set_reply(root, COLL_BOOT_ERROR, payload, 4 + len);
    start_replies(root);
}

static void root_send_table(struct coll_root *root)
{
    size_t cap = (size_t)root->nranks * (4 + COLL_WIRE_PEERINFO_MAX), off = 0;
    uint8_t *table = malloc(cap);

    if (!table) {
        root_fail(root, COLL_ERR_NO_MEMORY, "cannot allocate the table of %d ranks",
                  root->nranks);
        return;
    }
    for (int r = 0; r < root->nranks; r++) {
        root_conn_t *c = root->by_rank[r];
        coll_store_u32(table + off, c->info_len);
        memcpy(table + off + 4, c->info, c->info_len);
        off += 4 + c->info_len;
    }
    root_set_reply(root, COLL_BOOT_TABLE, table, off);
    free(table);
    COLL_INFO(COLL_SUBSYS_BOOT, "bootstrap root %s: all %d ranks joined", root->addr_str,
              root->nranks);
    start_replies(root);
}

uint32_t coll_boot_rankinfo_len(const uint8_t hdr[COLL_BOOT_HDR_BYTES])
{
    uint32_t type = coll_load_u32(hdr), len = coll_load_u32(hdr + 4);
    return type == COLL_BOOT_RANKINFO && len <= COLL_WIRE_PEERINFO_MAX ? len : 0;
}

coll_status_t coll_boot_parse_rankinfo(const uint8_t *buf, size_t len, uint32_t rank,
                                       coll_peer_info_t *info_p)
{
    coll_rbuf_t r = {buf, len, 0, 0};
    coll_peer_info_t info;

    if (coll_peer_info_decode(&r, &info) != COLL_OK || r.off != len || info.rank != rank)
        return COLL_ERR_PROTOCOL;
    *info_p = info;
    return COLL_OK;
}

static void conn_on_info(root_conn_t *c)
{
    struct coll_root *root = c->root;
    coll_peer_info_t info;

    if (coll_boot_parse_rankinfo(c->info, c->info_len, (uint32_t)c->rank, &info) != COLL_OK) {
        root_fail(root, COLL_ERR_PROTOCOL, "rank %d (%s) sent malformed peer info", c->rank,
                  c->hs.peer);
        return;
    }
    c->state = CONN_JOINED;
    coll_evloop_mod(root->ev, &c->src, EPOLLIN); /* to notice if it dies */
    if (++root->joined == root->nranks)
        root_send_table(root);
}

/* Read the RANKINFO frame: header, cap check, payload. */
static int conn_read(root_conn_t *c)
{
    uint8_t *buf = c->state == CONN_READ_HDR ? c->hdr : c->info;
    size_t want = c->state == CONN_READ_HDR ? COLL_BOOT_HDR_BYTES : c->info_len;
    ssize_t n = want > c->off ? coll_sock_read(c->fd, buf + c->off, want - c->off) : 0;

    if (n < 0)
        return -1;
    c->off += (size_t)n;
    if (c->off < want)
        return 0;
    c->off = 0;
    if (c->state == CONN_READ_HDR) {
        uint32_t type = coll_load_u32(c->hdr), len = coll_boot_rankinfo_len(c->hdr);
        if (len == 0) {
            root_fail(c->root, COLL_ERR_PROTOCOL, "rank %d (%s) sent a bad frame (type %u, "
                      "%u bytes; at most %d allowed)", c->rank, c->hs.peer, type,
                      coll_load_u32(c->hdr + 4),
                      COLL_WIRE_PEERINFO_MAX);
            return 0;
        }
        c->info_len = len;
        c->state = CONN_READ_INFO;
        return conn_read(c);
    }
    conn_on_info(c);
    return 0;
}

static void conn_after_handshake(root_conn_t *c, coll_status_t st)
{
    struct coll_root *root = c->root;

    if (st != COLL_OK) {
        char peer[COLL_ADDRSTR_LEN], why[sizeof(c->hs.errmsg)];
        unsigned version = c->hs.peer_version;
        snprintf(peer, sizeof(peer), "%s", c->hs.peer);
        snprintf(why, sizeof(why), "%s", c->hs.errmsg);
        /* logged before the close, so the line exists once the peer sees EOF */
        if (st != COLL_ERR_VERSION_MISMATCH)
            COLL_WARN(COLL_SUBSYS_BOOT, "bootstrap root %s: dropped connection from %s: %s",
                      root->addr_str, peer, why);
        conn_free(c);
        /* A version mismatch from a real rank dooms the job: say so to all. */
        if (st == COLL_ERR_VERSION_MISMATCH) {
            root_fail(root, st, "a rank at %s speaks wire protocol version %u, the "
                      "bootstrap root version %u: run one libcoll version on every rank",
                      peer, version, coll_wire_version());
            root->accounted++; /* it knows: it saw our version */
        }
        return;
    }
    c->rank = (int)c->hs.hello_fields.src_rank;
    root->by_rank[c->rank] = c;
    if (root->failed) { /* too late to join: tell it why the job failed */
        conn_start_reply(c);
        return;
    }
    c->state = CONN_READ_HDR;
    coll_evloop_mod(root->ev, &c->src, EPOLLIN);
}

static void conn_handler(void *arg, uint32_t events)
{
    root_conn_t *c = arg;
    struct coll_root *root = c->root;
    coll_status_t st;
    (void)events;

    switch (c->state) {
    case CONN_HANDSHAKE:
        st = coll_hs_progress(&c->hs);
        if (st == COLL_INPROGRESS)
            coll_evloop_mod(root->ev, &c->src, coll_hs_events(&c->hs));
        else
            conn_after_handshake(c, st);
        return;
    case CONN_READ_HDR:
    case CONN_READ_INFO:
    case CONN_JOINED:
        if (c->state == CONN_JOINED || conn_read(c) < 0) {
            /* A joined rank never sends more: readable means it closed. */
            char peer[COLL_ADDRSTR_LEN];
            int rank = c->rank;
            snprintf(peer, sizeof(peer), "%s", c->hs.peer);
            conn_free(c);
            if (!root->failed && root->joined < root->nranks) {
                root_fail(root, COLL_ERR_PEER_FAILED, "rank %d (%s) disconnected during "
                          "bootstrap (process died?)", rank, peer);
                root->accounted++; /* nobody left to tell there */
            }
        }
        return;
    case CONN_REPLY: {
        ssize_t n = coll_sock_write(c->fd, c->reply + c->off, c->reply_len - c->off);
        if (n < 0 || (c->off += (size_t)n) == c->reply_len) {
            c->state = CONN_DONE;
            conn_free(c);
        }
        return;
    }
    default:
        conn_free(c);
    }
}

static void listen_handler(void *arg, uint32_t events)
{
    struct coll_root *root = arg;
    (void)events;

    for (;;) {
        coll_addr_t peer;
        int fd = coll_sock_accept(root->listen_fd, &peer);
        if (fd < 0)
            return;
        root_conn_t *c = calloc(1, sizeof(*c));
        if (!c) {
            close(fd);
            return;
        }
        c->root = root;
        c->fd = fd;
        c->rank = -1;
        coll_list_push_back(&root->conns, &c->link);
        coll_hs_server_start(&c->hs, fd, &peer, COLL_CONN_BOOT, root->secret,
                             coll_time_ns() + root->handshake_ns, root_validate, c);
        if (coll_evloop_add(root->ev, &c->src, fd, EPOLLOUT, conn_handler, c) != COLL_OK) {
            conn_free(c);
            continue;
        }
        conn_handler(c, EPOLLOUT);
    }
}

/* ---- the thread ------------------------------------------------------------ */

static void root_check_timers(struct coll_root *root)
{
    coll_list_t *pos, *tmp;
    uint64_t now = coll_time_ns();

    coll_list_for_each_safe(pos, tmp, &root->conns) {
        root_conn_t *c = coll_container_of(pos, root_conn_t, link);
        if (c->state == CONN_HANDSHAKE && now > c->hs.deadline_ns)
            conn_handler(c, 0);
    }
    /* (a formed job's root only finishes sending the table) */
    int formed = root->nranks && root->joined == root->nranks;
    if (now > root->deadline_ns && !root->failed && !formed) {
        char missing[256] = "";
        size_t used = 0;
        for (int r = 0; r < root->nranks && used + 12 < sizeof(missing); r++)
            if (!root->by_rank[r] || root->by_rank[r]->state < CONN_JOINED)
                used += (size_t)snprintf(missing + used, sizeof(missing) - used, "%s%d",
                                         used ? "," : "", r);
        root_fail(root, COLL_ERR_TIMEOUT, "bootstrap timed out: %d of %d ranks joined "
                  "(missing: %s)", root->joined, root->nranks, root->nranks ? missing : "all");
    }
}

static void root_free(struct coll_root *root)
{
    while (!coll_list_empty(&root->conns))
        conn_free(coll_list_first(&root->conns, root_conn_t, link));
    if (root->listen_fd >= 0) {
        coll_evloop_del(root->ev, &root->listen_src);
        close(root->listen_fd);
    }
    coll_evloop_destroy(root->ev);
    pthread_mutex_destroy(&root->lock);
    free(root->by_rank);
    free(root->reply);
    free(root);
}

static void *root_thread(void *arg)
{
    struct coll_root *root = arg;
    int detached;

    for (;;) {
        int formed = root->nranks && root->joined == root->nranks;
        /* A failed job's root keeps answering ranks that come late (they
         * would otherwise retry until their deadline) until each rank knows,
         * unless its owner cancelled it: then its init must end now. */
        int all_know = root->nranks && root->accounted >= root->nranks;
        int cancelled = __atomic_load_n(&root->cancel, __ATOMIC_ACQUIRE);
        int done = (formed || (root->failed && (all_know || cancelled))) &&
                   coll_list_empty(&root->conns);
        /* A failed root whose replies are out, or the deadline plus a grace
         * period for slow readers, ends the thread. */
        if (done || coll_time_ns() > root->deadline_ns + 5000000000ull)
            break;
        coll_evloop_sleep(root->ev, 100);
        coll_evloop_dispatch(root->ev);
        root_check_timers(root);
        if (__atomic_load_n(&root->cancel, __ATOMIC_ACQUIRE) && !root->failed) {
            root_fail(root, COLL_ERR_PEER_FAILED, "the rank hosting the bootstrap root "
                      "failed its own init; the job cannot form");
            root->deadline_ns = coll_time_ns(); /* leave 5 s to deliver the news */
        }
    }
    /* The listening port closes as soon as the job has formed. */
    pthread_mutex_lock(&root->lock);
    root->finished = 1;
    detached = root->detached;
    pthread_mutex_unlock(&root->lock);
    if (detached)
        root_free(root);
    return NULL;
}

coll_status_t coll_root_start(const coll_addr_t *bind_addr, const uint8_t *secret,
                              uint32_t round, uint64_t deadline_ns, coll_root_t **root_p,
                              coll_addr_t *bound_p)
{
    coll_status_t st;
    struct coll_root *root = calloc(1, sizeof(*root));

    if (!root)
        return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_NO_MEMORY, "cannot allocate the root");
    root->listen_fd = -1;
    pthread_mutex_init(&root->lock, NULL);
    coll_list_init(&root->conns);
    memcpy(root->secret, secret, COLL_SECRET_BYTES);
    root->round = round;
    root->deadline_ns = deadline_ns;
    COLL_CHECK_GOTO(coll_param_duration_ns(COLL_PARAM_HANDSHAKE_TIMEOUT, &root->handshake_ns),
                    st, err);
    COLL_CHECK_GOTO(coll_evloop_create(&root->ev), st, err);
    COLL_CHECK_GOTO(coll_sock_listen(bind_addr, 1, &root->listen_fd, &root->addr), st, err);
    coll_addr_str(&root->addr, root->addr_str);
    COLL_CHECK_GOTO(coll_evloop_add(root->ev, &root->listen_src, root->listen_fd, EPOLLIN,
                                    listen_handler, root),
                    st, err);
    if (pthread_create(&root->thread, NULL, root_thread, root) != 0) {
        st = coll_error(COLL_SUBSYS_BOOT, COLL_ERR_SYSTEM, "cannot start the root thread");
        goto err;
    }
    *bound_p = root->addr;
    *root_p = root;
    return COLL_OK;
err:
    root_free(root);
    return st;
}

void coll_root_release(coll_root_t *root, int mode)
{
    int finished;

    if (mode == COLL_ROOT_CANCEL) {
        __atomic_store_n(&root->cancel, 1, __ATOMIC_RELEASE);
        coll_evloop_wake(root->ev);
    }
    if (mode != COLL_ROOT_DETACH) {
        pthread_join(root->thread, NULL);
        root_free(root);
        return;
    }
    pthread_detach(root->thread);
    pthread_mutex_lock(&root->lock);
    root->detached = 1;
    finished = root->finished;
    pthread_mutex_unlock(&root->lock);
    if (finished)
        root_free(root);
}
