/*
 * p2p.c: point-to-point messages: argument checks with messages that say
 * what is wrong, requests, and the public send/recv/wait family. The
 * internal coll_p2p_* calls are what algorithms are written against.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "schedule.h"

/* Largest message: 2^46 bytes (64 TiB). Anything above is a bug, most
 * often a negative count converted to size_t. */
#define COLL_MSG_BYTES_MAX (1ull << 46)

/* ---- requests ---------------------------------------------------------------- */

const char *coll_request_op(const struct coll_request *req)
{
    return req->sched ? coll_sched_name(req->sched) : req->op;
}

static void describe_failure(struct coll_request *req, coll_status_t status)
{
    struct coll_comm *comm = req->comm;
    const char *op = coll_request_op(req);
    const char *dir = req->kind == COLL_REQ_SEND ? "to" : "from";
    const char *peer = comm->peers && comm->peers[req->peer].ep ? comm->peers[req->peer].ep->desc
                                                                : "?";
    char tag[32] = "";

    if (req->tag >= 0)
        snprintf(tag, sizeof(tag), " tag %d", req->tag);
    if (status == COLL_ERR_SIZE_MISMATCH && req->tp.bytes_done == SIZE_MAX)
        coll_comm_error(comm, COLL_SUBSYS_P2P, status, "%s %s %s%s: the message is longer than "
                        "the %zu bytes the receive expects", req->op, dir, peer, tag,
                        req->tp.len);
    else if (status == COLL_ERR_SIZE_MISMATCH)
        coll_comm_error(comm, COLL_SUBSYS_P2P, status, "%s %s %s%s: the message has %zu bytes, "
                        "the receive expects %zu", op, dir, peer, tag, req->tp.bytes_done,
                        req->tp.len);
    else if (status == COLL_ERR_PEER_FAILED)
        coll_comm_error(comm, COLL_SUBSYS_P2P, status, "%s %s %s%s (%zu bytes): rank %d left the "
                        "communicator before the message was delivered", op, dir, peer, tag,
                        req->tp.len, req->peer);
    else if (status == COLL_ERR_INVALID_USAGE)
        coll_comm_error(comm, COLL_SUBSYS_P2P, status, "%s %s %s%s (%zu bytes) was still pending "
                        "when the communicator was destroyed", op, dir, peer, tag,
                        req->tp.len);
}

/* Called by a transport when it is done with a request. */
static void req_complete(coll_tp_req_t *tp, coll_status_t status)
{
    struct coll_request *req = (struct coll_request *)tp;
    struct coll_comm *comm = req->comm;

    req->done = 1;
    req->status = status;
    if (status < 0 && comm->error == COLL_OK)
        describe_failure(req, status);
    if (req->sched)
        coll_sched_vertex_done(req->sched, req->vid, status);
    coll_comm_wake_waiters(comm); /* another thread may wait for this one */
}

void coll_request_free(struct coll_request *req)
{
    req->magic = 0;
    free(req);
}

/* Spare requests, a list through ->next_spare: a small collective posts a few
 * messages per call, and malloc/free were a sixth of its time. */
#define REQ_SPARES_MAX 64

struct coll_request *coll_request_get(struct coll_comm *comm)
{
    struct coll_request *req = comm->req_spares;

    if (!req)
        return calloc(1, sizeof(*req));
    comm->req_spares = req->next_spare;
    comm->nreq_spares--;
    coll_zero(req, sizeof(*req));
    return req;
}

void coll_request_recycle(struct coll_comm *comm, struct coll_request *req)
{
    if (comm->nreq_spares >= REQ_SPARES_MAX) {
        coll_request_free(req);
        return;
    }
    req->magic = 0;
    req->next_spare = comm->req_spares;
    comm->req_spares = req;
    comm->nreq_spares++;
}

void coll_request_release_spares(struct coll_comm *comm)
{
    while (comm->req_spares) {
        struct coll_request *req = comm->req_spares;
        comm->req_spares = req->next_spare;
        free(req);
    }
    comm->nreq_spares = 0;
}

static coll_status_t post(struct coll_comm *comm, const char *op, int kind, void *buf,
                          size_t bytes, int peer, uint64_t tag, int user_tag,
                          struct coll_sched *sched, uint32_t vid, const void *fold_local,
                          uint32_t hints, void *reply, struct coll_request **req_p)
{
    struct coll_request *req;
    coll_peer_t *p;
    coll_status_t st;

    if (comm->state != COLL_COMM_LIVE)
        return comm->error != COLL_OK ? comm->error : COLL_ERR_INVALID_COMM;
    req = coll_request_get(comm);
    if (!req)
        return coll_comm_error(comm, COLL_SUBSYS_P2P, COLL_ERR_NO_MEMORY, "cannot allocate a request");
    req->sched = sched;
    req->vid = vid;
    req->magic = COLL_REQ_MAGIC;
    req->comm = comm;
    req->kind = kind;
    req->peer = peer;
    req->tag = user_tag;
    req->op = op;
    req->tp.tag = tag;
    req->tp.buf = buf;
    req->tp.len = bytes;
    req->tp.complete = req_complete;
    req->tp.fold = fold_local ? coll_sched_fold : NULL;
    req->fold_local = fold_local;
    req->tp.hints = hints;
    req->tp.reply = reply;
    req->tp.replied = 0;
    p = &comm->peers[peer];
    st = kind == COLL_REQ_SEND ? p->ops->ep_isend(p->ep, &req->tp)
                               : p->ops->ep_irecv(p->ep, &req->tp);
    if (st != COLL_OK) {
        coll_request_recycle(comm, req);
        return st;
    }
    *req_p = req;
    return COLL_OK;
}

coll_status_t coll_p2p_isend(struct coll_comm *comm, const void *buf, size_t bytes, int peer,
                             uint64_t tag, struct coll_request **req_p)
{
    return post(comm, "send", COLL_REQ_SEND, (void *)buf, bytes, peer, tag, -1, NULL, 0, NULL, 0,
                NULL, req_p);
}

coll_status_t coll_p2p_irecv(struct coll_comm *comm, void *buf, size_t bytes, int peer,
                             uint64_t tag, struct coll_request **req_p)
{
    return post(comm, "receive", COLL_REQ_RECV, buf, bytes, peer, tag, -1, NULL, 0, NULL, 0,
                NULL, req_p);
}

coll_status_t coll_p2p_post_vertex(struct coll_comm *comm, int kind, void *buf, size_t bytes,
                                   int peer, uint64_t tag, struct coll_sched *s, uint32_t vid,
                                   const void *fold_local, uint32_t hints, void *reply,
                                   struct coll_request **req_p)
{
    /* the schedule names the step (coll_request_op) */
    return post(comm, "collective", kind, buf, bytes, peer, tag, -1, s, vid, fold_local, hints,
                reply, req_p);
}

coll_status_t coll_p2p_waitall(struct coll_comm *comm, int n, struct coll_request **reqs,
                               const char *what)
{
    coll_status_t st = coll_comm_wait(comm, n, reqs, what, 0);
    for (int i = 0; i < n; i++) {
        if (reqs[i] && reqs[i]->done) {
            coll_request_free(reqs[i]);
            reqs[i] = NULL;
        }
    }
    return st;
}

/* ---- argument checks -------------------------------------------------------------- */

static coll_status_t check_buffer(struct coll_comm *comm, const char *fn, const void *buf,
                                  size_t count, coll_datatype_t dt, size_t *bytes_p)
{
    size_t esize = coll_datatype_size(dt);

    if (esize == 0)
        return coll_comm_error(comm, COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG, "%s: unknown datatype %d", fn,
                               (int)dt);
    if (count > COLL_MSG_BYTES_MAX / esize)
        return coll_comm_error(comm, COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG,
                               "%s: count %zu is too large (at most %llu elements of %zu "
                               "bytes; a negative count converted to size_t?)", fn, count,
                               COLL_MSG_BYTES_MAX / esize, esize);
    if (!buf && count > 0)
        return coll_comm_error(comm, COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG, "%s: buffer is NULL but count is %zu",
                               fn, count);
    *bytes_p = count * esize;
    return COLL_OK;
}

static coll_status_t check_peer_tag(struct coll_comm *comm, const char *fn, int peer, int tag)
{
    if (peer < 0 || peer >= comm->nranks)
        return coll_comm_error(comm, COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG, "%s: peer %d is out of range (the "
                               "communicator has ranks 0..%d)", fn, peer, comm->nranks - 1);
    if (tag < 0)
        return coll_comm_error(comm, COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG,
                               "%s: tag %d is negative (tags are 0..%d)", fn, tag, COLL_TAG_MAX);
    return COLL_OK;
}

/* Enter, check and post: shared by the public send and receive calls.
 * `hints`: COLL_TP_HINT_* (transport.h). */
static coll_status_t user_post(const char *fn, int kind, void *buf, size_t count,
                               coll_datatype_t dt, int peer, int tag, coll_comm_t comm,
                               uint32_t hints, struct coll_request **req_p)
{
    size_t bytes = 0;
    coll_status_t st;

    COLL_CHECK(coll_comm_enter(comm, fn, 0));
    st = req_p ? check_buffer(comm, fn, buf, count, dt, &bytes)
               : coll_comm_error(comm, COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG,
                                 "%s: request is NULL", fn);
    if (st == COLL_OK)
        st = check_peer_tag(comm, fn, peer, tag);
    if (st == COLL_OK)
        st = post(comm, fn, kind, buf, bytes, peer,
                  coll_tag_make(COLL_TAG_USER, 0, (uint32_t)tag), tag, NULL, 0, NULL, hints,
                  NULL, req_p);
    coll_comm_exit(comm);
    return st;
}

/* ---- public point-to-point ------------------------------------------------------------ */

coll_status_t coll_isend(const void *buf, size_t count, coll_datatype_t datatype, int peer,
                         int tag, coll_comm_t comm, coll_request_t *request)
{
    return user_post("coll_isend", COLL_REQ_SEND, (void *)buf, count, datatype, peer, tag, comm,
                     0, request);
}

coll_status_t coll_irecv(void *buf, size_t count, coll_datatype_t datatype, int peer, int tag,
                         coll_comm_t comm, coll_request_t *request)
{
    return user_post("coll_irecv", COLL_REQ_RECV, buf, count, datatype, peer, tag, comm, 0,
                     request);
}

coll_status_t coll_send(const void *buf, size_t count, coll_datatype_t datatype, int peer,
                        int tag, coll_comm_t comm)
{
    coll_request_t req;
    /* nothing else to do until it is sent */
    COLL_CHECK(user_post("coll_send", COLL_REQ_SEND, (void *)buf, count, datatype, peer, tag,
                         comm, COLL_TP_HINT_WAITS, &req));
    return coll_wait(&req);
}

coll_status_t coll_recv(void *buf, size_t count, coll_datatype_t datatype, int peer, int tag,
                        coll_comm_t comm)
{
    coll_request_t req;
    COLL_CHECK(user_post("coll_recv", COLL_REQ_RECV, buf, count, datatype, peer, tag, comm, 0,
                         &req));
    return coll_wait(&req);
}

coll_status_t coll_sendrecv(const void *sendbuf, size_t sendcount, coll_datatype_t sendtype,
                            int dest, int sendtag, void *recvbuf, size_t recvcount,
                            coll_datatype_t recvtype, int source, int recvtag, coll_comm_t comm)
{
    static const char fn[] = "coll_sendrecv";
    coll_request_t reqs[2] = {NULL, NULL};
    size_t sbytes = 0, rbytes = 0;
    coll_status_t st;

    /* Both halves are checked before either is posted: a bad send must not
     * leave a receive behind. */
    COLL_CHECK(coll_comm_enter(comm, fn, 0));
    st = check_buffer(comm, fn, recvbuf, recvcount, recvtype, &rbytes);
    if (st == COLL_OK)
        st = check_peer_tag(comm, fn, source, recvtag);
    if (st == COLL_OK)
        st = check_buffer(comm, fn, sendbuf, sendcount, sendtype, &sbytes);
    if (st == COLL_OK)
        st = check_peer_tag(comm, fn, dest, sendtag);
    /* Receive first, so that a peer doing the same never waits on us. */
    if (st == COLL_OK)
        st = post(comm, fn, COLL_REQ_RECV, recvbuf, rbytes, source,
                  coll_tag_make(COLL_TAG_USER, 0, (uint32_t)recvtag), recvtag, NULL, 0, NULL, 0,
                  NULL, &reqs[0]);
    if (st == COLL_OK)
        st = post(comm, fn, COLL_REQ_SEND, (void *)sendbuf, sbytes, dest,
                  coll_tag_make(COLL_TAG_USER, 0, (uint32_t)sendtag), sendtag, NULL, 0, NULL, 0,
                  NULL, &reqs[1]);
    coll_comm_exit(comm);
    coll_status_t wst = coll_waitall(2, reqs);
    return st != COLL_OK ? st : wst;
}

/* ---- completion ---------------------------------------------------------------------------- */

static coll_status_t check_request(const char *fn, coll_request_t *request)
{
    if (!request)
        return coll_error(COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG, "%s: request pointer is NULL",
                          fn);
    if (*request && (*request)->magic != COLL_REQ_MAGIC)
        return coll_error(COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG,
                          "%s: %p is not a pending request (completed twice?)", fn,
                          (void *)*request);
    return COLL_OK;
}

/* Enter a request's communicator even if it was destroyed meanwhile: the
 * handle is a tombstone whose lock stays valid, and the request is done. */
static void enter_for_request(struct coll_comm *comm)
{
    coll_comm_lock(comm);
    comm->active_calls++;
}

coll_status_t coll_test(coll_request_t *request, int *done)
{
    struct coll_request *req;
    struct coll_comm *comm;
    coll_status_t st = COLL_OK;

    COLL_CHECK(check_request("coll_test", request));
    if (!done)
        return coll_error(COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG, "coll_test: done is NULL");
    req = *request;
    if (!req) {
        *done = 1;
        return COLL_OK;
    }
    comm = req->comm;
    enter_for_request(comm);
    if (comm->state != COLL_COMM_DEAD)
        st = coll_comm_wait(comm, 1, &req, NULL, 1);
    *done = req->done;
    if (!req->done) {
        st = COLL_OK; /* still pending: not an error */
    } else {
        /* as coll_wait: a failed communicator's error wins */
        st = comm->error != COLL_OK ? comm->error : req->status;
        coll_request_free(req);
        *request = NULL;
    }
    coll_comm_exit(comm);
    return st;
}

coll_status_t coll_wait(coll_request_t *request)
{
    if (!request)
        return coll_error(COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG,
                          "coll_wait: request pointer is NULL");
    return coll_waitall(1, request);
}

/* Wait for (or with test_only, look once at) every request of `comm`
 * among requests[from..count). Returns the communicator's error if it
 * failed, COLL_INPROGRESS if test_only and some are not done, else COLL_OK. */
static coll_status_t wait_group(struct coll_comm *comm, int from, int count,
                                coll_request_t requests[], int test_only)
{
    struct coll_request **mine = malloc((size_t)(count - from) * sizeof(*mine));
    coll_status_t st = COLL_OK;
    int n = 0, pending = 0;

    enter_for_request(comm);
    for (int j = from; j < count; j++) {
        struct coll_request *r = requests[j];
        if (!r || r->comm != comm || comm->state == COLL_COMM_DEAD)
            continue;
        if (mine)
            mine[n++] = r;
        else /* no memory for the list: one at a time still progresses all */
            coll_comm_wait(comm, 1, &requests[j], NULL, test_only);
        pending += !r->done;
    }
    if (n > 0)
        coll_comm_wait(comm, n, mine, NULL, test_only);
    for (int i = 0; i < n; i++)
        pending += !mine[i]->done;
    if (comm->error != COLL_OK)
        st = comm->error;
    else if (test_only && pending)
        st = COLL_INPROGRESS;
    free(mine);
    coll_comm_exit(comm);
    return st;
}

/* Is requests[i] the first of its communicator in the array? (A NULL
 * entry is skipped, never dereferenced.) */
static int first_of_comm(coll_request_t requests[], int i)
{
    if (!requests[i])
        return 0;
    for (int j = 0; j < i; j++)
        if (requests[j] && requests[j]->comm == requests[i]->comm)
            return 0;
    return 1;
}

/* Several communicators: progress all of them in turns, so that none
 * waits on a peer that waits for our progress on another. */
static coll_status_t wait_many(int count, coll_request_t requests[])
{
    coll_status_t failed = COLL_OK;

    for (;;) {
        int busy = 0;
        struct coll_comm *sleep_on = NULL;
        for (int i = 0; i < count; i++) {
            if (!first_of_comm(requests, i))
                continue;
            coll_status_t st = wait_group(requests[i]->comm, i, count, requests, 1);
            if (st == COLL_INPROGRESS) {
                busy = 1;
                sleep_on = requests[i]->comm;
            } else if (st < 0 && failed == COLL_OK) {
                failed = st;
            }
        }
        if (!busy)
            return failed;
        enter_for_request(sleep_on);
        if (sleep_on->ev && sleep_on->state != COLL_COMM_DEAD) {
            coll_comm_unlock(sleep_on);
            coll_evloop_sleep(sleep_on->ev, 1);
            coll_comm_lock(sleep_on);
        }
        coll_comm_exit(sleep_on);
    }
}

coll_status_t coll_waitall(int count, coll_request_t requests[])
{
    coll_status_t first = COLL_OK;

    if (count < 0 || (count > 0 && !requests))
        return coll_error(COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG,
                          "coll_waitall: %d requests at %p", count, (void *)requests);
    for (int i = 0; i < count; i++)
        COLL_CHECK(check_request("coll_waitall", &requests[i]));
    /* Requests of one communicator are waited for together; several
     * communicators are progressed one after the other. */
    coll_status_t failed = COLL_OK; /* a communicator that failed meanwhile */
    int ncomms = 0, lead = -1;
    for (int i = 0; i < count; i++)
        if (first_of_comm(requests, i)) {
            ncomms++;
            lead = lead < 0 ? i : lead;
        }
    if (ncomms == 1)
        failed = wait_group(requests[lead]->comm, lead, count, requests, 0);
    else if (ncomms > 1)
        failed = wait_many(count, requests);
    for (int i = 0; i < count; i++) {
        struct coll_request *r = requests[i];
        if (!r)
            continue;
        if (!r->done) { /* only if the communicator vanished under us */
            if (first == COLL_OK)
                first = COLL_ERR_INTERNAL;
            continue;
        }
        if (r->status < 0 && first == COLL_OK)
            first = r->status;
        coll_request_free(r);
        requests[i] = NULL;
    }
    return first != COLL_OK ? first : failed;
}
