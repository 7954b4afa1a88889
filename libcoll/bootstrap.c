/*
 * bootstrap.c: the rank side of the bootstrap. A rank may start before
 * the root (torchrun, Slurm and mpirun start processes in any order), so
 * refused connections are retried with backoff until the deadline; only a
 * network that cannot be reached at all, or an explicit refusal by the
 * root (wrong secret, wrong version, rank taken), ends the attempt early.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "bootstrap.h"
#include "error.h"
#include "handshake.h"
#include "log.h"

#define JOIN_BACKOFF_MIN_NS (10 * 1000000ull)
#define JOIN_BACKOFF_MAX_NS (200 * 1000000ull)
#define JOIN_REPORT_GRACE_NS (2000 * 1000000ull)


typedef struct join_ctx {
    const coll_uid_t *uid;
    int nranks, rank;
    uint32_t round;
    const coll_peer_info_t *mine;
    uint64_t deadline_ns;
    const coll_waiter_t *w;
    coll_peer_info_t *table;
    char root_str[COLL_ADDRSTR_LEN];
    char last_why[256]; /* why the last attempt should be retried */
} join_ctx_t;

/* Outcome of one attempt: done, retry later, or give up with an error. */
#define JOIN_RETRY ((coll_status_t)(COLL_INPROGRESS + 1))

static coll_status_t join_connect(join_ctx_t *j, int *fd_p)
{
    int fd, err;

    COLL_CHECK(coll_sock_connect_start(&j->uid->root, &fd));
    while ((err = coll_sock_connect_result(fd)) == EINPROGRESS) {
        if (coll_waiter_aborted(j->w) || coll_time_ns() > j->deadline_ns) {
            err = coll_waiter_aborted(j->w) ? ECANCELED : ETIMEDOUT;
            break;
        }
        coll_sock_wait(fd, POLLOUT, j->deadline_ns, j->w);
    }
    if (err == 0) {
        *fd_p = fd;
        return COLL_OK;
    }
    close(fd);
    if (err == ECANCELED)
        return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_ABORTED, "init aborted while connecting "
                          "to the bootstrap root %s", j->root_str);
    if (err == ENETUNREACH || err == EACCES || err == EPERM || err == EAFNOSUPPORT)
        return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_UNREACHABLE,
                          "rank %d cannot reach the bootstrap root %s: %s", j->rank,
                          j->root_str, strerror(err));
    snprintf(j->last_why, sizeof(j->last_why), "%s", strerror(err));
    return JOIN_RETRY;
}

static coll_status_t join_handshake(join_ctx_t *j, int fd)
{
    coll_hs_t hs;
    coll_hello_t fields = {0};
    coll_status_t st;

    fields.prefix.kind = COLL_CONN_BOOT;
    fields.src_rank = (uint32_t)j->rank;
    fields.dst_rank = UINT32_MAX;
    fields.nranks = (uint32_t)j->nranks;
    fields.round = j->round;
    coll_hs_client_start(&hs, fd, &j->uid->root, &fields, j->uid->secret, j->deadline_ns);
    while ((st = coll_hs_progress(&hs)) == COLL_INPROGRESS) {
        if (coll_waiter_aborted(j->w))
            return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_ABORTED,
                              "init aborted during the bootstrap handshake");
        coll_sock_wait(fd, (short)(coll_hs_events(&hs) == EPOLLIN ? POLLIN : POLLOUT),
                       j->deadline_ns, j->w);
    }
    if (st == COLL_OK)
        return COLL_OK;
    if (hs.verdict == COLL_VERDICT_ROUND || st == COLL_ERR_PEER_FAILED) {
        snprintf(j->last_why, sizeof(j->last_why), "%s", hs.errmsg);
        return JOIN_RETRY;
    }
    return coll_error(COLL_SUBSYS_BOOT, st, "rank %d: bootstrap with %s failed: %s", j->rank,
                      j->root_str, hs.errmsg);
}

static coll_status_t join_send_info(join_ctx_t *j, int fd)
{
    uint8_t frame[COLL_BOOT_HDR_BYTES + COLL_WIRE_PEERINFO_MAX];
    coll_wbuf_t w = {frame + COLL_BOOT_HDR_BYTES, COLL_WIRE_PEERINFO_MAX, 0, 0};

    coll_peer_info_encode(j->mine, &w);
    if (w.overflow)
        return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_INTERNAL, "peer info exceeds %d bytes",
                          COLL_WIRE_PEERINFO_MAX);
    coll_store_u32(frame, COLL_BOOT_RANKINFO);
    coll_store_u32(frame + 4, (uint32_t)w.off);
    if (coll_sock_io_deadline(fd, frame, COLL_BOOT_HDR_BYTES + w.off, 1, j->deadline_ns,
                              j->w) != COLL_OK) {
        snprintf(j->last_why, sizeof(j->last_why), "connection lost while sending");
        return JOIN_RETRY;
    }
    return COLL_OK;
}

/* One pass over a TABLE body: every entry must decode to exactly its
 * length and carry its index as rank, and the entries must fill the body.
 * With table NULL it only checks, so that a malformed table leaves the
 * caller's table untouched. */
static int table_pass(const uint8_t *buf, size_t len, int nranks, coll_peer_info_t *table)
{
    coll_rbuf_t r = {buf, len, 0, 0};
    coll_peer_info_t info;

    for (int i = 0; i < nranks; i++) {
        uint32_t n = (uint32_t)coll_get_uint(&r, 4);
        if (r.underflow || n > COLL_WIRE_PEERINFO_MAX || n > len - r.off)
            return -1;
        coll_rbuf_t one = {buf + r.off, n, 0, 0};
        if (coll_peer_info_decode(&one, &info) != COLL_OK || one.off != n ||
            info.rank != (uint32_t)i)
            return -1;
        if (table)
            table[i] = info;
        r.off += n;
    }
    return nranks > 0 && r.off == len ? 0 : -1;
}

coll_status_t coll_boot_parse_table(const uint8_t *buf, size_t len, int nranks,
                                    coll_peer_info_t *table)
{
    if (table_pass(buf, len, nranks, NULL) != 0)
        return COLL_ERR_PROTOCOL;
    table_pass(buf, len, nranks, table);
    return COLL_OK;
}

/* The frame's type and length, checked against the caps before the body
 * is allocated. */
static int reply_hdr_ok(uint32_t type, uint32_t len, int nranks)
{
    size_t cap = type == COLL_BOOT_TABLE ? (size_t)nranks * (4 + COLL_WIRE_PEERINFO_MAX)
                                         : 4 + COLL_WIRE_ERRTEXT_MAX;
    return (type == COLL_BOOT_TABLE || type == COLL_BOOT_ERROR) && len <= cap &&
           (type != COLL_BOOT_ERROR || len >= 4);
}

/* The root's error frame: its status (a negative COLL_ERR_*, else a
 * protocol error) and its text, which may hold anything but a NUL. */
static coll_status_t reply_error(const uint8_t *body, uint32_t len, int rank)
{
    char text[COLL_WIRE_ERRTEXT_MAX + 1];
    coll_status_t st = (coll_status_t)(int32_t)coll_load_u32(body);
    size_t n = len - 4;

    if (st >= 0)
        st = COLL_ERR_PROTOCOL;
    memcpy(text, body + 4, n);
    text[n] = '\0';
    return coll_error(COLL_SUBSYS_BOOT, st, "rank %d: the job failed to form: %s", rank,
                      text[0] ? text : "(the root gave no reason)");
}

coll_status_t coll_boot_read_reply(int fd, int nranks, int rank, const char *root_str,
                                   uint64_t deadline_ns, const coll_waiter_t *w,
                                   coll_peer_info_t *table)
{
    uint8_t hdr[COLL_BOOT_HDR_BYTES], *body = NULL;
    coll_status_t st;
    uint32_t type = 0, len = 0;

    /* Wait a little past our own deadline: the root's report of who is
     * missing is sent at the root's deadline and names the real culprit. */
    st = coll_sock_io_deadline(fd, hdr, sizeof(hdr), 0, deadline_ns + JOIN_REPORT_GRACE_NS, w);
    if (st == COLL_OK) {
        type = coll_load_u32(hdr);
        len = coll_load_u32(hdr + 4);
        if (!reply_hdr_ok(type, len, nranks))
            return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_PROTOCOL,
                              "rank %d: the bootstrap root %s sent a bad frame (type %u, "
                              "%u bytes)", rank, root_str, type, len);
        body = malloc(len ? len : 1);
        if (!body)
            return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_NO_MEMORY, "cannot allocate %u bytes",
                              len);
        st = coll_sock_io_deadline(fd, body, len, 0, deadline_ns, w);
    }
    if (st == COLL_ERR_PEER_FAILED)
        st = coll_error(COLL_SUBSYS_BOOT, st, "rank %d: the bootstrap root %s closed the "
                        "connection before the job formed (root process died?)", rank,
                        root_str);
    else if (st == COLL_ERR_TIMEOUT || st == COLL_ERR_ABORTED)
        st = coll_error(COLL_SUBSYS_BOOT, st, "rank %d: %s waiting for the other ranks at the "
                        "bootstrap root %s", rank, st == COLL_ERR_TIMEOUT ? "timed out"
                        : "aborted", root_str);
    else if (type == COLL_BOOT_ERROR)
        st = reply_error(body, len, rank);
    else if (coll_boot_parse_table(body, len, nranks, table) != COLL_OK)
        st = coll_error(COLL_SUBSYS_BOOT, COLL_ERR_PROTOCOL,
                        "rank %d: the bootstrap root %s sent a malformed table", rank, root_str);
    free(body);
    return st;
}

static coll_status_t join_read_reply(join_ctx_t *j, int fd)
{
    return coll_boot_read_reply(fd, j->nranks, j->rank, j->root_str, j->deadline_ns, j->w,
                                j->table);
}

static coll_status_t join_once(join_ctx_t *j)
{
    int fd = -1;
    coll_status_t st = join_connect(j, &fd);

    if (st == COLL_OK)
        st = join_handshake(j, fd);
    if (st == COLL_OK)
        st = join_send_info(j, fd);
    if (st == COLL_OK)
        st = join_read_reply(j, fd);
    if (fd >= 0)
        close(fd);
    return st;
}

coll_status_t coll_bootstrap_join(const coll_uid_t *uid, int nranks, int rank,
                                  uint32_t round, const coll_peer_info_t *mine,
                                  uint64_t deadline_ns, const coll_waiter_t *w,
                                  coll_peer_info_t *table)
{
    join_ctx_t j = {uid, nranks, rank, round, mine, deadline_ns, w, table, "", ""};
    uint64_t backoff = JOIN_BACKOFF_MIN_NS, start = coll_time_ns();
    coll_status_t st;

    coll_addr_str(&uid->root, j.root_str);
    while ((st = join_once(&j)) == JOIN_RETRY) {
        if (coll_waiter_aborted(w))
            return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_ABORTED,
                              "rank %d: init aborted while joining the bootstrap root %s",
                              rank, j.root_str);
        if (coll_time_ns() + backoff > deadline_ns)
            return coll_error(COLL_SUBSYS_BOOT, COLL_ERR_UNREACHABLE,
                              "rank %d cannot reach the bootstrap root %s: still failing "
                              "after %.1f s (%s); is rank 0 / the id's creator running, and "
                              "is the address right?", rank, j.root_str,
                              (double)(coll_time_ns() - start) * 1e-9, j.last_why);
        COLL_TRACE(COLL_SUBSYS_BOOT, "rank %d: root %s not ready (%s), retrying", rank,
                   j.root_str, j.last_why);
        coll_waiter_sleep(w, backoff);
        backoff = COLL_MIN(backoff * 2, JOIN_BACKOFF_MAX_NS);
    }
    return st;
}
