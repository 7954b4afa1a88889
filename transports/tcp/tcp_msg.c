/*
 * tcp_msg.c: moving messages over a ready TCP endpoint: each socket's
 * writer (control frames first, then one data chunk at a time, pulled from
 * the granted sends so that the sockets stripe a large message between
 * them), the per-socket receive state machine, and matching (eager and
 * rendezvous).
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

#include "crc32c.h"
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

size_t tcp_hdr_seal(const tcp_iface_t *iface, const tcp_hdr_t *h, const void *payload,
                    size_t len, uint8_t out[TCP_HDR_MAX])
{
    tcp_hdr_encode(h, out);
    if (!iface->super.params.checksum)
        return TCP_HDR_BYTES;
    coll_store_u32(out + TCP_HDR_BYTES, coll_crc32c(0, payload, len));
    coll_store_u32(out + TCP_HDR_BYTES + 4, coll_crc32c(0, out, TCP_HDR_BYTES + 4));
    return TCP_HDR_MAX;
}

/* ---- sending ------------------------------------------------------------ */

static void tx_init(const tcp_iface_t *iface, tcp_tx_t *tx, const tcp_hdr_t *h,
                    const void *payload, size_t len, coll_tp_req_t *req)
{
    tx->hdr_len = tcp_hdr_seal(iface, h, payload, len, tx->hdr);
    tx->payload = payload;
    tx->payload_len = len;
    tx->off = 0;
    tx->req = req;
    tx->heap = 0;
}

static uint8_t tx_type(const tcp_tx_t *tx)
{
    return tx->hdr[0];
}

/* What an eager message of `len` bytes takes of the receiver's window. */
static size_t eager_cost(size_t len)
{
    return len + TCP_EAGER_OVERHEAD;
}

/* The largest message sent without a rendezvous. Toward a peer of our
 * host the receiver's progress loop sets the price of the round trip, not
 * a wire: a receiver with a CPU of its own answers late while it reduces
 * the chunk before, so messages up to a pipeline chunk go at once (costing
 * a copy where they arrive before their receive); where ranks share CPUs
 * most of them would arrive first. */
static size_t eager_limit(const tcp_ep_t *ep)
{
    if (ep->local && ep->iface->super.crowded)
        return ep->iface->eager_limit_crowded;
    return ep->eager_limit;
}

static int conn_usable(const tcp_conn_t *c)
{
    return c->fd >= 0 && c->state == TCP_CONN_READY && c->ep->state == TCP_EP_READY;
}

/* Queue a frame on socket c and start its writer if it is idle (not from
 * inside that writer: the frame would overtake the one being chosen). */
static void conn_enqueue(tcp_conn_t *c, tcp_tx_t *tx, int urgent)
{
    if (urgent)
        coll_list_insert_after(&c->ctlq, &tx->link);
    else
        coll_list_push_back(&c->ctlq, &tx->link);
    if (!c->in_tx && !c->cur && conn_usable(c))
        tcp_conn_on_writable(c);
    if (c->ep->state != TCP_EP_CLOSED)
        tcp_conn_update_events(c);
}

/* A frame that belongs to no request (CTS, BYE): copied to the heap.
 * `urgent` puts it ahead of the frames queued on the socket (a CTS: the
 * peer's data waits for it). */
coll_status_t tcp_tx_control(tcp_ep_t *ep, tcp_conn_t *c, const tcp_hdr_t *h,
                             const void *payload, size_t len, int urgent)
{
    tcp_tx_t *tx = malloc(sizeof(*tx) + len);
    if (!tx)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot queue a control frame");
    coll_copy(tx + 1, payload, len);
    tx_init(ep->iface, tx, h, tx + 1, len, NULL);
    tx->heap = 1;
    conn_enqueue(c, tx, urgent);
    return COLL_OK;
}

/* Leaving: once every granted byte has been handed to a socket, a BYE goes
 * behind it on every socket. */
static void queue_byes_if_due(tcp_ep_t *ep)
{
    tcp_hdr_t h = {.type = TCP_BYE};

    if (!ep->bye_pending || !coll_list_empty(&ep->active_sends))
        return;
    for (int i = 0; i < ep->nconn; i++) {
        tcp_conn_t *c = &ep->conn[i];
        if (c->bye_queued || c->fd < 0)
            continue;
        c->bye_queued = 1;
        tcp_tx_control(ep, c, &h, NULL, 0, 0);
    }
}

void tcp_ep_kick(tcp_ep_t *ep)
{
    queue_byes_if_due(ep);
    for (int i = 0; i < ep->nconn && ep->state == TCP_EP_READY; i++) {
        tcp_conn_t *c = &ep->conn[i];
        if (!c->in_tx && !c->cur && conn_usable(c))
            tcp_conn_on_writable(c);
    }
    for (int i = 0; i < ep->nconn && ep->state != TCP_EP_CLOSED; i++)
        tcp_conn_update_events(&ep->conn[i]);
}

static void fail_send(tcp_ep_t *ep)
{
    int err = ep->tx_errno;
    tcp_ep_fail(ep, COLL_ERR_PEER_FAILED, "sending to %s failed: %s%s", ep->super.desc,
                strerror(err), err == EPIPE || err == ECONNRESET ? " (process died?)" : "");
}

static void ep_read_all(tcp_ep_t *ep)
{
    for (int i = 0; i < ep->nconn && ep->state == TCP_EP_READY; i++)
        if (ep->conn[i].fd >= 0)
            tcp_conn_on_readable(&ep->conn[i]);
}

/* A send failed. A peer that aborts closes its sockets at once, so our
 * send may fail before we read the notice it sent with the reason (which
 * names the rank that really failed): read what is there first. */
static void tx_broken(tcp_ep_t *ep, int err)
{
    ep->tx_errno = err;
    if (ep->in_rx)
        return; /* the receive loop in progress reports it when it ends */
    ep_read_all(ep);
    if (ep->state == TCP_EP_READY)
        fail_send(ep);
}

/* Write a frame as far as the socket takes it, header and payload in one
 * sendmsg: 1 done, 0 blocked, -1 failed (the endpoint is failing). */
static int tx_write_one(tcp_conn_t *c, tcp_tx_t *tx)
{
    size_t hl = tx->hdr_len, total = hl + tx->payload_len;

    while (tx->off < total) {
        struct iovec iov[2];
        int n = 0;
        if (tx->off < hl) {
            iov[n].iov_base = tx->hdr + tx->off;
            iov[n++].iov_len = hl - tx->off;
        }
        if (tx->payload_len) {
            size_t poff = tx->off > hl ? tx->off - hl : 0;
            iov[n].iov_base = (void *)(tx->payload + poff);
            iov[n++].iov_len = tx->payload_len - poff;
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            tx_broken(c->ep, errno);
            return -1;
        }
        size_t before = tx->off > hl ? tx->off - hl : 0;
        tx->off += (size_t)w;
        if (tx->req && tx->off > hl)
            tx->req->bytes_done += tx->off - hl - before;
    }
    return 1;
}

/* Hand the next chunk of the oldest granted send to socket c. Chunks go
 * to whichever socket asks first, so a slow socket takes fewer. */
static tcp_tx_t *take_chunk(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    coll_tp_req_t *req = coll_list_first(&ep->active_sends, coll_tp_req_t, link);
    tcp_req_priv_t *priv = tcp_priv(req);
    size_t off = priv->data_off, len = COLL_MIN(req->len - off, ep->chunk);
    tcp_hdr_t h = {.type = TCP_DATA, .id = priv->peer_id, .tag = req->tag, .len = len,
                   .aux = off};

    tx_init(ep->iface, &c->data_tx, &h, (const uint8_t *)req->buf + off, len, req);
    priv->data_off = off + len;
    priv->inflight++;
    if (priv->data_off == req->len) {
        coll_list_del(&req->link); /* all handed out: the sockets hold it now */
        queue_byes_if_due(ep);
    }
    return &c->data_tx;
}

static tcp_tx_t *next_frame(tcp_conn_t *c)
{
    if (!coll_list_empty(&c->ctlq)) {
        tcp_tx_t *tx = coll_list_first(&c->ctlq, tcp_tx_t, link);
        coll_list_del(&tx->link);
        return tx;
    }
    if (!coll_list_empty(&c->ep->active_sends))
        return take_chunk(c);
    return NULL;
}

/* A chunk of `req` left (or was dropped with status): the send completes
 * with its last chunk. */
static void chunk_done(coll_tp_req_t *req, coll_status_t status)
{
    tcp_req_priv_t *priv = tcp_priv(req);
    if (--priv->inflight == 0 && priv->data_off == req->len)
        req->complete(req, status);
}

static void tx_done(tcp_tx_t *tx, coll_status_t status)
{
    if (tx->heap)
        free(tx);
    else if (tx_type(tx) == TCP_DATA)
        chunk_done(tx->req, status);
    else if (tx->req) /* EAGER; an RTS has no request to complete */
        tx->req->complete(tx->req, status);
}

void tcp_conn_on_writable(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;

    c->in_tx = 1;
    while (ep->state == TCP_EP_READY && !ep->tx_errno && c->fd >= 0) {
        if (!c->cur && !(c->cur = next_frame(c)))
            break;
        if (tx_write_one(c, c->cur) <= 0)
            break;
        tcp_tx_t *tx = c->cur;
        c->cur = NULL;
        tx_done(tx, COLL_OK);
    }
    c->in_tx = 0;
}

coll_status_t tcp_ep_isend(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;
    tcp_req_priv_t *priv = tcp_priv(req);

    if (ep->state == TCP_EP_CLOSED || ep->peer_left || ep->bye_pending) {
        req->complete(req, ep->error != COLL_OK ? ep->error : COLL_ERR_PEER_FAILED);
        return COLL_OK;
    }
    if (req->len <= eager_limit(ep) && eager_cost(req->len) <= ep->tx_credit) {
        tcp_hdr_t h = {.type = TCP_EAGER, .tag = req->tag, .len = req->len};
        ep->tx_credit -= eager_cost(req->len);
        tx_init(ep->iface, &priv->tx, &h, req->buf, req->len, req);
    } else {
        priv->id = ep->next_send_id++;
        tcp_hdr_t h = {.type = TCP_RTS, .id = priv->id, .tag = req->tag, .len = req->len};
        tx_init(ep->iface, &priv->tx, &h, NULL, 0, NULL);
        coll_list_push_back(&ep->rndv_sends, &req->link);
    }
    /* socket 0 only: its order is the matching order */
    conn_enqueue(&ep->conn[0], &priv->tx, 0);
    return COLL_OK;
}

/* ---- receiving ---------------------------------------------------------- */

static void rx_expect_payload(tcp_conn_t *c, void *dst, size_t len, coll_tp_req_t *req)
{
    c->rx_corrupt = c->rx_hdr.type != TCP_ABORT &&
                    coll_test_corrupt_due(c->ep->iface->super.params.test_corrupt_frame, len);
    c->rx_state = TCP_RX_PAYLOAD;
    c->rx_dst = dst;
    c->rx_left = len;
    c->rx_req = req;
    c->rx_fold = 0;
}

/* 1 once socket c has its fold buffer (allocated on first use). */
static int foldbuf_ready(tcp_conn_t *c)
{
    return c->foldbuf || (c->foldbuf = malloc(TCP_FOLD_BYTES)) != NULL;
}

/* The payload for offset `off` of req, which reduces as it receives:
 * through the fold buffer. 0, or -1 when that cannot be allocated (the
 * link has failed). */
static int rx_expect_fold(tcp_conn_t *c, coll_tp_req_t *req, size_t off, size_t len)
{
    if (!foldbuf_ready(c)) {
        tcp_ep_fail(c->ep, COLL_ERR_NO_MEMORY, "cannot allocate %u bytes to reduce a message "
                    "from %s as it arrives", TCP_FOLD_BYTES, c->ep->super.desc);
        return -1;
    }
    rx_expect_payload(c, NULL, len, req);
    c->rx_fold = 1;
    c->fold_off = off;
    c->fold_fill = 0;
    return 0;
}

static void rx_discard(tcp_conn_t *c, size_t len)
{
    c->rx_corrupt = 0;
    c->rx_state = TCP_RX_DISCARD;
    c->rx_left = len;
}

/* Answer an RTS that matched `req` (or, when req is NULL or of another
 * size, tell the sender to drop the message). The CTS jumps the queue of
 * socket 0: the sender's data waits for it. */
static void answer_rts(tcp_ep_t *ep, coll_tp_req_t *req, uint32_t send_id, size_t msg_len)
{
    tcp_hdr_t h = {.type = TCP_CTS, .id = send_id};

    if (!req || req->len != msg_len) {
        h.flags = TCP_CTS_DISCARD;
        if (req)
            coll_match_size_mismatch(req, msg_len);
    } else {
        tcp_priv(req)->id = ep->next_recv_id++;
        h.aux = tcp_priv(req)->id;
        coll_list_push_back(&ep->rndv_recvs, &req->link);
    }
    tcp_tx_control(ep, &ep->conn[0], &h, NULL, 0, 1);
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

/* An eager message of `len` bytes left our hands (delivered to a receive,
 * or dropped): its credit goes back to the sender once a quarter of our
 * window has gathered, so that a stream of small messages costs few
 * CREDIT frames. */
static void eager_delivered(tcp_ep_t *ep, size_t len)
{
    tcp_hdr_t h = {.type = TCP_CREDIT};

    ep->rx_owed += eager_cost(len);
    if (ep->rx_owed < ep->rx_window / 4 || ep->state != TCP_EP_READY ||
        ep->bye_pending || ep->peer_left)
        return;
    h.aux = ep->rx_owed;
    ep->rx_out -= ep->rx_owed;
    ep->rx_owed = 0;
    tcp_tx_control(ep, &ep->conn[0], &h, NULL, 0, 1); /* failing, the link is failing too */
}

static void on_eager(tcp_conn_t *c, const tcp_hdr_t *h)
{
    tcp_ep_t *ep = c->ep;
    coll_tp_req_t *req;

    if (h->len > TCP_EAGER_MAX) {
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent an eager message of %llu bytes (the "
                    "protocol allows at most %u)", ep->super.desc,
                    (unsigned long long)h->len, TCP_EAGER_MAX);
        return;
    }
    if (eager_cost(h->len) > ep->rx_window - ep->rx_out) {
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent an eager message of %llu bytes beyond "
                    "this rank's window (%zu of its COLL_TCP_EAGER_WINDOW%s=%zu bytes in use)",
                    ep->super.desc, (unsigned long long)h->len, ep->rx_out,
                    ep->local ? "_LOCAL" : "", ep->rx_window);
        return;
    }
    ep->rx_out += eager_cost(h->len);
    req = coll_match_take_posted(&ep->match, h->tag);
    if (req)
        eager_delivered(ep, h->len); /* it goes straight to its receive */
    if (req && req->len != h->len) {
        coll_match_size_mismatch(req, h->len);
        rx_discard(c, h->len);
        return;
    }
    if (req && req->fold) {
        if (rx_expect_fold(c, req, 0, h->len) != 0)
            req->complete(req, COLL_ERR_NO_MEMORY); /* taken from the posted list */
        return;
    }
    if (req) {
        rx_expect_payload(c, req->buf, h->len, req);
        return;
    }
    coll_unexp_t *ux = calloc(1, sizeof(*ux));
    void *data = ux ? coll_match_payload_block(&ep->match, h->len, &ux->cap) : NULL;
    if (!data) {
        free(ux);
        tcp_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot buffer a %llu-byte message from %s",
                    (unsigned long long)h->len, ep->super.desc);
        return;
    }
    ux->tag = h->tag;
    ux->len = h->len;
    ux->data = data;
    c->rx_ux = ux;
    rx_expect_payload(c, data, h->len, NULL);
}

/* The header just read began an unexpected eager message (rx_ux is set
 * only from such a header to the end of its payload) that its receive may
 * take over. A socket read on every progress turn stops there: the call
 * now waiting may be done, and the receive, posted before the next turn,
 * then takes the payload straight from the socket (adopt_streaming)
 * rather than copying it a second time out of the block. A root that runs
 * ahead of a stream of broadcasts sends each message before its receive
 * is posted. */
static int rx_stop_for_receive(const tcp_conn_t *c)
{
    return c->rx_ux && c->rx_ux->len >= TCP_ADOPT_MIN && c->src.cold;
}

static void on_rts(tcp_conn_t *c, const tcp_hdr_t *h)
{
    tcp_ep_t *ep = c->ep;
    coll_tp_req_t *req = coll_match_take_posted(&ep->match, h->tag);
    if (req) {
        answer_rts(ep, req, h->id, h->len);
        return;
    }
    if (coll_match_keep_remote(&ep->match, h->tag, h->len, h->id, NULL, 0) != 0)
        tcp_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot record a message from %s", ep->super.desc);
}

static void on_credit(tcp_conn_t *c, const tcp_hdr_t *h)
{
    tcp_ep_t *ep = c->ep;
    size_t out = ep->peer_window - ep->tx_credit; /* eager bytes not given back */

    if (h->len != 0)
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent a credit frame with a payload of %llu "
                    "bytes (it has none)", ep->super.desc, (unsigned long long)h->len);
    else if (h->aux > out)
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s gave back %llu bytes of eager credit, but had "
                    "only %zu", ep->super.desc, (unsigned long long)h->aux, out);
    else
        ep->tx_credit += h->aux;
}

static void on_cts(tcp_conn_t *c, const tcp_hdr_t *h)
{
    tcp_ep_t *ep = c->ep;
    coll_tp_req_t *req = find_by_id(&ep->rndv_sends, h->id);

    if (!req && ep->bye_pending)
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
    tcp_priv(req)->inflight = 0;
    coll_list_push_back(&ep->active_sends, &req->link);
    tcp_ep_kick(ep);
}

static void on_data(tcp_conn_t *c, const tcp_hdr_t *h)
{
    tcp_ep_t *ep = c->ep;
    coll_tp_req_t *req = find_by_id(&ep->rndv_recvs, h->id);

    if (!req && ep->bye_pending) {
        rx_discard(c, h->len); /* for a receive we failed when we started leaving */
        return;
    }
    if (!req || h->aux > req->len || h->len > req->len - h->aux) {
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent data for %s (id %u, offset %llu, %llu "
                    "bytes)", ep->super.desc, req ? "outside its receive buffer" :
                    "no receive", h->id, (unsigned long long)h->aux,
                    (unsigned long long)h->len);
        return;
    }
    if (req->fold)
        (void)rx_expect_fold(c, req, h->aux, h->len); /* failing, the link fails req */
    else
        rx_expect_payload(c, (uint8_t *)req->buf + h->aux, h->len, req);
}

/* The peer is gone once every socket said goodbye: each BYE follows the
 * last frame of its socket, so then nothing of the peer is in flight. */
static void on_bye(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;

    c->got_bye = 1;
    for (int i = 0; i < ep->nconn; i++)
        if (!ep->conn[i].got_bye)
            return;
    ep->peer_left = 1;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: tcp: %s left the communicator",
              ep->iface->super.params.rank, ep->super.desc);
    /* What is still awaited never will be (receives, data it was granted,
     * grants for our sends). */
    coll_match_fail_posted(&ep->match, COLL_ERR_PEER_FAILED);
    tcp_ep_fail_pending_rndv(ep, COLL_ERR_PEER_FAILED);
}

/* COLL_CHECKSUM: a frame whose header or payload fails its CRC fails the
 * link before anything of it completes a request. */
static int rx_corrupted(tcp_conn_t *c, const char *what, uint32_t got, uint32_t want)
{
    tcp_ep_t *ep = c->ep;
    if (got == want)
        return 0;
    tcp_ep_fail(ep, COLL_ERR_DATA_CORRUPTION, "data corruption on the link from %s to rank %d "
                "(tcp socket %d): a frame's %s failed its CRC-32C (computed %08x, sent %08x); "
                "its message was not delivered", ep->super.desc, ep->iface->super.params.rank,
                c->idx, what, got, want);
    return 1;
}

/* The payload's checksum, once its last byte is in. */
static int rx_payload_corrupted(tcp_conn_t *c)
{
    return c->ep->iface->super.params.checksum &&
           rx_corrupted(c, "payload", c->rx_crc, coll_load_u32(c->rx_hdr_buf + TCP_HDR_BYTES));
}

static void on_header(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    tcp_hdr_t *h = &c->rx_hdr;

    if (ep->iface->super.params.checksum &&
        rx_corrupted(c, "header", coll_crc32c(0, c->rx_hdr_buf, TCP_HDR_BYTES + 4),
                     coll_load_u32(c->rx_hdr_buf + TCP_HDR_BYTES + 4)))
        return;
    c->rx_crc = 0;
    tcp_hdr_decode(c->rx_hdr_buf, h);
    c->rx_state = TCP_RX_HDR;
    switch (h->type) {
    case TCP_EAGER: on_eager(c, h); break;
    case TCP_RTS: on_rts(c, h); break;
    case TCP_CTS: on_cts(c, h); break;
    case TCP_DATA: on_data(c, h); break;
    case TCP_BYE: on_bye(c); break;
    case TCP_CREDIT: on_credit(c, h); break;
    case TCP_ABORT:
        if (h->len > COLL_WIRE_ERRTEXT_MAX) {
            tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent an abort notice of %llu bytes",
                        ep->super.desc, (unsigned long long)h->len);
            break;
        }
        memset(c->rx_text, 0, sizeof(c->rx_text));
        rx_expect_payload(c, c->rx_text, h->len, NULL);
        break;
    default:
        tcp_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent an unknown frame type %u",
                    ep->super.desc, h->type);
    }
}

/* An eager message that arrived unexpected is complete. */
static void unexpected_done(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    coll_unexp_t *ux = c->rx_ux;

    c->rx_ux = NULL;
    /* A receive may have been posted while the payload streamed in. */
    coll_tp_req_t *late = coll_match_take_posted(&ep->match, ux->tag);
    if (!late) {
        coll_list_push_back(&ep->match.unexpected, &ux->link);
        return;
    }
    eager_delivered(ep, ux->len);
    coll_match_deliver_eager(&ep->match, late, ux); /* folds it when the receive reduces */
    free(ux);
}

static void on_payload_done(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    coll_tp_req_t *req = c->rx_req;
    const tcp_hdr_t *h = &c->rx_hdr;

    c->rx_state = TCP_RX_HDR;
    c->rx_req = NULL;
    if (rx_payload_corrupted(c)) {
        if (req && h->type == TCP_EAGER)
            req->complete(req, COLL_ERR_DATA_CORRUPTION); /* in no list */
        return;
    }
    if (h->type == TCP_ABORT) {
        tcp_ep_fail(ep, coll_tp_abort_status((int64_t)h->aux), "%s aborted: %s", ep->super.desc,
                    c->rx_text);
    } else if (h->type == TCP_DATA) {
        /* chunks arrive on any socket in any order: done when all are in */
        if (req->bytes_done >= req->len) {
            coll_list_del(&req->link);
            req->complete(req, COLL_OK);
        }
    } else if (req) {
        req->complete(req, COLL_OK);
    } else if (c->rx_ux) {
        unexpected_done(c);
    }
}

static void rx_failed(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;

    if (errno == EPIPE && c->got_bye) {
        /* Orderly close after its goodbye on this socket. */
        tcp_conn_close_fd(c);
        if (ep->peer_left)
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

/* Bytes for the receive state machine: from the staging buffer first;
 * else from the socket, straight into dst when at least TCP_RXBUF are
 * wanted (payloads), through the staging buffer otherwise (so that one
 * recv brings a header and a small payload, often several frames).
 * Returns the bytes given, 0 when none are available now (a recv that came
 * back short means the socket is drained: no second recv to learn it),
 * -1 on error or end of file (errno set). */
static ssize_t conn_read(tcp_conn_t *c, void *dst, size_t len)
{
    ssize_t n;

    if (c->rxbuf_off == c->rxbuf_len) {
        if (c->rx_drained)
            return 0;
        if (len >= TCP_RXBUF) {
            n = coll_sock_read(c->fd, dst, len);
            c->rx_drained = n >= 0 && (size_t)n < len;
            return n;
        }
        n = coll_sock_read(c->fd, c->rxbuf, TCP_RXBUF);
        if (n <= 0) {
            c->rx_drained = n == 0;
            return n;
        }
        c->rx_drained = n < TCP_RXBUF;
        c->rxbuf_off = 0;
        c->rxbuf_len = (size_t)n;
    }
    n = (ssize_t)COLL_MIN(len, c->rxbuf_len - c->rxbuf_off);
    coll_copy(dst, c->rxbuf + c->rxbuf_off, (size_t)n);
    c->rxbuf_off += (size_t)n;
    return n;
}

/* n payload bytes just arrived at p: the test hook, then the checksum. */
static void rx_payload_bytes(tcp_conn_t *c, uint8_t *p, size_t n)
{
    if (c->rx_corrupt) {
        p[0] ^= 0x01;
        c->rx_corrupt = 0;
    }
    if (c->ep->iface->super.params.checksum)
        c->rx_crc = coll_crc32c(c->rx_crc, p, n);
}

/* Payload bytes straight to their place (rx_dst). Returns as conn_read. */
static ssize_t rx_copy_read(tcp_conn_t *c)
{
    ssize_t n = conn_read(c, c->rx_dst, c->rx_left);

    if (n <= 0)
        return n;
    rx_payload_bytes(c, c->rx_dst, (size_t)n);
    c->rx_dst += n;
    c->rx_left -= (size_t)n;
    if (c->rx_req)
        c->rx_req->bytes_done += (size_t)n;
    return n;
}

/* Payload bytes of a receive that reduces: into the fold buffer, folded
 * when it is full or the frame ends. Returns as conn_read. */
static ssize_t rx_fold_read(tcp_conn_t *c)
{
    uint8_t *at = c->foldbuf + c->fold_fill;
    ssize_t n = conn_read(c, at, COLL_MIN(c->rx_left, TCP_FOLD_BYTES - c->fold_fill));

    if (n <= 0)
        return n;
    rx_payload_bytes(c, at, (size_t)n);
    c->fold_fill += (size_t)n;
    c->rx_left -= (size_t)n;
    if (c->fold_fill == TCP_FOLD_BYTES || c->rx_left == 0) {
        c->rx_req->fold(c->rx_req, c->fold_off, c->foldbuf, c->fold_fill);
        c->fold_off += c->fold_fill;
        c->fold_fill = 0;
    }
    c->rx_req->bytes_done += (size_t)n;
    return n;
}

/* Returns 1 if it took anything from the socket or the staging buffer. */
static int rx_loop(tcp_conn_t *c)
{
    static __thread uint8_t sink[TCP_DISCARD_CHUNK];
    tcp_ep_t *ep = c->ep;
    size_t hl = ep->iface->hdr_len;
    int took = 0;

    c->rx_drained = 0;
    while (ep->state == TCP_EP_READY && c->fd >= 0) {
        ssize_t n;
        switch (c->rx_state) {
        case TCP_RX_HDR:
            n = conn_read(c, c->rx_hdr_buf + c->rx_off, hl - c->rx_off);
            if (n > 0 && (c->rx_off += (size_t)n) == hl) {
                c->rx_off = 0;
                on_header(c);
                if (rx_stop_for_receive(c))
                    return 1; /* the next progress turn reads on */
            }
            break;
        case TCP_RX_PAYLOAD:
            n = !c->rx_left ? 0 : c->rx_fold ? rx_fold_read(c) : rx_copy_read(c);
            if (c->rx_left == 0) {
                on_payload_done(c);
                n = 1;
            }
            break;
        default: /* TCP_RX_DISCARD */
            n = c->rx_left ? conn_read(c, sink, COLL_MIN(c->rx_left, sizeof(sink))) : 0;
            if (n > 0) {
                rx_payload_bytes(c, sink, (size_t)n);
                c->rx_left -= (size_t)n;
            }
            if (c->rx_left == 0) {
                c->rx_state = TCP_RX_HDR;
                n = rx_payload_corrupted(c) ? 0 : 1;
            }
            break;
        }
        if (n < 0) {
            rx_failed(c);
            return 1;
        }
        if (n == 0)
            return took; /* drained */
        took = 1;
    }
    return took;
}

int tcp_conn_on_readable(tcp_conn_t *c)
{
    tcp_ep_t *ep = c->ep;
    int nested = ep->in_rx, took;

    ep->in_rx = 1;
    took = rx_loop(c);
    ep->in_rx = nested;
    if (!nested && ep->state == TCP_EP_READY && ep->tx_errno) {
        ep_read_all(ep);
        if (ep->state == TCP_EP_READY)
            fail_send(ep);
    }
    return took;
}

/* req matches the unexpected eager message that a socket of ep is
 * filling into a block: the bytes in so far go from the block to req, the
 * rest straight from the socket. A receive that folds gets whole pieces
 * of COLL_TP_FOLD_ALIGN from the block; the cut element's bytes start
 * the fold buffer. 1 if req was taken; 0 leaves it to be posted (no such
 * message, or its length differs, for the size mismatch to be reported
 * when it is whole). */
static int adopt_streaming(tcp_ep_t *ep, coll_tp_req_t *req)
{
    for (int i = 0; i < ep->nconn; i++) {
        tcp_conn_t *c = &ep->conn[i];
        coll_unexp_t *ux = c->rx_ux;
        size_t got, whole;

        if (!ux || ux->tag != req->tag || ux->len != req->len || c->rx_state != TCP_RX_PAYLOAD)
            continue;
        if (req->fold && !foldbuf_ready(c))
            return 0; /* the block goes on filling, as before */
        got = ux->len - c->rx_left;
        whole = req->fold ? got / COLL_TP_FOLD_ALIGN * COLL_TP_FOLD_ALIGN : got;
        if (whole > 0)
            coll_tp_deliver(req, 0, ux->data, whole);
        if (got > whole)
            memcpy(c->foldbuf, (const uint8_t *)ux->data + whole, got - whole);
        req->bytes_done = got;
        c->rx_req = req;
        c->rx_fold = req->fold != NULL;
        c->rx_dst = req->fold ? NULL : (uint8_t *)req->buf + got;
        c->fold_off = whole;
        c->fold_fill = got - whole;
        c->rx_ux = NULL;
        ep->rx_adopted++;
        eager_delivered(ep, ux->len);
        coll_match_drop_payload(&ep->match, ux);
        free(ux);
        return 1;
    }
    return 0;
}

coll_status_t tcp_ep_irecv(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    tcp_ep_t *ep = (tcp_ep_t *)tep;
    coll_unexp_t *ux = coll_match_take_unexpected(&ep->match, req->tag);

    if (!ux && ep->state == TCP_EP_READY && adopt_streaming(ep, req))
        return COLL_OK;
    if (!ux) {
        coll_status_t why = COLL_OK;
        if (ep->state == TCP_EP_CLOSED || ep->peer_left || ep->bye_pending)
            why = ep->error != COLL_OK ? ep->error
                  : ep->bye_pending ? COLL_ERR_INVALID_USAGE : COLL_ERR_PEER_FAILED;
        coll_match_post(&ep->match, req, why);
        return COLL_OK;
    }
    if (ux->data) {
        eager_delivered(ep, ux->len);
        coll_match_deliver_eager(&ep->match, req, ux);
    } else if (ep->state == TCP_EP_READY && !ep->peer_left) {
        answer_rts(ep, req, ux->id, ux->len);
    } else {
        req->complete(req, COLL_ERR_PEER_FAILED);
    }
    free(ux);
    return COLL_OK;
}

static int being_filled(const tcp_ep_t *ep, const coll_tp_req_t *req)
{
    for (int i = 0; i < ep->nconn; i++)
        if (ep->conn[i].rx_req == req)
            return 1;
    return 0;
}

void tcp_ep_fail_pending_rndv(tcp_ep_t *ep, coll_status_t status)
{
    coll_list_t *pos, *tmp;

    coll_list_for_each_safe(pos, tmp, &ep->rndv_sends) {
        coll_tp_req_t *req = coll_container_of(pos, coll_tp_req_t, link);
        tcp_tx_t *rts = &tcp_priv(req)->tx;
        /* an RTS half written finishes first (ep_destroy fails it if it must) */
        if (ep->conn[0].cur == rts)
            continue;
        if (rts->link.next && rts->link.next != &rts->link) /* still queued: drop it */
            coll_list_del(&rts->link);
        coll_list_del(&req->link);
        req->complete(req, status);
    }
    coll_list_for_each_safe(pos, tmp, &ep->rndv_recvs) {
        coll_tp_req_t *req = coll_container_of(pos, coll_tp_req_t, link);
        if (being_filled(ep, req)) /* a receive being filled right now finishes first */
            continue;
        coll_list_del(&req->link);
        req->complete(req, status);
    }
}

/* Drop what socket c was doing: its frames and its receive in progress. */
static void conn_fail(tcp_conn_t *c, coll_status_t status)
{
    /* A receive being filled by an eager payload sits in no list. */
    if (c->rx_req && c->rx_hdr.type == TCP_EAGER && c->rx_state == TCP_RX_PAYLOAD)
        c->rx_req->complete(c->rx_req, status);
    c->rx_req = NULL;
    c->rx_state = TCP_RX_HDR;
    c->rxbuf_off = c->rxbuf_len = 0;
    if (c->cur) {
        tcp_tx_t *tx = c->cur;
        c->cur = NULL;
        tx_done(tx, status);
    }
    while (!coll_list_empty(&c->ctlq)) {
        tcp_tx_t *tx = coll_list_first(&c->ctlq, tcp_tx_t, link);
        coll_list_del(&tx->link);
        tx_done(tx, status);
    }
}

void tcp_ep_fail_requests(tcp_ep_t *ep, coll_status_t status)
{
    coll_list_t *lists[] = {&ep->rndv_sends, &ep->active_sends, &ep->rndv_recvs};

    for (int i = 0; i < ep->nconn; i++)
        conn_fail(&ep->conn[i], status);
    /* granted sends still in the list complete here, whatever their chunks
     * in flight did above */
    for (size_t i = 0; i < COLL_ARRAY_LEN(lists); i++) {
        while (!coll_list_empty(lists[i])) {
            coll_tp_req_t *req = coll_list_first(lists[i], coll_tp_req_t, link);
            coll_list_del(&req->link);
            req->complete(req, status);
        }
    }
    coll_match_fail_posted(&ep->match, status);
}
