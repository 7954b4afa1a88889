/*
 * tcp.h: the TCP transport's objects (one file each: tcp_iface.c,
 * tcp_ep.c, tcp_msg.c) and its frame format.
 *
 * One authenticated socket per peer pair, opened by the higher rank. After
 * the handshake every frame starts with a 32-byte header:
 *   u8 type, u8 flags, u16 zero, u32 id, u64 tag, u64 len, u64 aux
 *
 *   EAGER  tag, len, payload       messages <= COLL_TCP_EAGER_LIMIT
 *   RTS    tag, len, id=send id    "I have len bytes for tag"
 *   CTS    id=send id, aux=recv id "send them" (flag DISCARD: "drop them")
 *   DATA   id=recv id, aux=offset, len, payload (one chunk of a message)
 *   BYE    no fields               the peer destroyed its communicator
 *   ABORT  len, payload = reason   the peer's communicator failed
 *
 * Large messages wait for the receive (RTS/CTS) so that a receiver never
 * allocates more than the eager limit for a message nobody asked for, and
 * DATA lands directly in the user's buffer.
 */
#ifndef COLL_TCP_H
#define COLL_TCP_H

#include "handshake.h"
#include "transport.h"
#include "util/match.h"

#define TCP_HDR_BYTES 32
/* Largest eager payload a receiver accepts, whatever the sender's limit. */
#define TCP_EAGER_MAX (4u << 20)
/* Rendezvous payloads go out in DATA frames of at most this many bytes,
 * taking turns with other frames: a small message never waits behind a
 * whole large one, and an abort notice is never more than one chunk away
 * from a frame boundary. */
#define TCP_DATA_CHUNK (1u << 20)

enum tcp_frame_type {
    TCP_EAGER = 1,
    TCP_RTS = 2,
    TCP_CTS = 3,
    TCP_DATA = 4,
    TCP_BYE = 5,
    TCP_ABORT = 6,
};
#define TCP_CTS_DISCARD 0x1

typedef struct tcp_hdr {
    uint8_t type;
    uint8_t flags;
    uint32_t id;
    uint64_t tag;
    uint64_t len;
    uint64_t aux;
} tcp_hdr_t;

void tcp_hdr_encode(const tcp_hdr_t *h, uint8_t out[TCP_HDR_BYTES]);
void tcp_hdr_decode(const uint8_t in[TCP_HDR_BYTES], tcp_hdr_t *h);

/* One frame in an endpoint's send queue. */
typedef struct tcp_tx {
    coll_list_t link;
    uint8_t hdr[TCP_HDR_BYTES];
    const uint8_t *payload;
    size_t payload_len;
    size_t off;            /* bytes of header + payload written */
    coll_tp_req_t *req;    /* completed once written (EAGER, last DATA chunk) */
    int heap;              /* control frame: free once written */
} tcp_tx_t;

/* Per-request state, kept in coll_tp_req_t.scratch. */
typedef struct tcp_req_priv {
    tcp_tx_t tx;
    uint32_t id;           /* send: our id in RTS; recv: our id in CTS */
    uint32_t peer_id;      /* send: the receiver's id from CTS */
    size_t data_off;       /* send: bytes of payload queued so far */
} tcp_req_priv_t;

_Static_assert(sizeof(tcp_req_priv_t) <= COLL_TP_REQ_SCRATCH, "tcp request state too large");

static inline tcp_req_priv_t *tcp_priv(coll_tp_req_t *req)
{
    return (tcp_req_priv_t *)req->scratch;
}

enum tcp_ep_state {
    TCP_EP_CONNECTING,  /* non-blocking connect in flight */
    TCP_EP_HANDSHAKE,   /* connected, proving ourselves */
    TCP_EP_RETRY,       /* waiting to connect again */
    TCP_EP_WAIT_ACCEPT, /* the peer connects to us */
    TCP_EP_READY,
    TCP_EP_CLOSED,
};

enum tcp_rx_state {
    TCP_RX_HDR,
    TCP_RX_PAYLOAD,
    TCP_RX_DISCARD,
};

typedef struct tcp_iface tcp_iface_t;

typedef struct tcp_ep {
    coll_tp_ep_t super;
    tcp_iface_t *iface;
    int state;
    int fd;
    coll_ev_source_t src;
    coll_addr_t peer_addr;
    coll_hs_t hs;
    uint64_t retry_at_ns;
    coll_status_t error;      /* why it closed; COLL_OK while usable */
    int peer_left;            /* got BYE */
    int bye_queued;
    int tx_errno;             /* a send failed; reported once the input is read */
    int in_rx;                /* inside tcp_ep_on_readable */

    coll_list_t txq;          /* tcp_tx_t */

    int rx_state;
    uint8_t rx_hdr_buf[TCP_HDR_BYTES];
    size_t rx_off;
    tcp_hdr_t rx_hdr;
    uint8_t *rx_dst;          /* where payload bytes go */
    size_t rx_left;
    coll_tp_req_t *rx_req;    /* receive being filled, if any */
    coll_unexp_t *rx_ux;      /* unexpected eager message being filled */
    char rx_text[COLL_WIRE_ERRTEXT_MAX + 1];

    coll_match_t match;
    coll_list_t rndv_sends;   /* sends waiting for CTS (req->link) */
    coll_list_t rndv_recvs;   /* receives waiting for DATA (req->link) */
    uint32_t next_send_id;
    uint32_t next_recv_id;
} tcp_ep_t;

/* An accepted connection still proving itself. */
typedef struct tcp_pending {
    coll_list_t link;
    tcp_iface_t *iface;
    int fd;
    coll_ev_source_t src;
    coll_hs_t hs;
} tcp_pending_t;

struct tcp_iface {
    coll_tp_iface_t super;
    int listen_fd;
    coll_ev_source_t listen_src;
    coll_addr_t addr;
    tcp_ep_t **eps;           /* by peer rank */
    coll_list_t pending;      /* tcp_pending_t */
    int nretry;               /* endpoints in TCP_EP_RETRY */
    size_t eager_limit;
};

/* tcp_ep.c */
coll_status_t tcp_ep_connect(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                             coll_tp_ep_t **ep_p);
coll_status_t tcp_ep_accept(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                            coll_tp_ep_t **ep_p);
coll_status_t tcp_ep_ready(coll_tp_ep_t *ep);
coll_status_t tcp_ep_flush(coll_tp_ep_t *ep);
coll_status_t tcp_ep_close(coll_tp_ep_t *ep, coll_status_t why, const char *reason);
coll_status_t tcp_ep_destroy(coll_tp_ep_t *ep);
void tcp_ep_attach(tcp_ep_t *ep, int fd, const char *peer_str);
void tcp_ep_retry_due(tcp_ep_t *ep);
void tcp_ep_fail(tcp_ep_t *ep, coll_status_t status, const char *fmt, ...) COLL_PRINTF(3, 4);
void tcp_ep_update_events(tcp_ep_t *ep);

/* tcp_msg.c */
coll_status_t tcp_ep_isend(coll_tp_ep_t *ep, coll_tp_req_t *req);
coll_status_t tcp_ep_irecv(coll_tp_ep_t *ep, coll_tp_req_t *req);
void tcp_ep_on_readable(tcp_ep_t *ep);
void tcp_ep_on_writable(tcp_ep_t *ep);
void tcp_tx_enqueue(tcp_ep_t *ep, tcp_tx_t *tx);
coll_status_t tcp_tx_control(tcp_ep_t *ep, const tcp_hdr_t *h, const void *payload,
                             size_t len);
void tcp_ep_fail_requests(tcp_ep_t *ep, coll_status_t status);
/* Fail sends waiting for a clear-to-send and receives waiting for data. */
void tcp_ep_fail_pending_rndv(tcp_ep_t *ep, coll_status_t status);

#endif /* COLL_TCP_H */
