/*
 * ofi_msg.c: messages over libfabric: tagged sends and receives posted
 * with our own operation records, their completions and completion
 * errors, control messages, and cancelling what an endpoint still has
 * posted when it closes.
 *
 * Sizes: a receive of more bytes than were sent completes with the
 * sender's length (the core reports a size mismatch with it); a message
 * longer than the receive fails with FI_ETRUNC, whose overflow length
 * gives the sender's length.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "ofi.h"

ofi_op_t *ofi_op_alloc(ofi_iface_t *iface, ofi_ep_t *ep, int kind, coll_tp_req_t *req)
{
    ofi_op_t *op;

    if (!coll_list_empty(&iface->free_ops)) {
        op = coll_list_first(&iface->free_ops, ofi_op_t, link);
        coll_list_del(&op->link);
    } else if (!(op = malloc(sizeof(*op)))) {
        return NULL;
    }
    memset(op, 0, offsetof(ofi_op_t, ctl));
    op->iface = iface;
    op->ep = ep;
    op->kind = kind;
    op->req = req;
    return op;
}

static ofi_op_t *op_alloc(ofi_ep_t *ep, int kind, coll_tp_req_t *req)
{
    return ofi_op_alloc(ep->iface, ep, kind, req);
}

void ofi_op_free(ofi_iface_t *iface, ofi_op_t *op)
{
    if (op->mr)
        ofi_mr_put(iface, op->mr);
    op->mr = NULL;
    coll_list_push_back(&iface->free_ops, &op->link);
}

static int op_is_send(const ofi_op_t *op)
{
    return op->kind == OFI_OP_SEND || op->kind == OFI_OP_CTL_SEND ||
           op->kind == OFI_OP_FRAME_SEND;
}

/* A payload receive of our own matching: those are counted, so that
 * frame receives always find room (ofi_match.c). */
static int op_is_data_rx(const ofi_op_t *op)
{
    return op->kind == OFI_OP_RECV && op->iface->sw_match;
}

/* A frame: its header, then the payload of an eager send. */
static ssize_t post_framed(ofi_op_t *op, void *desc, uint64_t tag)
{
    struct iovec iov[2] = {{&op->frame, sizeof(op->frame)}, {op->buf, op->len}};
    void *descs[2] = {NULL, desc};

    return fi_tsendv(op->iface->ep, iov, descs, op->len ? 2 : 1, op->ep->addr, tag, &op->fictx);
}

static ssize_t post_raw(ofi_op_t *op)
{
    ofi_ep_t *ep = op->ep;
    ofi_iface_t *iface = op->iface;
    void *desc = op->mr ? op->mr->desc : NULL;
    void *buf = op->buf;
    size_t len = op->len;
    uint64_t tag = ofi_tag(iface, op->tag), ignore = op->ignore;

    if (op->framed)
        return post_framed(op, desc, tag);
    /* the length travels as remote CQ data: a receive too short for the
     * message learns it from the truncation error, where providers do not
     * always fill the overflow length */
    if (op->kind == OFI_OP_SEND && iface->cq_data)
        return fi_tsenddata(iface->ep, buf, len, desc, len, ep->addr, tag, &op->fictx);
    if (op_is_send(op))
        return fi_tsend(iface->ep, buf, len, desc, ep->addr, tag, &op->fictx);
    /* Control and frame receives take any source: a HELLO can arrive
     * before we inserted its sender's address, and some providers (shm)
     * then match it to no directed receive, or to the wrong one; its tag
     * (a frame's header) names the sender instead. */
    return fi_trecv(iface->ep, buf, len, desc,
                    op->kind == OFI_OP_RECV ? ep->addr : FI_ADDR_UNSPEC, tag, ignore,
                    &op->fictx);
}

static ssize_t post(ofi_op_t *op)
{
    ofi_iface_t *iface = op->iface;
    ssize_t rc;

    if (op_is_data_rx(op) && iface->data_rx >= iface->data_rx_max)
        return -FI_EAGAIN;
    rc = post_raw(op);
    if (rc == 0 && op_is_data_rx(op))
        iface->data_rx++;
    return rc;
}

/* Posted: what waited for that (a CTS) goes. */
static void on_posted(ofi_op_t *op)
{
    if (op->cts_due)
        ofi_match_posted(op);
}

ssize_t ofi_post_frame_recv(ofi_op_t *op)
{
    return post(op);
}

/* The provider's queue is full (shm: -FI_ENOMEM past rx_attr->size
 * receives): the op waits in the backlog, in order. */
static int queue_full(ssize_t rc)
{
    return rc == -FI_EAGAIN || rc == -FI_ENOMEM;
}

/* A post failed for good: the link is broken. */
static void post_failed(ofi_op_t *op, ssize_t rc)
{
    ofi_ep_t *ep = op->ep;
    coll_tp_req_t *req = op->req;

    ep->nsends -= op_is_send(op);
    ofi_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s: posting a %s of %zu bytes failed: %s",
                ep->super.desc, op_is_send(op) ? "send" : "receive", op->len,
                fi_strerror((int)-rc));
    ofi_op_free(ep->iface, op);
    if (req)
        req->complete(req, ep->error);
}

/* Sends and receives wait apart: one queue for both could hold a send
 * behind a receive that waits for room that only that send's peer can
 * free (every rank's receive queue full of receives for messages stuck
 * behind receives). */
static coll_list_t *backlog_of(ofi_op_t *op)
{
    return op_is_send(op) ? &op->iface->backlog_tx : &op->iface->backlog_rx;
}

/* Post `op`, or queue it behind others waiting for room (everything after
 * a queued op queues too, which keeps the send order). On failure the op
 * is freed, the link failed and the request (if any) completed. */
coll_status_t ofi_post_op(ofi_ep_t *ep, ofi_op_t *op, void *buf, size_t len, uint64_t tag,
                          uint64_t ignore)
{
    ofi_iface_t *iface = ep->iface;
    coll_status_t st;
    ssize_t rc = -FI_EAGAIN;

    op->buf = buf;
    op->len = len;
    op->tag = tag;
    op->ignore = ignore;
    if (iface->need_mr && len && (st = ofi_mr_get(iface, buf, len, &op->mr)) != COLL_OK) {
        coll_tp_req_t *req = op->req;
        ofi_op_free(iface, op);
        if (req)
            req->complete(req, st);
        return st;
    }
    ep->nsends += op_is_send(op);
    if (coll_list_empty(backlog_of(op)))
        rc = post(op);
    if (rc == 0) {
        coll_list_push_back(&ep->ops, &op->link);
        on_posted(op);
    } else if (queue_full(rc)) {
        op->queued = 1;
        coll_list_push_back(backlog_of(op), &op->link);
    } else {
        post_failed(op, rc);
        return COLL_ERR_PEER_FAILED;
    }
    return COLL_OK;
}

/* Post what waits for room, oldest first, until the provider is full. */
static void post_queued(coll_list_t *backlog)
{
    while (!coll_list_empty(backlog)) {
        ofi_op_t *op = coll_list_first(backlog, ofi_op_t, link);
        ssize_t rc = post(op);
        if (queue_full(rc))
            return;
        coll_list_del(&op->link);
        op->queued = 0;
        if (rc != 0) {
            post_failed(op, rc);
            continue;
        }
        coll_list_push_back(&op->ep->ops, &op->link);
        on_posted(op);
        /* one side left while it waited: only a message already there can
         * still match it */
        if (op->kind == OFI_OP_RECV && (op->ep->peer_left || op->ep->leaving))
            ofi_ep_cancel_ops(op->ep, op->ep->leaving ? COLL_ERR_INVALID_USAGE
                                                      : COLL_ERR_PEER_FAILED, 0);
    }
}

void ofi_post_backlog(ofi_iface_t *iface)
{
    ofi_match_repost(iface);
    post_queued(&iface->backlog_tx);
    post_queued(&iface->backlog_rx);
}

coll_status_t ofi_post_ctl_recv(ofi_ep_t *ep)
{
    ofi_op_t *op = op_alloc(ep, OFI_OP_CTL_RECV, NULL);

    if (!op)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
    /* any control type: the low bits are ignored */
    return ofi_post_op(ep, op, &op->ctl, sizeof(op->ctl), ofi_ctl_tag(ep->super.peer, 0), 0xff);
}

coll_status_t ofi_send_ctl(ofi_ep_t *ep, uint32_t type, const char *text)
{
    ofi_op_t *op = op_alloc(ep, OFI_OP_CTL_SEND, NULL);
    size_t len = offsetof(ofi_ctl_t, text);

    if (!op)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
    op->ctl.magic = OFI_CTL_MAGIC;
    op->ctl.type = type;
    op->ctl.rank = (uint32_t)ep->iface->super.params.rank;
    op->ctl.nranks = (uint32_t)ep->iface->super.params.nranks;
    op->ctl.src_nonce = ep->iface->nonce;
    op->ctl.dst_nonce = ep->peer_nonce;
    op->ctl.frames = ep->frames_out;
    if (text) {
        snprintf(op->ctl.text, sizeof(op->ctl.text), "%s", text);
        len += strlen(op->ctl.text) + 1;
    }
    return ofi_post_op(ep, op, &op->ctl, len, ofi_ctl_tag(ep->iface->super.params.rank, type), 0);
}

/* A request the endpoint cannot take: what it says about the link. */
static coll_status_t closed_status(const ofi_ep_t *ep, int sending)
{
    if (ep->error != COLL_OK)
        return ep->error;
    if (ep->leaving)
        return sending ? COLL_ERR_PEER_FAILED : COLL_ERR_INVALID_USAGE;
    return COLL_ERR_PEER_FAILED;
}

coll_status_t ofi_ep_isend(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    ofi_ep_t *ep = (ofi_ep_t *)tep;
    ofi_op_t *op;

    if (ep->state == OFI_EP_CLOSED || ep->peer_left) {
        req->complete(req, closed_status(ep, 1));
        return COLL_OK;
    }
    if (ep->iface->sw_match)
        return ofi_match_isend(ep, req);
    if (!(op = op_alloc(ep, OFI_OP_SEND, req))) {
        req->complete(req, COLL_ERR_NO_MEMORY);
        return COLL_OK;
    }
    ofi_post_op(ep, op, req->buf, req->len, req->tag, 0);
    return COLL_OK;
}

coll_status_t ofi_ep_irecv(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    ofi_ep_t *ep = (ofi_ep_t *)tep;
    ofi_op_t *op;

    if (ep->state == OFI_EP_CLOSED) {
        req->complete(req, closed_status(ep, 0));
        return COLL_OK;
    }
    if (ep->iface->sw_match) {
        ofi_match_irecv(ep, req);
        return COLL_OK;
    }
    if (!(op = op_alloc(ep, OFI_OP_RECV, req))) {
        req->complete(req, COLL_ERR_NO_MEMORY);
        return COLL_OK;
    }
    if (ofi_post_op(ep, op, req->buf, req->len, req->tag, 0) != COLL_OK)
        return COLL_OK;
    /* The peer left: only a message it sent before (and the provider
     * holds) can match; cancelling finds out. */
    if (ep->peer_left)
        ofi_ep_cancel_ops(ep, COLL_ERR_PEER_FAILED, 0);
    return COLL_OK;
}

static void complete_req(ofi_op_t *op, coll_status_t st, size_t bytes)
{
    coll_tp_req_t *req = op->req;

    op->req = NULL;
    if (!req)
        return;
    if (st == COLL_OK && op->kind == OFI_OP_RECV && bytes != req->len) {
        req->bytes_done = bytes; /* the sender's length, for the message */
        req->complete(req, COLL_ERR_SIZE_MISMATCH);
        return;
    }
    if (st == COLL_OK)
        req->bytes_done = bytes;
    req->complete(req, st);
}

/* Take `op` off its endpoint's list; NULL if the endpoint is gone. */
static ofi_ep_t *op_detach(ofi_op_t *op)
{
    ofi_ep_t *ep = op->ep;

    coll_list_del(&op->link);
    if (op_is_data_rx(op))
        op->iface->data_rx--;
    if (ep)
        ep->nsends -= op_is_send(op);
    return ep;
}

void ofi_on_completion(ofi_iface_t *iface, const struct fi_cq_tagged_entry *e)
{
    ofi_op_t *op = e->op_context;
    ofi_ep_t *ep = op_detach(op);

    if (ep && (op->kind == OFI_OP_RECV || op->kind == OFI_OP_CTL_RECV))
        ep->last_rx_ns = coll_time_ns();
    switch (op->kind) {
    case OFI_OP_SEND:
        complete_req(op, COLL_OK, op->req ? op->req->len : 0);
        break;
    case OFI_OP_RECV:
        complete_req(op, COLL_OK, e->len);
        break;
    case OFI_OP_CTL_SEND:
        if (ep && op->ctl.type == OFI_CTL_BYE)
            ep->bye_done = coll_time_ns();
        break;
    case OFI_OP_CTL_RECV:
        if (ep && ep->error == COLL_OK) {
            ofi_ep_on_ctl(ep, &op->ctl, e->len);
            if (ep->error == COLL_OK && !ep->peer_left)
                ofi_post_ctl_recv(ep);
        }
        break;
    case OFI_OP_FRAME_RECV:
        ofi_match_on_frame(iface, op, e->len);
        break;
    case OFI_OP_FRAME_SEND:
        break;
    }
    ofi_op_free(iface, op);
}

static const char *op_what(const ofi_op_t *op)
{
    switch (op->kind) {
    case OFI_OP_SEND: return "send";
    case OFI_OP_RECV: return "receive";
    case OFI_OP_CTL_SEND: return "control send";
    case OFI_OP_FRAME_SEND: return "frame send";
    case OFI_OP_FRAME_RECV: return "frame receive";
    default: return "control receive";
    }
}

void ofi_on_cq_error(ofi_iface_t *iface, const struct fi_cq_err_entry *err)
{
    ofi_op_t *op = err->op_context;
    char prov[128] = "";
    ofi_ep_t *ep;

    if (!op) {
        COLL_WARN(COLL_SUBSYS_NET, "rank %d: ofi: %s reported an error of no operation: %s",
                  iface->super.params.rank, ofi_prov_name(iface), fi_strerror(err->err));
        return;
    }
    ep = op_detach(op);
    if (op->kind == OFI_OP_FRAME_RECV) {
        ofi_match_frame_failed(iface, op, err->err);
        ofi_op_free(iface, op);
        return;
    }
    COLL_TRACE(COLL_SUBSYS_NET, "rank %d: ofi: %s to/from %s completed with %s (%d, olen %zu)",
               iface->super.params.rank, op_what(op), ep ? ep->super.desc : "a closed endpoint",
               fi_strerror(abs(err->err)), err->err, err->olen);
    if (abs(err->err) == FI_ECANCELED) {
        complete_req(op, op->cancelled ? op->cancelled : COLL_ERR_ABORTED, 0);
    } else if (abs(err->err) == FI_ETRUNC && op->kind == OFI_OP_RECV && op->req) {
        /* the sender's length, for the message, where the provider says it
         * (libfabric 1.17's shm gives neither the data nor olen here) */
        size_t sent = (err->flags & FI_REMOTE_CQ_DATA) ? (size_t)err->data : 0;
        if (sent <= op->req->len)
            sent = err->olen ? op->req->len + err->olen : SIZE_MAX;
        op->req->bytes_done = sent;
        coll_tp_req_t *req = op->req;
        op->req = NULL;
        req->complete(req, COLL_ERR_SIZE_MISMATCH);
    } else if (ep && (ep->leaving || ep->peer_left)) {
        /* one side left: its endpoint may be gone before our last words */
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: ofi: %s to %s after leaving: %s",
                   iface->super.params.rank, op_what(op), ep->super.desc, fi_strerror(err->err));
        complete_req(op, COLL_ERR_PEER_FAILED, 0);
    } else if (ep) {
        /* the provider says the link is broken: name the peer */
        fi_cq_strerror(iface->cq, err->prov_errno, err->err_data, prov, sizeof(prov));
        ofi_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s: %s of %zu bytes failed: %s (%s: %s)",
                    ep->super.desc, op_what(op), op->req ? op->req->len : err->len,
                    fi_strerror(err->err), ofi_prov_name(iface), prov);
        complete_req(op, ep->error, 0);
    } else {
        complete_req(op, COLL_ERR_PEER_FAILED, 0);
    }
    if (ep && op->kind == OFI_OP_CTL_SEND && op->ctl.type == OFI_CTL_BYE)
        ep->bye_done = coll_time_ns();
    ofi_op_free(iface, op);
}

static void cancel_queued(ofi_ep_t *ep, coll_list_t *backlog, coll_status_t status)
{
    coll_list_t *pos, *tmp;

    coll_list_for_each_safe(pos, tmp, backlog) {
        ofi_op_t *op = coll_container_of(pos, ofi_op_t, link);
        if (op->ep != ep)
            continue;
        coll_list_del(&op->link);
        ep->nsends -= op_is_send(op);
        complete_req(op, status, 0);
        ofi_op_free(ep->iface, op);
    }
}

/* include_sends (the link failed): every op, its request failed at once
 * with `status`. Otherwise (we or the peer left): data receives only,
 * failed with `status` when libfabric confirms the cancel; one that a
 * message matched meanwhile completes normally. */
void ofi_ep_cancel_ops(ofi_ep_t *ep, coll_status_t status, int include_sends)
{
    coll_list_t *pos, *tmp;

    /* never posted: nothing to ask libfabric */
    /* (a queued receive is not failed when one side leaves: the message
     * it waits for may be in the provider already; it is posted, then
     * cancelled, by post_queued) */
    if (include_sends) {
        cancel_queued(ep, &ep->iface->backlog_tx, status);
        cancel_queued(ep, &ep->iface->backlog_rx, status);
    }
    if (ep->iface->sw_match)
        ofi_match_cancel(ep, status, include_sends);
    coll_list_for_each_safe(pos, tmp, &ep->ops) {
        ofi_op_t *op = coll_container_of(pos, ofi_op_t, link);
        if (!include_sends && (op->kind != OFI_OP_RECV || op->cancelled))
            continue;
        if (!op->cancelled) {
            op->cancelled = status;
            fi_cancel(&ep->iface->ep->fid, &op->fictx);
        }
        if (include_sends)
            complete_req(op, status, 0);
    }
}
