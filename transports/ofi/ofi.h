/*
 * ofi.h: the libfabric transport's objects (one file each: ofi_iface.c,
 * ofi_ep.c, ofi_msg.c, ofi_match.c, ofi_mr.c).
 *
 * One reliable-datagram endpoint (FI_EP_RDM) per communicator, with one
 * completion queue and one address vector; a coll endpoint per peer is
 * only that peer's address in the vector plus its bookkeeping. Messages
 * are libfabric tagged messages: the provider matches them (our 64-bit
 * wire tag, folded when the provider offers fewer bits) and
 * FI_DIRECTED_RECV restricts a receive to its peer. Equal tags match in
 * send order because we ask for FI_ORDER_SAS.
 *
 * Control messages of our own use the tag context 0xF (the core uses
 * 0..2) with the sender's rank in the tag, one always-posted receive per
 * peer:
 *   HELLO  rank, nranks: here I am; answered by HELLO_ACK, repeated until
 *          that arrives: a provider may drop a message from a
 *          sender not yet in the receiver's address vector (libfabric
 *          1.17's shm does), which at init is a matter of timing. Data
 *          goes only after the peer's HELLO, i.e. once it has our address.
 *   BYE    the peer destroyed its communicator
 *   ABORT  reason: the peer's communicator failed
 *   PING   keepalive while receives wait: a dead remote peer shows as a
 *          failed send, whatever the provider does with idle links
 *
 * Every operation handed to libfabric is an ofi_op_t of ours, never the
 * core's request: a request can be failed (and freed by the core) while
 * libfabric still owns its context, which then completes as a detached op.
 *
 * Matching of our own (ofi_match.c), for providers whose own matching can
 * deadlock (shm) or stall after a truncated message (tcp before libfabric
 * 1.18), and wherever COLL_OFI_MATCH=ours: messages travel as frames
 * (eager with their payload, or a request to send) into receives that
 * take any frame, which we match to the core's receives; a large payload
 * goes once its receive is posted.
 */
#ifndef COLL_OFI_H
#define COLL_OFI_H

/* libfabric is opened with dlopen on first use (ofi_dl.c), not linked:
 * its six exported functions are reached through wrappers of ours. The
 * rest of its API is inline functions over the objects' ops tables. */
#define fi_getinfo coll_fi_getinfo
#define fi_freeinfo coll_fi_freeinfo
#define fi_dupinfo coll_fi_dupinfo
#define fi_fabric coll_fi_fabric
#define fi_strerror coll_fi_strerror
#define fi_version coll_fi_version

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "transport.h"
#include "util/match.h"

#define OFI_FI_VERSION FI_VERSION(1, 9)

/* ofi_dl.c: open libfabric (once per process). On failure: an error
 * naming the rank and dlerror's reason when `required`, else COLL_OK
 * with *loaded_p = 0 (the transport stays unused). */
coll_status_t ofi_dl_load(int rank, int required, int *loaded_p);

/* Address blob: u8 version, u8 flags, u16 name length, u32 provider hash,
 * u64 pid namespace, u64 nonce (this iface's, random), then the
 * provider's endpoint name. */
#define OFI_ADDR_VERSION 1
#define OFI_ADDR_HDR 24
#define OFI_NAME_MAX (COLL_TP_ADDR_MAX - OFI_ADDR_HDR)
#define OFI_ADDR_ACTIVE 0x1
#define OFI_ADDR_OWN_MATCH 0x2 /* we match messages (ofi_match.c) */

/* Frames of our own matching (ofi_match.c): the tag context of frames,
 * and of rendezvous payloads (the receiver's id in the low 32 bits). Both
 * survive ofi_tag's folding. */
#define OFI_FRAME_TAG (0xeull << 60)
#define OFI_PAYLOAD_TAG (0xdull << 60)
enum ofi_frame_type {
    OFI_FRAME_EAGER = 1, /* the payload follows the header */
    OFI_FRAME_RTS = 2,   /* len bytes wait at the sender under id */
    OFI_FRAME_CTS = 3,   /* send id's payload with tag OFI_PAYLOAD_TAG | aux */
};
#define OFI_CTS_DISCARD 0x1 /* CTS flag: the receive does not take it */

typedef struct ofi_frame {
    uint32_t rank;         /* the sender's */
    uint8_t type;          /* enum ofi_frame_type */
    uint8_t flags;
    uint16_t pad;
    uint32_t id;           /* RTS, CTS: the sender's id of the message */
    uint32_t aux;          /* CTS: the receiver's id of the payload */
    uint64_t tag;          /* EAGER, RTS: our wire tag */
    uint64_t len;          /* EAGER, RTS: the message's length */
} ofi_frame_t;

/* Control messages. */
#define OFI_CTL_CTX 0xfull
#define OFI_CTL_TAG (OFI_CTL_CTX << 60)
/* A control message's tag: context, the sender's rank, the type. */
static inline uint64_t ofi_ctl_tag(int sender, uint32_t type)
{
    return OFI_CTL_TAG | (uint64_t)(uint32_t)sender << 8 | type;
}
#define OFI_CTL_MAGIC 0x434f4649u /* "COFI" */
#define OFI_CTL_TEXT 512
enum ofi_ctl_type {
    OFI_CTL_HELLO = 1,
    OFI_CTL_BYE = 2,
    OFI_CTL_ABORT = 3,
    OFI_CTL_PING = 4,
    OFI_CTL_HELLO_ACK = 5,
};

typedef struct ofi_ctl {
    uint32_t magic;
    uint32_t type;
    uint32_t rank;
    uint32_t nranks;
    /* the sender's and the receiver's iface nonces: a control message
     * for an endpoint of an earlier communicator that had this address
     * (a port the OS gave out again) is recognised and dropped */
    uint64_t src_nonce;
    uint64_t dst_nonce;
    uint64_t frames;       /* BYE: frames sent to the receiver before it (ofi_match.c) */
    char text[OFI_CTL_TEXT];
} ofi_ctl_t;

typedef struct ofi_iface ofi_iface_t;
typedef struct ofi_ep ofi_ep_t;

/* One registration in the cache (ofi_mr.c). */
typedef struct ofi_mr {
    uintptr_t base;
    size_t len;
    struct fid_mr *mr;
    void *desc;
    int refs;         /* operations holding it */
    int cached;       /* in iface->mrs; else freed when refs drops to 0 */
    uint64_t used;    /* LRU clock */
} ofi_mr_t;

enum ofi_op_kind {
    OFI_OP_SEND,
    OFI_OP_RECV,
    OFI_OP_CTL_SEND,
    OFI_OP_CTL_RECV,
    OFI_OP_FRAME_SEND,     /* RTS or CTS (an eager send is an OFI_OP_SEND with framed) */
    OFI_OP_FRAME_RECV,     /* takes any frame into a bounce slot */
};

/* An operation owned by libfabric until its completion. The fi_context2
 * comes first: providers that ask for FI_CONTEXT(2) use it. */
typedef struct ofi_op {
    struct fi_context2 fictx;
    coll_list_t link;      /* ep->ops while posted; iface->free_ops after */
    ofi_iface_t *iface;
    ofi_ep_t *ep;          /* NULL once the endpoint was destroyed */
    coll_tp_req_t *req;    /* NULL for control ops and detached requests */
    int kind;              /* enum ofi_op_kind */
    coll_status_t cancelled; /* cancel asked: the request's status then */
    int queued;            /* in iface->backlog, not yet posted */
    void *buf;             /* what to post */
    size_t len;
    uint64_t tag, ignore;
    ofi_mr_t *mr;          /* registration held, if any */
    int framed;            /* a send behind `frame` (iov of two) */
    int cts_due;           /* a payload receive: send its CTS once posted */
    int slot;              /* OFI_OP_FRAME_RECV: its bounce buffer */
    ofi_frame_t frame;     /* header of a frame sent */
    ofi_ctl_t ctl;         /* control payload */
} ofi_op_t;

enum ofi_ep_state {
    OFI_EP_CONNECTING,     /* HELLO not yet both ways */
    OFI_EP_READY,
    OFI_EP_CLOSED,
};

struct ofi_ep {
    coll_tp_ep_t super;
    ofi_iface_t *iface;
    int state;
    fi_addr_t addr;
    coll_status_t error;   /* why it closed; COLL_OK while usable */
    int got_hello;         /* the peer's HELLO arrived */
    int peer_has_ours;     /* its HELLO_ACK arrived */
    uint64_t hello_due_ns; /* when ours is repeated until then */
    int peer_left;         /* got BYE */
    int leaving;           /* closed gracefully: BYE queued */
    uint64_t bye_done;     /* when our BYE's send completed (or failed); 0 before */
    int nsends;            /* data and control sends posted or queued */
    coll_list_t ops;       /* ofi_op_t posted for this peer */
    coll_match_t match;    /* our matching: receives posted, frames unexpected */
    coll_list_t rndv_sends; /* coll_tp_req_t whose RTS went, waiting for the CTS */
    uint32_t next_send_id, next_recv_id;
    uint64_t frames_out, frames_in; /* frames sent to / taken from the peer */
    uint64_t bye_frames;   /* its BYE came after this many frames */
    int bye_due;           /* its BYE came; frames before it have not all */
    uint64_t last_rx_ns;   /* anything arrived from the peer */
    uint64_t ping_ns;      /* next keepalive due */
    uint64_t peer_nonce;   /* its iface's nonce, from its address blob */
    uint32_t pid;          /* watched when on our host */
    int pidfd;
    coll_ev_source_t pid_src;
};

struct ofi_iface {
    coll_tp_iface_t super;
    int active;            /* 0: published as unusable, no fabric opened */
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
    int wait_fd;           /* the CQ's wait object, or -1 */
    coll_ev_source_t wait_src;
    int idle_hook;
    uint8_t name[OFI_NAME_MAX];
    size_t namelen;
    uint32_t prov_hash;
    uint64_t pidns;
    uint64_t host_hash;    /* coll_host_hash(): peers on this host */
    uint64_t nonce;        /* random, published: tells our control messages apart */
    int tag_bits;          /* the provider's tag width (<= 64) */
    int need_mr;           /* FI_MR_LOCAL (or COLL_OFI_MR=always) */
    int cq_data;           /* 8 bytes of remote CQ data: sends carry their length */
    ofi_ep_t **eps;        /* by peer rank */
    ofi_ep_t **by_addr;    /* by fi_addr_t (FI_AV_TABLE indexes) */
    int naddr;
    int busy_poll;         /* the wait fd misses some progress: waiters poll */
    int sw_match;          /* our matching (ofi_match.c), not the provider's */
    size_t eager_max;      /* sw_match: payload bytes an eager frame carries */
    size_t slot_bytes;     /* sw_match: one bounce buffer */
    int nslots;
    uint8_t *slots;        /* bounce buffers of the frame receives */
    coll_list_t frame_recvs; /* ofi_op_t OFI_OP_FRAME_RECV posted */
    coll_list_t frame_idle;  /* ... waiting for room in the provider */
    int data_rx;           /* sw_match: payload receives posted */
    int data_rx_max;       /* ... at most: the rest of rx_attr->size stays for frames */
    coll_list_t free_ops;
    coll_list_t orphans;   /* ops of destroyed endpoints still posted */
    coll_list_t backlog_tx; /* sends waiting for room in the provider's queues */
    coll_list_t backlog_rx; /* receives waiting likewise */
    ofi_mr_t *mrs;         /* registration cache */
    int nmrs, mr_cap;
    uint64_t mr_clock;
    uint64_t mr_next_key;
};

/* Our 64-bit wire tag as the provider's tag. */
static inline uint64_t ofi_tag(const ofi_iface_t *iface, uint64_t tag)
{
    unsigned seq_bits;
    uint64_t ctx, seq;

    if (iface->tag_bits >= 64)
        return tag;
    seq_bits = (unsigned)iface->tag_bits - 36;
    ctx = tag >> 60;
    seq = (tag >> 32) & ((1ull << seq_bits) - 1);
    return ctx << (iface->tag_bits - 4) | seq << 32 | (tag & 0xffffffffu);
}

/* ofi_iface.c */
int ofi_poll_cq(ofi_iface_t *iface);
const char *ofi_prov_name(const ofi_iface_t *iface);

/* ofi_ep.c */
coll_status_t ofi_ep_connect(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                             coll_tp_ep_t **ep_p);
coll_status_t ofi_ep_accept(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                            coll_tp_ep_t **ep_p);
coll_status_t ofi_ep_ready(coll_tp_ep_t *ep);
coll_status_t ofi_ep_flush(coll_tp_ep_t *ep);
coll_status_t ofi_ep_close(coll_tp_ep_t *ep, coll_status_t why, const char *reason);
coll_status_t ofi_ep_destroy(coll_tp_ep_t *ep);
void ofi_ep_fail(ofi_ep_t *ep, coll_status_t status, const char *fmt, ...) COLL_PRINTF(3, 4);
void ofi_ep_on_ctl(ofi_ep_t *ep, const ofi_ctl_t *ctl, size_t len);
void ofi_ep_keepalive(ofi_ep_t *ep, uint64_t now);
void ofi_ep_bye_check(ofi_ep_t *ep);

/* ofi_msg.c */
coll_status_t ofi_ep_isend(coll_tp_ep_t *ep, coll_tp_req_t *req);
coll_status_t ofi_ep_irecv(coll_tp_ep_t *ep, coll_tp_req_t *req);
coll_status_t ofi_post_ctl_recv(ofi_ep_t *ep);
coll_status_t ofi_send_ctl(ofi_ep_t *ep, uint32_t type, const char *text);
void ofi_on_completion(ofi_iface_t *iface, const struct fi_cq_tagged_entry *e);
void ofi_on_cq_error(ofi_iface_t *iface, const struct fi_cq_err_entry *err);
/* Cancel every posted op of `ep`; requests complete with `status` at once. */
void ofi_ep_cancel_ops(ofi_ep_t *ep, coll_status_t status, int include_sends);
void ofi_op_free(ofi_iface_t *iface, ofi_op_t *op);
void ofi_post_backlog(ofi_iface_t *iface);

/* ofi_match.c */
coll_status_t ofi_match_open(ofi_iface_t *iface);
void ofi_match_repost(ofi_iface_t *iface);
void ofi_match_ep_init(ofi_ep_t *ep);
coll_status_t ofi_match_isend(ofi_ep_t *ep, coll_tp_req_t *req);
void ofi_match_irecv(ofi_ep_t *ep, coll_tp_req_t *req);
void ofi_match_on_frame(ofi_iface_t *iface, ofi_op_t *op, size_t len);
void ofi_match_frame_failed(ofi_iface_t *iface, ofi_op_t *op, int err);
void ofi_match_posted(ofi_op_t *op);
void ofi_match_cancel(ofi_ep_t *ep, coll_status_t status, int include_sends);
int ofi_match_waiting(const ofi_ep_t *ep);

/* ofi_msg.c, for ofi_match.c */
ofi_op_t *ofi_op_alloc(ofi_iface_t *iface, ofi_ep_t *ep, int kind, coll_tp_req_t *req);
ssize_t ofi_post_frame_recv(ofi_op_t *op);
coll_status_t ofi_post_op(ofi_ep_t *ep, ofi_op_t *op, void *buf, size_t len, uint64_t tag,
                          uint64_t ignore);

/* ofi_mr.c */
coll_status_t ofi_mr_get(ofi_iface_t *iface, const void *buf, size_t len, ofi_mr_t **mr_p);
void ofi_mr_put(ofi_iface_t *iface, ofi_mr_t *mr);
void ofi_mr_cache_free(ofi_iface_t *iface);

#endif /* COLL_OFI_H */
