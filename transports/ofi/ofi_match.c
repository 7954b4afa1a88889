/*
 * ofi_match.c: matching of our own, for providers whose tag matching
 * deadlocks when receives are posted in another order than messages
 * arrive. libfabric 1.17's shm is one: a receiving endpoint holds at most
 * rx_attr->size (1024) posted receives and as many unexpected messages,
 * and reads its command queue in order, so once the unexpected ones fill
 * their pool the message at the head waits for a receive, and every
 * message behind it (those our posted receives wait for) waits too. With
 * more receives wanted than the provider takes (ours wait in the backlog)
 * nothing moves again: the head's receive is in our backlog, behind
 * receives that wait for messages behind the head. (libfabric's efa
 * provider copies shm's unexpected messages out of its receive pool for
 * the same reason, ofiwg/libfabric#7099; shm's own unexpected pool is
 * discussed in #10693.) libfabric's tcp;ofi_rxm before 1.18 is another:
 * once an eager message is truncated into a shorter receive, later
 * messages between the pair can stop arriving (ofiwg/libfabric#8974), so
 * a mismatch that should fail one receive hangs the communicator.
 *
 * So the provider here matches nothing of ours: every message starts as a
 * frame (ofi_frame_t) sent with one tag, into one of nslots receives that
 * take any frame from anyone; we match it to the core's receives
 * (util/match.h, as tcp does) and keep what is unexpected ourselves, so
 * the provider's unexpected pool only holds frames for the moment until a
 * frame receive is posted again, and a frame never overflows its receive.
 * Payloads up to eager_max bytes travel in the frame (shm: its inject
 * size, copied at once; otherwise a 16 KiB slot); larger ones by
 * rendezvous: RTS, then, once the receive is posted to the provider under
 * an id of the receiver's, CTS, then the payload with that id in its tag.
 * Payload receives are kept below data_rx_max, so that frame and control
 * receives always find room. Frames from one peer complete in the order
 * it sent them (FI_ORDER_SAS), which keeps equal tags in order.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "ofi.h"

/* Frame receives posted at once: a burst larger than this waits in the
 * provider's unexpected pool until the next progress call reposts them. */
#define OFI_FRAME_SLOTS 64
/* A frame receive's buffer where the provider's inject size does not
 * bound it. tcp;ofi_rxm sends up to 16 KiB eagerly; p2p latency over
 * libfabric 1.17's tcp: a frame of 4 or 8 KiB 18.7-19.8 us, the
 * rendezvous (RTS, CTS, payload) 44-48 us, the provider's matching 18.6-19.3 us */
#define OFI_EAGER_SLOT 16384
/* Receives left free besides frames and one control receive per peer. */
#define OFI_RX_MARGIN 16

/* A rendezvous send's id, in its request's scratch. */
static uint32_t *send_id(coll_tp_req_t *req)
{
    return (uint32_t *)req->scratch;
}

/* Post a frame receive; without room in the provider it waits for the
 * next progress call. 0, or -1 while it waits. */
static int post_slot(ofi_iface_t *iface, ofi_op_t *op)
{
    ssize_t rc = ofi_post_frame_recv(op);

    if (rc == -FI_EAGAIN || rc == -FI_ENOMEM)
        return -1;
    if (rc == 0) {
        coll_list_push_back(&iface->frame_recvs, &op->link);
    } else {
        /* the endpoint is broken: every link fails on its own */
        COLL_WARN(COLL_SUBSYS_NET, "rank %d: ofi: posting a frame receive failed: %s",
                  iface->super.params.rank, fi_strerror((int)-rc));
        ofi_op_free(iface, op);
    }
    return 0;
}

static coll_status_t new_slot(ofi_iface_t *iface, int slot)
{
    ofi_op_t *op = ofi_op_alloc(iface, NULL, OFI_OP_FRAME_RECV, NULL);

    if (!op)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
    op->slot = slot;
    op->buf = iface->slots + (size_t)slot * iface->slot_bytes;
    op->len = iface->slot_bytes;
    op->tag = OFI_FRAME_TAG;
    if (post_slot(iface, op) != 0)
        coll_list_push_back(&iface->frame_idle, &op->link);
    return COLL_OK;
}

coll_status_t ofi_match_open(ofi_iface_t *iface)
{
    const struct fi_info *info = iface->info;
    int64_t rx = info->rx_attr->size ? (int64_t)info->rx_attr->size : INT32_MAX;

    /* where waiters poll (shm), a send above the inject size needs the
     * peer's progress, so eager frames stay within it; elsewhere (tcp) a
     * frame of a few KiB completes as one socket write and saves the
     * rendezvous's round trip */
    size_t slot = iface->busy_poll ? info->tx_attr->inject_size : OFI_EAGER_SLOT;
    iface->slot_bytes = slot > sizeof(ofi_frame_t) ? slot : sizeof(ofi_frame_t);
    iface->eager_max = iface->slot_bytes - sizeof(ofi_frame_t);
    iface->nslots = OFI_FRAME_SLOTS;
    iface->data_rx_max = (int)COLL_MIN(rx - OFI_FRAME_SLOTS - iface->super.params.nranks -
                                       OFI_RX_MARGIN, INT32_MAX);
    if (iface->data_rx_max < 1)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_UNSUPPORTED, "rank %d: ofi: %s takes %lld "
                          "posted receives, too few for %d frame receives and %d ranks",
                          iface->super.params.rank, ofi_prov_name(iface), (long long)rx,
                          OFI_FRAME_SLOTS, iface->super.params.nranks);
    iface->slots = malloc((size_t)iface->nslots * iface->slot_bytes);
    if (!iface->slots)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
    for (int i = 0; i < iface->nslots; i++)
        COLL_CHECK(new_slot(iface, i));
    return COLL_OK;
}

void ofi_match_repost(ofi_iface_t *iface)
{
    while (!coll_list_empty(&iface->frame_idle)) {
        ofi_op_t *op = coll_list_first(&iface->frame_idle, ofi_op_t, link);
        coll_list_del(&op->link);
        if (post_slot(iface, op) != 0) {
            coll_list_insert_after(&iface->frame_idle, &op->link);
            return;
        }
    }
}

void ofi_match_ep_init(ofi_ep_t *ep)
{
    coll_match_init(&ep->match, NULL);
    coll_list_init(&ep->rndv_sends);
}

static void send_frame(ofi_ep_t *ep, const ofi_frame_t *f, coll_tp_req_t *req, void *buf,
                       size_t len)
{
    ofi_op_t *op = ofi_op_alloc(ep->iface, ep, req ? OFI_OP_SEND : OFI_OP_FRAME_SEND, req);

    if (!op) {
        ofi_ep_fail(ep, COLL_ERR_NO_MEMORY, "ofi: out of memory sending to %s", ep->super.desc);
        if (req)
            req->complete(req, COLL_ERR_NO_MEMORY);
        return;
    }
    op->framed = 1;
    ep->frames_out++;
    op->frame = *f;
    op->frame.rank = (uint32_t)ep->iface->super.params.rank;
    ofi_post_op(ep, op, buf, len, OFI_FRAME_TAG, 0);
}

static void send_cts(ofi_ep_t *ep, uint32_t id, uint32_t aux, uint8_t flags)
{
    ofi_frame_t f = {.type = OFI_FRAME_CTS, .flags = flags, .id = id, .aux = aux};
    send_frame(ep, &f, NULL, NULL, 0);
}

coll_status_t ofi_match_isend(ofi_ep_t *ep, coll_tp_req_t *req)
{
    ofi_frame_t f = {.tag = req->tag, .len = req->len};

    if (req->len <= ep->iface->eager_max) {
        f.type = OFI_FRAME_EAGER;
        send_frame(ep, &f, req, req->buf, req->len);
        return COLL_OK;
    }
    /* counted as a send until the CTS comes: a flush waits for it */
    f.type = OFI_FRAME_RTS;
    f.id = *send_id(req) = ep->next_send_id++;
    coll_list_push_back(&ep->rndv_sends, &req->link);
    ep->nsends++;
    send_frame(ep, &f, NULL, NULL, 0);
    return COLL_OK;
}

/* An RTS met its receive (or none, or one of another size: the sender is
 * told to drop the message). The CTS goes once the payload's receive is
 * posted (ofi_match_posted): a payload never waits in the provider. */
static void answer_rts(ofi_ep_t *ep, coll_tp_req_t *req, uint32_t id, size_t len)
{
    uint32_t rid = ep->next_recv_id++;
    ofi_op_t *op;

    if (!req || req->len != len) {
        if (req)
            coll_match_size_mismatch(req, len);
        send_cts(ep, id, 0, OFI_CTS_DISCARD);
        return;
    }
    if (!(op = ofi_op_alloc(ep->iface, ep, OFI_OP_RECV, req))) {
        req->complete(req, COLL_ERR_NO_MEMORY);
        send_cts(ep, id, 0, OFI_CTS_DISCARD);
        return;
    }
    op->cts_due = 1;
    op->frame.id = id;
    op->frame.aux = rid;
    ofi_post_op(ep, op, req->buf, req->len, OFI_PAYLOAD_TAG | rid, 0);
}

void ofi_match_posted(ofi_op_t *op)
{
    op->cts_due = 0;
    send_cts(op->ep, op->frame.id, op->frame.aux, 0);
}

void ofi_match_irecv(ofi_ep_t *ep, coll_tp_req_t *req)
{
    coll_unexp_t *ux = coll_match_take_unexpected(&ep->match, req->tag);

    /* the peer's frames all came before its BYE: what is not here never comes */
    if (!ux) {
        coll_match_post(&ep->match, req, ep->peer_left ? COLL_ERR_PEER_FAILED : COLL_OK);
        return;
    }
    if (ux->data)
        coll_match_deliver_eager(&ep->match, req, ux);
    else if (!ep->peer_left)
        answer_rts(ep, req, ux->id, ux->len);
    else
        req->complete(req, COLL_ERR_PEER_FAILED);
    free(ux);
}

static void on_eager(ofi_ep_t *ep, const ofi_frame_t *f, const void *payload)
{
    coll_tp_req_t *req = coll_match_take_posted(&ep->match, f->tag);

    if (req) {
        coll_match_complete_copy(req, payload, f->len);
    } else if (!ep->leaving && /* once we left, nothing asks for it */
               coll_match_keep_copy(&ep->match, f->tag, payload, f->len) != 0) {
        ofi_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot buffer a %llu-byte message from %s",
                    (unsigned long long)f->len, ep->super.desc);
    }
}

static void on_rts(ofi_ep_t *ep, const ofi_frame_t *f)
{
    coll_tp_req_t *req = coll_match_take_posted(&ep->match, f->tag);

    if (req || ep->leaving)
        answer_rts(ep, req, f->id, f->len);
    else if (coll_match_keep_remote(&ep->match, f->tag, f->len, f->id, NULL, 0) != 0)
        ofi_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot record a message from %s", ep->super.desc);
}

static void on_cts(ofi_ep_t *ep, const ofi_frame_t *f)
{
    coll_list_t *pos, *tmp;
    coll_tp_req_t *req = NULL;
    ofi_op_t *op;

    coll_list_for_each_safe(pos, tmp, &ep->rndv_sends) {
        coll_tp_req_t *r = coll_container_of(pos, coll_tp_req_t, link);
        if (*send_id(r) == f->id) {
            req = r;
            break;
        }
    }
    if (!req) {
        ofi_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent a clear-to-send for unknown message %u",
                    ep->super.desc, f->id);
        return;
    }
    coll_list_del(&req->link);
    ep->nsends--;
    if (f->flags & OFI_CTS_DISCARD) {
        req->complete(req, COLL_OK); /* the receiver reports the mismatch */
        return;
    }
    if (!(op = ofi_op_alloc(ep->iface, ep, OFI_OP_SEND, req))) {
        req->complete(req, COLL_ERR_NO_MEMORY);
        return;
    }
    ofi_post_op(ep, op, req->buf, req->len, OFI_PAYLOAD_TAG | f->aux, 0);
}

/* Which endpoint a frame is from: its header names the sender. */
static ofi_ep_t *frame_ep(ofi_iface_t *iface, const ofi_frame_t *f, size_t len)
{
    int rank = iface->super.params.rank;

    if (len < sizeof(*f) || f->rank >= (uint32_t)iface->super.params.nranks ||
        !iface->eps[f->rank]) {
        COLL_WARN(COLL_SUBSYS_NET, "rank %d: ofi: dropped a frame of %zu bytes from %s rank",
                  rank, len, len < sizeof(*f) ? "an unknown" : "a stranger or unconnected");
        return NULL;
    }
    return iface->eps[f->rank];
}

/* A frame from a peer whose link stands. */
static void on_frame_of(ofi_ep_t *ep, const ofi_frame_t *f, const uint8_t *buf, size_t len)
{
    ep->last_rx_ns = coll_time_ns();
    switch (f->type) {
    case OFI_FRAME_EAGER:
        if (f->len != len - sizeof(*f)) {
            ofi_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent %zu bytes in an eager frame of %llu",
                        ep->super.desc, len - sizeof(*f), (unsigned long long)f->len);
            return;
        }
        on_eager(ep, f, buf + sizeof(*f));
        break;
    case OFI_FRAME_RTS:
        on_rts(ep, f);
        break;
    case OFI_FRAME_CTS:
        on_cts(ep, f);
        break;
    default:
        ofi_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent frame type %u", ep->super.desc, f->type);
    }
}

/* Every frame counts, for the BYE that waits for them. */
static void on_frame(ofi_iface_t *iface, const uint8_t *buf, size_t len)
{
    ofi_frame_t f;
    ofi_ep_t *ep;

    memcpy(&f, buf, len < sizeof(f) ? len : sizeof(f));
    if (!(ep = frame_ep(iface, &f, len)))
        return;
    ep->frames_in++;
    if (ep->error == COLL_OK)
        on_frame_of(ep, &f, buf, len);
    ofi_ep_bye_check(ep);
}

void ofi_match_on_frame(ofi_iface_t *iface, ofi_op_t *op, size_t len)
{
    on_frame(iface, op->buf, len);
    /* its slot takes the next frame (op itself is freed by the caller) */
    if (new_slot(iface, op->slot) != COLL_OK)
        COLL_WARN(COLL_SUBSYS_NET, "rank %d: ofi: a frame receive is lost (out of memory)",
                  iface->super.params.rank);
}

void ofi_match_frame_failed(ofi_iface_t *iface, ofi_op_t *op, int err)
{
    if (abs(err) == FI_ECANCELED)
        return; /* the endpoint is closing */
    COLL_WARN(COLL_SUBSYS_NET, "rank %d: ofi: a frame receive failed: %s",
              iface->super.params.rank, fi_strerror(abs(err)));
    new_slot(iface, op->slot);
}

void ofi_match_cancel(ofi_ep_t *ep, coll_status_t status, int include_sends)
{
    /* every frame the peer sent before it left (or before we did) is here */
    coll_match_fail_posted(&ep->match, status);
    if (!include_sends && !ep->peer_left)
        return;
    /* a peer that left sends no CTS */
    while (!coll_list_empty(&ep->rndv_sends)) {
        coll_tp_req_t *req = coll_list_first(&ep->rndv_sends, coll_tp_req_t, link);
        coll_list_del(&req->link);
        ep->nsends--;
        req->complete(req, status);
    }
}

int ofi_match_waiting(const ofi_ep_t *ep)
{
    return !coll_list_empty(&ep->match.posted) || !coll_list_empty(&ep->rndv_sends);
}
