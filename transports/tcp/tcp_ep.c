/*
 * tcp_ep.c: a TCP endpoint's life: connect (or wait to be accepted),
 * handshake, ready, and the ways it ends: a graceful goodbye, an abort
 * notice, or a failure that names the peer's rank and address.
 */
#include <errno.h>
#include <linux/sockios.h>
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

static void ep_handler(void *arg, uint32_t events);

static void ep_set_desc(tcp_ep_t *ep)
{
    char addr[COLL_ADDRSTR_LEN];
    snprintf(ep->super.desc, sizeof(ep->super.desc), "rank %d (%s)", ep->super.peer,
             coll_addr_str(&ep->peer_addr, addr));
}

static tcp_ep_t *ep_alloc(tcp_iface_t *iface, const coll_peer_info_t *peer)
{
    const coll_tp_addr_t *a = coll_peer_info_addr(peer, COLL_TP_TCP);
    tcp_ep_t *ep = calloc(1, sizeof(*ep));

    if (!ep)
        return NULL;
    ep->super.iface = &iface->super;
    ep->super.peer = (int)peer->rank;
    ep->iface = iface;
    ep->fd = -1;
    ep->src.fd = -1;
    if (!a || a->len != COLL_WIRE_ADDR_BYTES || coll_addr_from_wire(a->data, &ep->peer_addr))
        memset(&ep->peer_addr, 0, sizeof(ep->peer_addr));
    ep_set_desc(ep);
    coll_list_init(&ep->txq);
    coll_match_init(&ep->match);
    coll_list_init(&ep->rndv_sends);
    coll_list_init(&ep->rndv_recvs);
    ep->rx_state = TCP_RX_HDR;
    return ep;
}

static void ep_close_fd(tcp_ep_t *ep)
{
    if (ep->fd < 0)
        return;
    coll_evloop_del(ep->iface->super.params.evloop, &ep->src);
    close(ep->fd);
    ep->fd = -1;
}

void tcp_ep_update_events(tcp_ep_t *ep)
{
    uint32_t events;

    if (ep->fd < 0)
        return;
    if (ep->state == TCP_EP_CONNECTING)
        events = EPOLLOUT;
    else if (ep->state == TCP_EP_HANDSHAKE)
        events = coll_hs_events(&ep->hs);
    else
        events = EPOLLIN | (coll_list_empty(&ep->txq) ? 0 : EPOLLOUT);
    coll_evloop_mod(ep->iface->super.params.evloop, &ep->src, events);
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
    if (ep->state == TCP_EP_RETRY)
        ep->iface->nretry--;
    ep->state = TCP_EP_CLOSED;
    ep->error = status;
    ep_close_fd(ep);
    /* The core records the cause first, so that the requests failing next
     * are reported as part of it rather than on their own. */
    ep->iface->super.params.ep_failed(ep->iface->super.params.core, ep->super.peer, status,
                                      msg);
    tcp_ep_fail_requests(ep, status);
}

static void ep_start_connect(tcp_ep_t *ep)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;
    int fd;

    if (coll_sock_connect_start(&ep->peer_addr, &fd) != COLL_OK) {
        tcp_ep_fail(ep, COLL_ERR_UNREACHABLE, "cannot connect to %s: %s", ep->super.desc,
                    coll_error_thread());
        return;
    }
    ep->fd = fd;
    ep->state = TCP_EP_CONNECTING;
    if (coll_evloop_add(pr->evloop, &ep->src, fd, EPOLLOUT, ep_handler, ep) != COLL_OK)
        tcp_ep_fail(ep, COLL_ERR_SYSTEM, "cannot watch the socket to %s", ep->super.desc);
}

/* A connection attempt failed in a way a later attempt may not: the peer's
 * backlog was full, or its accept side dropped us while it was busy. */
static void ep_schedule_retry(tcp_ep_t *ep, const char *why)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;

    ep_close_fd(ep);
    if (coll_time_ns() + TCP_RETRY_DELAY_NS > pr->connect_deadline_ns) {
        tcp_ep_fail(ep, COLL_ERR_UNREACHABLE, "cannot connect to %s: %s (gave up at the "
                    "deadline)", ep->super.desc, why);
        return;
    }
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: tcp: connecting to %s failed (%s), retrying",
              pr->rank, ep->super.desc, why);
    ep->state = TCP_EP_RETRY;
    ep->retry_at_ns = coll_time_ns() + TCP_RETRY_DELAY_NS;
    ep->iface->nretry++;
}

void tcp_ep_retry_due(tcp_ep_t *ep)
{
    if (coll_time_ns() < ep->retry_at_ns)
        return;
    ep->iface->nretry--;
    ep_start_connect(ep);
}

static void ep_become_ready(tcp_ep_t *ep)
{
    ep->state = TCP_EP_READY;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: tcp: connected to %s", ep->iface->super.params.rank,
              ep->super.desc);
    tcp_ep_on_writable(ep); /* sends posted while connecting */
    tcp_ep_update_events(ep);
}

static void ep_connect_step(tcp_ep_t *ep)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;
    int err = coll_sock_connect_result(ep->fd);

    if (err == EINPROGRESS)
        return;
    if (err == ECONNREFUSED || err == ETIMEDOUT) {
        ep_schedule_retry(ep, strerror(err));
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
    coll_hs_client_start(&ep->hs, ep->fd, &ep->peer_addr, &fields, pr->secret,
                         pr->connect_deadline_ns);
    ep->state = TCP_EP_HANDSHAKE;
}

static void ep_handshake_step(tcp_ep_t *ep)
{
    coll_status_t st = coll_hs_progress(&ep->hs);

    if (st == COLL_INPROGRESS)
        return;
    if (st == COLL_OK)
        ep_become_ready(ep);
    else if (st == COLL_ERR_PEER_FAILED)
        ep_schedule_retry(ep, ep->hs.errmsg); /* dropped before it knew us */
    else
        tcp_ep_fail(ep, st, "handshake with %s failed: %s", ep->super.desc, ep->hs.errmsg);
}

static void ep_handler(void *arg, uint32_t events)
{
    tcp_ep_t *ep = arg;

    switch (ep->state) {
    case TCP_EP_CONNECTING:
        ep_connect_step(ep);
        if (ep->state != TCP_EP_HANDSHAKE)
            break;
        __attribute__((fallthrough)); /* the greeting may already be here */
    case TCP_EP_HANDSHAKE:
        ep_handshake_step(ep);
        break;
    case TCP_EP_READY:
        if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
            tcp_ep_on_readable(ep);
        if ((events & EPOLLOUT) && ep->state == TCP_EP_READY)
            tcp_ep_on_writable(ep);
        break;
    default:
        break;
    }
    tcp_ep_update_events(ep);
}

/* An accepted connection proved it is `ep`'s peer. */
void tcp_ep_attach(tcp_ep_t *ep, int fd, const char *peer_str)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;

    ep->fd = fd;
    snprintf(ep->super.desc, sizeof(ep->super.desc), "rank %d (%s)", ep->super.peer,
             peer_str);
    if (coll_evloop_add(pr->evloop, &ep->src, fd, EPOLLIN, ep_handler, ep) != COLL_OK) {
        tcp_ep_fail(ep, COLL_ERR_SYSTEM, "cannot watch the socket from %s", ep->super.desc);
        return;
    }
    ep_become_ready(ep);
}

coll_status_t tcp_ep_connect(coll_tp_iface_t *tiface, const coll_peer_info_t *peer,
                             coll_tp_ep_t **ep_p)
{
    tcp_iface_t *iface = (tcp_iface_t *)tiface;
    tcp_ep_t *ep = ep_alloc(iface, peer);

    if (!ep)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate tcp endpoint");
    if (ep->peer_addr.len == 0) {
        free(ep);
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_PROTOCOL,
                          "rank %u published no valid tcp address", peer->rank);
    }
    iface->eps[peer->rank] = ep;
    ep_start_connect(ep);
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
    ep->state = TCP_EP_WAIT_ACCEPT;
    iface->eps[peer->rank] = ep;
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
    int unacked = 0;

    if (ep->state != TCP_EP_READY || ep->fd < 0)
        return COLL_OK;
    if (!coll_list_empty(&ep->txq))
        return COLL_INPROGRESS;
    /* Bytes the peer's kernel has not acknowledged: a close now could lose
     * them if the peer also has unread data for us (RST). */
    if (ioctl(ep->fd, SIOCOUTQ, &unacked) == 0 && unacked > 0 && !ep->peer_left)
        return COLL_INPROGRESS;
    return COLL_OK;
}

/* Finish the frame being written (at most one chunk or eager message),
 * so that the stream is at a frame boundary. */
static coll_status_t finish_head_frame(tcp_ep_t *ep, uint64_t deadline_ns)
{
    tcp_tx_t *head = coll_list_empty(&ep->txq) ? NULL : coll_list_first(&ep->txq, tcp_tx_t, link);
    coll_status_t st = COLL_OK;

    if (!head || head->off == 0)
        return COLL_OK;
    if (head->off < TCP_HDR_BYTES)
        st = coll_sock_io_deadline(ep->fd, head->hdr + head->off, TCP_HDR_BYTES - head->off, 1,
                                   deadline_ns, NULL);
    size_t done = head->off > TCP_HDR_BYTES ? head->off - TCP_HDR_BYTES : 0;
    if (st == COLL_OK && head->payload_len > done)
        st = coll_sock_io_deadline(ep->fd, (void *)(head->payload + done),
                                   head->payload_len - done, 1, deadline_ns, NULL);
    return st;
}

/* Tell the peer why we are failing: the reason usually names the rank
 * that really failed, which the peer could not learn otherwise. Best
 * effort, bounded by TCP_ABORT_NOTICE_NS. */
static void send_abort_notice(tcp_ep_t *ep, const char *reason)
{
    uint8_t frame[TCP_HDR_BYTES + COLL_WIRE_ERRTEXT_MAX];
    size_t len = strnlen(reason, COLL_WIRE_ERRTEXT_MAX);
    uint64_t deadline = coll_time_ns() + TCP_ABORT_NOTICE_NS;
    tcp_hdr_t h = {.type = TCP_ABORT, .len = len};

    if (ep->tx_errno || finish_head_frame(ep, deadline) != COLL_OK)
        return;
    tcp_hdr_encode(&h, frame);
    memcpy(frame + TCP_HDR_BYTES, reason, len);
    (void)coll_sock_io_deadline(ep->fd, frame, TCP_HDR_BYTES + len, 1, deadline, NULL);
}

coll_status_t tcp_ep_close(coll_tp_ep_t *tep, coll_status_t why, const char *reason)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;

    if (ep->state == TCP_EP_CLOSED)
        return COLL_OK;
    if (why == COLL_OK && ep->state == TCP_EP_READY) {
        if (!ep->bye_queued) {
            tcp_hdr_t h = {.type = TCP_BYE};
            ep->bye_queued = 1;
            /* Messages the peer would still have to act on never complete:
             * receives, and large sends it has not asked for yet. Frames
             * already queued (eager sends, granted data) still go out. */
            coll_match_fail_posted(&ep->match, COLL_ERR_INVALID_USAGE);
            tcp_ep_fail_pending_rndv(ep, COLL_ERR_INVALID_USAGE);
            tcp_tx_control(ep, &h, NULL, 0);
            tcp_ep_update_events(ep);
        }
        return COLL_OK;
    }
    if (ep->state == TCP_EP_READY && reason)
        send_abort_notice(ep, reason);
    if (ep->state == TCP_EP_RETRY)
        ep->iface->nretry--;
    ep->state = TCP_EP_CLOSED;
    ep->error = why == COLL_OK ? COLL_ERR_ABORTED : why;
    ep_close_fd(ep);
    tcp_ep_fail_requests(ep, ep->error);
    return COLL_OK;
}

coll_status_t tcp_ep_destroy(coll_tp_ep_t *tep)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;
    char sink[4096];

    if (ep->fd >= 0) {
        /* Our goodbye is out; read what is left so close() sends FIN,
         * not RST. */
        shutdown(ep->fd, SHUT_WR);
        while (coll_sock_read(ep->fd, sink, sizeof(sink)) > 0)
            ;
    }
    if (ep->state != TCP_EP_CLOSED)
        tcp_ep_close(tep, COLL_ERR_ABORTED, NULL);
    while (!coll_list_empty(&ep->txq)) {
        tcp_tx_t *tx = coll_list_first(&ep->txq, tcp_tx_t, link);
        coll_list_del(&tx->link);
        if (tx->heap)
            free(tx);
    }
    free(ep->rx_ux ? ep->rx_ux->data : NULL);
    free(ep->rx_ux);
    coll_match_free_unexpected(&ep->match);
    if (ep->iface->eps[ep->super.peer] == ep)
        ep->iface->eps[ep->super.peer] = NULL;
    free(ep);
    return COLL_OK;
}
