/*
 * verbs_ep.c: a queue pair's life. Created in INIT with every receive
 * slot posted; the TCP side link connects (the higher rank dials, as for
 * every transport); both sides send their connection record over it; each
 * moves its QP to RTR then RTS and says so (a second, empty message), and
 * the endpoint is ready once both have: a QP must not be sent to before
 * the peer's is ready to receive, or the first packets are dropped and
 * retried for seconds.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "verbs.h"

enum {
    WIRE_SENT = 1,
    WIRE_RECEIVED = 2,
    SYNC_SENT = 4,
    SYNC_RECEIVED = 8,
};
#define WIRE_TAG_CONN 1
#define WIRE_TAG_SYNC 2

/* Before a failed endpoint gives its requests back (and deregisters their
 * buffers): a QP in the error state takes no more RDMA writes, so the
 * peer's pending writes are not answered with "remote access error" but
 * retried, while the side link tells it why we stopped. */
static void ep_qp_stop(verbs_ep_t *ep)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
    if (ep->qp)
        ibv_modify_qp(ep->qp, &a, IBV_QP_STATE);
}

void verbs_ep_fail(verbs_ep_t *ep, coll_status_t status, const char *fmt, ...)
{
    char msg[COLL_WIRE_ERRTEXT_MAX];
    va_list ap;

    if (ep->state == VERBS_EP_CLOSED)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (ep->state < VERBS_EP_READY)
        ep->iface->nconnecting--;
    ep->state = VERBS_EP_CLOSED;
    ep->error = status;
    ep_qp_stop(ep);
    /* A peer that broke the protocol or whose data arrived corrupted is
     * alive: it learns why over the side link (else it would report that
     * we died). */
    if (ep->wire)
        ep->wire->iface->ops->ep_close(ep->wire, status,
                                       status == COLL_ERR_PROTOCOL ||
                                       status == COLL_ERR_DATA_CORRUPTION ? msg : NULL);
    /* The core records the cause first (it names the peer), then the
     * requests fail as part of it. */
    ep->iface->super.params.ep_failed(ep->iface->super.params.core, ep->super.peer, status, msg);
    verbs_ep_fail_requests(ep, status);
}

/* ---- queue pair states ------------------------------------------------------------- */

static coll_status_t qp_modify(verbs_ep_t *ep, struct ibv_qp_attr *attr, int mask,
                               const char *state)
{
    int rc = ibv_modify_qp(ep->qp, attr, mask);
    if (rc != 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: verbs: queue pair to %s "
                          "for %s: ibv_modify_qp: %s", ep->iface->super.params.rank, state,
                          ep->super.desc, strerror(rc));
    return COLL_OK;
}

static coll_status_t qp_init(verbs_ep_t *ep)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = ep->iface->dev.port,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
    };
    return qp_modify(ep, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
                     "INIT");
}

static coll_status_t qp_rtr(verbs_ep_t *ep)
{
    const verbs_dev_t *dev = &ep->iface->dev;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTR,
        .path_mtu = (enum ibv_mtu)COLL_MIN(dev->mtu, ep->peer.mtu),
        .dest_qp_num = ep->peer.qpn,
        .rq_psn = ep->peer.psn,
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12, /* 0.64 ms before a sender retries a full receive queue */
        .ah_attr = {.dlid = ep->peer.lid, .sl = 0, .port_num = dev->port},
    };
    /* RoCE always routes by GID; InfiniBand by LID within a subnet. */
    if (dev->link == VERBS_LINK_ETH) {
        a.ah_attr.is_global = 1;
        memcpy(a.ah_attr.grh.dgid.raw, ep->peer.gid, 16);
        a.ah_attr.grh.sgid_index = (uint8_t)dev->gid_index;
        a.ah_attr.grh.hop_limit = 64;
    }
    return qp_modify(ep, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR");
}

static coll_status_t qp_rts(verbs_ep_t *ep)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_RTS,
        .timeout = (uint8_t)ep->iface->timeout,
        .retry_cnt = 7,
        .rnr_retry = 7, /* unlimited: a receiver short of slots is slow, not dead */
        .sq_psn = ep->psn,
        .max_rd_atomic = 1,
    };
    return qp_modify(ep, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

/* ---- creation ------------------------------------------------------------------------ */

static coll_status_t ep_alloc_bufs(verbs_ep_t *ep)
{
    size_t bytes = (size_t)(VERBS_CREDITS + VERBS_SEND_SLOTS) * VERBS_SLOT_BYTES;
    long page = sysconf(_SC_PAGESIZE);

    if (posix_memalign((void **)&ep->bufs, page > 0 ? (size_t)page : 4096, bytes) != 0)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "verbs: cannot allocate %zu "
                          "bytes of slots for %s", bytes, ep->super.desc);
    ep->bufs_mr = ibv_reg_mr(ep->iface->dev.pd, ep->bufs, bytes, IBV_ACCESS_LOCAL_WRITE);
    if (!ep->bufs_mr)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "rank %d: verbs: ibv_reg_mr of "
                          "%zu bytes for %s: %s%s", ep->iface->super.params.rank, bytes,
                          ep->super.desc, strerror(errno),
                          errno == ENOMEM ? " (locked memory limit: ulimit -l)" : "");
    for (int i = 0; i < VERBS_SEND_SLOTS; i++)
        ep->free_slots[i] = (uint32_t)(VERBS_CREDITS + i);
    ep->nfree_slots = VERBS_SEND_SLOTS;
    return COLL_OK;
}

static coll_status_t ep_create_qp(verbs_ep_t *ep)
{
    verbs_iface_t *vi = ep->iface;
    struct ibv_qp_init_attr qa = {
        .send_cq = vi->cq,
        .recv_cq = vi->cq,
        .cap = {.max_send_wr = VERBS_SQ_DEPTH, .max_recv_wr = VERBS_CREDITS,
                .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
    };

    ep->qp = ibv_create_qp(vi->dev.pd, &qa);
    if (!ep->qp)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "rank %d: verbs: ibv_create_qp for "
                          "%s: %s", vi->super.params.rank, ep->super.desc, strerror(errno));
    COLL_CHECK(qp_init(ep));
    for (uint32_t i = 0; i < VERBS_CREDITS; i++)
        COLL_CHECK(verbs_post_recv(ep, i));
    /* A PSN that differs per connection, so that a stale packet of an
     * earlier QP with the same number is not taken for ours. */
    ep->psn = (uint32_t)(coll_time_ns() ^ ((uint64_t)getpid() << 8) ^ (uint64_t)ep->qp->qp_num) &
              0xffffff;
    return COLL_OK;
}

static void wire_complete(coll_tp_req_t *req, coll_status_t status);

static coll_tp_req_t *wire_req(verbs_ep_t *ep, verbs_wire_req_t *w, int bit, uint64_t tag,
                               void *buf, size_t len)
{
    memset(w, 0, sizeof(*w));
    coll_list_init(&w->req.link);
    w->req.tag = tag;
    w->req.buf = buf;
    w->req.len = len;
    w->req.complete = wire_complete;
    w->ep = ep;
    w->bit = bit;
    return &w->req;
}

/* The peer's TCP address, as the TCP transport expects it. */
static coll_status_t ep_open_wire(verbs_ep_t *ep, const coll_peer_info_t *peer, int dial)
{
    coll_tp_iface_t *wire = ep->iface->wire;
    coll_peer_info_t wi = *peer;
    verbs_addr_t a;
    int has;

    COLL_CHECK(verbs_peer_addr(peer, &a, &has));
    wi.naddrs = 1;
    wi.addrs[0].tp_id = COLL_TP_TCP;
    wi.addrs[0].len = a.tcp_len;
    memcpy(wi.addrs[0].data, a.tcp, a.tcp_len);
    if (dial)
        COLL_CHECK(wire->ops->ep_connect(wire, &wi, &ep->wire));
    else
        COLL_CHECK(wire->ops->ep_accept(wire, &wi, &ep->wire));
    return COLL_OK;
}

static void ep_free(verbs_ep_t *ep)
{
    if (ep->wire)
        ep->wire->iface->ops->ep_destroy(ep->wire);
    if (ep->qp)
        ibv_destroy_qp(ep->qp);
    if (ep->bufs_mr)
        ibv_dereg_mr(ep->bufs_mr);
    free(ep->bufs);
    free(ep);
}

static coll_status_t ep_create(coll_tp_iface_t *iface, const coll_peer_info_t *peer, int dial,
                               coll_tp_ep_t **ep_p)
{
    verbs_iface_t *vi = (verbs_iface_t *)iface;
    verbs_ep_t *ep = calloc(1, sizeof(*ep));
    coll_status_t st;

    if (!ep)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "cannot allocate a verbs endpoint");
    ep->super.iface = iface;
    ep->super.peer = (int)peer->rank;
    snprintf(ep->super.desc, sizeof(ep->super.desc), "rank %u (%s, verbs)", peer->rank,
             peer->hostname);
    ep->iface = vi;
    ep->state = VERBS_EP_WIRE;
    coll_list_init(&ep->txq);
    coll_match_init(&ep->match, NULL);
    coll_list_init(&ep->rndv_sends);
    coll_list_init(&ep->writes);
    coll_list_init(&ep->rndv_recvs);
    COLL_CHECK_GOTO(ep_alloc_bufs(ep), st, err);
    COLL_CHECK_GOTO(ep_create_qp(ep), st, err);
    COLL_CHECK_GOTO(ep_open_wire(ep, peer, dial), st, err);
    vi->eps[peer->rank] = ep;
    vi->nconnecting++;
    *ep_p = &ep->super;
    return COLL_OK;
err:
    ep_free(ep);
    return st;
}

coll_status_t verbs_ep_connect(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                               coll_tp_ep_t **ep_p)
{
    return ep_create(iface, peer, 1, ep_p);
}

coll_status_t verbs_ep_accept(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                              coll_tp_ep_t **ep_p)
{
    return ep_create(iface, peer, 0, ep_p);
}

/* ---- the exchange ------------------------------------------------------------------------- */

static void wire_complete(coll_tp_req_t *req, coll_status_t status)
{
    verbs_wire_req_t *w = coll_container_of(req, verbs_wire_req_t, req);
    if (status != COLL_OK)
        w->ep->wire_error = status;
    else
        w->ep->wire_done |= w->bit;
}

/* Post both directions of one step of the exchange over the side link. */
static coll_status_t wire_post(verbs_ep_t *ep, int sent_bit, int recv_bit, uint64_t tag,
                               void *out, void *in, size_t len, verbs_wire_req_t *sreq,
                               verbs_wire_req_t *rreq)
{
    const coll_tp_ops_t *ops = ep->wire->iface->ops;
    COLL_CHECK(ops->ep_irecv(ep->wire, wire_req(ep, rreq, recv_bit, tag, in, len)));
    COLL_CHECK(ops->ep_isend(ep->wire, wire_req(ep, sreq, sent_bit, tag, out, len)));
    return COLL_OK;
}

static coll_status_t ep_send_record(verbs_ep_t *ep)
{
    const verbs_dev_t *dev = &ep->iface->dev;
    verbs_conn_t c = {
        .link = dev->link, .port = dev->port, .mtu = dev->mtu, .lid = dev->lid,
        .qpn = ep->qp->qp_num, .psn = ep->psn, .credits = VERBS_CREDITS,
        .slot_bytes = VERBS_SLOT_BYTES,
    };
    coll_wbuf_t w = {ep->conn_out, sizeof(ep->conn_out), 0, 0};

    memcpy(c.gid, dev->gid.raw, 16);
    verbs_conn_encode(&c, &w);
    return wire_post(ep, WIRE_SENT, WIRE_RECEIVED, WIRE_TAG_CONN, ep->conn_out, ep->conn_in,
                     sizeof(ep->conn_in), &ep->wire_send, &ep->wire_recv);
}

/* The peer's record arrived: check it, bring the QP up, say so. */
static coll_status_t ep_take_record(verbs_ep_t *ep)
{
    coll_rbuf_t r = {ep->conn_in, sizeof(ep->conn_in), 0, 0};
    coll_status_t st = verbs_conn_decode(&r, &ep->peer);
    int rank = ep->iface->super.params.rank;

    if (st != COLL_OK)
        return coll_error(COLL_SUBSYS_NET, st, "rank %d: verbs: malformed connection record "
                          "from %s (%s)", rank, ep->super.desc, coll_status_str(st));
    if (ep->peer.link != ep->iface->dev.link || ep->peer.slot_bytes != VERBS_SLOT_BYTES ||
        ep->peer.credits <= VERBS_CREDIT_RESERVE)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_PROTOCOL, "rank %d: verbs: %s uses another "
                          "link layer or slot size (%s, %u-byte slots, %u credits)", rank,
                          ep->super.desc, ep->peer.link == VERBS_LINK_IB ? "InfiniBand" :
                          "Ethernet", ep->peer.slot_bytes, ep->peer.credits);
    COLL_CHECK(qp_rtr(ep));
    COLL_CHECK(qp_rts(ep));
    ep->tx_credits = (int)ep->peer.credits - VERBS_CREDIT_RESERVE;
    return wire_post(ep, SYNC_SENT, SYNC_RECEIVED, WIRE_TAG_SYNC, ep->conn_out, ep->conn_in, 0,
                     &ep->sync_send, &ep->sync_recv);
}

static coll_status_t ep_step(verbs_ep_t *ep)
{
    coll_status_t st;
    if (ep->wire_error != COLL_OK)
        return coll_error(COLL_SUBSYS_NET, ep->wire_error, "rank %d: verbs: exchanging "
                          "connection records with %s failed: %s", ep->iface->super.params.rank,
                          ep->super.desc, coll_status_str(ep->wire_error));
    switch (ep->state) {
    case VERBS_EP_WIRE:
        st = ep->wire->iface->ops->ep_ready(ep->wire);
        if (st != COLL_OK)
            return st;
        COLL_CHECK(ep_send_record(ep));
        ep->state = VERBS_EP_XCHG;
        return COLL_OK;
    case VERBS_EP_XCHG:
        if ((ep->wire_done & (WIRE_SENT | WIRE_RECEIVED)) != (WIRE_SENT | WIRE_RECEIVED))
            return COLL_INPROGRESS;
        COLL_CHECK(ep_take_record(ep));
        ep->state = VERBS_EP_SYNC;
        return COLL_OK;
    case VERBS_EP_SYNC:
        if ((ep->wire_done & (SYNC_SENT | SYNC_RECEIVED)) != (SYNC_SENT | SYNC_RECEIVED))
            return COLL_INPROGRESS;
        ep->state = VERBS_EP_READY;
        ep->iface->nconnecting--;
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: verbs: connected to %s (QP %u -> %u, %s port %u)",
                  ep->iface->super.params.rank, ep->super.desc, ep->qp->qp_num, ep->peer.qpn,
                  ep->iface->dev.name, ep->iface->dev.port);
        verbs_ep_kick(ep);
        return COLL_OK;
    default:
        return COLL_INPROGRESS;
    }
}

/* Run the exchange as far as it goes now. */
void verbs_ep_advance(verbs_ep_t *ep)
{
    coll_status_t st = COLL_OK;
    while (ep->state < VERBS_EP_READY && st == COLL_OK)
        st = ep_step(ep);
    if (st != COLL_OK && st != COLL_INPROGRESS)
        verbs_ep_fail(ep, st, "%s", coll_error_thread());
}

coll_status_t verbs_ep_ready(coll_tp_ep_t *tep)
{
    verbs_ep_t *ep = (verbs_ep_t *)tep;
    if (ep->state < VERBS_EP_READY)
        verbs_ep_advance(ep);
    if (ep->state == VERBS_EP_READY)
        return COLL_OK;
    return ep->state == VERBS_EP_CLOSED ? ep->error : COLL_INPROGRESS;
}

/* ---- leaving ---------------------------------------------------------------------------- */

/* Done when nothing is queued or unacknowledged (a send completion means
 * the peer's adapter acknowledged it), the BYE included, or the peer left. */
coll_status_t verbs_ep_flush(coll_tp_ep_t *tep)
{
    verbs_ep_t *ep = (verbs_ep_t *)tep;
    if (ep->state != VERBS_EP_READY)
        return COLL_OK;
    /* A peer that left takes nothing more and destroys its queue pair next:
     * what we still send it would only be retried until the QP gives up. */
    if (!ep->peer_left && (!coll_list_empty(&ep->txq) || !coll_list_empty(&ep->writes) ||
                           ep->sq_used > 0 || (ep->bye_pending && !ep->bye_sent)))
        return COLL_INPROGRESS;
    return ep->wire->iface->ops->ep_flush(ep->wire);
}

coll_status_t verbs_ep_close(coll_tp_ep_t *tep, coll_status_t why, const char *reason)
{
    verbs_ep_t *ep = (verbs_ep_t *)tep;

    if (ep->state == VERBS_EP_CLOSED)
        return COLL_OK;
    if (why == COLL_OK && ep->state == VERBS_EP_READY) {
        if (!ep->bye_pending) {
            verbs_hdr_t h = {.type = VERBS_BYE};
            ep->bye_pending = 1;
            /* What the peer would still have to act on never completes. */
            coll_match_fail_posted(&ep->match, COLL_ERR_INVALID_USAGE);
            verbs_ep_fail_pending_rndv(ep, COLL_ERR_INVALID_USAGE);
            if (!ep->peer_left)
                verbs_tx_control(ep, &h, 0);
            else
                ep->bye_sent = 1;
            ep->wire->iface->ops->ep_close(ep->wire, COLL_OK, NULL);
        }
        return COLL_OK;
    }
    /* The reason travels over the side link, which the peer reads at once. */
    if (ep->wire)
        ep->wire->iface->ops->ep_close(ep->wire, why == COLL_OK ? COLL_ERR_ABORTED : why, reason);
    if (ep->state < VERBS_EP_READY)
        ep->iface->nconnecting--;
    ep->state = VERBS_EP_CLOSED;
    ep->error = why == COLL_OK ? COLL_ERR_ABORTED : why;
    ep_qp_stop(ep);
    verbs_ep_fail_requests(ep, ep->error);
    return COLL_OK;
}

coll_status_t verbs_ep_destroy(coll_tp_ep_t *tep)
{
    verbs_ep_t *ep = (verbs_ep_t *)tep;

    if (ep->state != VERBS_EP_CLOSED)
        verbs_ep_close(tep, COLL_ERR_ABORTED, NULL);
    coll_match_free_unexpected(&ep->match);
    if (ep->iface->eps[ep->super.peer] == ep)
        ep->iface->eps[ep->super.peer] = NULL;
    ep_free(ep);
    return COLL_OK;
}
