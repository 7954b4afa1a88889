/*
 * schedule.c: the schedule engine (see schedule.h). A schedule is built as a
 * vertex array plus a list of edges; coll_sched_start turns the edges into
 * successor lists and releases the vertices that wait for nothing.
 *
 * Completions of messages arrive in transport callbacks, which only note
 * them; the communicator's progress pass (coll_sched_progress) then marks
 * vertices done, releases their successors and starts them. Starting a
 * send or receive from inside a transport callback would re-enter the
 * transport in the middle of its own work, which is why the two are split.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight.h"
#include "log.h"
#include "reduce.h"
#include "schedule.h"

enum { V_SEND, V_RECV, V_REDUCE, V_COPY, V_AVG, V_JOIN, V_CHECK, V_POLL };
enum { V_WAITING, V_ISSUED, V_DONE };

typedef struct coll_vertex {
    uint8_t type;
    uint8_t state;
    uint32_t deps_left;
    uint32_t succ_first, nsucc; /* into s->succ, set by start */
    uint32_t mtag;
    uint8_t fold;               /* recv: reduce as it arrives, dst = incoming op a */
    uint8_t local_first;        /* ... or dst = a op incoming */
    uint8_t hints;              /* COLL_TP_HINT_* */
    uint8_t replied;            /* send, recv: the transport wrote the folded range back
                                   (coll_tp_req.replied) */
    int peer;
    coll_vid_t unless;          /* send, recv: done without moving anything where this
                                   vertex's message was replied (-1: always moves) */
    void *reply;                /* send: coll_tp_req.reply */
    void *dst;
    const void *a, *b;
    size_t len;                 /* bytes (send, recv, copy) or elements (reduce, avg) */
    struct coll_request *req;   /* send, recv: while in flight */
    coll_sched_check_fn check;  /* check */
    coll_sched_poll_fn poll;    /* poll; dst is its arg, mtag its step */
} coll_vertex_t;

struct coll_sched {
    struct coll_comm *comm;
    coll_list_t link;           /* comm->scheds while running */
    uint32_t seq;
    const char *algo;           /* static: the algorithm's name */
    char name[64];              /* "allreduce #12 (ring)", for messages; formatted
                                   when first asked for (snprintf per call shows
                                   in the profile of small collectives) */
    coll_args_t args;
    /* take_spare clears from here on; coll_sched_create sets all above */
    uint32_t nv, ne, nready, ncompleted, nscratch; /* entries used in the arrays below */
    uint32_t left;              /* vertices not done */
    uint32_t inflight;          /* messages started, not done */
    size_t bytes_done;
    coll_status_t status;       /* first error (building or running) */
    coll_vid_t gate;            /* every new vertex waits for it (-1: none) */
    coll_vid_t failed;          /* the vertex that failed first (-1: none) */
    uint32_t npolling;          /* poll vertices started, not done */
    int mbox_peer;              /* the peer a mailbox step waits for (-1: none) */
    int mbox_put;               /* 1: for it to free a slot for our message; 0: for its message */
    struct coll_request *req;   /* the collective's request */
    /* From here on: arrays and their capacities, kept when the schedule is
     * recycled (take_spare), so that a small collective allocates nothing. */
    coll_vertex_t *v;
    uint32_t capv;
    uint32_t (*edge)[2];        /* build time: (from, to) */
    uint32_t cape;
    uint32_t *succ, capsucc;    /* successor lists, concatenated */
    uint32_t *ready;            /* released, not yet started */
    uint32_t *completed;        /* messages done, noted by callbacks */
    uint32_t *polling;          /* poll vertices started, not done */
    coll_status_t *completed_st;
    uint32_t capnodes;          /* capacity of ready, completed, completed_st */
    struct coll_scratch { void *p; size_t len; } *scratch;
    uint32_t capscratch;
};

#define SCHED_KEPT offsetof(coll_sched_t, v) /* the part take_spare keeps */

static const char *const coll_names[COLL_NUM_COLLS] = {
    [COLL_BARRIER] = "barrier",       [COLL_BCAST] = "broadcast",
    [COLL_REDUCE] = "reduce",         [COLL_ALLREDUCE] = "allreduce",
    [COLL_ALLGATHER] = "allgather",   [COLL_REDUCE_SCATTER] = "reduce_scatter",
    [COLL_ALLTOALL] = "alltoall",     [COLL_ALLTOALLV] = "alltoallv",
    [COLL_SCATTER] = "scatter",       [COLL_GATHER] = "gather",
};

const char *coll_coll_name(coll_coll_t coll)
{
    return (unsigned)coll < COLL_NUM_COLLS ? coll_names[coll] : "?";
}

const coll_args_t *coll_sched_args(const coll_sched_t *s)
{
    return &s->args;
}

const char *coll_sched_name(const coll_sched_t *s)
{
    coll_sched_t *m = (coll_sched_t *)s; /* the name is a cache */
    if (!m->name[0])
        snprintf(m->name, sizeof(m->name), "%s #%u (%s)", coll_coll_name(s->args.coll), s->seq,
                 s->algo);
    return s->name;
}

uint32_t coll_sched_seq(const coll_sched_t *s)
{
    return s->seq;
}

struct coll_comm *coll_sched_comm(const coll_sched_t *s)
{
    return s->comm;
}

int coll_sched_rank(const coll_sched_t *s)
{
    return s->comm->rank;
}

int coll_sched_size(const coll_sched_t *s)
{
    return s->comm->nranks;
}

/* ---- building ------------------------------------------------------------- */

static void nomem(coll_sched_t *s)
{
    if (s->status == COLL_OK)
        s->status = COLL_ERR_NO_MEMORY;
}

/* Grow *p (elements of size `esize`, capacity *cap) to hold n + 1. */
static int grow(void **p, uint32_t *cap, uint32_t n, size_t esize)
{
    if (n < *cap)
        return 0;
    uint32_t ncap = *cap ? *cap * 2 : 64;
    void *q = realloc(*p, (size_t)ncap * esize);
    if (!q)
        return -1;
    *p = q;
    *cap = ncap;
    return 0;
}

static void free_arrays(coll_sched_t *s)
{
    free(s->scratch);
    free(s->v);
    free(s->edge);
    free(s->succ);
    free(s->ready);
    free(s->completed);
    free(s->completed_st);
    free(s->polling);
    free(s);
}

void coll_sched_cache_release(struct coll_comm *comm)
{
    if (comm->sched_spare)
        free_arrays(comm->sched_spare);
    comm->sched_spare = NULL;
    coll_blocks_release(&comm->scratch_blocks);
}

void *coll_sched_scratch(coll_sched_t *s, size_t bytes)
{
    size_t len;
    void *p = coll_blocks_take(&s->comm->scratch_blocks, bytes, &len);

    if (!p || grow((void **)&s->scratch, &s->capscratch, s->nscratch, sizeof(*s->scratch)) != 0) {
        free(p);
        nomem(s);
        return NULL;
    }
    s->scratch[s->nscratch].p = p;
    s->scratch[s->nscratch++].len = len;
    return p;
}

static int add_edge(coll_sched_t *s, coll_vid_t from, uint32_t to)
{
    if (grow((void **)&s->edge, &s->cape, s->ne, sizeof(*s->edge)) != 0) {
        nomem(s);
        return -1;
    }
    s->edge[s->ne][0] = (uint32_t)from;
    s->edge[s->ne][1] = to;
    s->ne++;
    s->v[to].deps_left++;
    return 0;
}

static coll_vid_t add_vertex(coll_sched_t *s, int type, int ndeps, const coll_vid_t *deps)
{
    if (s->status != COLL_OK ||
        grow((void **)&s->v, &s->capv, s->nv, sizeof(*s->v)) != 0) {
        nomem(s);
        return -1;
    }
    uint32_t id = s->nv++;
    coll_vertex_t *v = &s->v[id];
    coll_zero(v, sizeof(*v));
    v->type = (uint8_t)type;
    v->unless = -1;
    for (int i = 0; i < ndeps; i++)
        if (deps[i] >= 0 && add_edge(s, deps[i], id) != 0)
            return -1;
    /* a vertex that waits for nothing else waits for the gate; the others
     * wait for it through their dependencies */
    if (v->deps_left == 0 && s->gate >= 0 && add_edge(s, s->gate, id) != 0)
        return -1;
    return (coll_vid_t)id;
}

static coll_vid_t add_message(coll_sched_t *s, int type, const void *buf, size_t bytes, int peer,
                              uint32_t mtag, int ndeps, const coll_vid_t *deps)
{
    coll_vid_t id = add_vertex(s, type, ndeps, deps);
    if (id >= 0) {
        coll_vertex_t *v = &s->v[id];
        v->a = buf;
        v->dst = (void *)buf;
        v->len = bytes;
        v->peer = peer;
        v->mtag = mtag;
    }
    return id;
}

coll_vid_t coll_sched_send(coll_sched_t *s, const void *buf, size_t bytes, int peer,
                           uint32_t mtag, int ndeps, const coll_vid_t *deps)
{
    return add_message(s, V_SEND, buf, bytes, peer, mtag, ndeps, deps);
}

coll_vid_t coll_sched_send_hinted(coll_sched_t *s, const void *buf, size_t bytes, int peer,
                                  uint32_t mtag, uint32_t hints, int ndeps,
                                  const coll_vid_t *deps)
{
    coll_vid_t id = add_message(s, V_SEND, buf, bytes, peer, mtag, ndeps, deps);
    if (id >= 0)
        s->v[id].hints = (uint8_t)hints;
    return id;
}

coll_vid_t coll_sched_recv(coll_sched_t *s, void *buf, size_t bytes, int peer, uint32_t mtag,
                           int ndeps, const coll_vid_t *deps)
{
    return add_message(s, V_RECV, buf, bytes, peer, mtag, ndeps, deps);
}

coll_vid_t coll_sched_recv_result(coll_sched_t *s, void *buf, size_t bytes, int peer,
                                  uint32_t mtag, int ndeps, const coll_vid_t *deps)
{
    coll_vid_t id = add_message(s, V_RECV, buf, bytes, peer, mtag, ndeps, deps);
    if (id >= 0 && s->args.stream)
        s->v[id].hints = COLL_TP_HINT_STREAM;
    return id;
}

coll_vid_t coll_sched_recv_reduce(coll_sched_t *s, void *dst, const void *local, void *tmp,
                                  size_t count, int peer, uint32_t mtag, int order, int ndeps,
                                  const coll_vid_t *deps)
{
    size_t bytes = count * s->args.esize;
    const coll_peer_t *pr = &s->comm->peers[peer];

    int fold = pr->ep && (pr->ep->recv_fold == 1 ||
                          (pr->ep->recv_fold == COLL_TP_FOLD_IN_PLACE && dst == local));

    if (count > 0 && s->comm->fold && fold) {
        coll_vid_t id = add_message(s, V_RECV, dst, bytes, peer, mtag, ndeps, deps);
        if (id >= 0) {
            s->v[id].a = local;
            s->v[id].fold = 1;
            s->v[id].local_first = order == COLL_LOCAL_FIRST;
        }
        return id;
    }
    if (!tmp)
        tmp = coll_sched_scratch(s, bytes);
    coll_vid_t rv = coll_sched_recv(s, tmp, bytes, peer, mtag, ndeps, deps);
    if (order == COLL_LOCAL_FIRST)
        return coll_sched_reduce(s, dst, local, tmp, count, COLL_DEPS(rv));
    return coll_sched_reduce(s, dst, tmp, local, count, COLL_DEPS(rv));
}

void coll_sched_fold(coll_tp_req_t *tp, size_t off, const void *src, size_t bytes)
{
    struct coll_request *req = (struct coll_request *)tp;
    const coll_sched_t *s = req->sched;
    const void *local;

    if (!s) /* detached from a failed collective: nobody reads the result */
        return;
    local = (const uint8_t *)req->fold_local + off;
    if (s->v[req->vid].local_first)
        (void)coll_reduce_local((uint8_t *)tp->buf + off, local, src, bytes / s->args.esize,
                                s->args.dt, s->args.op);
    else
        (void)coll_reduce_local((uint8_t *)tp->buf + off, src, local, bytes / s->args.esize,
                                s->args.dt, s->args.op);
}

static coll_vid_t add_local(coll_sched_t *s, int type, void *dst, const void *a, const void *b,
                            size_t len, int ndeps, const coll_vid_t *deps)
{
    coll_vid_t id = add_vertex(s, type, ndeps, deps);
    if (id >= 0) {
        s->v[id].dst = dst;
        s->v[id].a = a;
        s->v[id].b = b;
        s->v[id].len = len;
    }
    return id;
}

coll_vid_t coll_sched_send_reply(coll_sched_t *s, const void *buf, size_t bytes, void *reply,
                                 int peer, uint32_t mtag, int ndeps, const coll_vid_t *deps)
{
    coll_vid_t id = add_message(s, V_SEND, buf, bytes, peer, mtag, ndeps, deps);
    if (id >= 0)
        s->v[id].reply = reply;
    return id;
}

coll_vid_t coll_sched_recv_reduce_reply(coll_sched_t *s, void *dst, const void *local, void *tmp,
                                        size_t count, int peer, uint32_t mtag, int order,
                                        int ndeps, const coll_vid_t *deps)
{
    coll_vid_t id = coll_sched_recv_reduce(s, dst, local, tmp, count, peer, mtag, order, ndeps,
                                           deps);
    if (id >= 0 && s->v[id].fold && s->args.op != COLL_AVG)
        s->v[id].hints |= COLL_TP_HINT_REPLY;
    return id;
}

void coll_sched_unless_replied(coll_sched_t *s, coll_vid_t id, coll_vid_t replied)
{
    if (id < 0 || replied < 0)
        return;
    if (add_edge(s, replied, (uint32_t)id) == 0)
        s->v[id].unless = replied;
}

coll_vid_t coll_sched_reduce(coll_sched_t *s, void *dst, const void *a, const void *b,
                             size_t count, int ndeps, const coll_vid_t *deps)
{
    return add_local(s, V_REDUCE, dst, a, b, count, ndeps, deps);
}

coll_vid_t coll_sched_copy(coll_sched_t *s, void *dst, const void *src, size_t bytes, int ndeps,
                           const coll_vid_t *deps)
{
    return add_local(s, V_COPY, dst, src, NULL, bytes, ndeps, deps);
}

coll_vid_t coll_sched_finish_avg(coll_sched_t *s, void *buf, size_t count, int ndeps,
                                 const coll_vid_t *deps)
{
    return add_local(s, V_AVG, buf, buf, NULL, count, ndeps, deps);
}

coll_vid_t coll_sched_join(coll_sched_t *s, int ndeps, const coll_vid_t *deps)
{
    return add_vertex(s, V_JOIN, ndeps, deps);
}

coll_vid_t coll_sched_poll(coll_sched_t *s, coll_sched_poll_fn fn, void *arg, int ndeps,
                           const coll_vid_t *deps)
{
    coll_vid_t id = add_vertex(s, V_POLL, ndeps, deps);
    if (id >= 0) {
        s->v[id].poll = fn;
        s->v[id].dst = arg;
    }
    return id;
}

/* A mailbox call that failed: the transport has closed the endpoint and
 * told the core, which failed the communicator with the reason. */
static coll_status_t mbox_status(coll_sched_t *s, int peer, int put, coll_status_t st)
{
    if (st == COLL_INPROGRESS) {
        s->mbox_peer = peer;
        s->mbox_put = put;
        return st;
    }
    if (s->comm->error != COLL_OK)
        return s->comm->error;
    return coll_comm_error(s->comm, COLL_SUBSYS_COLL, st, "%s: mailbox %s rank %d failed: %s",
                           coll_sched_name(s), put ? "message to" : "message from", peer,
                           coll_status_str(st));
}

coll_status_t coll_sched_mbox_put(coll_sched_t *s, int peer, const void *buf, size_t len)
{
    coll_peer_t *p = &s->comm->peers[peer];
    coll_status_t st = p->ops->ep_mbox_put(p->ep, p->mbox_out + 1, buf, len);
    if (st != COLL_OK)
        return mbox_status(s, peer, 1, st);
    p->mbox_out++;
    s->bytes_done += len;
    return COLL_OK;
}

coll_status_t coll_sched_mbox_get(coll_sched_t *s, int peer, size_t len, const void **buf_p)
{
    coll_peer_t *p = &s->comm->peers[peer];
    const void *in;
    size_t got;
    coll_status_t st = p->ops->ep_mbox_get(p->ep, p->mbox_in + 1, &in, &got);

    if (st != COLL_OK)
        return mbox_status(s, peer, 0, st);
    /* reading a shorter message as a longer one would use the slot's
     * stale bytes: a wrong answer instead of an error */
    if (got != len)
        return coll_comm_error(s->comm, COLL_SUBSYS_COLL, COLL_ERR_SIZE_MISMATCH,
                               "%s: rank %d sent a %zu-byte mailbox message, rank %d expects "
                               "%zu (do the ranks pass different counts?)", coll_sched_name(s),
                               peer, got, s->comm->rank, len);
    *buf_p = in;
    return COLL_OK;
}

coll_status_t coll_sched_mbox_release(coll_sched_t *s, int peer)
{
    coll_peer_t *p = &s->comm->peers[peer];
    coll_status_t st = p->ops->ep_mbox_release(p->ep, p->mbox_in + 1);
    if (st != COLL_OK)
        return mbox_status(s, peer, 0, st);
    p->mbox_in++;
    return COLL_OK;
}

coll_vid_t coll_sched_check(coll_sched_t *s, coll_sched_check_fn fn, void *arg, int ndeps,
                            const coll_vid_t *deps)
{
    coll_vid_t id = add_vertex(s, V_CHECK, ndeps, deps);
    if (id >= 0) {
        s->v[id].check = fn;
        s->v[id].dst = arg;
    }
    return id;
}

void coll_sched_set_gate(coll_sched_t *s, coll_vid_t gate)
{
    s->gate = gate;
}

/* A recycled schedule: the arrays stay, everything else starts at zero. */
static coll_sched_t *take_spare(struct coll_comm *comm)
{
    coll_sched_t *s = comm->sched_spare;

    if (!s)
        return calloc(1, sizeof(*s));
    comm->sched_spare = NULL;
    /* the counters only: coll_sched_create sets everything before them (a
     * memset of the whole head, args and name included, was 6% of a
     * 16-byte all-reduce) */
    memset(&s->nv, 0, SCHED_KEPT - offsetof(coll_sched_t, nv));
    return s;
}

coll_status_t coll_sched_create(struct coll_comm *comm, const coll_args_t *args,
                                const char *algo, coll_sched_t **s_p)
{
    coll_sched_t *s = take_spare(comm);
    if (!s)
        return coll_comm_error(comm, COLL_SUBSYS_COLL, COLL_ERR_NO_MEMORY,
                               "cannot allocate a schedule");
    s->comm = comm;
    s->args = *args;
    s->seq = comm->coll_seq;
    s->algo = algo;
    s->name[0] = '\0';
    s->gate = -1;
    s->failed = -1;
    s->mbox_peer = -1;
    coll_list_init(&s->link);
    *s_p = s;
    return COLL_OK;
}

void coll_sched_free(coll_sched_t *s)
{
    int running = 0;

    if (!s)
        return;
    for (uint32_t i = 0; i < s->nv; i++) {
        if (s->v[i].req) { /* never for a finished schedule: see sched_finish */
            s->v[i].req->sched = NULL;
            running = 1;
        }
    }
    for (uint32_t i = 0; i < s->nscratch; i++)
        coll_blocks_give(&s->comm->scratch_blocks, s->scratch[i].p, s->scratch[i].len);
    s->nscratch = 0;
    /* one spare per communicator: the next collective reuses its arrays */
    if (!running && !s->comm->sched_spare)
        s->comm->sched_spare = s;
    else
        free_arrays(s);
}

/* ---- running ----------------------------------------------------------------- */

static void release(coll_sched_t *s, uint32_t id)
{
    s->ready[s->nready++] = id;
}

static void vertex_done(coll_sched_t *s, uint32_t id, coll_status_t st)
{
    coll_vertex_t *v = &s->v[id];

    v->state = V_DONE;
    s->left--;
    if (v->req) {
        v->replied = v->req->tp.replied != 0;
        s->bytes_done += v->len;
        s->inflight--;
        coll_request_recycle(s->comm, v->req);
        v->req = NULL;
    }
    s->req->tp.bytes_done = s->bytes_done + (s->nv - s->left); /* progress, for stalls */
    if (st < 0 && s->status == COLL_OK) {
        s->status = st;
        s->failed = (coll_vid_t)id;
    }
    if (s->status != COLL_OK)
        return; /* stop releasing work; finish once the messages in flight are done */
    for (uint32_t k = 0; k < v->nsucc; k++) {
        uint32_t succ = s->succ[v->succ_first + k];
        if (--s->v[succ].deps_left == 0)
            release(s, succ);
    }
}

static coll_status_t start_message(coll_sched_t *s, uint32_t id)
{
    coll_vertex_t *v = &s->v[id];
    uint64_t tag = coll_tag_make(COLL_TAG_COLL, s->seq, v->mtag);
    uint32_t hints = v->hints;

    /* sends of a collective that reduces nothing are only copied */
    if (v->type == V_SEND && !coll_coll_reduces(s->args.coll))
        hints |= COLL_TP_HINT_PLAIN;

    s->inflight++;
    coll_status_t st = coll_p2p_post_vertex(s->comm, v->type == V_SEND ? COLL_REQ_SEND
                                                                       : COLL_REQ_RECV,
                                            v->dst, v->len, v->peer, tag, s, id,
                                            v->fold ? v->a : NULL, hints, v->reply, &v->req);
    if (st != COLL_OK)
        s->inflight--;
    return st;
}

static int is_local(const coll_vertex_t *v)
{
    return v->type == V_REDUCE || v->type == V_COPY || v->type == V_AVG;
}

/* A local copy this large, with messages of the schedule in flight, goes
 * in pieces with a pass of the transports after each (coll_comm_poll_busy),
 * so that a peer waiting on us moves its data meanwhile: a gather's root
 * copies its own block while its leaf's RTS comes in, and the leaf then
 * writes its block into the root (shm_share.c) instead of the two
 * copying it after the root's own copy. */
#define COPY_POLL_MIN ((size_t)4 << 20)
#define COPY_POLL_PIECE ((size_t)1 << 20)

static void copy_local(coll_sched_t *s, void *dst, const void *src, size_t len)
{
    if (len < COPY_POLL_MIN || s->inflight == 0) {
        coll_copy_local(dst, src, len);
        return;
    }
    for (size_t off = 0; off < len; off += COPY_POLL_PIECE) {
        coll_copy_local_part((char *)dst + off, (const char *)src + off,
                             COLL_MIN(COPY_POLL_PIECE, len - off), len);
        coll_comm_poll_busy(s->comm);
    }
}

static coll_status_t run_local(coll_sched_t *s, const coll_vertex_t *v)
{
    switch (v->type) {
    case V_REDUCE:
        return coll_reduce_local(v->dst, v->a, v->b, v->len, s->args.dt, s->args.op);
    case V_COPY:
        if (v->len && v->dst != v->a)
            copy_local(s, v->dst, v->a, v->len);
        return COLL_OK;
    case V_AVG:
        if (s->args.op == COLL_AVG)
            return coll_reduce_finish_avg(v->dst, v->len, s->args.dt, s->comm->nranks);
        return COLL_OK;
    default:
        return COLL_OK;
    }
}

/* Start a released vertex: local steps run at once, messages are posted
 * and finish in a callback (possibly before coll_p2p_post_vertex returns). */
static void start_vertex(coll_sched_t *s, uint32_t id)
{
    coll_vertex_t *v = &s->v[id];
    coll_status_t st = COLL_OK;

    v->state = V_ISSUED;
    if (s->status != COLL_OK) {
        vertex_done(s, id, s->status);
        return;
    }
    switch (v->type) {
    case V_SEND:
    case V_RECV:
        if (v->unless >= 0 && s->v[v->unless].replied)
            break; /* the transport moved it with the fold before */
        st = start_message(s, id);
        if (st == COLL_OK)
            return;
        break;
    case V_CHECK:
        st = v->check(s, v->dst);
        break;
    case V_POLL:
        s->polling[s->npolling++] = id;
        return; /* sched_advance runs it */
    default:
        st = run_local(s, v);
        break;
    }
    vertex_done(s, id, st);
}

static void sched_finish(coll_sched_t *s)
{
    struct coll_request *req = s->req;

    /* A failed gate (COLL_CHECK_ARGS) fails the call on every rank alike,
     * before any data moves, so the communicator stays usable. Any other
     * failure leaves peers waiting for messages that will never come:
     * fail the communicator so that they learn at once who and why. */
    if (s->status < 0 && s->failed != s->gate)
        coll_comm_fail_recorded(s->comm, s->status);

    coll_flight_end(s->comm, s->seq, s->status);
    coll_list_del(&s->link);
    if (s->comm->mbox_owner == s)
        s->comm->mbox_owner = NULL;
    req->status = s->status;
    req->done = 1;
    req->sched = NULL;
    coll_comm_wake_waiters(s->comm);
    coll_sched_free(s);
}

/* One call of each started poll vertex. They run only while this schedule
 * holds the communicator's mailboxes (see coll_comm.mbox_owner). */
static void run_polls(coll_sched_t *s)
{
    struct coll_comm *comm = s->comm;

    if (s->status == COLL_OK) { /* a failed one ends its polls at once */
        if (comm->mbox_owner && comm->mbox_owner != s)
            return;
        comm->mbox_owner = s;
    }
    for (uint32_t i = 0; i < s->npolling;) {
        uint32_t id = s->polling[i];
        coll_vertex_t *v = &s->v[id];
        coll_status_t st = s->status != COLL_OK ? s->status : v->poll(s, v->dst, &v->mtag);
        if (st == COLL_INPROGRESS) {
            i++;
            continue;
        }
        s->polling[i] = s->polling[--s->npolling];
        s->mbox_peer = -1;
        vertex_done(s, id, st);
    }
}

/* Run everything that can run now; returns once nothing moves. */
static void sched_advance(coll_sched_t *s)
{
    if (s->npolling > 0)
        run_polls(s);
    while (s->ncompleted > 0 || s->nready > 0) {
        while (s->ncompleted > 0) {
            s->ncompleted--;
            vertex_done(s, s->completed[s->ncompleted], s->completed_st[s->ncompleted]);
        }
        if (s->nready > 0)
            start_vertex(s, s->ready[--s->nready]);
        if (s->nready == 0 && s->ncompleted == 0 && s->npolling > 0)
            run_polls(s); /* just started, or a failure to end them with */
    }
    if (s->left == 0 || (s->status != COLL_OK && s->inflight == 0 && s->npolling == 0))
        sched_finish(s);
}

void coll_sched_vertex_done(coll_sched_t *s, uint32_t vid, coll_status_t status)
{
    s->completed[s->ncompleted] = vid;
    s->completed_st[s->ncompleted] = status;
    s->ncompleted++;
}

void coll_sched_progress(struct coll_comm *comm)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, &comm->scheds) {
        coll_sched_t *s = coll_container_of(pos, coll_sched_t, link);
        if (s->ncompleted > 0 || s->nready > 0 || s->left == 0 || s->npolling > 0 ||
            (s->status != COLL_OK && s->inflight == 0))
            sched_advance(s);
    }
}

void coll_sched_drain(struct coll_comm *comm)
{
    while (!coll_list_empty(&comm->scheds)) {
        coll_sched_t *s = coll_list_first(&comm->scheds, coll_sched_t, link);
        if (s->status == COLL_OK)
            s->status = comm->error != COLL_OK ? comm->error : COLL_ERR_INVALID_USAGE;
        sched_advance(s);
        if (!coll_list_empty(&comm->scheds) && coll_list_first(&comm->scheds, coll_sched_t,
                                                                link) == s) {
            /* messages still held by a transport: detach them, end anyway */
            s->inflight = 0;
            sched_advance(s);
        }
    }
}

/* Grow a kept array of `esize`-byte elements to hold `n` (no copy: the
 * contents are rebuilt for each schedule). */
static int reserve(void **p, uint32_t *cap, uint32_t n, size_t esize)
{
    if (n <= *cap && *p)
        return 0;
    void *q = malloc((size_t)(n ? n : 1) * esize);
    if (!q)
        return -1;
    free(*p);
    *p = q;
    *cap = n;
    return 0;
}

static int reserve_nodes(coll_sched_t *s)
{
    uint32_t cap = s->capnodes;
    if (reserve((void **)&s->ready, &cap, s->nv, sizeof(*s->ready)) != 0)
        return -1;
    cap = s->capnodes;
    if (reserve((void **)&s->completed, &cap, s->nv, sizeof(*s->completed)) != 0)
        return -1;
    cap = s->capnodes;
    if (reserve((void **)&s->completed_st, &cap, s->nv, sizeof(*s->completed_st)) != 0)
        return -1;
    cap = s->capnodes;
    if (reserve((void **)&s->polling, &cap, s->nv, sizeof(*s->polling)) != 0)
        return -1;
    s->capnodes = cap;
    return 0;
}

/* Edges to successor lists (counting sort by source vertex). */
static int build_successors(coll_sched_t *s)
{
    if (reserve((void **)&s->succ, &s->capsucc, s->ne, sizeof(*s->succ)) != 0 ||
        reserve_nodes(s) != 0)
        return -1;
    for (uint32_t e = 0; e < s->ne; e++)
        s->v[s->edge[e][0]].nsucc++;
    for (uint32_t i = 0, off = 0; i < s->nv; i++) {
        s->v[i].succ_first = off;
        off += s->v[i].nsucc;
        s->v[i].nsucc = 0;
    }
    for (uint32_t e = 0; e < s->ne; e++) {
        coll_vertex_t *from = &s->v[s->edge[e][0]];
        s->succ[from->succ_first + from->nsucc++] = s->edge[e][1];
    }
    return 0;
}

coll_status_t coll_sched_start(coll_sched_t *s, struct coll_request **req_p)
{
    struct coll_comm *comm = s->comm;
    struct coll_request *req;

    if (s->status == COLL_OK && build_successors(s) != 0)
        nomem(s);
    req = s->status == COLL_OK ? coll_request_get(comm) : NULL;
    if (!req) {
        coll_status_t st = s->status != COLL_OK ? s->status : COLL_ERR_NO_MEMORY;
        coll_coll_t coll = s->args.coll;
        coll_sched_free(s);
        return coll_comm_error(comm, COLL_SUBSYS_COLL, st, "cannot build the schedule of %s "
                               "(out of memory)", coll_coll_name(coll));
    }
    req->magic = COLL_REQ_MAGIC;
    req->comm = comm;
    req->kind = COLL_REQ_COLL;
    req->peer = -1;
    req->tag = -1;
    req->op = "collective";
    req->sched = s;
    s->req = req;
    s->left = s->nv;
    COLL_TRACE(COLL_SUBSYS_COLL, "rank %d: %s: %u steps, %u dependencies", comm->rank,
               coll_sched_name(s),
               s->nv, s->ne);
    coll_list_push_back(&comm->scheds, &s->link);
    for (uint32_t i = 0; i < s->nv; i++)
        if (s->v[i].deps_left == 0)
            release(s, i);
    sched_advance(s); /* may finish at once (one rank, or all local) */
    *req_p = req;
    return COLL_OK;
}

/* ---- a blocking call's mailbox step, without the engine ---------------------- */

/* Nothing else may use the mailboxes or be overtaken (no schedule
 * running), and no other thread may be progressing the communicator. */
static int inline_ok(const coll_sched_t *s)
{
    const struct coll_comm *comm = s->comm;

    if (comm->inline_polls == 0 || s->status != COLL_OK || s->nv == 0 ||
        s->v[s->nv - 1].type != V_POLL || !coll_list_empty(&comm->scheds) ||
        comm->has_leader || comm->state != COLL_COMM_LIVE)
        return 0;
    for (uint32_t i = 0; i + 1 < s->nv; i++)
        if (!is_local(&s->v[i]))
            return 0;
    return 1;
}

/* The poll still waits: the local steps are done, so the schedule becomes
 * the poll alone, which keeps its step (mtag) and argument. */
static void hand_over(coll_sched_t *s)
{
    s->v[0] = s->v[s->nv - 1];
    s->v[0].deps_left = 0;
    s->nv = 1;
    s->ne = 0;
}

/* The engine costs a 16-byte all-reduce of 2 ranks more than the mailbox
 * step itself: starting the schedule, a request, the progress pass over
 * every transport and event source, the clock and sched_yield between
 * polls (about 1300 of 2000 instructions a call in callgrind). A peer that
 * is a call's length behind is caught by a short spin; one further behind
 * gets the engine, with its deadlines and its yielding to ranks that share
 * our core. */
int coll_sched_run_inline(coll_sched_t *s, coll_status_t *st_p)
{
    coll_vertex_t *poll;
    coll_status_t st = COLL_OK;
    int limit;

    if (!inline_ok(s))
        return 0;
    for (uint32_t i = 0; i + 1 < s->nv && st == COLL_OK; i++)
        st = run_local(s, &s->v[i]);
    poll = &s->v[s->nv - 1];
    /* ranks that share CPUs: a spin holds the CPU the peer needs (4 ranks
     * on 2 CPUs, 16 B: 7 -> 15 us a call), so one look, then the engine,
     * which yields between polls */
    limit = s->comm->crowd > 1 ? 0 : s->comm->inline_polls;
    for (int k = 0; st == COLL_OK; k++) {
        st = poll->poll(s, poll->dst, &poll->mtag);
        if (st != COLL_INPROGRESS)
            break;
        if (k == limit) {
            hand_over(s);
            return 0;
        }
        st = COLL_OK;
        coll_cpu_relax();
    }
    /* as sched_finish: a failed step leaves peers waiting for messages
     * that will never come */
    if (st < 0)
        coll_comm_fail_recorded(s->comm, st);
    coll_flight_end(s->comm, s->seq, st);
    coll_sched_free(s);
    *st_p = st;
    return 1;
}

/* ---- diagnosis ----------------------------------------------------------------- */

size_t coll_sched_bytes_moved(const coll_sched_t *s)
{
    size_t bytes = s->bytes_done + (s->nv - s->left);
    for (uint32_t i = 0; i < s->nv; i++)
        if (s->v[i].req)
            bytes += s->v[i].req->tp.bytes_done;
    return bytes;
}

void coll_sched_write_running(struct coll_comm *comm, FILE *f)
{
    char waiting[1024];
    coll_list_t *pos, *tmp;

    coll_list_for_each_safe(pos, tmp, &comm->scheds) {
        coll_sched_t *s = coll_container_of(pos, coll_sched_t, link);
        coll_sched_describe_wait(s, waiting, sizeof(waiting));
        fprintf(f, "  %s waits for: %s\n", coll_sched_name(s),
                waiting[0] ? waiting : "nothing in flight (its next step is not ready)");
    }
}

void coll_sched_describe_wait(const coll_sched_t *s, char *buf, size_t len)
{
    size_t used = 0;
    int shown = 0, more = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i < s->nv; i++) {
        const coll_vertex_t *v = &s->v[i];
        if (!v->req)
            continue;
        if (shown == 4) {
            more++;
            continue;
        }
        const coll_tp_ep_t *ep = s->comm->peers[v->peer].ep;
        used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s %zu bytes %s %s "
                                 "(%zu moved)", shown ? "; " : "",
                                 v->type == V_SEND ? "sending" : "receiving", v->len,
                                 v->type == V_SEND ? "to" : "from", ep ? ep->desc : "?",
                                 v->req->tp.bytes_done);
        shown++;
    }
    if (s->mbox_peer >= 0 && used < len) {
        const coll_tp_ep_t *ep = s->comm->peers[s->mbox_peer].ep;
        used += (size_t)snprintf(buf + used, len - used, "%s%s", shown ? "; " : "",
                                 s->mbox_put ? "a free mailbox slot at " : "a mailbox message from ");
        if (used < len)
            used += (size_t)snprintf(buf + used, len - used, "%s", ep ? ep->desc : "?");
    }
    if (more && used < len)
        snprintf(buf + used, len - used, "; and %d more", more);
}
