/*
 * comm.h: the communicator object and the point-to-point layer that
 * algorithms are written against (see algorithms/algorithms.h).
 *
 * Locking: every public call enters the communicator (comm_enter), which
 * takes its lock (comm_lock.h: a mutex, biased to the thread that uses
 * the communicator) and counts the call in comm->active_calls. The lock
 * is released only while a waiting thread sleeps, so all transport state
 * is touched under it. A communicator handle is never
 * freed: after destroy or abort it stays as a small tombstone whose magic
 * says DEAD, so a late call gets COLL_ERR_INVALID_COMM instead of a crash,
 * and a request that outlives its communicator can still be completed.
 */
#ifndef COLL_COMM_H
#define COLL_COMM_H

#include <pthread.h>

#include "blocks.h"
#include "bootstrap.h"
#include "comm_lock.h"
#include "error.h"
#include "transport.h"

#define COLL_COMM_MAGIC_LIVE 0x4c4c4f43434f4d4dull /* "MMOCCOLL" */
#define COLL_COMM_MAGIC_DEAD 0x444145444d4d4f43ull

#define COLL_MAX_COLLS 16 /* >= COLL_NUM_COLLS (schedule.h) */

enum coll_comm_state {
    COLL_COMM_INIT,   /* being built by init */
    COLL_COMM_LIVE,
    COLL_COMM_FAILED, /* a fatal error: every call returns comm->error */
    COLL_COMM_DEAD,   /* destroyed or aborted: resources freed */
};

/* Wire tags: 4 bits of context, 28 bits of sequence, 32 bits of tag, so
 * that user messages, collectives and internal traffic never match each
 * other, and concurrent collectives differ by sequence number. */
enum coll_tag_ctx {
    COLL_TAG_USER = 0,
    COLL_TAG_COLL = 1,
    COLL_TAG_INTERNAL = 2,
};

static inline uint64_t coll_tag_make(unsigned ctx, uint32_t seq, uint32_t tag)
{
    return (uint64_t)ctx << 60 | (uint64_t)(seq & 0x0fffffffu) << 32 | tag;
}

typedef struct coll_peer {
    coll_peer_info_t info;
    const coll_tp_ops_t *ops;
    coll_tp_ep_t *ep;
    uint64_t mbox_out, mbox_in; /* mailbox messages written to it, read from it */
} coll_peer_t;

#define COLL_SCRATCH_CACHE 4

struct coll_comm {
    uint64_t magic;
    struct coll_comm *next_handle; /* every handle ever returned (tombstones) */
    pthread_mutex_t lock;          /* with bias: coll_comm_lock/unlock only */
    coll_comm_bias_t bias;
    pthread_cond_t idle;           /* active_calls dropped (abort waits on it) */
    int active_calls;
    int abort_requested;           /* atomic */
    /* During a split's init nobody holds the new handle, so what can abort
     * it is the parent's flag (the parent is never freed: a tombstone at
     * worst); NULL once init is over. */
    const int *parent_abort;
    int state;

    int rank;
    int nranks;
    uint8_t secret[COLL_SECRET_BYTES];
    uint64_t timeout_ns;
    uint64_t spin_ns;
    int inline_polls;              /* COLL_INLINE_POLLS */
    coll_addr_t local_addr;        /* interface in use; split roots bind here */
    char ifname[32];
    coll_evloop_t *ev;
    coll_tp_iface_t *ifaces[COLL_TP_MAX]; /* [0] is self */
    int niface;
    coll_peer_t *peers;            /* [nranks] */

    /* Waiting threads (leader/followers): one leader drives progress and
     * sleeps in the event loop; the others wait on progress_cond, which
     * releases the lock atomically, so no completion can be missed. */
    int has_leader;
    int leader_asleep;
    int nfollowers;
    pthread_cond_t progress_cond;  /* a request completed, or leadership is free */
    coll_list_t scheds;            /* running schedules (schedule.c) */
    struct coll_flight_entry *flight; /* the last collectives (flight.c), or NULL */
    /* Collective settings, read at init. */
    const struct coll_algo *forced[COLL_MAX_COLLS];      /* COLL_ALGO */
    const struct coll_algo *last_choice[COLL_MAX_COLLS]; /* to log changes */
    /* The last choice per collective and the call shape it was made for:
     * a training loop repeats its calls, and the cost model costs a
     * fraction of a microsecond per call (registry.c). */
    struct coll_algo_memo { const struct coll_algo *algo; size_t count, esize; int det; }
        algo_memo[COLL_MAX_COLLS];
    int algo_fallback;             /* COLL_ALGO_FALLBACK: coll_algo_fallback_t */
    int deterministic;
    int check_args;
    int bind;                      /* COLL_BIND: coll_bind_t */
    int fold;                      /* COLL_RECV_REDUCE */
    int checksum;                  /* COLL_CHECKSUM, the same on every rank */
    size_t chunk_bytes;            /* COLL_PIPELINE_CHUNK, or chunk_links (choose_chunk) */
    size_t chunk_links;            /* the largest chunk a link in use asks for, over ranks */
    size_t chunk_bulk;             /* the same toward other hosts, for large vectors (0: none) */
    size_t det_scratch_max;
    size_t window_bytes;           /* COLL_PIPELINE_WINDOW resolved (agree_costs); 0: none */
    int window_auto;               /* COLL_PIPELINE_WINDOW=auto */
    size_t stream_min;             /* COLL_STREAM_MIN resolved (the host's bytes); 0: never */
    size_t stream_rank_min;        /* ... over the ranks on our host: this rank's bytes */
    /* Scratch blocks of finished collectives, kept for the next ones (a
     * fresh large block faults in every page on every call); owned by
     * schedule.c, under the lock. */
    coll_blocks_t scratch_blocks; /* COLL_SCRATCH_CACHE of them */
    /* A finished schedule kept with its arrays, and spare requests, so
     * that a small collective allocates nothing (schedule.c, p2p.c). */
    struct coll_sched *sched_spare;
    struct coll_request *req_spares;
    int nreq_spares;
    /* Mailboxes (transport.h): bytes a message may hold, the same on every
     * rank (0: some pair has none), and the schedule using them now: they
     * are used by one collective at a time, in call order, so that the
     * per-peer message numbers agree on both sides (schedule.c). */
    size_t mbox_bytes;
    struct coll_sched *mbox_owner;
    /* Cost model, agreed across ranks at init (the maximum of each), so that
     * every rank chooses the same algorithm for a call. */
    double alpha, beta;            /* the slowest transport in use */
    double gamma, copy;            /* reduction and memcpy, seconds per byte */
    double crowd;                  /* ranks per CPU on the most crowded host (agree_costs);
                                      above 1: oversubscribed */
    int pull;                      /* every pair's transport lets receivers read senders'
                                      memory (coll_tp_perf_t.pull) */
    int one_host;                  /* every rank on one host: no wire between any pair */
    uint32_t coll_seq;             /* collectives started */
    uint32_t split_seq;

    coll_status_t error;           /* the fatal error, COLL_OK if none */
    char errmsg[COLL_ERRMSG_LEN];  /* its message */
    char lasterr[COLL_ERRMSG_LEN]; /* last error of any kind on this comm */
};

enum coll_req_kind {
    COLL_REQ_SEND = 1,
    COLL_REQ_RECV = 2,
    COLL_REQ_COLL = 3, /* a collective: done when its schedule is */
};

struct coll_sched;

#define COLL_REQ_MAGIC 0x5245515545535421ull

struct coll_request {
    coll_tp_req_t tp;       /* first: the transport hands this back */
    uint64_t magic;
    struct coll_comm *comm;
    int kind;
    int peer;
    int tag;                /* user tag, or -1 for internal traffic */
    const char *op;         /* API call that posted it, for messages */
    int done;
    coll_status_t status;
    size_t seen_bytes;      /* tp.bytes_done when last looked at */
    uint64_t stall_since_ns;
    uint64_t sampled_ns;    /* a collective's in-flight bytes last looked at */
    struct coll_sched *sched; /* COLL_REQ_COLL: its schedule while running;
                                 send/recv: the schedule it is a step of */
    uint32_t vid;           /* the step, for a send/recv of a schedule */
    struct coll_request *next_spare; /* in comm->req_spares while unused */
    const void *fold_local; /* a folding receive's local operand (coll_sched_fold) */
};

/* ---- creation ----------------------------------------------------------- */

struct coll_root;

typedef struct coll_init_args {
    int nranks;
    int rank;
    coll_uid_t uid;
    uint32_t round;                /* bootstrap round (init_env calls) */
    const coll_config_t *config;   /* may be NULL */
    struct coll_root *root;        /* a root this process runs for the job */
    const char *how;               /* "unique id", "torchrun", ... for logs */
    const int *parent_abort;       /* split: the parent's abort_requested */
    int local_size;                /* ranks on our host, from the launcher or the parent
                                    * (split); 0: not known before the bootstrap */
} coll_init_args_t;

/* Build a communicator: bootstrap, choose a transport per peer, connect.
 * Releases args->root (joins it, or cancels it on failure). */
coll_status_t coll_comm_init_internal(const coll_init_args_t *args, struct coll_comm **comm_p);

/* An all-reduce's pipeline chunk is `bulk` (links toward other hosts ask
 * for it, 0: none) where a rank's share of the vector, block_bytes, holds
 * at least this many of it, else `chunk` (the communicator's). */
#define COLL_BULK_MIN_CHUNKS 8
size_t coll_call_chunk(size_t chunk, size_t bulk, size_t block_bytes);

/* ---- entering and leaving (public API wrappers) ------------------------ */

/* Validate `comm`, lock it and count the call. With allow_failed, a failed
 * communicator may be entered (destroy, abort); otherwise its error is
 * returned at once. `fn` names the API function in messages. */
coll_status_t coll_comm_enter(struct coll_comm *comm, const char *fn, int allow_failed);
void coll_comm_exit(struct coll_comm *comm);

/* ---- errors ------------------------------------------------------------- */

/* A non-fatal error on this communicator: message prefixed with the rank,
 * stored as its last error, logged once. Returns status. */
coll_status_t coll_comm_error(struct coll_comm *comm, unsigned subsys, coll_status_t status,
                              const char *fmt, ...) COLL_PRINTF(4, 5);
/* A fatal error: as above, and the communicator fails: every endpoint is
 * closed with an abort notice carrying the message, pending requests fail,
 * later calls fail fast. Only the first fatal error is kept. */
coll_status_t coll_comm_fail(struct coll_comm *comm, unsigned subsys, coll_status_t status,
                             const char *fmt, ...) COLL_PRINTF(4, 5);
/* Fail the communicator with the error the failing step already recorded
 * and logged (coll_comm_error), so it is logged once. */
coll_status_t coll_comm_fail_recorded(struct coll_comm *comm, coll_status_t status);

/* ---- point-to-point for algorithms and internal use (lock held) -------- */

/* Post a send/receive of `bytes` bytes with a wire tag (coll_tag_make). */
coll_status_t coll_p2p_isend(struct coll_comm *comm, const void *buf, size_t bytes,
                             int peer, uint64_t tag, struct coll_request **req_p);
coll_status_t coll_p2p_irecv(struct coll_comm *comm, void *buf, size_t bytes, int peer,
                             uint64_t tag, struct coll_request **req_p);
/* Wait for all `n` requests (NULL entries skipped), then free them and
 * clear the array. `what` names the operation in timeout messages. */
coll_status_t coll_p2p_waitall(struct coll_comm *comm, int n, struct coll_request **reqs,
                               const char *what);
/* Post a step of a schedule; its completion is reported to the schedule.
 * A receive with fold_local != NULL reduces as it arrives (the peer's
 * endpoint has recv_fold) into buf, with fold_local as the
 * other operand (coll_sched_fold). `hints`: COLL_TP_HINT_* for the transport;
 * `reply`: a send's reply buffer (coll_tp_req.reply), or NULL. */
coll_status_t coll_p2p_post_vertex(struct coll_comm *comm, int kind, void *buf, size_t bytes,
                                   int peer, uint64_t tag, struct coll_sched *s, uint32_t vid,
                                   const void *fold_local, uint32_t hints, void *reply,
                                   struct coll_request **req_p);

/* One non-blocking pass of the progress engine. */
void coll_comm_progress(struct coll_comm *comm);
/* A pass of the transports alone, each told it is busy
 * (coll_tp_iface.busy), between pieces of a schedule's local copy: no
 * schedule advances in it, its completions are recorded for later. */
void coll_comm_poll_busy(struct coll_comm *comm);
/* The same at time `now` (coll_time_ns), read by the caller; nonzero when
 * a transport moved something (events dispatched, rings read or written). */
int coll_comm_progress_at(struct coll_comm *comm, uint64_t now);
/* Wait until every request in reqs is done, or the deadline. test_only:
 * a single pass, COLL_INPROGRESS if not all are done. At least one
 * progress pass is made, and once the communicator has failed its error
 * is returned even for requests that completed. `what` names the
 * operation in a timeout message (NULL: the request's own op). */
coll_status_t coll_comm_wait(struct coll_comm *comm, int n, struct coll_request **reqs,
                             const char *what, int test_only);
void coll_request_free(struct coll_request *req);
/* Internal requests, under the lock: get one (zeroed; NULL when out of
 * memory) and give it back for reuse; release the spares at teardown. */
struct coll_request *coll_request_get(struct coll_comm *comm);
void coll_request_recycle(struct coll_comm *comm, struct coll_request *req);
void coll_request_release_spares(struct coll_comm *comm);
/* What posted the request, for messages ("allreduce #12 (ring)", "send"). */
const char *coll_request_op(const struct coll_request *req);
/* A request completed: wake the threads that may be waiting for it. */
void coll_comm_wake_waiters(struct coll_comm *comm);

#endif /* COLL_COMM_H */
