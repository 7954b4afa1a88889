/*
 * tcp_msg.c: moving messages over a ready TCP endpoint: the send queue,
 * the receive state machine, and matching (eager and rendezvous).
 *
 * Every header field read from the wire is checked before it is used: a
 * type we do not know, an eager payload above TCP_EAGER_MAX, a CTS or DATA
 * for an id we never issued, or DATA outside its receive buffer is a
 * protocol error that fails the link and names the peer. Nothing is
 * allocated from a wire length except an eager payload, which is capped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "error.h"
#include "log.h"
#include "tcp.h"

#define TCP_DISCARD_CHUNK 65536

void tcp_hdr_encode(const tcp_hdr_t *h, uint8_t out[TCP_HDR_BYTES])
{
    out[0] = h->type;
    out[1] = h->flags;
    out[2] = out[3] = 0;
    coll_store_u32(out + 4, h->id);
    coll_store_u64(out + 8, h->tag);
    coll_store_u64(out + 16, h->len);
    coll_store_u64(out + 24, h->aux);
}

void tcp_hdr_decode(const uint8_t in[TCP_HDR_BYTES], tcp_hdr_t *h)
{
    h->type = in[0];
    h->flags = in[1];
    h->id = coll_load_u32(in + 4);
    h->tag = coll_load_u64(in + 8);
    h->len = coll_load_u64(in + 16);
    h->aux = coll_load_u64(in + 24);
}

/* ---- sending ------------------------------------------------------------ */

static void tx_init(tcp_tx_t *tx, const tcp_hdr_t *h, const void *payload, size_t len,
                    coll_tp_req_t *req)
{
    tcp_hdr_encode(h, tx->hdr);
    tx->payload = payload;
    tx->payload_len = len;
    tx->off = 0;
    tx->req = req;
    tx->heap = 0;
}

void tcp_tx_enqueue(tcp_ep_t *ep, tcp_tx_t *tx)
{
    int was_empty = coll_list_empty(&ep->txq);
    coll_list_push_back(&ep->txq, &tx->link);
    if (was_empty && ep->state == TCP_EP_READY) {
        tcp_ep_on_writable(ep);
        tcp_ep_update_events(ep);
    }
}

static uint8_t tcp_hdr_type(const tcp_tx_t *tx)
{
    return tx->hdr[0];
}

/* A frame that belongs to no request (CTS, BYE): copied to the heap. */
coll_status_t tcp_tx_control(tcp_ep_t *ep, const tcp_hdr_t *h, const void *payload,
                             size_t len)
{
    tcp_tx_t *tx = malloc(sizeof(*tx) + len);
    if (!tx)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot queue a control frame");
    coll_copy(tx + 1, payload, len);
    tx_init(tx, h, tx + 1, len, NULL);
    tx->heap = 1;
    tcp_tx_enqueue(ep, tx);
    return COLL_OK;
}

static void fail_send(tcp_ep_t *ep)
{
    int err = ep->tx_errno;
    tcp_ep_fail(ep, COLL_ERR_PEER_FAILED, "sending to %s failed: %s%s", ep->super.desc,
                strerror(err), err == EPIPE || err == ECONNRESET ? " (process died?)" : "");
}

/* A send failed. A peer that aborts closes its socket at once, so our
 * send may fail before we read the notice it sent with the reason (which
 * names the rank that really failed): read what is there first. */
static void tx_broken(tcp_ep_t *ep, int err)
{
    ep->tx_errno = err;
    if (ep->in_rx)
        return; /* the receive loop in progress reports it when it ends */
    tcp_ep_on_readable(ep);
    if (ep->state == TCP_EP_READY)
        fail_send(ep);
}

/* Write the head frame as far as the socket takes it: 1 done, 0 blocked,
 * -1 failed (the endpoint is failing). */
static int tx_write_one(tcp_ep_t *ep, tcp_tx_t *tx)
{
    size_t total = TCP_HDR_BYTES + tx->payload_len;

    while (tx->off < total) {
        struct iovec iov[2];
        int n = 0;
        if (tx->off < TCP_HDR_BYTES) {
            iov[n].iov_base = tx->hdr + tx->off;
            iov[n++].iov_len = TCP_HDR_BYTES - tx->off;
        }
        if (tx->payload_len) {
            size_t poff = tx->off > TCP_HDR_BYTES ? tx->off - TCP_HDR_BYTES : 0;
            iov[n].iov_base = (void *)(tx->payload + poff);
            iov[n++].iov_len = tx->payload_len - poff;
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(ep->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            tx_broken(ep, errno);
            return -1;
        }
        size_t before = tx->off > TCP_HDR_BYTES ? tx->off - TCP_HDR_BYTES : 0;
        tx->off += (size_t)w;
        if (tx->req && tx->off > TCP_HDR_BYTES)
            tx->req->bytes_done += tx->off - TCP_HDR_BYTES - before;
    }
    return 1;
}

/* Queue the next chunk of a rendezvous send; `kick` starts the writer
 * (not when called from inside it). */
static void queue_chunk(tcp_ep_t *ep, coll_tp_req_t *req, int kick)
{
    tcp_req_priv_t *priv = tcp_priv(req);
    size_t off = priv->data_off, len = COLL_MIN(req->len - off, (size_t)TCP_DATA_CHUNK);
    tcp_hdr_t h = {.type = TCP_DATA, .id = priv->peer_id, .tag = req->tag, .len = len,
                   .aux = off};

    priv->data_off = off + len;
    tx_init(&priv->tx, &h, (const uint8_t *)req->buf + off, len, req);
    if (kick)
        tcp_tx_enqueue(ep, &priv->tx);
    else
        coll_list_push_back(&ep->txq, &priv->tx.link);
}

void tcp_ep_on_writable(tcp_ep_t *ep)
{
    while (ep->state == TCP_EP_READY && !ep->tx_errno && !coll_list_empty(&ep->txq)) {
        tcp_tx_t *tx = coll_list_first(&ep->txq, tcp_tx_t, link);
        if (tx_write_one(ep, tx) <= 0)
            return;
        coll_list_del(&tx->link);
        if (tx->heap)
            free(tx);
        else if (tx->req && tcp_priv(tx->req)->data_off < tx->req->len &&
                 tcp_hdr_type(tx) == TCP_DATA)
            queue_chunk(ep, tx->req, 0); /* behind whatever else is waiting */
        else if (tx->req)
            tx->req->complete(tx->req, COLL_OK);
    }
}

coll_status_t tcp_ep_isend(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;
    tcp_req_priv_t *priv = tcp_priv(req);

    if (ep->state == TCP_EP_CLOSED || ep->peer_left || ep->bye_queued) {
        req->complete(req, ep->error != COLL_OK ? ep->error : COLL_ERR_PEER_FAILED);
        return COLL_OK;
    }
    if (req->len <= ep->iface->eager_limit) {
        tcp_hdr_t h = {.type = TCP_EAGER, .tag = req->tag, .len = req->len};
        tx_init(&priv->tx, &h, req->buf, req->len, req);
    } else {
        priv->id = ep->next_send_id++;
        tcp_hdr_t h = {.type = TCP_RTS, .id = priv->id, .tag = req->tag, .len = req->len};
        tx_init(&priv->tx, &h, NULL, 0, NULL);
        coll_list_push_back(&ep->rndv_sends, &req->link);
    }
    tcp_tx_enqueue(ep, &priv->tx);
    return COLL_OK;
}

/* ---- receiving ---------------------------------------------------------- */

static void rx_expect_payload(tcp_ep_t *ep, void *dst, size_t len, coll_tp_req_t *req)
{
    ep->rx_state = TCP_RX_PAYLOAD;
    ep->rx_dst = dst;
    ep->rx_left = len;
    ep->rx_req = req;
}

static void rx_discard(tcp_ep_t *ep, size_t len)
{
    ep->rx_state = TCP_RX_DISCARD;
    ep->rx_left = len;
}

static void size_mismatch(coll_tp_req_t *req, size_t msg_len)
{
    req->bytes_done = msg_len;
    req->complete(req, COLL_ERR_SIZE_MISMATCH);
}

/* Answer an RTS that matched `req` (or, when req is NULL or of another
 * size, tell the sender to drop the message). */
static void answer_rts(tcp_ep_t *ep, coll_tp_req_t *req, uint32_t send_id, size_t msg_len)
{
    tcp_hdr_t h = {.type = TCP_CTS, .id = send_id};

    if (!req || req->len != msg_len) {
        h.flags = TCP_CTS_DISCARD;
        if (req)
            size_mismatch(req, msg_len);
    } else {
        tcp_priv(req)->id = ep->next_recv_id++;
        h.aux = tcp_priv(req)->id;
        coll_list_push_back(&ep->rndv_recvs, &req->link);
    }
    tcp_tx_control(ep, &h, NULL, 0);
}

static coll_tp_req_t *find_by_id(coll_list_t *list, uint32_t id)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, list) {
        coll_tp_req_t *req = coll_container_of(pos, coll_tp_req_t, link);
        if (tcp_priv(req)->id == id)
            return req;
    }
    return NULL;
}

static void on_eager(tcp_ep_t *ep, const tcp_hdr_t *h)
{
    coll_tp_req_t *req;

    if (h->len > TCP_EAGER_MAX) {
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent an eager message of %llu bytes (the "
                    "protocol allows at most %u)", ep->super.desc,
                    (unsigned long long)h->len, TCP_EAGER_MAX);
        return;
    }
    req = coll_match_take_posted(&ep->match, h->tag);
    if (req && req->len != h->len) {
        size_mismatch(req, h->len);
        rx_discard(ep, h->len);
        return;
    }
    if (req) {
        rx_expect_payload(ep, req->buf, h->len, req);
        return;
    }
    coll_unexp_t *ux = calloc(1, sizeof(*ux));
    void *data = malloc(h->len ? h->len : 1);
    if (!ux || !data) {
        free(ux);
        free(data);
        tcp_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot buffer a %llu-byte message from %s",
                    (unsigned long long)h->len, ep->super.desc);
        return;
    }
    ux->tag = h->tag;
    ux->len = h->len;
    ux->data = data;
    ep->rx_ux = ux;
    rx_expect_payload(ep, data, h->len, NULL);
}

static void on_rts(tcp_ep_t *ep, const tcp_hdr_t *h)
{
    coll_tp_req_t *req = coll_match_take_posted(&ep->match, h->tag);
    if (req) {
        answer_rts(ep, req, h->id, h->len);
        return;
    }
    coll_unexp_t *ux = calloc(1, sizeof(*ux));
    if (!ux) {
        tcp_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot record a message from %s", ep->super.desc);
        return;
    }
    ux->tag = h->tag;
    ux->len = h->len;
    ux->id = h->id;
    coll_list_push_back(&ep->match.unexpected, &ux->link);
}

static void on_cts(tcp_ep_t *ep, const tcp_hdr_t *h)
{
    coll_tp_req_t *req = find_by_id(&ep->rndv_sends, h->id);

    if (!req && ep->bye_queued)
        return; /* a send we gave up when we started leaving */
    if (!req) {
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent a clear-to-send for unknown message %u",
                    ep->super.desc, h->id);
        return;
    }
    coll_list_del(&req->link);
    if (h->flags & TCP_CTS_DISCARD) {
        req->complete(req, COLL_OK); /* the receiver reports the mismatch */
        return;
    }
    tcp_priv(req)->peer_id = (uint32_t)h->aux;
    tcp_priv(req)->data_off = 0;
    queue_chunk(ep, req, 1);
}

static void on_data(tcp_ep_t *ep, const tcp_hdr_t *h)
{
    coll_tp_req_t *req = find_by_id(&ep->rndv_recvs, h->id);

    if (!req || h->aux > req->len || h->len > req->len - h->aux) {
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent data for %s (id %u, offset %llu, %llu "
                    "bytes)", ep->super.desc, req ? "outside its receive buffer" :
                    "no receive", h->id, (unsigned long long)h->aux,
                    (unsigned long long)h->len);
        return;
    }
    rx_expect_payload(ep, (uint8_t *)req->buf + h->aux, h->len, req);
}

static void on_bye(tcp_ep_t *ep)
{
    ep->peer_left = 1;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: tcp: %s left the communicator",
              ep->iface->super.params.rank, ep->super.desc);
    /* Everything it sent came before BYE: what is still awaited never will
     * (receives, data it was granted, grants for our sends). */
    coll_match_fail_posted(&ep->match, COLL_ERR_PEER_FAILED);
    tcp_ep_fail_pending_rndv(ep, COLL_ERR_PEER_FAILED);
}

static void on_header(tcp_ep_t *ep)
{
    tcp_hdr_t *h = &ep->rx_hdr;

    tcp_hdr_decode(ep->rx_hdr_buf, h);
    ep->rx_state = TCP_RX_HDR;
    switch (h->type) {
    case TCP_EAGER: on_eager(ep, h); break;
    case TCP_RTS: on_rts(ep, h); break;
    case TCP_CTS: on_cts(ep, h); break;
    case TCP_DATA: on_data(ep, h); break;
    case TCP_BYE: on_bye(ep); break;
    case TCP_ABORT:
        if (h->len > COLL_WIRE_ERRTEXT_MAX) {
            tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent an abort notice of %llu bytes",
                        ep->super.desc, (unsigned long long)h->len);
            break;
        }
        memset(ep->rx_text, 0, sizeof(ep->rx_text));
        rx_expect_payload(ep, ep->rx_text, h->len, NULL);
        break;
    default:
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent an unknown frame type %u",
                    ep->super.desc, h->type);
    }
}

static void on_payload_done(tcp_ep_t *ep)
{
    coll_tp_req_t *req = ep->rx_req;
    const tcp_hdr_t *h = &ep->rx_hdr;

    ep->rx_state = TCP_RX_HDR;
    ep->rx_req = NULL;
    if (h->type == TCP_ABORT) {
        tcp_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s aborted: %s", ep->super.desc, ep->rx_text);
    } else if (h->type == TCP_DATA) {
        if (req->bytes_done >= req->len) {
            coll_list_del(&req->link);
            req->complete(req, COLL_OK);
        }
    } else if (req) {
        req->complete(req, COLL_OK);
    } else if (ep->rx_ux) {
        coll_unexp_t *ux = ep->rx_ux;
        ep->rx_ux = NULL;
        /* A receive may have been posted while the payload streamed in. */
        coll_tp_req_t *late = coll_match_take_posted(&ep->match, ux->tag);
        if (late) {
            if (late->len == ux->len) {
                coll_copy(late->buf, ux->data, ux->len);
                late->bytes_done = ux->len;
                late->complete(late, COLL_OK);
            } else {
                size_mismatch(late, ux->len);
            }
            free(ux->data);
            free(ux);
        } else {
            coll_list_push_back(&ep->match.unexpected, &ux->link);
        }
    }
}

static void rx_failed(tcp_ep_t *ep)
{
    if (errno == EPIPE && ep->peer_left) {
        /* Orderly close after its goodbye. */
        coll_evloop_del(ep->iface->super.params.evloop, &ep->src);
        tcp_ep_close(&ep->super, COLL_ERR_PEER_FAILED, NULL);
        return;
    }
    if (errno == EPIPE || errno == ECONNRESET)
        tcp_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s closed the connection without leaving the "
                    "communicator (process died or was killed?)", ep->super.desc);
    else
        tcp_ep_fail(ep, COLL_ERR_PEER_FAILED, "receiving from %s failed: %s", ep->super.desc,
                    strerror(errno));
}

static void rx_loop(tcp_ep_t *ep);

void tcp_ep_on_readable(tcp_ep_t *ep)
{
    ep->in_rx = 1;
    rx_loop(ep);
    ep->in_rx = 0;
    if (ep->state == TCP_EP_READY && ep->tx_errno)
        fail_send(ep);
}

static void rx_loop(tcp_ep_t *ep)
{
    static __thread uint8_t sink[TCP_DISCARD_CHUNK];

    while (ep->state == TCP_EP_READY) {
        ssize_t n;
        switch (ep->rx_state) {
        case TCP_RX_HDR:
            n = coll_sock_read(ep->fd, ep->rx_hdr_buf + ep->rx_off, TCP_HDR_BYTES - ep->rx_off);
            if (n > 0 && (ep->rx_off += (size_t)n) == TCP_HDR_BYTES) {
                ep->rx_off = 0;
                on_header(ep);
            }
            break;
        case TCP_RX_PAYLOAD:
            n = ep->rx_left ? coll_sock_read(ep->fd, ep->rx_dst, ep->rx_left) : 0;
            if (n > 0) {
                ep->rx_dst += n;
                ep->rx_left -= (size_t)n;
                if (ep->rx_req)
                    ep->rx_req->bytes_done += (size_t)n;
            }
            if (ep->rx_left == 0) {
                on_payload_done(ep);
                n = 1;
            }
            break;
        default: /* TCP_RX_DISCARD */
            n = coll_sock_read(ep->fd, sink, COLL_MIN(ep->rx_left, sizeof(sink)));
            if (n > 0 && (ep->rx_left -= (size_t)n) == 0)
                ep->rx_state = TCP_RX_HDR;
            break;
        }
        if (n < 0) {
            rx_failed(ep);
            return;
        }
        if (n == 0)
            return; /* drained */
    }
}

coll_status_t tcp_ep_irecv(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;
    coll_unexp_t *ux = coll_match_take_unexpected(&ep->match, req->tag);

    if (!ux) {
        if (ep->state == TCP_EP_CLOSED || ep->peer_left || ep->bye_queued)
            req->complete(req, ep->error != COLL_OK ? ep->error
                               : ep->bye_queued ? COLL_ERR_INVALID_USAGE
                                                : COLL_ERR_PEER_FAILED);
        else
            coll_list_push_back(&ep->match.posted, &req->link);
        return COLL_OK;
    }
    if (ux->data) {
        if (ux->len == req->len) {
            coll_copy(req->buf, ux->data, ux->len);
            req->bytes_done = ux->len;
            req->complete(req, COLL_OK);
        } else {
            size_mismatch(req, ux->len);
        }
        free(ux->data);
    } else if (ep->state == TCP_EP_READY && !ep->peer_left) {
        answer_rts(ep, req, ux->id, ux->len);
    } else {
        req->complete(req, COLL_ERR_PEER_FAILED);
    }
    free(ux);
    return COLL_OK;
}

void tcp_ep_fail_pending_rndv(tcp_ep_t *ep, coll_status_t status)
{
    coll_list_t *lists[] = {&ep->rndv_sends, &ep->rndv_recvs};

    for (size_t i = 0; i < COLL_ARRAY_LEN(lists); i++) {
        coll_list_t *pos, *tmp;
        coll_list_for_each_safe(pos, tmp, lists[i]) {
            coll_tp_req_t *req = coll_container_of(pos, coll_tp_req_t, link);
            tcp_tx_t *rts = &tcp_priv(req)->tx;
            int queued = rts->link.next && rts->link.next != &rts->link;
            /* a receive being filled right now, or an RTS half written,
             * finishes first (ep_destroy fails it if it must) */
            if (req == ep->rx_req || (i == 0 && queued && rts->off > 0))
                continue;
            if (i == 0 && queued) /* the RTS lives in the request */
                coll_list_del(&rts->link);
            coll_list_del(&req->link);
            req->complete(req, status);
        }
    }
}

void tcp_ep_fail_requests(tcp_ep_t *ep, coll_status_t status)
{
    coll_list_t *lists[] = {&ep->rndv_sends, &ep->rndv_recvs};

    /* A receive being filled by an eager payload sits in no list. */
    if (ep->rx_req && ep->rx_hdr.type == TCP_EAGER && ep->rx_state == TCP_RX_PAYLOAD)
        ep->rx_req->complete(ep->rx_req, status);
    ep->rx_req = NULL;
    ep->rx_state = TCP_RX_HDR;
    while (!coll_list_empty(&ep->txq)) {
        tcp_tx_t *tx = coll_list_first(&ep->txq, tcp_tx_t, link);
        coll_list_del(&tx->link);
        if (tx->req)
            tx->req->complete(tx->req, status);
        if (tx->heap)
            free(tx);
    }
    for (size_t i = 0; i < COLL_ARRAY_LEN(lists); i++) {
        while (!coll_list_empty(lists[i])) {
            coll_tp_req_t *req = coll_list_first(lists[i], coll_tp_req_t, link);
            coll_list_del(&req->link);
            req->complete(req, status);
        }
    }
    coll_match_fail_posted(&ep->match, status);
}
