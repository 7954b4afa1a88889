/*
 * verbs_msg.c: messages over a ready queue pair (the format and the
 * credit scheme are described in verbs.h). Sending: everything waits in
 * the endpoint's txq until it has what it needs (a credit, a send slot,
 * room in the send queue), in order. Receiving: each completion of a
 * receive slot is one message, handled and the slot posted again at once.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "error.h"
#include "log.h"
#include "verbs.h"

void verbs_hdr_encode(const verbs_hdr_t *h, uint8_t out[VERBS_HDR_BYTES])
{
    out[0] = h->type;
    out[1] = h->flags;
    out[2] = (uint8_t)h->credits;
    out[3] = (uint8_t)(h->credits >> 8);
    coll_store_u32(out + 4, h->id);
    coll_store_u64(out + 8, h->tag);
    coll_store_u64(out + 16, h->len);
    coll_store_u64(out + 24, h->addr);
    coll_store_u32(out + 32, h->rkey);
    coll_store_u32(out + 36, h->aux);
}

void verbs_hdr_decode(const uint8_t in[VERBS_HDR_BYTES], verbs_hdr_t *h)
{
    h->type = in[0];
    h->flags = in[1];
    h->credits = (uint16_t)(in[2] | in[3] << 8);
    h->id = coll_load_u32(in + 4);
    h->tag = coll_load_u64(in + 8);
    h->len = coll_load_u64(in + 16);
    h->addr = coll_load_u64(in + 24);
    h->rkey = coll_load_u32(in + 32);
    h->aux = coll_load_u32(in + 36);
}

static uint8_t *slot_buf(verbs_ep_t *ep, uint32_t slot)
{
    return ep->bufs + (size_t)slot * VERBS_SLOT_BYTES;
}

coll_status_t verbs_post_recv(verbs_ep_t *ep, uint32_t slot)
{
    struct ibv_sge sge = {(uintptr_t)slot_buf(ep, slot), VERBS_SLOT_BYTES, ep->bufs_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = VERBS_WR_ID(ep->super.peer, VERBS_WR_RECV, slot),
                             .sg_list = &sge, .num_sge = 1}, *bad;
    int rc = ibv_post_recv(ep->qp, &wr, &bad);
    if (rc != 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: verbs: ibv_post_recv for "
                          "%s: %s", ep->iface->super.params.rank, ep->super.desc, strerror(rc));
    return COLL_OK;
}

static void tx_init(verbs_tx_t *tx, int kind, const verbs_hdr_t *h, const void *payload,
                    size_t len, coll_tp_req_t *req)
{
    coll_list_init(&tx->link);
    tx->hdr = *h;
    tx->payload = payload;
    tx->len = len;
    tx->req = req;
    tx->kind = (uint8_t)kind;
    tx->heap = 0;
}

/* ---- posting ------------------------------------------------------------------------ */

/* Copy a message into a send slot and post it; 0 if a resource is missing. */
static int post_msg(verbs_ep_t *ep, verbs_tx_t *tx)
{
    int free_msg = tx->hdr.type == VERBS_CREDIT;
    uint32_t slot;
    int rc;

    if ((!free_msg && ep->tx_credits == 0) || ep->nfree_slots == 0 ||
        ep->sq_used >= VERBS_SQ_DEPTH)
        return 0;
    slot = ep->free_slots[--ep->nfree_slots];
    tx->hdr.credits = (uint16_t)COLL_MIN(ep->owed, 0xffff);
    size_t bytes = VERBS_HDR_BYTES + tx->len;
    uint8_t *buf = slot_buf(ep, slot);
    verbs_hdr_encode(&tx->hdr, buf);
    coll_copy(buf + VERBS_HDR_BYTES, tx->payload, tx->len);
    if (ep->iface->super.params.checksum) {
        coll_store_u32(buf + bytes, coll_crc32c(0, buf, bytes));
        bytes += VERBS_CRC_BYTES;
    }
    struct ibv_sge sge = {(uintptr_t)buf, (uint32_t)bytes, ep->bufs_mr->lkey};
    struct ibv_send_wr wr = {.wr_id = VERBS_WR_ID(ep->super.peer, VERBS_WR_SEND, slot),
                             .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    rc = ibv_post_send(ep->qp, &wr, &bad);
    if (rc != 0) {
        ep->free_slots[ep->nfree_slots++] = slot;
        verbs_ep_fail(ep, COLL_ERR_SYSTEM, "verbs: ibv_post_send to %s: %s", ep->super.desc,
                      strerror(rc));
        return 0;
    }
    ep->owed -= tx->hdr.credits;
    ep->tx_credits -= !free_msg;
    ep->sq_used++;
    return 1;
}

/* Write a granted message in pieces; the last carries the receive's id. */
static int post_write(verbs_ep_t *ep, verbs_tx_t *tx)
{
    coll_tp_req_t *req = tx->req;
    verbs_req_priv_t *priv = verbs_priv(req);
    uint32_t pieces = (uint32_t)((req->len + VERBS_WRITE_MAX - 1) / VERBS_WRITE_MAX);

    if (ep->tx_credits == 0 || ep->sq_used + (int)pieces > VERBS_SQ_DEPTH)
        return 0;
    for (uint32_t i = 0; i < pieces; i++) {
        size_t off = (size_t)i * VERBS_WRITE_MAX, n = COLL_MIN(req->len - off, VERBS_WRITE_MAX);
        int last = i + 1 == pieces, rc;
        struct ibv_sge sge = {(uintptr_t)req->buf + off, (uint32_t)n, priv->mr->lkey};
        struct ibv_send_wr wr = {
            .wr_id = VERBS_WR_ID(ep->super.peer, VERBS_WR_WRITE, priv->id),
            .sg_list = &sge, .num_sge = 1,
            .opcode = last ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
            .send_flags = last ? IBV_SEND_SIGNALED : 0,
            .imm_data = htonl(tx->hdr.aux),
            .wr = {.rdma = {.remote_addr = tx->hdr.addr + off, .rkey = tx->hdr.rkey}},
        }, *bad;
        rc = ibv_post_send(ep->qp, &wr, &bad);
        if (rc != 0) {
            verbs_ep_fail(ep, COLL_ERR_SYSTEM, "verbs: RDMA write to %s: ibv_post_send: %s",
                          ep->super.desc, strerror(rc));
            return 0;
        }
        ep->sq_used++;
    }
    priv->pieces = pieces;
    ep->tx_credits--;
    return 1;
}

static void tx_posted(verbs_ep_t *ep, verbs_tx_t *tx)
{
    coll_tp_req_t *req = tx->req;
    int write = tx->kind == VERBS_TX_WRITE;
    size_t len = tx->len;

    /* Everything read from tx first: an eager tx lives in its request,
     * which is the core's again once completed. */
    coll_list_del(&tx->link);
    if (tx->hdr.type == VERBS_BYE && !write)
        ep->bye_sent = 1;
    if (tx->heap)
        free(tx);
    if (write) {
        coll_list_push_back(&ep->writes, &req->link);
    } else if (req) { /* eager: the payload is in the slot */
        req->bytes_done = len;
        req->complete(req, COLL_OK);
    }
}

/* Return slots on their own when half the window is owed: the peer may be
 * waiting for them with nothing of ours to carry them. */
static void maybe_send_credit(verbs_ep_t *ep)
{
    verbs_tx_t tx;
    verbs_hdr_t h = {.type = VERBS_CREDIT};
    if (ep->state != VERBS_EP_READY || ep->owed < VERBS_CREDITS / 2)
        return;
    tx_init(&tx, VERBS_TX_MSG, &h, NULL, 0, NULL);
    post_msg(ep, &tx);
}

void verbs_ep_kick(verbs_ep_t *ep)
{
    while (ep->state == VERBS_EP_READY && !coll_list_empty(&ep->txq)) {
        verbs_tx_t *tx = coll_list_first(&ep->txq, verbs_tx_t, link);
        if (!(tx->kind == VERBS_TX_WRITE ? post_write(ep, tx) : post_msg(ep, tx)))
            break;
        tx_posted(ep, tx);
    }
    maybe_send_credit(ep);
}

coll_status_t verbs_tx_control(verbs_ep_t *ep, const verbs_hdr_t *h, int urgent)
{
    verbs_tx_t *tx = malloc(sizeof(*tx));
    if (!tx) {
        verbs_ep_fail(ep, COLL_ERR_NO_MEMORY, "verbs: out of memory queueing a message for %s",
                      ep->super.desc);
        return COLL_ERR_NO_MEMORY;
    }
    tx_init(tx, VERBS_TX_MSG, h, NULL, 0, NULL);
    tx->heap = 1;
    if (urgent)
        coll_list_insert_after(&ep->txq, &tx->link);
    else
        coll_list_push_back(&ep->txq, &tx->link);
    verbs_ep_kick(ep);
    return COLL_OK;
}

/* ---- sending ------------------------------------------------------------------------ */

coll_status_t verbs_ep_isend(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    verbs_ep_t *ep = (verbs_ep_t *)tep;
    verbs_req_priv_t *priv = verbs_priv(req);

    if (ep->state == VERBS_EP_CLOSED || ep->peer_left || ep->bye_pending) {
        req->complete(req, ep->error != COLL_OK ? ep->error : COLL_ERR_PEER_FAILED);
        return COLL_OK;
    }
    if (req->len > (size_t)(VERBS_SQ_DEPTH / 2) * VERBS_WRITE_MAX)
        return coll_error(COLL_SUBSYS_P2P, COLL_ERR_INVALID_ARG, "verbs: a message of %zu bytes "
                          "is above the transport's limit", req->len);
    priv->mr = NULL;
    if (req->len <= VERBS_EAGER_MAX) {
        verbs_hdr_t h = {.type = VERBS_EAGER, .tag = req->tag, .len = req->len};
        tx_init(&priv->tx, VERBS_TX_MSG, &h, req->buf, req->len, req);
    } else {
        priv->id = ep->next_send_id++ & 0xffffff;
        verbs_hdr_t h = {.type = VERBS_RTS, .id = priv->id, .tag = req->tag, .len = req->len};
        if (ep->iface->super.params.checksum)
            h.aux = coll_crc32c(0, req->buf, req->len);
        tx_init(&priv->tx, VERBS_TX_MSG, &h, NULL, 0, NULL);
        coll_list_push_back(&ep->rndv_sends, &req->link);
    }
    coll_list_push_back(&ep->txq, &priv->tx.link);
    verbs_ep_kick(ep);
    return COLL_OK;
}

static coll_tp_req_t *find_by_id(coll_list_t *list, uint32_t id)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, list) {
        coll_tp_req_t *req = coll_container_of(pos, coll_tp_req_t, link);
        if (verbs_priv(req)->id == id)
            return req;
    }
    return NULL;
}

static coll_status_t ep_register(verbs_ep_t *ep, coll_tp_req_t *req)
{
    coll_status_t st = verbs_mr_get(&ep->iface->mrs, req->buf, req->len, &verbs_priv(req)->mr);
    if (st != COLL_OK)
        verbs_ep_fail(ep, st, "verbs: cannot register %zu bytes for a transfer with %s: %s",
                      req->len, ep->super.desc, coll_error_thread());
    return st;
}

static void on_cts(verbs_ep_t *ep, const verbs_hdr_t *h)
{
    coll_tp_req_t *req = find_by_id(&ep->rndv_sends, h->id);
    verbs_req_priv_t *priv;

    if (!req) {
        verbs_ep_fail(ep, COLL_ERR_PROTOCOL, "verbs: %s granted send %u, which we do not have",
                      ep->super.desc, h->id);
        return;
    }
    coll_list_del(&req->link);
    if (h->flags & VERBS_CTS_DISCARD) {
        req->complete(req, COLL_OK); /* the receiver reports the mismatch */
        return;
    }
    if (ep_register(ep, req) != COLL_OK)
        return;
    priv = verbs_priv(req);
    tx_init(&priv->tx, VERBS_TX_WRITE, h, NULL, 0, req);
    coll_list_push_back(&ep->txq, &priv->tx.link);
    verbs_ep_kick(ep);
}

static void on_write_sent(verbs_ep_t *ep, uint32_t id)
{
    coll_tp_req_t *req = find_by_id(&ep->writes, id);
    if (!req)
        return; /* failed already */
    coll_list_del(&req->link);
    ep->sq_used -= (int)verbs_priv(req)->pieces;
    verbs_mr_put(&ep->iface->mrs, verbs_priv(req)->mr);
    req->bytes_done = req->len;
    req->complete(req, COLL_OK);
}

/* ---- receiving ---------------------------------------------------------------------- */

/* An RTS met its receive (or none, or one of another size: then the
 * sender is told to drop the message). The CTS goes first in the queue:
 * the sender's data waits for it. */
static void answer_rts(verbs_ep_t *ep, coll_tp_req_t *req, uint32_t send_id, size_t msg_len,
                       uint32_t crc)
{
    verbs_hdr_t h = {.type = VERBS_CTS, .id = send_id};

    if (!req || req->len != msg_len) {
        h.flags = VERBS_CTS_DISCARD;
        if (req)
            coll_match_size_mismatch(req, msg_len);
    } else {
        if (ep_register(ep, req) != COLL_OK)
            return;
        verbs_priv(req)->id = ep->next_recv_id++ & 0xffffff;
        verbs_priv(req)->crc = crc;
        h.aux = verbs_priv(req)->id;
        h.addr = (uintptr_t)req->buf;
        h.rkey = verbs_priv(req)->mr->rkey;
        coll_list_push_back(&ep->rndv_recvs, &req->link);
    }
    verbs_tx_control(ep, &h, 1);
}

coll_status_t verbs_ep_irecv(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    verbs_ep_t *ep = (verbs_ep_t *)tep;
    coll_unexp_t *ux;
    coll_status_t why = COLL_OK;

    verbs_priv(req)->mr = NULL;
    coll_list_init(&verbs_priv(req)->tx.link); /* fail_list unlinks it */
    if (ep->state == VERBS_EP_CLOSED) {
        req->complete(req, ep->error);
        return COLL_OK;
    }
    ux = coll_match_take_unexpected(&ep->match, req->tag);
    if (ux) {
        if (ux->data)
            coll_match_deliver_eager(&ep->match, req, ux);
        else
            answer_rts(ep, req, ux->id, ux->len, (uint32_t)(uintptr_t)ux->ctx);
        free(ux);
        return COLL_OK;
    }
    if (ep->peer_left)
        why = COLL_ERR_PEER_FAILED;
    else if (ep->bye_pending)
        why = COLL_ERR_INVALID_USAGE;
    coll_match_post(&ep->match, req, why);
    return COLL_OK;
}

static void on_eager(verbs_ep_t *ep, const verbs_hdr_t *h, const uint8_t *payload)
{
    coll_tp_req_t *req = coll_match_take_posted(&ep->match, h->tag);

    if (req)
        coll_match_complete_copy(req, payload, h->len);
    else if (coll_match_keep_copy(&ep->match, h->tag, payload, h->len) != 0)
        verbs_ep_fail(ep, COLL_ERR_NO_MEMORY, "verbs: out of memory holding a message from %s",
                      ep->super.desc);
}

static void on_rts(verbs_ep_t *ep, const verbs_hdr_t *h)
{
    coll_tp_req_t *req = coll_match_take_posted(&ep->match, h->tag);

    /* an unexpected one keeps its CRC-32C (COLL_CHECKSUM) in ctx */
    if (req)
        answer_rts(ep, req, h->id, h->len, h->aux);
    else if (coll_match_keep_remote(&ep->match, h->tag, h->len, h->id,
                                    (void *)(uintptr_t)h->aux, 0) != 0)
        verbs_ep_fail(ep, COLL_ERR_NO_MEMORY, "verbs: out of memory holding a message from %s",
                      ep->super.desc);
}

static void on_bye(verbs_ep_t *ep)
{
    ep->peer_left = 1;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: verbs: %s left the communicator",
              ep->iface->super.params.rank, ep->super.desc);
    coll_match_fail_posted(&ep->match, COLL_ERR_PEER_FAILED);
    verbs_ep_fail_pending_rndv(ep, COLL_ERR_PEER_FAILED);
}

/* COLL_CHECKSUM: the link fails, naming itself, and nothing of the
 * message is delivered. */
static int corrupted(verbs_ep_t *ep, const char *what, size_t len, uint32_t got, uint32_t want)
{
    if (got == want)
        return 0;
    verbs_ep_fail(ep, COLL_ERR_DATA_CORRUPTION, "data corruption on the link from %s to rank %d "
                  "(verbs): %s of %zu bytes failed its CRC-32C (computed %08x, sent %08x); its "
                  "message was not delivered", ep->super.desc, ep->iface->super.params.rank,
                  what, len, got, want);
    return 1;
}

/* The test hook (crc32c.h), then the check of a message that RDMA writes
 * brought: 1 when it must not be delivered. */
static int write_corrupted(verbs_ep_t *ep, coll_tp_req_t *req)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;

    if (coll_test_corrupt_due(pr->test_corrupt_frame, req->len))
        ((uint8_t *)req->buf)[0] ^= 0x01;
    return pr->checksum && corrupted(ep, "an RDMA-written message", req->len,
                                     coll_crc32c(0, req->buf, req->len), verbs_priv(req)->crc);
}

/* The same for a message in a receive slot, whose last VERBS_CRC_BYTES are
 * its CRC when checksums are on. */
static int slot_corrupted(verbs_ep_t *ep, const verbs_hdr_t *h, uint8_t *buf, uint32_t bytes)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;
    uint32_t body = bytes - (pr->checksum ? VERBS_CRC_BYTES : 0);

    if (h->type == VERBS_EAGER && h->len == body - VERBS_HDR_BYTES &&
        coll_test_corrupt_due(pr->test_corrupt_frame, h->len))
        buf[VERBS_HDR_BYTES] ^= 0x01;
    return pr->checksum && corrupted(ep, "a message", body, coll_crc32c(0, buf, body),
                                     coll_load_u32(buf + body));
}

static void on_write_done(verbs_ep_t *ep, uint32_t id)
{
    coll_tp_req_t *req = find_by_id(&ep->rndv_recvs, id);
    if (!req) {
        verbs_ep_fail(ep, COLL_ERR_PROTOCOL, "verbs: %s finished writing receive %u, which we "
                      "do not have", ep->super.desc, id);
        return;
    }
    coll_list_del(&req->link);
    verbs_mr_put(&ep->iface->mrs, verbs_priv(req)->mr);
    if (write_corrupted(ep, req)) {
        req->complete(req, COLL_ERR_DATA_CORRUPTION); /* in no list */
        return;
    }
    req->bytes_done = req->len;
    req->complete(req, COLL_OK);
}

/* One message in a receive slot. Returns 1 if it took a credit. */
static int on_message(verbs_ep_t *ep, uint8_t *buf, uint32_t bytes)
{
    uint32_t crc_bytes = ep->iface->super.params.checksum ? VERBS_CRC_BYTES : 0;
    verbs_hdr_t h;

    if (bytes < VERBS_HDR_BYTES + crc_bytes) {
        verbs_ep_fail(ep, COLL_ERR_PROTOCOL, "verbs: %s sent a %u-byte message", ep->super.desc,
                      bytes);
        return 0;
    }
    verbs_hdr_decode(buf, &h);
    if (slot_corrupted(ep, &h, buf, bytes))
        return 0;
    bytes -= crc_bytes;
    ep->tx_credits += h.credits;
    if (ep->tx_credits > (int)ep->peer.credits - VERBS_CREDIT_RESERVE) {
        verbs_ep_fail(ep, COLL_ERR_PROTOCOL, "verbs: %s returned more credits than it had",
                      ep->super.desc);
        return 0;
    }
    if (h.type == VERBS_EAGER && h.len == bytes - VERBS_HDR_BYTES)
        on_eager(ep, &h, buf + VERBS_HDR_BYTES);
    else if (h.type == VERBS_RTS && h.len > VERBS_EAGER_MAX)
        on_rts(ep, &h);
    else if (h.type == VERBS_CTS)
        on_cts(ep, &h);
    else if (h.type == VERBS_BYE)
        on_bye(ep);
    else if (h.type != VERBS_CREDIT)
        verbs_ep_fail(ep, COLL_ERR_PROTOCOL, "verbs: %s sent a malformed message (type %u, "
                      "%llu bytes in %u)", ep->super.desc, h.type, (unsigned long long)h.len,
                      bytes);
    return h.type != VERBS_CREDIT;
}

static const char *wc_what(const struct ibv_wc *wc)
{
    switch (VERBS_WR_KIND(wc->wr_id)) {
    case VERBS_WR_RECV: return "receive from";
    case VERBS_WR_SEND: return "send to";
    default: return "RDMA write to";
    }
}

void verbs_ep_on_wc(verbs_ep_t *ep, const struct ibv_wc *wc)
{
    int kind = VERBS_WR_KIND(wc->wr_id), counted = 1;
    uint32_t idx = VERBS_WR_IDX(wc->wr_id);

    if (ep->state == VERBS_EP_CLOSED)
        return; /* flushed work of an endpoint we gave up */
    if (wc->status != IBV_WC_SUCCESS) {
        verbs_ep_fail(ep, COLL_ERR_PEER_FAILED, "verbs: %s %s failed: %s (status %d, vendor "
                      "error 0x%x)", wc_what(wc), ep->super.desc, ibv_wc_status_str(wc->status),
                      (int)wc->status, wc->vendor_err);
        return;
    }
    if (kind == VERBS_WR_RECV) {
        if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
            on_write_done(ep, ntohl(wc->imm_data));
        else
            counted = on_message(ep, slot_buf(ep, idx), wc->byte_len);
        if (ep->state == VERBS_EP_CLOSED)
            return;
        if (verbs_post_recv(ep, idx) != COLL_OK) {
            verbs_ep_fail(ep, COLL_ERR_SYSTEM, "%s", coll_error_thread());
            return;
        }
        ep->owed += counted;
    } else if (kind == VERBS_WR_SEND) {
        ep->free_slots[ep->nfree_slots++] = idx;
        ep->sq_used--;
    } else {
        on_write_sent(ep, idx);
    }
    verbs_ep_kick(ep);
}

/* ---- failing ------------------------------------------------------------------------ */

static void fail_list(verbs_ep_t *ep, coll_list_t *list, coll_status_t status)
{
    while (!coll_list_empty(list)) {
        coll_tp_req_t *req = coll_list_first(list, coll_tp_req_t, link);
        verbs_req_priv_t *priv = verbs_priv(req);
        coll_list_del(&req->link);
        coll_list_del(&priv->tx.link); /* an RTS still queued */
        if (priv->mr)
            verbs_mr_put(&ep->iface->mrs, priv->mr);
        priv->mr = NULL;
        req->complete(req, status);
    }
}

void verbs_ep_fail_pending_rndv(verbs_ep_t *ep, coll_status_t status)
{
    fail_list(ep, &ep->rndv_sends, status);
    fail_list(ep, &ep->rndv_recvs, status);
}

void verbs_ep_fail_requests(verbs_ep_t *ep, coll_status_t status)
{
    /* The queue first: once a request completes, its memory is the core's. */
    while (!coll_list_empty(&ep->txq)) {
        verbs_tx_t *tx = coll_list_first(&ep->txq, verbs_tx_t, link);
        coll_tp_req_t *req = tx->req;
        coll_list_del(&tx->link);
        if (tx->heap)
            free(tx);
        if (req) {
            if (verbs_priv(req)->mr)
                verbs_mr_put(&ep->iface->mrs, verbs_priv(req)->mr);
            verbs_priv(req)->mr = NULL;
            req->complete(req, status);
        }
    }
    verbs_ep_fail_pending_rndv(ep, status);
    fail_list(ep, &ep->writes, status);
    coll_match_fail_posted(&ep->match, status);
}
