/*
 * fuzz_tcp_frames.c: the TCP transport's frame parser (tcp_msg.c), after
 * the handshake: what an authenticated peer sends on its data sockets.
 * A real endpoint (tcp_ep_accept, the iface's own code) gets two
 * socketpairs as its sockets; the fuzzer's bytes are what the peer writes
 * on them, in chunks and on sockets the input chooses, so that headers and
 * payloads split across reads and the two sockets interleave as striped
 * DATA does.
 *
 * Input: a byte of setup, then records. Setup bits 0-1: receives to post
 * (0-3, tags 0..2, sizes from the next bytes: u16 each, so that EAGER and
 * DATA have a buffer to land in); bit 2: post a send above the eager limit
 * (an RTS with id 0 goes out, so that a fuzzed CTS can grant it and DATA
 * flows back out). Records: u8 socket (bit 0) | u8 length, then that
 * many bytes; the end of the input closes both sockets (EOF).
 *
 * Invariants: receive buffers are exactly their size (ASan sees any write
 * past them); a request completes at most once, a receive that succeeds
 * has exactly its length; a failed endpoint reported a status and a
 * message naming the peer; nothing is allocated from a length field above
 * the protocol's caps (libFuzzer's malloc limit, -rss_limit_mb, catches
 * it); the endpoint is either usable or closed at the end, and closing and
 * destroying it completes every request.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "evloop.h"
#include "fuzz.h"
#include "tcp/tcp.h"

#define NRECV_MAX 3
#define SEND_BYTES (256u << 10) /* above COLL_TCP_EAGER_LIMIT (64K here): a rendezvous send */

extern const coll_tp_ops_t coll_tp_tcp_ops;

static const uint8_t secret[COLL_SECRET_BYTES] = "0123456789abcdef0123456789abcdef";

typedef struct fuzz_req {
    coll_tp_req_t tp;     /* first: the transport hands this back */
    int completions;
    coll_status_t status;
} fuzz_req_t;

typedef struct fuzz_core {
    int failed;
    coll_status_t status;
    char msg[COLL_WIRE_ERRTEXT_MAX];
} fuzz_core_t;

static uint8_t send_buf[SEND_BYTES];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    setenv("COLL_NSOCKS", "2", 1);
    setenv("COLL_TCP_CHUNK", "4K", 1);
    setenv("COLL_TCP_EAGER_LIMIT", "64K", 1);
    return 0;
}

static void on_complete(coll_tp_req_t *tp, coll_status_t status)
{
    fuzz_req_t *r = (fuzz_req_t *)tp;
    r->completions++;
    r->status = status;
}

static void on_ep_failed(void *core, int peer, coll_status_t status, const char *msg)
{
    fuzz_core_t *c = core;
    FUZZ_CHECK(peer == 1, "failure reported for peer %d", peer);
    FUZZ_CHECK(status < 0, "failure with status %d", status);
    FUZZ_CHECK(msg && strstr(msg, "rank 1"), "failure message does not name the peer: %s",
               msg ? msg : "(null)");
    if (!c->failed) {
        c->failed = 1;
        c->status = status;
        snprintf(c->msg, sizeof(c->msg), "%s", msg);
    }
}

/* Read and drop what the endpoint wrote to the peer (CTS, RTS, DATA). */
static void drain(int fd)
{
    uint8_t sink[16384];
    while (read(fd, sink, sizeof(sink)) > 0)
        ;
}

/* A size mismatch reports the message's size in bytes_done (match.h). */
static void check_req(const fuzz_req_t *r, int is_recv)
{
    int mismatch = r->completions && r->status == COLL_ERR_SIZE_MISMATCH;
    FUZZ_CHECK(r->completions <= 1, "a request completed %d times", r->completions);
    FUZZ_CHECK(!is_recv || mismatch || r->tp.bytes_done <= r->tp.len,
               "receive moved %zu of %zu bytes", r->tp.bytes_done, r->tp.len);
    if (is_recv && r->completions && r->status == COLL_OK)
        FUZZ_CHECK(r->tp.bytes_done == r->tp.len, "receive succeeded with %zu of %zu bytes",
                   r->tp.bytes_done, r->tp.len);
}

typedef struct rig {
    fuzz_core_t core;
    coll_evloop_t *ev;
    coll_addr_t local;
    coll_tp_iface_t *iface;
    coll_tp_ep_t *ep;
    int peer_fd[2];
} rig_t;

/* An iface and an endpoint to rank 1 whose two sockets are socketpairs. */
static int rig_open(rig_t *g)
{
    coll_tp_params_t params = {
        .rank = 0, .nranks = 2, .secret = secret, .local_addr = &g->local,
        .handshake_timeout_ns = 1000000000ull, .core = &g->core, .ep_failed = on_ep_failed,
    };
    coll_peer_info_t peer;
    coll_addr_t peer_addr;

    memset(g, 0, sizeof(*g));
    g->peer_fd[0] = g->peer_fd[1] = -1;
    if (coll_addr_resolve("127.0.0.1", 1, "fuzz", &g->local) != COLL_OK ||
        coll_evloop_create(&g->ev) != COLL_OK)
        return -1;
    coll_addr_set_port(&g->local, 0); /* the listening socket: any free port */
    params.local_addr = &g->local;
    params.evloop = g->ev;
    params.connect_deadline_ns = coll_time_ns() + 1000000000ull;
    if (coll_tp_tcp_ops.iface_open(&params, &g->iface) != COLL_OK)
        return -1;
    g->iface->ops = &coll_tp_tcp_ops;
    memset(&peer, 0, sizeof(peer));
    peer.rank = 1;
    peer.naddrs = 1;
    peer.addrs[0].tp_id = COLL_TP_TCP;
    peer.addrs[0].len = TCP_ADDR_BYTES;
    coll_addr_resolve("127.0.0.1", 1, "fuzz", &peer_addr);
    coll_addr_to_wire(&peer_addr, peer.addrs[0].data);
    peer.addrs[0].data[COLL_WIRE_ADDR_BYTES] = 2;
    coll_store_u32(peer.addrs[0].data + TCP_ADDR_WINDOW, 1u << 20);     /* eager windows */
    coll_store_u32(peer.addrs[0].data + TCP_ADDR_WINDOW + 4, 1u << 20);
    FUZZ_CHECK(tcp_ep_accept(g->iface, &peer, &g->ep) == COLL_OK, "tcp_ep_accept failed");
    tcp_ep_t *ep = (tcp_ep_t *)g->ep;
    FUZZ_CHECK(ep->nconn == 2, "%d sockets, expected 2", ep->nconn);
    for (int i = 0; i < 2; i++) {
        int sv[2];
        FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0,
                   "socketpair: %s", strerror(errno));
        g->peer_fd[i] = sv[1];
        tcp_conn_attach(&ep->conn[i], sv[0], "127.0.0.1:1");
    }
    FUZZ_CHECK(tcp_ep_ready(g->ep) == COLL_OK, "endpoint not ready after attaching");
    return 0;
}

static void rig_close(rig_t *g)
{
    if (g->ep) {
        tcp_ep_close(g->ep, COLL_ERR_ABORTED, NULL);
        tcp_ep_destroy(g->ep);
    }
    if (g->iface)
        coll_tp_tcp_ops.iface_close(g->iface);
    for (int i = 0; i < 2; i++)
        if (g->peer_fd[i] >= 0)
            close(g->peer_fd[i]);
    coll_evloop_destroy(g->ev);
}

/* Let the endpoint read and write what is pending. */
static void pump(rig_t *g)
{
    for (int round = 0; round < 4; round++) {
        coll_evloop_dispatch(g->ev);
        drain(g->peer_fd[0]);
        drain(g->peer_fd[1]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    fuzz_req_t recvs[NRECV_MAX], snd;
    uint8_t *bufs[NRECV_MAX] = {NULL};
    uint8_t setup = fuzz_byte(&in);
    int nrecv = setup & 3, sending = (setup >> 2) & 1;
    rig_t g;

    FUZZ_CHECK(rig_open(&g) == 0, "cannot set up: %s", coll_error_thread());
    memset(recvs, 0, sizeof(recvs));
    memset(&snd, 0, sizeof(snd));
    for (int i = 0; i < nrecv; i++) {
        size_t len = fuzz_byte(&in) | (size_t)fuzz_byte(&in) << 8;
        bufs[i] = malloc(len ? len : 1); /* exactly its size: ASan sees overruns */
        recvs[i].tp.tag = (uint64_t)i;
        recvs[i].tp.buf = bufs[i];
        recvs[i].tp.len = len;
        recvs[i].tp.complete = on_complete;
        FUZZ_CHECK(tcp_ep_irecv(g.ep, &recvs[i].tp) == COLL_OK, "irecv refused");
    }
    if (sending) {
        snd.tp.tag = 0;
        snd.tp.buf = send_buf;
        snd.tp.len = SEND_BYTES;
        snd.tp.complete = on_complete;
        FUZZ_CHECK(tcp_ep_isend(g.ep, &snd.tp) == COLL_OK, "isend refused");
    }
    pump(&g);
    while (in.len > 0 && ((tcp_ep_t *)g.ep)->state == TCP_EP_READY) {
        int sock = fuzz_byte(&in) & 1;
        size_t want = fuzz_byte(&in), n = COLL_MIN(want, in.len);
        if (n && write(g.peer_fd[sock], in.p, n) != (ssize_t)n)
            break;
        in.p += n;
        in.len -= n;
        pump(&g);
    }
    for (int i = 0; i < 2; i++) { /* the peer hangs up */
        shutdown(g.peer_fd[i], SHUT_WR);
    }
    pump(&g);
    tcp_ep_t *ep = (tcp_ep_t *)g.ep;
    FUZZ_CHECK(ep->state == TCP_EP_READY || ep->state == TCP_EP_CLOSED, "endpoint state %d",
               ep->state);
    FUZZ_CHECK(ep->state != TCP_EP_CLOSED || g.core.failed || ep->peer_left,
               "endpoint closed without reporting why");
    for (int i = 0; i < nrecv; i++)
        check_req(&recvs[i], 1);
    if (sending)
        check_req(&snd, 0);
    rig_close(&g);
    g.ep = NULL;
    /* closing failed whatever was left: every request completed once */
    for (int i = 0; i < nrecv; i++) {
        FUZZ_CHECK(recvs[i].completions == 1, "receive %d completed %d times", i,
                   recvs[i].completions);
        check_req(&recvs[i], 1);
        free(bufs[i]);
    }
    if (sending)
        FUZZ_CHECK(snd.completions == 1, "send completed %d times", snd.completions);
    return 0;
}
