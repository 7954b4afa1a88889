/*
 * collectives.c: the public collective calls. Each checks its arguments
 * (and says which one is wrong, on which rank), works out whether the call
 * is in place, takes the next collective sequence number (the same on
 * every rank, since collectives are called in the same order), lets the
 * registry pick an algorithm, and runs the schedule it builds. Blocking
 * calls are the non-blocking ones followed by a wait.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "algorithms.h"
#include "flight.h"
#include "log.h"
#include "reduce.h"

/* Largest buffer a call may name: 2^46 bytes; above is a bug, most often
 * a negative count converted to size_t. */
#define COLL_BUF_BYTES_MAX (1ull << 46)

typedef struct call {
    struct coll_comm *comm;
    const char *fn;
    int nonblocking;
    size_t touched; /* bytes of this rank's buffers (check_buf), an in-place pair once */
    coll_args_t a;
} call_t;

static coll_status_t bad(call_t *c, coll_status_t st, const char *fmt, ...) COLL_PRINTF(3, 4);

static coll_status_t bad(call_t *c, coll_status_t st, const char *fmt, ...)
{
    char msg[COLL_ERRMSG_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return coll_comm_error(c->comm, COLL_SUBSYS_COLL, st, "%s: %s", c->fn, msg);
}

static coll_status_t check_type(call_t *c, size_t count, size_t blocks)
{
    size_t es = coll_datatype_size(c->a.dt);
    if (es == 0)
        return bad(c, COLL_ERR_INVALID_ARG, "unknown datatype %d", (int)c->a.dt);
    if (count > COLL_BUF_BYTES_MAX / es / blocks)
        return bad(c, COLL_ERR_INVALID_ARG, "count %zu is too large (a negative count "
                   "converted to size_t?)", count);
    c->a.esize = es;
    return COLL_OK;
}

static coll_status_t check_op(call_t *c)
{
    if ((unsigned)c->a.op >= COLL_NUM_OPS)
        return bad(c, COLL_ERR_INVALID_ARG, "unknown op %d", (int)c->a.op);
    if (!coll_reduce_supported(c->a.dt, c->a.op))
        return bad(c, COLL_ERR_UNSUPPORTED, "op %s is not supported for %s (an integer mean "
                   "would overflow in the sum and be truncated: use sum and divide)",
                   coll_reduce_op_name(c->a.op), coll_reduce_datatype_name(c->a.dt));
    return COLL_OK;
}

static coll_status_t check_root(call_t *c)
{
    if (c->a.root < 0 || c->a.root >= c->comm->nranks)
        return bad(c, COLL_ERR_INVALID_ARG, "root %d is out of range (the communicator has "
                   "ranks 0..%d)", c->a.root, c->comm->nranks - 1);
    return COLL_OK;
}

static coll_status_t check_buf(call_t *c, const char *name, const void *buf, size_t bytes)
{
    if (!buf && bytes > 0)
        return bad(c, COLL_ERR_INVALID_ARG, "%s is NULL but must hold %zu bytes", name, bytes);
    c->touched += bytes;
    return COLL_OK;
}

/* Buffers are either the call's in-place form or disjoint. */
static coll_status_t check_overlap(call_t *c, const void *s, size_t sbytes, const void *r,
                                   size_t rbytes, int in_place)
{
    uintptr_t s0 = (uintptr_t)s, r0 = (uintptr_t)r;
    if (in_place || !sbytes || !rbytes || s0 + sbytes <= r0 || r0 + rbytes <= s0)
        return COLL_OK;
    return bad(c, COLL_ERR_INVALID_ARG, "sendbuf [%p, +%zu bytes) and recvbuf [%p, +%zu bytes) "
               "overlap without being the call's in-place form", s, sbytes, r, rbytes);
}

/* Both buffers, with the in-place test `in_place`. */
static coll_status_t check_pair(call_t *c, size_t sbytes, size_t rbytes, int in_place)
{
    COLL_CHECK(check_buf(c, "sendbuf", c->a.sendbuf, sbytes));
    COLL_CHECK(check_buf(c, "recvbuf", c->a.recvbuf, rbytes));
    if (in_place) /* one buffer holds the other */
        c->touched -= COLL_MIN(sbytes, rbytes);
    c->a.in_place = in_place;
    return check_overlap(c, c->a.sendbuf, sbytes, c->a.recvbuf, rbytes, in_place);
}

/* The pipeline chunk of this call. Links toward other hosts ask for a
 * larger one (chunk_bulk) for large vectors; only the all-reduce takes it.
 * Emulated cluster, 4 hosts at 1 Gbit/s, 16 and 64 MiB: the all-reduce
 * went from 81-91% of the link to 88-93%, the broadcast (a chain) fell
 * from 84-93% to 78-88%, reduce-scatter and all-gather stayed level
 * (docs/performance-sets.md). count * esize is the same on every rank. */
static size_t call_chunk(const call_t *c)
{
    struct coll_comm *comm = c->comm;

    if (c->a.coll != COLL_ALLREDUCE)
        return comm->chunk_bytes;
    return coll_call_chunk(comm->chunk_bytes, comm->chunk_bulk,
                           c->a.count * c->a.esize / (size_t)comm->nranks);
}

/* Choose, build and start; *req_p completes with the collective. A
 * blocking call may end here (*req_p NULL): coll_sched_run_inline. */
static coll_status_t launch(call_t *c, struct coll_request **req_p)
{
    struct coll_comm *comm = c->comm;
    const coll_algo_t *algo;
    coll_sched_t *s;
    coll_status_t st;

    c->a.deterministic = comm->deterministic;
    c->a.check_args = comm->check_args;
    c->a.chunk_bytes = call_chunk(c);
    c->a.det_scratch_max = comm->det_scratch_max;
    c->a.window_bytes = comm->window_bytes;
    c->a.pull = comm->pull;
    c->a.mbox_bytes = comm->mbox_bytes;
    c->a.stream = comm->stream_rank_min > 0 && c->touched >= comm->stream_rank_min;
    COLL_CHECK(coll_algo_select(comm, &c->a, &algo));
    c->a.algo = algo->name;
    COLL_CHECK(coll_sched_create(comm, &c->a, algo->name, &s));
    coll_flight_start(comm, comm->coll_seq, &c->a);
    comm->coll_seq++;
    if (c->a.check_args && comm->nranks > 1)
        coll_check_args_add(s);
    algo->build(s);
    if (!c->nonblocking && coll_sched_run_inline(s, &st)) {
        *req_p = NULL;
        return st;
    }
    return coll_sched_start(s, req_p);
}

/* The tail of every call: blocking ones wait, non-blocking ones hand the
 * request over. */
static coll_status_t finish(call_t *c, coll_status_t st, coll_request_t *request)
{
    struct coll_request *req = NULL;

    if (st == COLL_OK)
        st = launch(c, &req);
    if (st == COLL_OK && c->nonblocking) {
        *request = req;
    } else if (st == COLL_OK && req) {
        st = coll_comm_wait(c->comm, 1, &req, NULL, 0);
        if (req->done)
            coll_request_recycle(c->comm, req);
    }
    coll_comm_exit(c->comm);
    return st;
}

/* Enter and fill the parts every call has. A non-blocking call's name
 * starts with "coll_i". */
static coll_status_t begin(call_t *c, const char *fn, coll_comm_t comm, coll_coll_t coll,
                           const void *sendbuf, void *recvbuf, size_t count,
                           coll_datatype_t dt, coll_request_t *request)
{
    int nonblocking = strncmp(fn, "coll_i", 6) == 0;

    coll_zero(c, sizeof(*c));
    c->fn = fn;
    c->nonblocking = nonblocking;
    c->comm = comm;
    c->a.coll = coll;
    c->a.sendbuf = sendbuf;
    c->a.recvbuf = recvbuf;
    c->a.count = count;
    c->a.dt = dt;
    c->a.op = COLL_SUM;
    COLL_CHECK(coll_comm_enter(comm, fn, 0));
    if (nonblocking && !request) {
        coll_status_t st = bad(c, COLL_ERR_INVALID_ARG, "request is NULL");
        coll_comm_exit(comm);
        return st;
    }
    return COLL_OK;
}

#define BEGIN(coll, sb, rb, n, dt)                                                 \
    call_t c;                                                                      \
    coll_status_t st = begin(&c, fn, comm, coll, sb, rb, n, dt, request);          \
    if (st != COLL_OK)                                                             \
        return st

/* ---- each collective: the checks, then finish() ------------------------------- */

static coll_status_t barrier(const char *fn, coll_comm_t comm, coll_request_t *request)
{
    BEGIN(COLL_BARRIER, NULL, NULL, 0, COLL_UINT8);
    c.a.esize = 1;
    return finish(&c, COLL_OK, request);
}

static coll_status_t allreduce(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                               coll_datatype_t dt, coll_op_t op, coll_comm_t comm,
                               coll_request_t *request)
{
    BEGIN(COLL_ALLREDUCE, sendbuf, recvbuf, count, dt);
    c.a.op = op;
    st = check_type(&c, count, 1);
    if (st == COLL_OK)
        st = check_op(&c);
    if (st == COLL_OK)
        st = check_pair(&c, count * c.a.esize, count * c.a.esize, sendbuf == recvbuf);
    return finish(&c, st, request);
}

static coll_status_t broadcast(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                               coll_datatype_t dt, int root, coll_comm_t comm,
                               coll_request_t *request)
{
    BEGIN(COLL_BCAST, sendbuf, recvbuf, count, dt);
    c.a.root = root;
    st = check_type(&c, count, 1);
    if (st == COLL_OK)
        st = check_root(&c);
    if (st == COLL_OK) {
        size_t bytes = count * c.a.esize;
        if (c.comm->rank == root) {
            st = check_pair(&c, bytes, bytes, sendbuf == recvbuf);
        } else {
            c.a.sendbuf = NULL; /* not read off the root */
            st = check_buf(&c, "recvbuf", recvbuf, bytes);
        }
    }
    return finish(&c, st, request);
}

static coll_status_t reduce(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                            coll_datatype_t dt, coll_op_t op, int root, coll_comm_t comm,
                            coll_request_t *request)
{
    BEGIN(COLL_REDUCE, sendbuf, recvbuf, count, dt);
    c.a.op = op;
    c.a.root = root;
    st = check_type(&c, count, 1);
    if (st == COLL_OK)
        st = check_op(&c);
    if (st == COLL_OK)
        st = check_root(&c);
    if (st == COLL_OK) {
        size_t bytes = count * c.a.esize;
        if (c.comm->rank == root) {
            st = check_pair(&c, bytes, bytes, sendbuf == recvbuf);
        } else {
            c.a.recvbuf = NULL; /* not written off the root */
            st = check_buf(&c, "sendbuf", sendbuf, bytes);
        }
    }
    return finish(&c, st, request);
}

static coll_status_t allgather(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                               coll_datatype_t dt, coll_comm_t comm, coll_request_t *request)
{
    BEGIN(COLL_ALLGATHER, sendbuf, recvbuf, count, dt);
    st = check_type(&c, count, (size_t)c.comm->nranks);
    if (st == COLL_OK) {
        size_t bytes = count * c.a.esize;
        st = check_pair(&c, bytes, bytes * (size_t)c.comm->nranks,
                        sendbuf == COLL_PTR(recvbuf, (size_t)c.comm->rank * count, c.a.esize));
    }
    return finish(&c, st, request);
}

static coll_status_t reduce_scatter(const char *fn, const void *sendbuf, void *recvbuf,
                                    size_t count, coll_datatype_t dt, coll_op_t op,
                                    coll_comm_t comm, coll_request_t *request)
{
    BEGIN(COLL_REDUCE_SCATTER, sendbuf, recvbuf, count, dt);
    c.a.op = op;
    st = check_type(&c, count, (size_t)c.comm->nranks);
    if (st == COLL_OK)
        st = check_op(&c);
    if (st == COLL_OK) {
        size_t bytes = count * c.a.esize;
        st = check_pair(&c, bytes * (size_t)c.comm->nranks, bytes,
                        recvbuf == COLL_PTR(sendbuf, (size_t)c.comm->rank * count, c.a.esize));
    }
    return finish(&c, st, request);
}

static coll_status_t alltoall(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                              coll_datatype_t dt, coll_comm_t comm, coll_request_t *request)
{
    BEGIN(COLL_ALLTOALL, sendbuf, recvbuf, count, dt);
    st = check_type(&c, count, (size_t)c.comm->nranks);
    if (st == COLL_OK) {
        size_t bytes = count * c.a.esize * (size_t)c.comm->nranks;
        st = check_pair(&c, bytes, bytes, sendbuf == recvbuf);
    }
    return finish(&c, st, request);
}

/* Extent in bytes of a v-layout: the end of its furthest block. */
static coll_status_t v_extent(call_t *c, const char *cname, const size_t *counts,
                              const char *dname, const size_t *displs, size_t *bytes_p)
{
    size_t end = 0, es = c->a.esize, max = COLL_BUF_BYTES_MAX / es;
    if (!counts || !displs)
        return bad(c, COLL_ERR_INVALID_ARG, "%s or %s is NULL", cname, dname);
    for (int k = 0; k < c->comm->nranks; k++) {
        if (counts[k] > max || displs[k] > max - counts[k])
            return bad(c, COLL_ERR_INVALID_ARG, "%s[%d] = %zu at %s[%d] = %zu is too large",
                       cname, k, counts[k], dname, k, displs[k]);
        if (counts[k] && displs[k] + counts[k] > end)
            end = displs[k] + counts[k];
    }
    *bytes_p = end * es;
    return COLL_OK;
}

static coll_status_t alltoallv(const char *fn, const void *sendbuf, const size_t *sendcounts,
                               const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                               const size_t *rdispls, coll_datatype_t dt, coll_comm_t comm,
                               coll_request_t *request)
{
    size_t sbytes = 0, rbytes = 0;
    BEGIN(COLL_ALLTOALLV, sendbuf, recvbuf, 0, dt);
    c.a.sendcounts = sendcounts;
    c.a.sdispls = sdispls;
    c.a.recvcounts = recvcounts;
    c.a.rdispls = rdispls;
    st = check_type(&c, 0, 1);
    if (st == COLL_OK)
        st = v_extent(&c, "sendcounts", sendcounts, "sdispls", sdispls, &sbytes);
    if (st == COLL_OK)
        st = v_extent(&c, "recvcounts", recvcounts, "rdispls", rdispls, &rbytes);
    if (st == COLL_OK && sendcounts[c.comm->rank] != recvcounts[c.comm->rank])
        st = bad(&c, COLL_ERR_INVALID_ARG, "sendcounts[%d] = %zu but recvcounts[%d] = %zu: "
                 "the block a rank sends itself must fit exactly", c.comm->rank,
                 sendcounts[c.comm->rank], c.comm->rank, recvcounts[c.comm->rank]);
    if (st == COLL_OK)
        st = check_pair(&c, sbytes, rbytes, 0);
    return finish(&c, st, request);
}

static coll_status_t scatter(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                             coll_datatype_t dt, int root, coll_comm_t comm,
                             coll_request_t *request)
{
    BEGIN(COLL_SCATTER, sendbuf, recvbuf, count, dt);
    c.a.root = root;
    st = check_type(&c, count, (size_t)c.comm->nranks);
    if (st == COLL_OK)
        st = check_root(&c);
    if (st == COLL_OK) {
        size_t bytes = count * c.a.esize;
        if (c.comm->rank == root) {
            st = check_pair(&c, bytes * (size_t)c.comm->nranks, bytes,
                            recvbuf == COLL_PTR(sendbuf, (size_t)root * count, c.a.esize));
        } else {
            c.a.sendbuf = NULL;
            st = check_buf(&c, "recvbuf", recvbuf, bytes);
        }
    }
    return finish(&c, st, request);
}

static coll_status_t gather(const char *fn, const void *sendbuf, void *recvbuf, size_t count,
                            coll_datatype_t dt, int root, coll_comm_t comm,
                            coll_request_t *request)
{
    BEGIN(COLL_GATHER, sendbuf, recvbuf, count, dt);
    c.a.root = root;
    st = check_type(&c, count, (size_t)c.comm->nranks);
    if (st == COLL_OK)
        st = check_root(&c);
    if (st == COLL_OK) {
        size_t bytes = count * c.a.esize;
        if (c.comm->rank == root) {
            st = check_pair(&c, bytes, bytes * (size_t)c.comm->nranks,
                            sendbuf == COLL_PTR(recvbuf, (size_t)root * count, c.a.esize));
        } else {
            c.a.recvbuf = NULL;
            st = check_buf(&c, "sendbuf", sendbuf, bytes);
        }
    }
    return finish(&c, st, request);
}

/* ---- the public calls -------------------------------------------------------------- */

coll_status_t coll_barrier(coll_comm_t comm)
{
    return barrier("coll_barrier", comm, NULL);
}

coll_status_t coll_ibarrier(coll_comm_t comm, coll_request_t *request)
{
    return barrier("coll_ibarrier", comm, request);
}

coll_status_t coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                             coll_datatype_t datatype, coll_op_t op, coll_comm_t comm)
{
    return allreduce("coll_allreduce", sendbuf, recvbuf, count, datatype, op, comm, NULL);
}

coll_status_t coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                              coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                              coll_request_t *request)
{
    return allreduce("coll_iallreduce", sendbuf, recvbuf, count, datatype, op, comm, request);
}

coll_status_t coll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                             coll_datatype_t datatype, int root, coll_comm_t comm)
{
    return broadcast("coll_broadcast", sendbuf, recvbuf, count, datatype, root, comm, NULL);
}

coll_status_t coll_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
                              coll_datatype_t datatype, int root, coll_comm_t comm,
                              coll_request_t *request)
{
    return broadcast("coll_ibroadcast", sendbuf, recvbuf, count, datatype, root, comm, request);
}

coll_status_t coll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                          coll_datatype_t datatype, coll_op_t op, int root, coll_comm_t comm)
{
    return reduce("coll_reduce", sendbuf, recvbuf, count, datatype, op, root, comm, NULL);
}

coll_status_t coll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                           coll_datatype_t datatype, coll_op_t op, int root, coll_comm_t comm,
                           coll_request_t *request)
{
    return reduce("coll_ireduce", sendbuf, recvbuf, count, datatype, op, root, comm, request);
}

coll_status_t coll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                             coll_datatype_t datatype, coll_comm_t comm)
{
    return allgather("coll_allgather", sendbuf, recvbuf, sendcount, datatype, comm, NULL);
}

coll_status_t coll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                              coll_datatype_t datatype, coll_comm_t comm,
                              coll_request_t *request)
{
    return allgather("coll_iallgather", sendbuf, recvbuf, sendcount, datatype, comm, request);
}

coll_status_t coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                  coll_datatype_t datatype, coll_op_t op, coll_comm_t comm)
{
    return reduce_scatter("coll_reduce_scatter", sendbuf, recvbuf, recvcount, datatype, op,
                          comm, NULL);
}

coll_status_t coll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                   coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                                   coll_request_t *request)
{
    return reduce_scatter("coll_ireduce_scatter", sendbuf, recvbuf, recvcount, datatype, op,
                          comm, request);
}

coll_status_t coll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                            coll_datatype_t datatype, coll_comm_t comm)
{
    return alltoall("coll_alltoall", sendbuf, recvbuf, count, datatype, comm, NULL);
}

coll_status_t coll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                             coll_datatype_t datatype, coll_comm_t comm, coll_request_t *request)
{
    return alltoall("coll_ialltoall", sendbuf, recvbuf, count, datatype, comm, request);
}

coll_status_t coll_alltoallv(const void *sendbuf, const size_t *sendcounts, const size_t *sdispls,
                             void *recvbuf, const size_t *recvcounts, const size_t *rdispls,
                             coll_datatype_t datatype, coll_comm_t comm)
{
    return alltoallv("coll_alltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                     rdispls, datatype, comm, NULL);
}

coll_status_t coll_ialltoallv(const void *sendbuf, const size_t *sendcounts,
                              const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                              const size_t *rdispls, coll_datatype_t datatype, coll_comm_t comm,
                              coll_request_t *request)
{
    return alltoallv("coll_ialltoallv", sendbuf, sendcounts, sdispls, recvbuf, recvcounts,
                     rdispls, datatype, comm, request);
}

coll_status_t coll_scatter(const void *sendbuf, void *recvbuf, size_t count,
                           coll_datatype_t datatype, int root, coll_comm_t comm)
{
    return scatter("coll_scatter", sendbuf, recvbuf, count, datatype, root, comm, NULL);
}

coll_status_t coll_iscatter(const void *sendbuf, void *recvbuf, size_t count,
                            coll_datatype_t datatype, int root, coll_comm_t comm,
                            coll_request_t *request)
{
    return scatter("coll_iscatter", sendbuf, recvbuf, count, datatype, root, comm, request);
}

coll_status_t coll_gather(const void *sendbuf, void *recvbuf, size_t count,
                          coll_datatype_t datatype, int root, coll_comm_t comm)
{
    return gather("coll_gather", sendbuf, recvbuf, count, datatype, root, comm, NULL);
}

coll_status_t coll_igather(const void *sendbuf, void *recvbuf, size_t count,
                           coll_datatype_t datatype, int root, coll_comm_t comm,
                           coll_request_t *request)
{
    return gather("coll_igather", sendbuf, recvbuf, count, datatype, root, comm, request);
}
