/*
 * tcp_ep.c: a TCP endpoint's life: its sockets connect (or wait to be
 * accepted) and prove themselves, the endpoint is ready once all of them
 * are, and it ends in one of three ways: a graceful goodbye, an abort
 * notice, or a failure that names the peer's rank and address. One socket
 * failing fails the whole endpoint: the peer is gone either way.
 */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "tcp.h"

#define TCP_RETRY_DELAY_NS (50 * 1000000ull)
#define TCP_ABORT_NOTICE_NS (250 * 1000000ull)

static void conn_handler(void *arg, uint32_t events);
static void send_abort_notice(tcp_ep_t *ep, coll_status_t why, const char *reason);
static void linger_for_notice(tcp_ep_t *ep, uint64_t deadline_ns);

/* Options of every data socket. The unsent backlog is bounded by one
 * chunk: enough to keep the link busy between two writable events, small
 * enough that a clear-to-send queued behind it leaves within a chunk's
 * time on the wire (the head-of-line bound of tcp.h). */
void tcp_sock_setup(int fd, const tcp_iface_t *iface, size_t chunk, int local)
{
    int lowat = (int)chunk;

    coll_sock_tune(fd);
    setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
    /* tcp_iface.c checked that the kernel takes this name */
    if (local && iface->congestion_local[0])
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, iface->congestion_local,
                   (socklen_t)strlen(iface->congestion_local));
    if (iface->bufsize > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &iface->bufsize, sizeof(iface->bufsize));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &iface->bufsize, sizeof(iface->bufsize));
    }
}

static void ep_set_desc(tcp_ep_t *ep, const char *peer_str)
{
    char addr[COLL_ADDRSTR_LEN];
    snprintf(ep->super.desc, sizeof(ep->super.desc), "rank %d (%s)", ep->super.peer,
             peer_str ? peer_str : coll_addr_str(&ep->peer_addr, addr));
}

/* The peer's address, socket count and eager window from its blob (0
 * sockets: invalid): its COLL_NSOCKS_LOCAL and COLL_TCP_EAGER_WINDOW_LOCAL
 * when it shares our kernel, else its COLL_NSOCKS and
 * COLL_TCP_EAGER_WINDOW. */
static int read_peer_blob(const coll_peer_info_t *peer, int local, coll_addr_t *addr,
                       size_t *window)
{
    const coll_tp_addr_t *a = coll_peer_info_addr(peer, COLL_TP_TCP);

    memset(addr, 0, sizeof(*addr));
    if (!a || a->len != TCP_ADDR_BYTES || coll_addr_from_wire(a->data, addr) != 0)
        return 0;
    *window = COLL_MIN(coll_load_u32(a->data + TCP_ADDR_WINDOW + (local ? 4 : 0)),
                       TCP_EAGER_WINDOW_MAX);
    return a->data[COLL_WIRE_ADDR_BYTES + (local ? 1 : 0)];
}

static void ep_free(tcp_ep_t *ep)
{
    for (int i = 0; i < TCP_NSOCKS_MAX; i++) {
        free(ep->conn[i].rxbuf);
        free(ep->conn[i].foldbuf);
    }
    free(ep);
}

static tcp_ep_t *ep_alloc(tcp_iface_t *iface, const coll_peer_info_t *peer)
{
    tcp_ep_t *ep = calloc(1, sizeof(*ep));
    int theirs, local;

    if (!ep)
        return NULL;
    ep->super.iface = &iface->super;
    ep->super.peer = (int)peer->rank;
    ep->iface = iface;
    ep->state = TCP_EP_CONNECTING;
    /* Between processes of one kernel (loopback or a local address) TCP is
     * memory copies: striping buys no bandwidth there and costs a system
     * call per chunk on both sides. Both sides see the same host hash. */
    local = peer->host_hash == iface->host_hash;
    theirs = read_peer_blob(peer, local, &ep->peer_addr, &ep->peer_window);
    ep->tx_credit = ep->peer_window;
    ep->rx_window = local ? iface->eager_window_local : iface->eager_window;
    ep->local = local;
    /* Both sides use the smaller count, so they agree without a round trip. */
    ep->nconn = COLL_MAX(1, COLL_MIN(local ? iface->nsocks_local : iface->nsocks, theirs));
    ep->chunk = local ? iface->chunk_local : iface->chunk;
    ep->eager_limit = local ? iface->eager_limit_local : iface->eager_limit;
    /* Folding reads the socket a TCP_FOLD_BYTES piece at a time. Between
     * ranks of one kernel that cost more wall time than it saved: receiving
     * whole chunks and reducing them after was 10-15% faster on 2 ranks at
     * 1 and 4 MiB (all-reduce, medians of 100 calls; level with 1 MiB
     * pieces) and level or faster on 3 and 4, with the same CPU time in
     * each function (perf); across a 1 Gbit/s link folding was 1-3 points
     * of the link ahead. */
    ep->super.recv_fold = local ? iface->recv_fold_local : 1;
    ep_set_desc(ep, NULL);
    coll_match_init(&ep->match, &iface->blocks);
    coll_list_init(&ep->rndv_sends);
    coll_list_init(&ep->active_sends);
    coll_list_init(&ep->rndv_recvs);
    for (int i = 0; i < ep->nconn; i++) {
        tcp_conn_t *c = &ep->conn[i];
        c->ep = ep;
        c->idx = i;
        c->fd = -1;
        c->src.fd = -1;
        c->rx_state = TCP_RX_HDR;
        coll_list_init(&c->ctlq);
        c->rxbuf = malloc(TCP_RXBUF);
        if (!c->rxbuf) {
            ep_free(ep);
            return NULL;
        }
    }
    return ep;
}

void tcp_conn_close_fd(tcp_conn_t *c)
{
    if (c->fd < 0)
        return;
    coll_evloop_del(c->ep->iface->super.params.evloop, &c->src);
    close(c->fd);
    c->fd = -1;
}

static int conn_wants_write(const tcp_conn_t *c)
{
    const tcp_ep_t *ep = c->ep;
    return c->cur || !coll_list_empty(&c->ctlq) ||
           (ep->state == TCP_EP_READY && !coll_list_empty(&ep->active_sends));
}

void tcp_conn_update_events(tcp_conn_t *c)
{
    uint32_t events;

    if (c->fd < 0 || c->src.fd < 0)
        return;
    if (c->state == TCP_CONN_CONNECTING)
        events = EPOLLOUT;
    else if (c->state == TCP_CONN_HANDSHAKE)
        events = coll_hs_events(&c->hs);
    else if (c->state == TCP_CONN_READY && c->ep->state == TCP_EP_READY)
        events = EPOLLIN | (conn_wants_write(c) ? EPOLLOUT : 0);
    else
        events = 0; /* ready, waiting for its siblings: bytes wait in the kernel */
    coll_evloop_mod(c->ep->iface->super.params.evloop, &c->src, events);
    /* A socket that only waits for input is read on every progress turn
     * (tcp_iface_poll_direct); one with bytes to write needs epoll's
     * EPOLLOUT as before. */
    coll_evloop_set_cold(c->ep->iface->super.params.evloop, &c->src,
                         c->ep->iface->ndirect > 0 && events == EPOLLIN);
}

void tcp_iface_stop_direct(tcp_iface_t *iface)
{
    int n = iface->ndirect;

    iface->ndirect = 0;
    for (int i = 0; i < n; i++)
        coll_evloop_set_cold(iface->super.params.evloop, &iface->direct[i]->src, 0);
}

/* Direct polling covers every socket of the iface or none: once the
 * sockets outnumber COLL_TCP_POLL_DIRECT, one epoll_wait per turn costs
 * less than a read of each. */
static void track_sockets(tcp_iface_t *iface, tcp_ep_t *ep)
{
    iface->nsockets += ep->nconn;
    if (iface->nsockets > iface->poll_direct) {
        tcp_iface_stop_direct(iface);
        return;
    }
    for (int i = 0; i < ep->nconn; i++)
        iface->direct[iface->ndirect++] = &ep->conn[i];
}

static void untrack_sockets(tcp_iface_t *iface, tcp_ep_t *ep)
{
    int kept = 0;

    for (int i = 0; i < iface->ndirect; i++)
        if (iface->direct[i]->ep != ep)
            iface->direct[kept++] = iface->direct[i];
    iface->ndirect = kept;
}

/* Lower latency than epoll for a socket or two: data that arrives while
 * we poll is taken by the next recv, not by an epoll_wait then a recv.
 * 2-rank 16-byte all-reduce over loopback, 8 alternating launches: 10.8
 * -> 9.2 us, Open MPI 11.1 (docs/performance-sets.md). */
int tcp_iface_poll_direct(tcp_iface_t *iface)
{
    int took = 0;

    for (int i = 0; i < iface->ndirect; i++) {
        tcp_conn_t *c = iface->direct[i];
        if (!c->src.cold || c->fd < 0)
            continue; /* not ready, or waiting to write: epoll watches it */
        took |= tcp_conn_on_readable(c);
        if (c->ep->state != TCP_EP_CLOSED)
            tcp_conn_update_events(c);
    }
    return took;
}

static void ep_close_fds(tcp_ep_t *ep)
{
    for (int i = 0; i < ep->nconn; i++) {
        if (ep->conn[i].state == TCP_CONN_RETRY) {
            ep->iface->nretry--;
            ep->conn[i].state = TCP_CONN_CONNECTING;
        }
        tcp_conn_close_fd(&ep->conn[i]);
    }
}

void tcp_ep_fail(tcp_ep_t *ep, coll_status_t status, const char *fmt, ...)
{
    char msg[COLL_WIRE_ERRTEXT_MAX];
    va_list ap;

    if (ep->state == TCP_EP_CLOSED)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* A peer that broke the protocol or corrupted a frame is alive: it
     * learns why the link broke (it would otherwise report a peer that
     * died, and pass that on); its other failures mean it is gone or not
     * one of us. */
    if ((status == COLL_ERR_PROTOCOL || status == COLL_ERR_DATA_CORRUPTION) &&
        ep->state == TCP_EP_READY)
        send_abort_notice(ep, status, msg);
    ep->state = TCP_EP_CLOSED;
    ep->error = status;
    ep_close_fds(ep);
    /* The core records the cause first, so that the requests failing next
     * are reported as part of it rather than on their own. */
    ep->iface->super.params.ep_failed(ep->iface->super.params.core, ep->super.peer, status,
                                      msg);
    tcp_ep_fail_requests(ep, status);
}

static void conn_start_connect(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    const coll_tp_params_t *pr = &ep->iface->super.params;
    int fd;

    if (coll_sock_connect_buf(&ep->peer_addr, ep->iface->bufsize, &fd) != COLL_OK) {
        tcp_ep_fail(ep, COLL_ERR_UNREACHABLE, "cannot connect to %s: %s", ep->super.desc,
                    coll_error_thread());
        return;
    }
    tcp_sock_setup(fd, ep->iface, ep->chunk, ep->local);
    c->fd = fd;
    c->state = TCP_CONN_CONNECTING;
    if (coll_evloop_add(pr->evloop, &c->src, fd, EPOLLOUT, conn_handler, c) != COLL_OK)
        tcp_ep_fail(ep, COLL_ERR_SYSTEM, "cannot watch the socket to %s", ep->super.desc);
}

/* A connection attempt failed in a way a later attempt may not: the peer's
 * backlog was full, or its accept side dropped us while it was busy. */
static void conn_schedule_retry(tcp_conn_t *c, const char *why)
{
    tcp_ep_t *ep = c->ep;
    const coll_tp_params_t *pr = &ep->iface->super.params;

    tcp_conn_close_fd(c);
    if (coll_time_ns() + TCP_RETRY_DELAY_NS > pr->connect_deadline_ns) {
        tcp_ep_fail(ep, COLL_ERR_UNREACHABLE, "cannot connect to %s: %s (gave up at the "
                    "deadline)", ep->super.desc, why);
        return;
    }
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: tcp: connecting socket %d to %s failed (%s), "
              "retrying", pr->rank, c->idx, ep->super.desc, why);
    c->state = TCP_CONN_RETRY;
    c->retry_at_ns = coll_time_ns() + TCP_RETRY_DELAY_NS;
    ep->iface->nretry++;
}

void tcp_conn_retry_due(tcp_conn_t *c)
{
    if (coll_time_ns() < c->retry_at_ns)
        return;
    c->ep->iface->nretry--;
    conn_start_connect(c);
}

static void conn_become_ready(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;

    c->state = TCP_CONN_READY;
    for (int i = 0; i < ep->nconn; i++)
        if (ep->conn[i].state != TCP_CONN_READY)
            return;
    ep->state = TCP_EP_READY;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: tcp: connected to %s (%d socket%s)",
              ep->iface->super.params.rank, ep->super.desc, ep->nconn,
              ep->nconn > 1 ? "s" : "");
    tcp_ep_kick(ep); /* sends posted while connecting */
}

static void conn_connect_step(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    const coll_tp_params_t *pr = &ep->iface->super.params;
    int err = coll_sock_connect_result(c->fd);

    if (err == EINPROGRESS)
        return;
    if (err == ECONNREFUSED || err == ETIMEDOUT) {
        conn_schedule_retry(c, strerror(err));
        return;
    }
    if (err != 0) {
        tcp_ep_fail(ep, COLL_ERR_UNREACHABLE, "cannot connect to %s: %s", ep->super.desc,
                    strerror(err));
        return;
    }
    coll_hello_t fields = {0};
    fields.prefix.kind = COLL_CONN_TCP;
    fields.src_rank = (uint32_t)pr->rank;
    fields.dst_rank = (uint32_t)ep->super.peer;
    fields.nranks = (uint32_t)pr->nranks;
    fields.round = (uint32_t)c->idx;
    coll_hs_client_start(&c->hs, c->fd, &ep->peer_addr, &fields, pr->secret,
                         pr->connect_deadline_ns);
    c->state = TCP_CONN_HANDSHAKE;
}

static void conn_handshake_step(tcp_conn_t *c)
{
    coll_status_t st = coll_hs_progress(&c->hs);

    if (st == COLL_INPROGRESS)
        return;
    if (st == COLL_OK)
        conn_become_ready(c);
    else if (st == COLL_ERR_PEER_FAILED)
        conn_schedule_retry(c, c->hs.errmsg); /* dropped before it knew us */
    else
        tcp_ep_fail(c->ep, st, "handshake with %s failed: %s", c->ep->super.desc,
                    c->hs.errmsg);
}

static void conn_handler(void *arg, uint32_t events)
{
    tcp_conn_t *c = arg;
    tcp_ep_t *ep = c->ep;

    switch (c->state) {
    case TCP_CONN_CONNECTING:
        conn_connect_step(c);
        if (c->state != TCP_CONN_HANDSHAKE)
            break;
        __attribute__((fallthrough)); /* the greeting may already be here */
    case TCP_CONN_HANDSHAKE:
        conn_handshake_step(c);
        break;
    case TCP_CONN_READY:
        if (ep->state != TCP_EP_READY) {
            if (events & (EPOLLERR | EPOLLHUP))
                tcp_ep_fail(ep, COLL_ERR_UNREACHABLE, "%s closed socket %d while the others "
                            "were connecting", ep->super.desc, c->idx);
            break;
        }
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            tcp_conn_on_readable(c);
        if ((events & EPOLLOUT) && ep->state == TCP_EP_READY)
            tcp_conn_on_writable(c);
        break;
    default:
        break;
    }
    if (ep->state != TCP_EP_CLOSED)
        tcp_conn_update_events(c);
}

/* An accepted connection proved it is socket c of its peer. */
void tcp_conn_attach(tcp_conn_t *c, int fd, const char *peer_str)
{
    tcp_ep_t *ep = c->ep;
    const coll_tp_params_t *pr = &ep->iface->super.params;

    c->fd = fd;
    tcp_sock_setup(fd, ep->iface, ep->chunk, ep->local);
    if (c->idx == 0)
        ep_set_desc(ep, peer_str);
    if (coll_evloop_add(pr->evloop, &c->src, fd, EPOLLIN, conn_handler, c) != COLL_OK) {
        tcp_ep_fail(ep, COLL_ERR_SYSTEM, "cannot watch the socket from %s", ep->super.desc);
        return;
    }
    conn_become_ready(c);
}

coll_status_t tcp_ep_connect(coll_tp_iface_t *tiface, const coll_peer_info_t *peer,
                             coll_tp_ep_t **ep_p)
{
    tcp_iface_t *iface = (tcp_iface_t *)tiface;
    tcp_ep_t *ep = ep_alloc(iface, peer);

    if (!ep)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate tcp endpoint");
    if (ep->peer_addr.len == 0) {
        ep_free(ep);
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_PROTOCOL,
                          "rank %u published no valid tcp address", peer->rank);
    }
    iface->eps[peer->rank] = ep;
    track_sockets(iface, ep);
    for (int i = 0; i < ep->nconn && ep->state != TCP_EP_CLOSED; i++)
        conn_start_connect(&ep->conn[i]);
    *ep_p = &ep->super;
    return COLL_OK;
}

coll_status_t tcp_ep_accept(coll_tp_iface_t *tiface, const coll_peer_info_t *peer,
                            coll_tp_ep_t **ep_p)
{
    tcp_iface_t *iface = (tcp_iface_t *)tiface;
    tcp_ep_t *ep = ep_alloc(iface, peer);

    if (!ep)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate tcp endpoint");
    for (int i = 0; i < ep->nconn; i++)
        ep->conn[i].state = TCP_CONN_WAIT_ACCEPT;
    iface->eps[peer->rank] = ep;
    track_sockets(iface, ep);
    *ep_p = &ep->super;
    return COLL_OK;
}

coll_status_t tcp_ep_ready(coll_tp_ep_t *tep)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;
    /* A peer may finish and leave before we are done connecting to the
     * others: the link was made, which is all init asks. */
    if (ep->state == TCP_EP_READY || ep->peer_left)
        return COLL_OK;
    if (ep->state == TCP_EP_CLOSED)
        return ep->error != COLL_OK ? ep->error : COLL_ERR_PEER_FAILED;
    return COLL_INPROGRESS;
}

coll_status_t tcp_ep_flush(coll_tp_ep_t *tep)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;

    if (ep->state != TCP_EP_READY)
        return COLL_OK;
    if (!coll_list_empty(&ep->active_sends))
        return COLL_INPROGRESS;
    for (int i = 0; i < ep->nconn; i++) {
        tcp_conn_t *c = &ep->conn[i];
        int unacked = 0;
        if (c->fd < 0)
            continue;
        if (c->cur || !coll_list_empty(&c->ctlq))
            return COLL_INPROGRESS;
        /* Bytes the peer's kernel has not acknowledged: a close now could
         * lose them if the peer also has unread data for us (RST). */
        if (ioctl(c->fd, SIOCOUTQ, &unacked) == 0 && unacked > 0 && !ep->peer_left)
            return COLL_INPROGRESS;
    }
    return COLL_OK;
}

/* Finish the frame being written (at most one chunk or eager message),
 * so that the stream is at a frame boundary. */
static coll_status_t finish_head_frame(tcp_conn_t *c, uint64_t deadline_ns)
{
    tcp_tx_t *head = c->cur;
    coll_status_t st = COLL_OK;

    if (!head || head->off == 0)
        return COLL_OK;
    if (head->off < head->hdr_len)
        st = coll_sock_io_deadline(c->fd, head->hdr + head->off, head->hdr_len - head->off, 1,
                                   deadline_ns, NULL);
    size_t done = head->off > head->hdr_len ? head->off - head->hdr_len : 0;
    if (st == COLL_OK && head->payload_len > done)
        st = coll_sock_io_deadline(c->fd, (void *)(head->payload + done),
                                   head->payload_len - done, 1, deadline_ns, NULL);
    return st;
}

/* Tell the peer why we are failing: the reason usually names the rank
 * that really failed, which the peer could not learn otherwise. On every
 * socket, since the peer may read any of them first; best effort, bounded
 * by TCP_ABORT_NOTICE_NS in all. */
static void send_abort_notice(tcp_ep_t *ep, coll_status_t why, const char *reason)
{
    uint8_t frame[TCP_HDR_MAX + COLL_WIRE_ERRTEXT_MAX];
    size_t len = strnlen(reason, COLL_WIRE_ERRTEXT_MAX), hl;
    uint64_t deadline = coll_time_ns() + TCP_ABORT_NOTICE_NS;
    tcp_hdr_t h = {.type = TCP_ABORT, .len = len, .aux = (uint64_t)(int64_t)why};

    if (ep->tx_errno)
        return;
    hl = tcp_hdr_seal(ep->iface, &h, reason, len, frame);
    memcpy(frame + hl, reason, len);
    for (int i = 0; i < ep->nconn; i++) {
        tcp_conn_t *c = &ep->conn[i];
        if (c->fd < 0 || finish_head_frame(c, deadline) != COLL_OK)
            continue;
        (void)coll_sock_io_deadline(c->fd, frame, hl + len, 1, deadline, NULL);
    }
    linger_for_notice(ep, deadline);
}

/* close() on a socket with unread input sends a reset and drops what is
 * still in our send queue: the notice, when the peer's window was full
 * (it then reports that we died, naming us instead of the culprit). So
 * read and discard the input until the peer has taken every byte we sent,
 * bounded by the notice deadline (a stopped peer takes nothing). */
static void linger_for_notice(tcp_ep_t *ep, uint64_t deadline_ns)
{
    char sink[4096];

    for (;;) {
        struct pollfd pfd[TCP_NSOCKS_MAX];
        int npfd = 0;
        for (int i = 0; i < ep->nconn; i++) {
            int fd = ep->conn[i].fd, unsent = 0;
            if (fd < 0)
                continue;
            ssize_t n;
            while ((n = coll_sock_read(fd, sink, sizeof(sink))) > 0)
                ;
            if (n == 0 && ioctl(fd, SIOCOUTQ, &unsent) == 0 && unsent > 0)
                pfd[npfd++] = (struct pollfd){.fd = fd, .events = POLLIN};
        }
        uint64_t now = coll_time_ns();
        if (npfd == 0 || now >= deadline_ns)
            return;
        /* no event says "acknowledged": wake on input or after 1 ms */
        (void)poll(pfd, (nfds_t)npfd, 1);
    }
}

coll_status_t tcp_ep_close(coll_tp_ep_t *tep, coll_status_t why, const char *reason)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;

    if (ep->state == TCP_EP_CLOSED)
        return COLL_OK;
    if (why == COLL_OK && ep->state == TCP_EP_READY) {
        if (!ep->bye_pending) {
            ep->bye_pending = 1;
            /* Messages the peer would still have to act on never complete:
             * receives, and large sends it has not asked for yet. Frames
             * already queued (eager sends, granted data) still go out,
             * then a BYE on every socket. */
            coll_match_fail_posted(&ep->match, COLL_ERR_INVALID_USAGE);
            tcp_ep_fail_pending_rndv(ep, COLL_ERR_INVALID_USAGE);
            tcp_ep_kick(ep);
        }
        return COLL_OK;
    }
    if (ep->state == TCP_EP_READY && reason)
        send_abort_notice(ep, why, reason);
    ep->state = TCP_EP_CLOSED;
    ep->error = why == COLL_OK ? COLL_ERR_ABORTED : why;
    ep_close_fds(ep);
    tcp_ep_fail_requests(ep, ep->error);
    return COLL_OK;
}

static void free_tx(tcp_tx_t *tx)
{
    if (tx && tx->heap)
        free(tx);
}

coll_status_t tcp_ep_destroy(coll_tp_ep_t *tep)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;
    char sink[4096];

    for (int i = 0; i < ep->nconn; i++) {
        tcp_conn_t *c = &ep->conn[i];
        if (c->fd < 0)
            continue;
        /* Our goodbye is out; read what is left so close() sends FIN,
         * not RST. */
        shutdown(c->fd, SHUT_WR);
        while (coll_sock_read(c->fd, sink, sizeof(sink)) > 0)
            ;
    }
    if (ep->state != TCP_EP_CLOSED)
        tcp_ep_close(tep, COLL_ERR_ABORTED, NULL);
    for (int i = 0; i < ep->nconn; i++) {
        tcp_conn_t *c = &ep->conn[i];
        free_tx(c->cur);
        c->cur = NULL;
        while (!coll_list_empty(&c->ctlq)) {
            tcp_tx_t *tx = coll_list_first(&c->ctlq, tcp_tx_t, link);
            coll_list_del(&tx->link);
            free_tx(tx);
        }
        if (c->rx_ux)
            coll_match_drop_payload(&ep->match, c->rx_ux);
        free(c->rx_ux);
    }
    coll_match_free_unexpected(&ep->match);
    untrack_sockets(ep->iface, ep);
    if (ep->iface->eps[ep->super.peer] == ep)
        ep->iface->eps[ep->super.peer] = NULL;
    ep_free(ep);
    return COLL_OK;
}
