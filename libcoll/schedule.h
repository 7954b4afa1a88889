/*
 * schedule.h: collectives as schedules. An algorithm does not send anything
 * itself: it builds a schedule, a graph of vertices (send, receive, local
 * reduce, copy, the final division of an average) whose edges say "this
 * waits for that". The engine starts every vertex whose dependencies are
 * done, in any order, and progresses with the communicator; so one
 * mechanism gives non-blocking collectives, several collectives in flight,
 * and pipelines in which sending, receiving and reducing overlap.
 *
 * Messages of a schedule carry wire tags (COLL context, the collective's
 * sequence number, and an algorithm-chosen 32-bit `mtag`): a send and its
 * receive must use the same mtag, and two messages between the same pair
 * should not share one unless their order is fixed by dependencies.
 *
 * Building never fails in the middle: an allocation failure is recorded and
 * returned by coll_sched_start, so algorithms need no error checks.
 */
#ifndef COLL_SCHEDULE_H
#define COLL_SCHEDULE_H

#include <stdio.h>

#include "comm.h"

/* The collectives. */
typedef enum coll_coll {
    COLL_BARRIER,
    COLL_BCAST,
    COLL_REDUCE,
    COLL_ALLREDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALLTOALL,
    COLL_ALLTOALLV,
    COLL_SCATTER,
    COLL_GATHER,
    COLL_NUM_COLLS
} coll_coll_t;

const char *coll_coll_name(coll_coll_t coll);

/* Does the collective reduce (take an op)? */
static inline int coll_coll_reduces(coll_coll_t coll)
{
    return coll == COLL_ALLREDUCE || coll == COLL_REDUCE || coll == COLL_REDUCE_SCATTER;
}

/* A collective call as the user made it (after argument checks). */
typedef struct coll_args {
    coll_coll_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;             /* elements; per block for (all)gather, scatter,
                                 reduce-scatter and alltoall */
    coll_datatype_t dt;
    coll_op_t op;
    int root;
    size_t esize;             /* bytes per element */
    int in_place;             /* the call's in-place form was used */
    int deterministic;        /* COLL_DETERMINISTIC */
    size_t chunk_bytes;       /* COLL_PIPELINE_CHUNK */
    size_t det_scratch_max;   /* COLL_DET_SCRATCH_MAX */
    size_t window_bytes;      /* COLL_PIPELINE_WINDOW: chunk bytes in flight; 0: no limit */
    const size_t *sendcounts, *sdispls, *recvcounts, *rdispls; /* alltoallv */
    int check_args;           /* COLL_CHECK_ARGS: compare the call across ranks first */
    size_t mbox_bytes;        /* largest mailbox message (coll_sched_mbox_put); 0: none */
    int stream;               /* the buffers outgrow the cache (COLL_STREAM_MIN):
                                 coll_sched_recv_result streams */
    int pull;                 /* every pair's transport lets receivers read senders'
                                 memory: every pair shares memory (comm->pull) */
    const char *algo;         /* the algorithm chosen for the call */
} coll_args_t;

typedef int32_t coll_vid_t;  /* vertex id; negative: none */
typedef struct coll_sched coll_sched_t;

/* Dependency lists: COLL_DEPS(a, b) or COLL_NODEPS. Negative ids are
 * skipped, so "the previous step, if any" needs no special case. */
#define COLL_DEPS(...) \
    (int)(sizeof((coll_vid_t[]){__VA_ARGS__}) / sizeof(coll_vid_t)), (coll_vid_t[]){__VA_ARGS__}
#define COLL_NODEPS 0, NULL

/* ---- building (algorithms) --------------------------------------------- */

const coll_args_t *coll_sched_args(const coll_sched_t *s);
const char *coll_sched_name(const coll_sched_t *s); /* "allreduce #12 (ring)" */
struct coll_comm *coll_sched_comm(const coll_sched_t *s);
uint32_t coll_sched_seq(const coll_sched_t *s);
int coll_sched_rank(const coll_sched_t *s);
int coll_sched_size(const coll_sched_t *s);

/* Scratch memory freed with the schedule (NULL only after an allocation
 * failure, which coll_sched_start then reports). */
void *coll_sched_scratch(coll_sched_t *s, size_t bytes);

coll_vid_t coll_sched_send(coll_sched_t *s, const void *buf, size_t bytes, int peer,
                           uint32_t mtag, int ndeps, const coll_vid_t *deps);
/* A send with COLL_TP_HINT_* for the transport (transport.h). */
coll_vid_t coll_sched_send_hinted(coll_sched_t *s, const void *buf, size_t bytes, int peer,
                                  uint32_t mtag, uint32_t hints, int ndeps,
                                  const coll_vid_t *deps);
coll_vid_t coll_sched_recv(coll_sched_t *s, void *buf, size_t bytes, int peer, uint32_t mtag,
                           int ndeps, const coll_vid_t *deps);
/* A receive into the call's result that no later vertex of the schedule
 * reads: where the call's buffers outgrow the cache (args.stream) the
 * transport may store it past the cache (COLL_TP_HINT_STREAM). */
coll_vid_t coll_sched_recv_result(coll_sched_t *s, void *buf, size_t bytes, int peer,
                                  uint32_t mtag, int ndeps, const coll_vid_t *deps);
/* Operand order of coll_sched_recv_reduce: a min or max that meets a NaN
 * or a signed zero depends on it, and results must not depend on the path. */
enum { COLL_INCOMING_FIRST = 0, COLL_LOCAL_FIRST = 1 };

/* Receive `count` elements from `peer` and reduce them with `local` into
 * dst (dst = incoming op local, or local op incoming; dst may be local).
 * Where the peer's transport can reduce as the data arrives
 * (its endpoint's recv_fold) that is one step and tmp is not used; otherwise
 * the message lands in tmp (which may be dst when dst is not local; NULL:
 * scratch taken only then) and a reduce step follows. `deps` gate the receive; as the receive may write
 * dst as soon as it starts, nothing may still read dst (e.g. a send of
 * it) unless a dependency waits for it. Returns the step after which dst
 * holds the result. */
coll_vid_t coll_sched_recv_reduce(coll_sched_t *s, void *dst, const void *local, void *tmp,
                                  size_t count, int peer, uint32_t mtag, int order, int ndeps,
                                  const coll_vid_t *deps);
/* The last exchange of a reduce-scatter whose next step sends each side's
 * folded range straight back (recursive halving, then doubling, with the
 * same peer): a send of buf whose receiver may write the final result of
 * that range into `reply` as it folds, and a coll_sched_recv_reduce whose
 * folded range may be written back to the sender's reply (not for
 * COLL_AVG, whose division comes after). Whether it was is known only
 * when these finish: the steps that would move the same bytes back are
 * added as usual and marked with coll_sched_unless_replied. */
coll_vid_t coll_sched_send_reply(coll_sched_t *s, const void *buf, size_t bytes, void *reply,
                                 int peer, uint32_t mtag, int ndeps, const coll_vid_t *deps);
coll_vid_t coll_sched_recv_reduce_reply(coll_sched_t *s, void *dst, const void *local, void *tmp,
                                        size_t count, int peer, uint32_t mtag, int order,
                                        int ndeps, const coll_vid_t *deps);
/* Vertex `id` (a send or receive) waits for `replied` and is done without
 * moving anything where the transport wrote `replied`'s range back: a
 * send of our folded range after coll_sched_recv_reduce_reply, a receive
 * of the peer's after coll_sched_send_reply. Both sides decide alike: a
 * message is replied at both its ends or at neither. */
void coll_sched_unless_replied(coll_sched_t *s, coll_vid_t id, coll_vid_t replied);
/* dst[i] = a[i] op b[i] for `count` elements of the collective's datatype
 * and op (dst may be a or b). */
coll_vid_t coll_sched_reduce(coll_sched_t *s, void *dst, const void *a, const void *b,
                             size_t count, int ndeps, const coll_vid_t *deps);
coll_vid_t coll_sched_copy(coll_sched_t *s, void *dst, const void *src, size_t bytes,
                           int ndeps, const coll_vid_t *deps);
/* buf[i] /= nranks, for COLL_AVG after the sum (a no-op for other ops). */
coll_vid_t coll_sched_finish_avg(coll_sched_t *s, void *buf, size_t count, int ndeps,
                                 const coll_vid_t *deps);
/* A vertex that only waits for its dependencies (joins branches). */
coll_vid_t coll_sched_join(coll_sched_t *s, int ndeps, const coll_vid_t *deps);
/* A vertex that runs fn(s, arg) once its dependencies are done; an error
 * it returns fails the schedule (fn records the message). */
typedef coll_status_t (*coll_sched_check_fn)(coll_sched_t *s, void *arg);
coll_vid_t coll_sched_check(coll_sched_t *s, coll_sched_check_fn fn, void *arg, int ndeps,
                            const coll_vid_t *deps);
/* ---- steps that poll ------------------------------------------------------ */

/* A vertex that calls fn(s, arg, &step) once its dependencies are done and
 * then on every progress pass until it returns COLL_OK (done) or an error
 * (the schedule fails; fn records the message); COLL_INPROGRESS: call
 * again. `step` starts at 0 and is fn's to keep its place in. For work
 * that is cheaper to poll than to post, over mailboxes. */
typedef coll_status_t (*coll_sched_poll_fn)(coll_sched_t *s, void *arg, uint32_t *step);
coll_vid_t coll_sched_poll(coll_sched_t *s, coll_sched_poll_fn fn, void *arg, int ndeps,
                           const coll_vid_t *deps);

/* Mailboxes (transport.h), for poll functions only: small messages in
 * slots both processes map, without matching, queueing or requests. Usable
 * when coll_args_t.mbox_bytes covers the message (every pair of the
 * communicator has them). The poll steps of one collective run only
 * while no earlier collective's do, so each peer's messages are numbered
 * alike on both sides. Put and get answer COLL_INPROGRESS until they can
 * be done (the reader has released the slot; the message is there); a
 * gotten message stays readable, in place, until released. Both sides
 * know a message's length from the call's arguments: get fails the call
 * (COLL_ERR_SIZE_MISMATCH, naming the rank) when it is not `len`. */
coll_status_t coll_sched_mbox_put(coll_sched_t *s, int peer, const void *buf, size_t len);
coll_status_t coll_sched_mbox_get(coll_sched_t *s, int peer, size_t len, const void **buf_p);
coll_status_t coll_sched_mbox_release(coll_sched_t *s, int peer);

/* Every vertex added from now on waits for `gate` too (the argument check
 * runs before any data moves). */
void coll_sched_set_gate(coll_sched_t *s, coll_vid_t gate);

/* COLL_CHECK_ARGS: add the cross-rank comparison of the call and make it
 * the gate of every step added afterwards (check_args.c). */
void coll_check_args_add(coll_sched_t *s);

/* ---- running (the collective layer) --------------------------------------- */

/* `name` (e.g. "ring") is copied for messages. */
coll_status_t coll_sched_create(struct coll_comm *comm, const coll_args_t *args,
                                const char *name, coll_sched_t **s_p);
/* Start the schedule (lock held). On success *req_p completes when every
 * vertex has; on failure the schedule is freed. */
coll_status_t coll_sched_start(coll_sched_t *s, struct coll_request **req_p);
void coll_sched_free(coll_sched_t *s);
/* A blocking call's schedule that is local steps and one mailbox poll as
 * its last step (the oneshot algorithms), while nothing else runs on the
 * communicator: run it here, polling up to COLL_INLINE_POLLS times (lock
 * held). Returns 1 when it ended, with its status in *st_p (the schedule
 * is freed); 0 when it is not of that form or the poll still waits: then
 * coll_sched_start takes it over, the poll going on from its step. */
int coll_sched_run_inline(coll_sched_t *s, coll_status_t *st_p);

/* Engine hooks, for comm.c and p2p.c. */
void coll_sched_progress(struct coll_comm *comm);
/* The communicator is going away and its endpoints are closed: finish
 * every schedule (with an error if it had not finished) and free it. */
void coll_sched_drain(struct coll_comm *comm);
/* Free the scratch blocks the communicator kept for later collectives. */
void coll_sched_cache_release(struct coll_comm *comm);
void coll_sched_vertex_done(coll_sched_t *s, uint32_t vid, coll_status_t status);
/* The fold of a receive posted by coll_sched_recv_reduce (transport.h). */
void coll_sched_fold(coll_tp_req_t *req, size_t off, const void *src, size_t bytes);
/* Describe what a stalled collective waits for (peers, bytes). */
void coll_sched_describe_wait(const coll_sched_t *s, char *buf, size_t len);
/* Each running schedule of the communicator, one line with what it waits
 * for (the hang report). */
void coll_sched_write_running(struct coll_comm *comm, FILE *f);
/* Bytes moved so far, in-flight messages included (slow; for stall checks). */
size_t coll_sched_bytes_moved(const coll_sched_t *s);

#endif /* COLL_SCHEDULE_H */
