/*
 * transport.h: the one interface every transport implements (TCP now;
 * shared memory, libfabric, verbs and CUDA IPC later) and the only one the
 * core uses to move bytes. Transports never see algorithms or collectives.
 *
 * Per communicator the core opens one iface per transport (iface_open:
 * the transport's "listen"), publishes each iface's address through the
 * bootstrap, and then, for every peer, asks the transports in priority
 * order whether they can reach it (can_connect, NCCL style: "no" is a
 * successful answer). The first that says yes gets an endpoint: ep_connect
 * on the side of the higher rank, ep_accept on the lower. Both are
 * non-blocking; ep_ready says when the endpoint is usable.
 *
 * Messages are tagged, reliable and ordered per (endpoint, tag); matching
 * is done by the transport (transports/util/match.h helps), so that
 * libfabric can use its native tag matching. A request is owned by the
 * transport from ep_isend/ep_irecv until it calls req->complete; progress
 * happens in handlers registered on the communicator's event loop and in
 * iface_progress, both called by the core's wait loop ("test" is
 * progress plus the completion flag the callback sets).
 *
 * Mailboxes (optional; transports without them answer
 * COLL_ERR_UNSUPPORTED): per endpoint and direction a few fixed slots
 * (at least two) in memory both processes map, for the small messages of
 * collectives that run outside the schedule engine
 * (algorithms/allreduce_oneshot.c). The core numbers the messages of each
 * direction 1, 2, 3, ... and keeps both counters; with k slots message t
 * goes to slot t % k, which the writer may fill only once the reader has
 * released message t - k (the put answers COLL_INPROGRESS until then). Nothing is matched or
 * queued, so a message costs one cache line or a few.
 *
 * Tables follow libfabric's rules: `size` first so the struct can grow,
 * designated initializers, and no NULL slots (unsupported operations
 * return COLL_ERR_UNSUPPORTED).
 */
#ifndef COLL_TRANSPORT_H
#define COLL_TRANSPORT_H

#include <string.h>

#include "copy.h"
#include "evloop.h"
#include "net.h"
#include "util.h"
#include "wire.h"

/* Memory kinds a transport can read and write directly. */
enum coll_mem_kind {
    COLL_MEM_HOST = 0,
    COLL_MEM_CUDA = 1,
};
#define COLL_MEM_BIT(kind) (1u << (kind))

/* coll_tp_req.hints: how the caller uses a message; a transport may ignore them. */
/* Send: let the receiver read this buffer where it lies (one copy) at
 * sizes where the transport would otherwise copy through buffers of its
 * own. For exchange steps in which every rank sends and receives at once:
 * there a second copy doubles each core's work instead of overlapping it
 * (shared memory, 4-rank all-to-all of 1 MiB: 79 -> 67 us). The receiver
 * may still ask for the copies where they have cost less lately (shm:
 * choose_way). */
#define COLL_TP_HINT_ONE_COPY 1u
/* Send: the sender waits for this send and nothing else (a broadcast's
 * root, a blocking send), so its CPU is free to help move it (shm: it
 * copies part of the message into the receiver's buffer while the
 * receiver reads the rest, shm_share.c). */
#define COLL_TP_HINT_WAITS 2u
/* Receive: the data lands where the call leaves its result and does not
 * read it again, and the call's buffers outgrow the cache
 * (COLL_STREAM_MIN): a transport that copies it out of buffers of its
 * own stores it with non-temporal stores (coll_tp_deliver), which neither
 * read each line of the destination first nor push out of the cache what
 * the call still reads. */
#define COLL_TP_HINT_STREAM 4u
/* Send: its receiver copies it and reduces nothing (every send of a
 * collective that does not reduce; the schedule sets it). Where ranks
 * share CPUs a single copy is their cheapest delivery, which shm offers
 * such sends from a lower size and at any size
 * (COLL_SHM_CMA_CROWDED). */
#define COLL_TP_HINT_PLAIN 8u
/* Receive that folds: what it folds is final and goes back to the sender
 * next (the last exchange of a recursive-halving reduce-scatter, then the
 * first of the doubling all-gather, with the same peer). Where the sender
 * named a reply buffer (coll_tp_req.reply) the transport may write each
 * folded piece there while it is still in cache, and set `replied` on
 * both requests: the exchange back is then already done (shm: 2 ranks,
 * 16 MiB, one read and one write per piece against a second read of the
 * whole half later). */
#define COLL_TP_HINT_REPLY 16u

/* Wire ids of transports, used to label address blobs in the bootstrap. */
enum coll_tp_id {
    COLL_TP_SELF = 0,
    COLL_TP_TCP = 1,
    COLL_TP_SHM = 2,
    COLL_TP_OFI = 3,
    COLL_TP_VERBS = 4,
    COLL_TP_CUDA_IPC = 5,
    /* Not a transport: the core's settings that every rank must share
     * (comm.c), published beside the transports' addresses. */
    COLL_TP_CORE = 0xff,
};

typedef struct coll_tp_addr {
    uint16_t tp_id;
    uint16_t len;
    uint8_t data[COLL_TP_ADDR_MAX];
} coll_tp_addr_t;

/* What every rank publishes about itself through the bootstrap. */
typedef struct coll_peer_info {
    uint32_t rank;
    uint32_t pid;
    uint64_t host_hash; /* equal for ranks that can share memory */
    char hostname[COLL_WIRE_HOSTNAME_BYTES];
    uint32_t naddrs;
    coll_tp_addr_t addrs[COLL_TP_MAX];
} coll_peer_info_t;

/* Serialize / parse one peer info (bounded; parse rejects malformed input). */
void coll_peer_info_encode(const coll_peer_info_t *info, coll_wbuf_t *w);
coll_status_t coll_peer_info_decode(coll_rbuf_t *r, coll_peer_info_t *info);
const coll_tp_addr_t *coll_peer_info_addr(const coll_peer_info_t *info, uint16_t tp_id);

/* Inputs of the cost model: time = latency + bytes / bandwidth. */
typedef struct coll_tp_perf {
    double latency_s;
    double bandwidth_Bps;
    double overhead_s; /* CPU time per message on the caller's side */
    /* 1: a receiver copies large messages out of the sender's memory by
     * itself (process_vm_readv), so moving them needs no CPU time of the
     * sender's; 0: the sender's CPU pushes the data (sockets). */
    int pull;
    /* Smallest pipeline chunk (COLL_PIPELINE_CHUNK) that moves at full
     * speed toward a peer on this host (_local) or on another one
     * (_remote): below it each message's own costs show, such as a system
     * call on both sides. 0: no wish; the caller zeroes the struct.
     * _remote is taken only by all-reduce calls whose blocks hold at
     * least COLL_BULK_MIN_CHUNKS of it (collectives.c): a larger chunk
     * fills the pipeline later. */
    size_t chunk_local, chunk_remote;
} coll_tp_perf_t;

typedef struct coll_tp_req coll_tp_req_t;
typedef void (*coll_tp_complete_fn)(coll_tp_req_t *req, coll_status_t status);
/* Combine `bytes` arriving bytes at src into buf + off (see fold below). */
typedef void (*coll_tp_fold_fn)(coll_tp_req_t *req, size_t off, const void *src, size_t bytes);

/* Pieces handed to a fold start at multiples of this (and end at one, or
 * at the end of the message), so that no element is cut in two. */
#define COLL_TP_FOLD_ALIGN 64

#define COLL_TP_REQ_SCRATCH 128

/* Request-level failures are reported by completing the request with a
 * status; the core words the message, since it knows the operation:
 *   COLL_ERR_SIZE_MISMATCH  the sender's length differs; bytes_done holds it
 *                           (SIZE_MAX: longer than the receive, by how much
 *                           the transport cannot tell)
 *   COLL_ERR_PEER_FAILED    the peer left (destroyed its communicator) */
struct coll_tp_req {
    coll_list_t link;     /* the transport's while the request is pending */
    uint64_t tag;
    void *buf;            /* send: source (not written); recv: destination */
    size_t len;           /* bytes */
    size_t bytes_done;    /* moved so far: the core watches it for stalls */
    coll_tp_complete_fn complete;
    /* Receive-and-reduce, on endpoints with recv_fold (NULL
     * otherwise): arriving bytes go through fold instead of a copy into
     * buf, so that a reduction reads them where the transport has them
     * (a shared ring, a bounce buffer in cache) rather than after a copy
     * to memory. Deliver with coll_tp_deliver. */
    coll_tp_fold_fn fold;
    uint32_t hints;       /* COLL_TP_HINT_* */
    /* Send: where the receiver may write back the folded result of this
     * range (COLL_TP_HINT_REPLY), len bytes; NULL: nowhere. */
    void *reply;
    /* Set by the transport before complete: the folded result was written
     * back (send: into reply; receive: into the sender's reply). */
    int replied;
    /* Transport-private state, so that posting needs no allocation. */
    uint8_t scratch[COLL_TP_REQ_SCRATCH] __attribute__((aligned(16)));
};

/* Hand `len` received bytes at src, for offset `off` of the message, to
 * the receive: folded or copied. */
static inline void coll_tp_deliver(coll_tp_req_t *req, size_t off, const void *src, size_t len)
{
    if (req->fold)
        req->fold(req, off, src, len);
    else if (req->hints & COLL_TP_HINT_STREAM)
        coll_copy_stream((uint8_t *)req->buf + off, src, len);
    else
        coll_copy((uint8_t *)req->buf + off, src, len);
}

typedef struct coll_tp_iface coll_tp_iface_t;
typedef struct coll_tp_ep coll_tp_ep_t;
typedef struct coll_tp_ops coll_tp_ops_t;

/* What the core gives a transport when it opens an iface. */
typedef struct coll_tp_params {
    int rank;
    int nranks;
    const uint8_t *secret;          /* COLL_SECRET_BYTES */
    const coll_addr_t *local_addr;  /* chosen interface address, port 0 */
    coll_evloop_t *evloop;
    uint64_t handshake_timeout_ns;  /* for strangers on our listening port */
    uint64_t connect_deadline_ns;   /* for our own outgoing connections */
    int required;                   /* named in COLL_TRANSPORTS: missing hardware is an error */
    int checksum;                   /* COLL_CHECKSUM: CRC-32C in every frame */
    int64_t test_corrupt_frame;     /* COLL_TEST_CORRUPT_FRAME (crc32c.h) */
    /* Ranks of the job on this host, for resources sized before the peers
     * are known (the launcher's count, the parent's for a split, else
     * COLL_LOCAL_SIZE); 0: not known, as many as nranks may be. */
    int local_size;
    void *core;
    /* The link to `peer` is broken (died, aborted, protocol violation):
     * the core fails the communicator. `msg` names the peer. */
    void (*ep_failed)(void *core, int peer, coll_status_t status, const char *msg);
} coll_tp_params_t;

struct coll_tp_iface {
    const coll_tp_ops_t *ops;   /* set by the core after iface_open */
    coll_tp_params_t params;
    /* Set by the core once the ranks agreed on the cost model (0 before):
     * a host of the communicator runs more ranks than it has CPUs, so a
     * receiver is often descheduled when its data arrives. */
    int crowded;
    /* Set by the core around a poll it makes between pieces of a local
     * copy of its own (coll_comm_poll_busy): take in what peers sent and
     * answer it, so that a peer waiting on us can move its data
     * meanwhile, but leave copies a peer could make instead of us (shm: a
     * shared receive's pieces) for a later poll. */
    int busy;
};

struct coll_tp_ep {
    coll_tp_iface_t *iface;
    int peer;
    char desc[96]; /* "rank 3 (10.0.0.3:41234)", for messages */
    /* Receives that reduce fold here as the data arrives (coll_tp_req_t.fold)
     * instead of landing in scratch that a reduce step reads after; set by
     * the transport when it makes the endpoint, where that costs less: 1
     * always, COLL_TP_FOLD_IN_PLACE only where the fold writes over its
     * local operand (dst == local), 0 never. */
    int recv_fold;
};
#define COLL_TP_FOLD_IN_PLACE 2

struct coll_tp_ops {
    size_t size;
    const char *name;
    uint16_t id;                    /* enum coll_tp_id */
    uint32_t mem_kinds;             /* COLL_MEM_BIT(...) mask */

    /* Create the per-communicator state and start listening. */
    coll_status_t (*iface_open)(const coll_tp_params_t *params, coll_tp_iface_t **iface_p);
    /* Stop listening and free; every endpoint was destroyed before. */
    coll_status_t (*iface_close)(coll_tp_iface_t *iface);
    /* The address peers need to reach this iface. */
    coll_status_t (*iface_addr)(coll_tp_iface_t *iface, coll_tp_addr_t *addr_p);
    coll_status_t (*iface_query)(coll_tp_iface_t *iface, coll_tp_perf_t *perf_p);
    /* Non-blocking progress and timers not driven by the event loop. */
    coll_status_t (*iface_progress)(coll_tp_iface_t *iface, int *progressed_p);

    /* Can this transport reach `peer`? *yes_p = 0 is not an error. */
    coll_status_t (*can_connect)(coll_tp_iface_t *iface, const coll_peer_info_t *self,
                                 const coll_peer_info_t *peer, int *yes_p);
    /* Start connecting to / expect a connection from `peer`. */
    coll_status_t (*ep_connect)(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                                coll_tp_ep_t **ep_p);
    coll_status_t (*ep_accept)(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                               coll_tp_ep_t **ep_p);
    /* COLL_OK once connected, COLL_INPROGRESS before, or the error. */
    coll_status_t (*ep_ready)(coll_tp_ep_t *ep);

    /* Post a tagged send or receive of req->len bytes. Either may complete
     * before returning. Errors that concern only this request complete it
     * with that error; the call itself fails only for a bad argument. */
    coll_status_t (*ep_isend)(coll_tp_ep_t *ep, coll_tp_req_t *req);
    coll_status_t (*ep_irecv)(coll_tp_ep_t *ep, coll_tp_req_t *req);

    /* COLL_OK when every send (and a goodbye, once closed) has reached the
     * peer, COLL_INPROGRESS before. */
    coll_status_t (*ep_flush)(coll_tp_ep_t *ep);
    /* Stop the endpoint. why == COLL_OK: leave gracefully (queued sends go
     * out, then a goodbye; pending receives fail with
     * COLL_ERR_INVALID_USAGE). Otherwise tell the peer `reason` (best
     * effort) and fail every pending request with `why`. Idempotent and
     * safe inside an event handler; memory stays until ep_destroy. */
    coll_status_t (*ep_close)(coll_tp_ep_t *ep, coll_status_t why, const char *reason);
    /* Release everything (never from inside an event handler). */
    coll_status_t (*ep_destroy)(coll_tp_ep_t *ep);

    /* Mailboxes (see above). Bytes one slot holds. */
    coll_status_t (*ep_mbox_query)(coll_tp_ep_t *ep, size_t *bytes_p);
    /* Write message `seq`: COLL_INPROGRESS while the reader still holds
     * message seq - 2 (nothing written then). */
    coll_status_t (*ep_mbox_put)(coll_tp_ep_t *ep, uint64_t seq, const void *buf, size_t len);
    /* Message `seq` from the peer, in place: COLL_INPROGRESS until it is
     * there. The pointer is good until ep_mbox_release(seq). */
    coll_status_t (*ep_mbox_get)(coll_tp_ep_t *ep, uint64_t seq, const void **buf_p,
                                 size_t *len_p);
    coll_status_t (*ep_mbox_release)(coll_tp_ep_t *ep, uint64_t seq);
};

/* The mailbox slots of transports that have none. */
coll_status_t coll_tp_no_mbox_query(coll_tp_ep_t *ep, size_t *bytes_p);
coll_status_t coll_tp_no_mbox_put(coll_tp_ep_t *ep, uint64_t seq, const void *buf, size_t len);
coll_status_t coll_tp_no_mbox_get(coll_tp_ep_t *ep, uint64_t seq, const void **buf_p,
                                  size_t *len_p);
coll_status_t coll_tp_no_mbox_release(coll_tp_ep_t *ep, uint64_t seq);
#define COLL_TP_NO_MBOX                          \
    .ep_mbox_query = coll_tp_no_mbox_query,      \
    .ep_mbox_put = coll_tp_no_mbox_put,          \
    .ep_mbox_get = coll_tp_no_mbox_get,          \
    .ep_mbox_release = coll_tp_no_mbox_release

/* The status with which a peer's abort notice fails our side: its own when
 * it timed out (the job's collective timed out: every rank reports a
 * timeout, the first to notice naming who had not arrived), otherwise
 * COLL_ERR_PEER_FAILED. Older peers send 0, which reads as the latter. */
static inline coll_status_t coll_tp_abort_status(int64_t theirs)
{
    return theirs == COLL_ERR_TIMEOUT ? COLL_ERR_TIMEOUT : COLL_ERR_PEER_FAILED;
}

/* Transports compiled in, in default priority order (self excluded). */
const coll_tp_ops_t *const *coll_tp_registry(int *count_p);
const coll_tp_ops_t *coll_tp_self_ops(void);
const coll_tp_ops_t *coll_tp_lookup(const char *name);

#endif /* COLL_TRANSPORT_H */
