/*
 * verbs.h: the libibverbs transport's objects (one file each: verbs_dev.c
 * device/port/GID, verbs_iface.c, verbs_ep.c the queue pair's life,
 * verbs_msg.c messages) and its message format. Pure parts (parsers, wire
 * records, registration cache) are in verbs_cfg.h.
 *
 * One reliable-connected QP per peer pair, all on one CQ per iface. The
 * QP numbers and PSNs each side needs are exchanged over a private TCP
 * endpoint (the iface's address blob carries its address): the blob is
 * published once for all peers and cannot hold a QP number per peer. The
 * TCP link stays up beside the QP: it reports a dead peer at once, where
 * an idle QP would notice nothing.
 *
 * Messages (IBV_WR_SEND into the peer's receive slots) start with a
 * 40-byte header: u8 type, u8 flags, u16 credits, u32 id, u64 tag,
 * u64 len, u64 addr, u32 rkey, u32 aux.
 *   EAGER   tag, len, payload        len <= VERBS_EAGER_MAX
 *   RTS     tag, len, id=send id     "I have len bytes for tag"
 *   CTS     id=send id, aux=recv id, addr, rkey: "write them there"
 *           (flag DISCARD: "drop them", the sizes differ)
 *   CREDIT  credits only
 *   BYE     the peer destroyed its communicator
 * With COLL_CHECKSUM, every message ends in a CRC-32C of what precedes it
 * (header and payload; VERBS_CRC_BYTES, little-endian), and an RTS's aux
 * is the CRC-32C of the whole message, which the receiver checks once the
 * writes have landed, before the receive completes.
 * An abort's reason travels over the TCP side link (its ABORT frame).
 * After a CTS the sender RDMA-writes the message (pieces of at most
 * VERBS_WRITE_MAX) and the last piece carries immediate data = the recv
 * id, which completes the receive: RC delivers writes in order.
 *
 * Credits: each side posts VERBS_CREDITS receive slots. Every message but
 * CREDIT, and every write with immediate, takes one of the sender's
 * credits; headers return the slots the receiver reposted since its last
 * message, and a CREDIT message returns them when the receiver still
 * owes half the window after sending what it could (so two sides that
 * both wait for credits cannot block each other). CREDIT itself needs no credit:
 * VERBS_CREDIT_RESERVE slots are kept for it (and the QP's RNR retry,
 * unlimited, covers the rare burst beyond them).
 */
#ifndef COLL_VERBS_H
#define COLL_VERBS_H

#include <infiniband/verbs.h>

#include "transport.h"
#include "util/match.h"
#include "verbs_cfg.h"

#define VERBS_HDR_BYTES 40
#define VERBS_CREDITS 32
#define VERBS_CREDIT_RESERVE 2
#define VERBS_SLOT_BYTES 8192
#define VERBS_CRC_BYTES 4
/* The same with checksums on or off, so that it is one constant. */
#define VERBS_EAGER_MAX (VERBS_SLOT_BYTES - VERBS_HDR_BYTES - VERBS_CRC_BYTES)
#define VERBS_SEND_SLOTS 32
#define VERBS_SQ_DEPTH 128
#define VERBS_WRITE_MAX (1u << 30)
#define VERBS_POLL_BATCH 32

enum verbs_msg_type {
    VERBS_EAGER = 1,
    VERBS_RTS = 2,
    VERBS_CTS = 3,
    VERBS_CREDIT = 4,
    VERBS_BYE = 5,
};
#define VERBS_CTS_DISCARD 0x1

typedef struct verbs_hdr {
    uint8_t type;
    uint8_t flags;
    uint16_t credits;
    uint32_t id;
    uint64_t tag;
    uint64_t len;
    uint64_t addr;
    uint32_t rkey;
    uint32_t aux;
} verbs_hdr_t;

void verbs_hdr_encode(const verbs_hdr_t *h, uint8_t out[VERBS_HDR_BYTES]);
void verbs_hdr_decode(const uint8_t in[VERBS_HDR_BYTES], verbs_hdr_t *h);

/* Work request ids: peer rank, kind, slot or message id (24 bits). Ids,
 * not pointers: completions of a failed endpoint may arrive after its
 * requests were given back. */
enum verbs_wr_kind {
    VERBS_WR_RECV = 1,
    VERBS_WR_SEND = 2,   /* a message from a send slot */
    VERBS_WR_WRITE = 3,  /* the last piece of a rendezvous write */
};
#define VERBS_WR_ID(peer, kind, idx) \
    ((uint64_t)(uint32_t)(peer) << 32 | (uint64_t)(kind) << 24 | ((idx) & 0xffffffu))
#define VERBS_WR_PEER(id) ((int)((id) >> 32))
#define VERBS_WR_KIND(id) ((int)(((id) >> 24) & 0xff))
#define VERBS_WR_IDX(id) ((uint32_t)((id) & 0xffffffu))

/* Something waiting for a send slot, a credit or room in the send queue. */
enum verbs_tx_kind {
    VERBS_TX_MSG = 1,
    VERBS_TX_WRITE = 2,
};

typedef struct verbs_tx {
    coll_list_t link;
    verbs_hdr_t hdr;          /* WRITE: addr, rkey, aux = recv id of the target */
    const void *payload;
    size_t len;
    coll_tp_req_t *req;       /* EAGER: completed once copied; WRITE: the send */
    uint8_t kind;             /* enum verbs_tx_kind */
    uint8_t heap;             /* control message: free once posted */
} verbs_tx_t;

/* Per-request state, kept in coll_tp_req_t.scratch. */
typedef struct verbs_req_priv {
    verbs_tx_t tx;
    verbs_mr_t *mr;           /* rendezvous: the buffer's registration */
    uint32_t id;              /* send: our id in RTS; recv: our id in CTS */
    uint32_t pieces;          /* send: writes posted for it */
    uint32_t crc;             /* recv, COLL_CHECKSUM: the message's CRC-32C, from the RTS */
} verbs_req_priv_t;

_Static_assert(sizeof(verbs_req_priv_t) <= COLL_TP_REQ_SCRATCH, "verbs request state too large");

static inline verbs_req_priv_t *verbs_priv(coll_tp_req_t *req)
{
    return (verbs_req_priv_t *)req->scratch;
}

/* The device, port and GID this iface uses (verbs_dev.c). */
typedef struct verbs_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    char name[IBV_SYSFS_NAME_MAX];
    uint8_t port;
    uint8_t link;             /* enum verbs_link */
    uint8_t mtu;              /* enum ibv_mtu */
    int gid_index;
    union ibv_gid gid;
    uint16_t lid;
    double gbps;              /* the port's signalling rate, for the cost model */
    int max_cqe;
} verbs_dev_t;

enum verbs_ep_state {
    VERBS_EP_WIRE,      /* the TCP side link is connecting */
    VERBS_EP_XCHG,      /* connection records in flight */
    VERBS_EP_SYNC,      /* our QP is ready to send; waiting for the peer's */
    VERBS_EP_READY,
    VERBS_EP_CLOSED,
};

typedef struct verbs_iface verbs_iface_t;
typedef struct verbs_ep verbs_ep_t;

/* A request of the connection exchange over the side link. */
typedef struct verbs_wire_req {
    coll_tp_req_t req;
    verbs_ep_t *ep;
    int bit;
} verbs_wire_req_t;

struct verbs_ep {
    coll_tp_ep_t super;
    verbs_iface_t *iface;
    int state;
    coll_status_t error;      /* why it closed; COLL_OK while usable */
    int peer_left;            /* got BYE */
    int bye_pending;          /* leaving: BYE after what is queued */
    int bye_sent;

    struct ibv_qp *qp;
    uint32_t psn;
    uint8_t *bufs;            /* VERBS_CREDITS receive then VERBS_SEND_SLOTS send slots */
    struct ibv_mr *bufs_mr;
    uint32_t free_slots[VERBS_SEND_SLOTS];
    int nfree_slots;
    int tx_credits;           /* messages we may still send */
    int owed;                 /* slots reposted, not yet returned to the peer */
    int sq_used;              /* work requests in our send queue */
    coll_list_t txq;          /* verbs_tx_t waiting for resources */

    /* The TCP side link and the connection exchange over it. */
    coll_tp_ep_t *wire;
    verbs_wire_req_t wire_send, wire_recv, sync_send, sync_recv;
    uint8_t conn_out[VERBS_CONN_BYTES], conn_in[VERBS_CONN_BYTES];
    int wire_done;            /* bit 0,1: record sent, received; 2,3: sync sent, received */
    coll_status_t wire_error;
    verbs_conn_t peer;

    coll_match_t match;
    coll_list_t rndv_sends;   /* sends waiting for CTS */
    coll_list_t writes;       /* sends whose data is being written */
    coll_list_t rndv_recvs;   /* receives waiting for the write */
    uint32_t next_send_id;
    uint32_t next_recv_id;
};

struct verbs_iface {
    coll_tp_iface_t super;
    int has_dev;
    verbs_dev_t dev;
    struct ibv_comp_channel *chan;
    struct ibv_cq *cq;
    coll_ev_source_t chan_src;
    coll_tp_iface_t *wire;    /* the TCP iface for connection records */
    coll_tp_params_t wire_params;
    verbs_ep_t **eps;         /* by peer rank */
    verbs_mr_cache_t mrs;
    int mr_cap;               /* COLL_IB_MR_CACHE */
    int timeout;              /* COLL_IB_TIMEOUT */
    int armed;                /* the CQ will signal its channel */
    int chan_added;
    int nconnecting;          /* endpoints not ready yet */
};

/* verbs_dev.c */
coll_status_t verbs_dev_open(const coll_tp_params_t *params, verbs_dev_t *dev_p, int *found_p);
void verbs_dev_close(verbs_dev_t *dev);
extern const verbs_mr_ops_t verbs_mr_ibv_ops;

/* verbs_iface.c */
void verbs_iface_poll(verbs_iface_t *vi);
coll_status_t verbs_peer_addr(const coll_peer_info_t *peer, verbs_addr_t *a_p, int *has_p);

/* verbs_ep.c */
coll_status_t verbs_ep_connect(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                               coll_tp_ep_t **ep_p);
coll_status_t verbs_ep_accept(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                              coll_tp_ep_t **ep_p);
coll_status_t verbs_ep_ready(coll_tp_ep_t *ep);
coll_status_t verbs_ep_flush(coll_tp_ep_t *ep);
coll_status_t verbs_ep_close(coll_tp_ep_t *ep, coll_status_t why, const char *reason);
coll_status_t verbs_ep_destroy(coll_tp_ep_t *ep);
void verbs_ep_advance(verbs_ep_t *ep);
void verbs_ep_fail(verbs_ep_t *ep, coll_status_t status, const char *fmt, ...) COLL_PRINTF(3, 4);

/* verbs_msg.c */
coll_status_t verbs_ep_isend(coll_tp_ep_t *ep, coll_tp_req_t *req);
coll_status_t verbs_ep_irecv(coll_tp_ep_t *ep, coll_tp_req_t *req);
void verbs_ep_on_wc(verbs_ep_t *ep, const struct ibv_wc *wc);
coll_status_t verbs_post_recv(verbs_ep_t *ep, uint32_t slot);
void verbs_ep_kick(verbs_ep_t *ep);
/* Queue a message that belongs to no request (CTS, BYE); urgent: first. */
coll_status_t verbs_tx_control(verbs_ep_t *ep, const verbs_hdr_t *h, int urgent);
void verbs_ep_fail_requests(verbs_ep_t *ep, coll_status_t status);
void verbs_ep_fail_pending_rndv(verbs_ep_t *ep, coll_status_t status);

#endif /* COLL_VERBS_H */
