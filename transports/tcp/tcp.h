/*
 * tcp.h: the TCP transport's objects (one file each: tcp_iface.c,
 * tcp_ep.c, tcp_msg.c) and its frame format.
 *
 * Each peer pair shares COLL_NSOCKS authenticated sockets (the smaller of
 * the two ranks' settings, published in the address blob), all opened by
 * the higher rank; the handshake's round field carries the socket index.
 * After the handshake every frame starts with a 32-byte header:
 *   u8 type, u8 flags, u16 zero, u32 id, u64 tag, u64 len, u64 aux
 *
 *   EAGER  tag, len, payload       messages <= COLL_TCP_EAGER_LIMIT (_LOCAL, _CROWDED)
 *   RTS    tag, len, id=send id    "I have len bytes for tag"
 *   CTS    id=send id, aux=recv id "send them" (flag DISCARD: "drop them")
 *   DATA   id=recv id, aux=offset, len, payload (one chunk of a message)
 *   BYE    no fields               the peer destroyed its communicator
 *   ABORT  len, aux = its status (int64), payload = reason: the peer's
 *          communicator failed
 *   CREDIT aux = bytes              eager credit given back (below)
 *
 * With COLL_CHECKSUM=1 (the same on every rank, checked at init) the
 * header grows by 8 bytes: u32 CRC-32C of the payload, then u32 CRC-32C
 * of the 36 bytes before it. The receiver checks the header's before it
 * acts on any field, and the payload's before the message completes; a
 * mismatch fails the link with COLL_ERR_DATA_CORRUPTION.
 *
 * Matching order: EAGER and RTS travel on socket 0 only, so messages are
 * matched in the order they were sent. DATA chunks carry their offset and
 * go on whichever socket is free first (striping); they land directly in
 * the matched receive buffer, in any order. BYE goes on every socket after
 * the last chunk queued on it, and the peer counts as gone once all of them
 * arrived; ABORT goes on every socket, so the reason arrives whichever
 * socket the peer reads first.
 *
 * Eager credit: a sender may have at most the receiver's
 * COLL_TCP_EAGER_WINDOW (or its _LOCAL twin; both are published in the
 * receiver's address blob) of eager messages
 * that the receiver has not delivered yet, each counted as its length plus
 * TCP_EAGER_OVERHEAD. A message that does not fit goes as RTS, so it waits
 * for its receive instead of for the receiver's memory. The receiver
 * counts what it delivered (into a posted receive at once, or out of its
 * unexpected queue later) and gives it back in a CREDIT frame once a
 * quarter of the window has gathered; an eager message beyond the window
 * is a protocol error. Without this, a sender that runs ahead (a
 * broadcast root in a loop) grew the receiver's queue of unexpected
 * messages without bound (0.8-2.6 GB in 60000 broadcasts of 64 KiB).
 *
 * Head-of-line: control frames (CTS above all) go ahead of queued data, a
 * socket holds at most one data chunk in our queue, and TCP_NOTSENT_LOWAT
 * keeps the kernel's unsent backlog small, so a CTS waits for at most one
 * chunk plus that backlog rather than for megabytes of the other direction.
 */
#ifndef COLL_TCP_H
#define COLL_TCP_H

#include "handshake.h"
#include "net.h"
#include "transport.h"
#include "util/match.h"

#define TCP_HDR_BYTES 32
/* With COLL_CHECKSUM: the payload's CRC and the header's, 4 bytes each. */
#define TCP_HDR_MAX (TCP_HDR_BYTES + 8)
/* Largest eager payload a receiver accepts, whatever the sender's limit. */
#define TCP_EAGER_MAX (4u << 20)
/* Sockets per peer: COLL_NSOCKS is capped here (the address blob and the
 * endpoint hold a fixed array). */
#define TCP_NSOCKS_MAX 16
/* Most sockets an iface reads directly on every turn (COLL_TCP_POLL_DIRECT). */
#define TCP_DIRECT_MAX 16
/* Bytes read ahead into a socket's staging buffer when a header is due:
 * one recv then usually brings the header and a small payload together. */
#define TCP_RXBUF 4096
/* A receive that reduces reads this much from the socket before folding
 * it, so that the reduction reads the bytes from cache, not from the
 * destination after a trip to memory (a multiple of COLL_TP_FOLD_ALIGN). */
#define TCP_FOLD_BYTES (64u << 10)
/* Unexpected eager messages from this size may be taken over by their
 * receive while they stream in (tcp_msg.c, adopt_streaming). */
#define TCP_ADOPT_MIN (64u << 10)
/* The address blob: the wire address, the sender's socket counts
 * (COLL_NSOCKS, COLL_NSOCKS_LOCAL, a byte each), then its eager windows
 * (COLL_TCP_EAGER_WINDOW, COLL_TCP_EAGER_WINDOW_LOCAL, u32 each). */
#define TCP_ADDR_BYTES (COLL_WIRE_ADDR_BYTES + 10)
#define TCP_ADDR_WINDOW (COLL_WIRE_ADDR_BYTES + 2)
/* What an eager message costs of the window beyond its payload: the
 * receiver's record and allocation for it (so that a flood of empty
 * messages is bounded too). */
#define TCP_EAGER_OVERHEAD 128
/* COLL_TCP_EAGER_WINDOW is capped here (the blob holds a u32). */
#define TCP_EAGER_WINDOW_MAX (1u << 30)

enum tcp_frame_type {
    TCP_EAGER = 1,
    TCP_RTS = 2,
    TCP_CTS = 3,
    TCP_DATA = 4,
    TCP_BYE = 5,
    TCP_ABORT = 6,
    TCP_CREDIT = 7,
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

/* One frame queued on a socket. */
typedef struct tcp_tx {
    coll_list_t link;
    uint8_t hdr[TCP_HDR_MAX];
    size_t hdr_len;        /* TCP_HDR_BYTES, or TCP_HDR_MAX with checksums */
    const uint8_t *payload;
    size_t payload_len;
    size_t off;            /* bytes of header + payload written */
    coll_tp_req_t *req;    /* EAGER: completed once written; DATA: the send */
    int heap;              /* control frame: free once written */
} tcp_tx_t;

/* Per-request state, kept in coll_tp_req_t.scratch. */
typedef struct tcp_req_priv {
    tcp_tx_t tx;           /* the EAGER or RTS frame */
    uint32_t id;           /* send: our id in RTS; recv: our id in CTS */
    uint32_t peer_id;      /* send: the receiver's id from CTS */
    size_t data_off;       /* send: bytes of payload handed to sockets so far */
    uint32_t inflight;     /* send: chunks being written on some socket */
} tcp_req_priv_t;

_Static_assert(sizeof(tcp_req_priv_t) <= COLL_TP_REQ_SCRATCH, "tcp request state too large");

static inline tcp_req_priv_t *tcp_priv(coll_tp_req_t *req)
{
    return (tcp_req_priv_t *)req->scratch;
}

/* A socket's state; the endpoint is ready once all of its sockets are. */
enum tcp_conn_state {
    TCP_CONN_CONNECTING,  /* non-blocking connect in flight */
    TCP_CONN_HANDSHAKE,   /* connected, proving ourselves */
    TCP_CONN_RETRY,       /* waiting to connect again */
    TCP_CONN_WAIT_ACCEPT, /* the peer connects to us */
    TCP_CONN_READY,
};

enum tcp_ep_state {
    TCP_EP_CONNECTING,  /* some socket is not ready yet */
    TCP_EP_READY,
    TCP_EP_CLOSED,
};

enum tcp_rx_state {
    TCP_RX_HDR,
    TCP_RX_PAYLOAD,
    TCP_RX_DISCARD,
};

typedef struct tcp_iface tcp_iface_t;
typedef struct tcp_ep tcp_ep_t;

/* One socket of an endpoint: its own send queue and receive state. */
typedef struct tcp_conn {
    tcp_ep_t *ep;
    int idx;                  /* 0 carries EAGER, RTS and CTS */
    int state;                /* enum tcp_conn_state */
    int fd;
    coll_ev_source_t src;
    coll_hs_t hs;
    uint64_t retry_at_ns;

    coll_list_t ctlq;         /* frames not started: EAGER, RTS, CTS, BYE */
    tcp_tx_t *cur;            /* the frame being written, if any */
    tcp_tx_t data_tx;         /* this socket's data chunk (at most one) */
    int bye_queued;

    int rx_state;
    uint8_t rx_hdr_buf[TCP_HDR_MAX];
    size_t rx_off;
    tcp_hdr_t rx_hdr;
    uint8_t *rx_dst;          /* where payload bytes go */
    size_t rx_left;
    coll_tp_req_t *rx_req;    /* receive being filled, if any */
    int rx_drained;           /* the last recv came back short */
    int got_bye;
    int in_tx;                /* inside this socket's writer */
    coll_unexp_t *rx_ux;      /* unexpected eager message being filled */
    char rx_text[COLL_WIRE_ERRTEXT_MAX + 1];
    uint32_t rx_crc;          /* COLL_CHECKSUM: the payload's so far */
    int rx_corrupt;           /* test hook: flip the payload's first byte */
    uint8_t *rxbuf;           /* TCP_RXBUF staging bytes */
    size_t rxbuf_off, rxbuf_len;
    /* A receive that reduces (coll_tp_req_t.fold): payload bytes gather in
     * foldbuf (TCP_FOLD_BYTES, allocated on first use) and are folded into
     * the message at fold_off a cache-sized piece at a time. */
    int rx_fold;
    uint8_t *foldbuf;
    size_t fold_off, fold_fill;
} tcp_conn_t;

struct tcp_ep {
    coll_tp_ep_t super;
    tcp_iface_t *iface;
    int state;
    coll_addr_t peer_addr;
    coll_status_t error;      /* why it closed; COLL_OK while usable */
    int peer_left;            /* got BYE on every socket */
    int bye_pending;          /* leaving: BYE goes out once all data is queued */
    int tx_errno;             /* a send failed; reported once the input is read */
    int in_rx;                /* inside a receive loop */
    uint64_t rx_adopted;      /* unexpected eager messages their receive took over */

    int nconn;
    size_t chunk;             /* COLL_TCP_CHUNK, or its _LOCAL twin */
    size_t eager_limit;       /* COLL_TCP_EAGER_LIMIT, or its _LOCAL twin (eager_limit()) */
    size_t rx_window;         /* our COLL_TCP_EAGER_WINDOW toward it (or _LOCAL) */
    size_t peer_window;       /* its COLL_TCP_EAGER_WINDOW toward us (or _LOCAL) */
    int local;                /* it shares our kernel: the _LOCAL settings apply */
    size_t tx_credit;         /* eager bytes we may still send it */
    size_t rx_out;            /* eager bytes received, not yet given back */
    size_t rx_owed;           /* of those, delivered: given back in a batch */
    tcp_conn_t conn[TCP_NSOCKS_MAX];

    coll_match_t match;
    coll_list_t rndv_sends;   /* sends waiting for CTS (req->link) */
    coll_list_t active_sends; /* granted sends with chunks not yet handed out */
    coll_list_t rndv_recvs;   /* receives waiting for DATA (req->link) */
    uint32_t next_send_id;
    uint32_t next_recv_id;
};

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
    int nretry;               /* sockets in TCP_CONN_RETRY */
    size_t eager_limit;       /* COLL_TCP_EAGER_LIMIT */
    size_t eager_limit_local; /* COLL_TCP_EAGER_LIMIT_LOCAL */
    size_t eager_limit_crowded; /* COLL_TCP_EAGER_LIMIT_CROWDED */
    size_t chunk;             /* COLL_TCP_CHUNK */
    size_t chunk_local;       /* COLL_TCP_CHUNK_LOCAL */
    size_t eager_window;      /* COLL_TCP_EAGER_WINDOW */
    size_t eager_window_local; /* COLL_TCP_EAGER_WINDOW_LOCAL */
    int nsocks;               /* COLL_NSOCKS */
    int nsocks_local;         /* COLL_NSOCKS_LOCAL */
    int recv_fold_local;      /* COLL_TCP_RECV_REDUCE_LOCAL: coll_tp_ep.recv_fold */
    uint64_t host_hash;       /* coll_host_hash(): which peers share our kernel */
    int bufsize;              /* COLL_SOCKET_BUFSIZE (0: the kernel's autotuning) */
    char congestion_local[16]; /* COLL_TCP_CONGESTION_LOCAL ("": the system's) */
    size_t hdr_len;           /* TCP_HDR_MAX with COLL_CHECKSUM, else TCP_HDR_BYTES */
    /* Direct polling (COLL_TCP_POLL_DIRECT): while every socket of the
     * iface fits in direct[] and the ranks have a CPU each, sockets that
     * only wait for input are cold in the event loop and read on every
     * progress turn instead. */
    int poll_direct;          /* COLL_TCP_POLL_DIRECT */
    int nsockets;             /* sockets of every endpoint created so far */
    int ndirect;              /* entries of direct[]; 0 once stopped */
    tcp_conn_t *direct[TCP_DIRECT_MAX];
    /* blocks of eager payloads that arrive before their receive, kept
     * mapped for the next ones (blocks.h) */
    coll_blocks_t blocks;
};

extern const coll_tp_ops_t coll_tp_tcp_ops; /* tcp_iface.c */

/* tcp_ep.c */
coll_status_t tcp_ep_connect(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                             coll_tp_ep_t **ep_p);
coll_status_t tcp_ep_accept(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                            coll_tp_ep_t **ep_p);
coll_status_t tcp_ep_ready(coll_tp_ep_t *ep);
coll_status_t tcp_ep_flush(coll_tp_ep_t *ep);
coll_status_t tcp_ep_close(coll_tp_ep_t *ep, coll_status_t why, const char *reason);
coll_status_t tcp_ep_destroy(coll_tp_ep_t *ep);
void tcp_conn_attach(tcp_conn_t *c, int fd, const char *peer_str);
void tcp_conn_retry_due(tcp_conn_t *c);
void tcp_ep_fail(tcp_ep_t *ep, coll_status_t status, const char *fmt, ...) COLL_PRINTF(3, 4);
void tcp_conn_update_events(tcp_conn_t *c);
/* Read the directly polled sockets; returns 1 if any gave bytes. */
int tcp_iface_poll_direct(tcp_iface_t *iface);
/* Back to epoll for every socket, for good (too many, or ranks share CPUs). */
void tcp_iface_stop_direct(tcp_iface_t *iface);
void tcp_conn_close_fd(tcp_conn_t *c);
void tcp_sock_setup(int fd, const tcp_iface_t *iface, size_t chunk, int local);

/* tcp_msg.c */
/* Encode h into out and, with checksums on, append the CRCs of the payload
 * and of the header; returns the header's length on the wire. */
size_t tcp_hdr_seal(const tcp_iface_t *iface, const tcp_hdr_t *h, const void *payload,
                    size_t len, uint8_t out[TCP_HDR_MAX]);
coll_status_t tcp_ep_isend(coll_tp_ep_t *ep, coll_tp_req_t *req);
coll_status_t tcp_ep_irecv(coll_tp_ep_t *ep, coll_tp_req_t *req);
/* Read what the socket holds; returns 1 if anything was taken. */
int tcp_conn_on_readable(tcp_conn_t *c);
void tcp_conn_on_writable(tcp_conn_t *c);
/* Start every ready socket that has nothing to write (new data or BYE). */
void tcp_ep_kick(tcp_ep_t *ep);
coll_status_t tcp_tx_control(tcp_ep_t *ep, tcp_conn_t *c, const tcp_hdr_t *h,
                             const void *payload, size_t len, int urgent);
void tcp_ep_fail_requests(tcp_ep_t *ep, coll_status_t status);
/* Fail sends waiting for a clear-to-send and receives waiting for data. */
void tcp_ep_fail_pending_rndv(tcp_ep_t *ep, coll_status_t status);

#endif /* COLL_TCP_H */
