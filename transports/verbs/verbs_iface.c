/*
 * verbs_iface.c: the verbs transport's iface: its device (verbs_dev.c),
 * one completion queue for every queue pair with its completion channel
 * on the event loop, the TCP iface that carries connection records, and
 * the ops table.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "error.h"
#include "log.h"
#include "param.h"
#include "verbs.h"

extern const coll_tp_ops_t coll_tp_tcp_ops;

/* ---- completions ----------------------------------------------------------- */

static void iface_dispatch(verbs_iface_t *vi, const struct ibv_wc *wc)
{
    int peer = VERBS_WR_PEER(wc->wr_id);
    verbs_ep_t *ep = peer >= 0 && peer < vi->super.params.nranks ? vi->eps[peer] : NULL;

    /* A completion of a queue pair already destroyed: nothing waits for it. */
    if (ep && ep->qp && ep->qp->qp_num == wc->qp_num)
        verbs_ep_on_wc(ep, wc);
}

/* Drain the CQ; then arm the channel (if an event consumed the last arm)
 * and drain again, so that nothing that arrived in between waits for an
 * event that never comes. */
void verbs_iface_poll(verbs_iface_t *vi)
{
    struct ibv_wc wc[VERBS_POLL_BATCH];
    for (int pass = 0; pass < 2; pass++) {
        int n;
        while ((n = ibv_poll_cq(vi->cq, VERBS_POLL_BATCH, wc)) > 0)
            for (int i = 0; i < n; i++)
                iface_dispatch(vi, &wc[i]);
        if (n < 0)
            COLL_WARN(COLL_SUBSYS_NET, "rank %d: verbs: ibv_poll_cq failed (%d)",
                      vi->super.params.rank, n);
        if (vi->armed)
            return;
        if (ibv_req_notify_cq(vi->cq, 0) == 0)
            vi->armed = 1;
    }
}

static void on_channel(void *arg, uint32_t events)
{
    verbs_iface_t *vi = arg;
    struct ibv_cq *cq;
    void *ctx;
    (void)events;
    while (ibv_get_cq_event(vi->chan, &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        vi->armed = 0;
    }
    verbs_iface_poll(vi);
}

/* ---- the TCP side link ------------------------------------------------------------ */

/* The TCP link to `peer` broke: the peer died or aborted (the message
 * says which). Once our endpoint is closed, nothing more to say. */
static void wire_failed(void *core, int peer, coll_status_t status, const char *msg)
{
    verbs_iface_t *vi = core;
    verbs_ep_t *ep = peer >= 0 && peer < vi->super.params.nranks ? vi->eps[peer] : NULL;
    if (ep && ep->state != VERBS_EP_CLOSED && !ep->peer_left)
        verbs_ep_fail(ep, status, "%s", msg);
}

static coll_status_t iface_open_wire(verbs_iface_t *vi)
{
    vi->wire_params = vi->super.params;
    vi->wire_params.core = vi;
    vi->wire_params.ep_failed = wire_failed;
    COLL_CHECK(coll_tp_tcp_ops.iface_open(&vi->wire_params, &vi->wire));
    vi->wire->ops = &coll_tp_tcp_ops;
    return COLL_OK;
}

/* ---- open and close ------------------------------------------------------------------ */

static coll_status_t iface_read_params(verbs_iface_t *vi)
{
    int rank = vi->super.params.rank;
    COLL_CHECK(coll_param_int_range(COLL_PARAM_IB_TIMEOUT, 1, 31, rank, &vi->timeout));
    return coll_param_int_range(COLL_PARAM_IB_MR_CACHE, 0, 65536, rank, &vi->mr_cap);
}

static coll_status_t iface_open_cq(verbs_iface_t *vi)
{
    const coll_tp_params_t *pr = &vi->super.params;
    long want = (long)pr->nranks * (VERBS_CREDITS + VERBS_SQ_DEPTH) + 16;
    int cqe = (int)COLL_MIN(want, (long)vi->dev.max_cqe);

    vi->chan = ibv_create_comp_channel(vi->dev.ctx);
    if (!vi->chan)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "rank %d: ibv_create_comp_channel "
                          "on %s: %s", pr->rank, vi->dev.name, strerror(errno));
    fcntl(vi->chan->fd, F_SETFL, fcntl(vi->chan->fd, F_GETFL) | O_NONBLOCK);
    vi->cq = ibv_create_cq(vi->dev.ctx, cqe, NULL, vi->chan, 0);
    if (!vi->cq)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "rank %d: ibv_create_cq of %d "
                          "entries on %s: %s", pr->rank, cqe, vi->dev.name, strerror(errno));
    COLL_CHECK(coll_evloop_add(pr->evloop, &vi->chan_src, vi->chan->fd, EPOLLIN, on_channel, vi));
    vi->chan_added = 1;
    vi->armed = ibv_req_notify_cq(vi->cq, 0) == 0;
    return COLL_OK;
}

static void iface_free(verbs_iface_t *vi)
{
    if (vi->wire)
        vi->wire->ops->iface_close(vi->wire);
    if (vi->chan_added)
        coll_evloop_del(vi->super.params.evloop, &vi->chan_src);
    if (vi->cq)
        ibv_destroy_cq(vi->cq);
    if (vi->chan)
        ibv_destroy_comp_channel(vi->chan);
    if (vi->has_dev) {
        verbs_mr_cache_fini(&vi->mrs);
        verbs_dev_close(&vi->dev);
    }
    free(vi->eps);
    free(vi);
}

static coll_status_t verbs_iface_open(const coll_tp_params_t *params, coll_tp_iface_t **iface_p)
{
    verbs_iface_t *vi = calloc(1, sizeof(*vi));
    coll_status_t st;

    if (!vi)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "cannot allocate a verbs iface");
    vi->super.params = *params;
    COLL_CHECK_GOTO(iface_read_params(vi), st, err);
    COLL_CHECK_GOTO(verbs_dev_open(params, &vi->dev, &vi->has_dev), st, err);
    if (vi->has_dev) {
        verbs_mr_cache_init(&vi->mrs, &verbs_mr_ibv_ops, &vi->dev, vi->mr_cap);
        vi->eps = calloc((size_t)params->nranks, sizeof(*vi->eps));
        if (!vi->eps) {
            st = coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "cannot allocate %d endpoints",
                            params->nranks);
            goto err;
        }
        COLL_CHECK_GOTO(iface_open_cq(vi), st, err);
        COLL_CHECK_GOTO(iface_open_wire(vi), st, err);
        COLL_INFO(COLL_SUBSYS_INIT, "rank %d: verbs: %s port %u, %s, GID index %d, %.0f Gbit/s",
                  params->rank, vi->dev.name, vi->dev.port,
                  vi->dev.link == VERBS_LINK_IB ? "InfiniBand" : "Ethernet (RoCE)",
                  vi->dev.gid_index, vi->dev.gbps);
    }
    *iface_p = &vi->super;
    return COLL_OK;
err:
    iface_free(vi);
    return st;
}

static coll_status_t verbs_iface_close(coll_tp_iface_t *iface)
{
    iface_free((verbs_iface_t *)iface);
    return COLL_OK;
}

/* ---- what peers see ------------------------------------------------------------------ */

static coll_status_t verbs_iface_addr(coll_tp_iface_t *iface, coll_tp_addr_t *addr_p)
{
    verbs_iface_t *vi = (verbs_iface_t *)iface;
    verbs_addr_t a = {0};
    coll_tp_addr_t tcp;
    coll_wbuf_t w;

    if (vi->has_dev) {
        COLL_CHECK(vi->wire->ops->iface_addr(vi->wire, &tcp));
        if (tcp.len > VERBS_ADDR_TCP_MAX)
            return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INTERNAL, "verbs: TCP address of %u "
                              "bytes does not fit", tcp.len);
        a.flags = VERBS_ADDR_HAS_DEVICE;
        a.link = vi->dev.link;
        a.tcp_len = (uint8_t)tcp.len;
        memcpy(a.tcp, tcp.data, tcp.len);
    }
    w = (coll_wbuf_t){addr_p->data, sizeof(addr_p->data), 0, 0};
    verbs_addr_encode(&a, &w);
    addr_p->tp_id = COLL_TP_VERBS;
    addr_p->len = (uint16_t)w.off;
    return COLL_OK;
}

/* Nominal figures until the core's probe measures the link: a few
 * microseconds per message, 90% of the port's signalling rate. */
static coll_status_t verbs_iface_query(coll_tp_iface_t *iface, coll_tp_perf_t *perf_p)
{
    verbs_iface_t *vi = (verbs_iface_t *)iface;
    perf_p->latency_s = 3e-6;
    perf_p->bandwidth_Bps = (vi->has_dev ? vi->dev.gbps : 10) * 1e9 / 8 * 0.9;
    perf_p->overhead_s = 1e-6;
    perf_p->pull = 0; /* messages are sent, not read with RDMA reads */
    return COLL_OK;
}

static coll_status_t verbs_iface_progress(coll_tp_iface_t *iface, int *progressed_p)
{
    verbs_iface_t *vi = (verbs_iface_t *)iface;
    *progressed_p = 0;
    if (!vi->has_dev)
        return COLL_OK;
    verbs_iface_poll(vi);
    for (int p = 0; vi->nconnecting > 0 && p < vi->super.params.nranks; p++)
        if (vi->eps[p] && vi->eps[p]->state < VERBS_EP_READY)
            verbs_ep_advance(vi->eps[p]);
    return vi->wire->ops->iface_progress(vi->wire, progressed_p);
}

/* The peer's blob: NULL (no device, or none published), or decoded. */
coll_status_t verbs_peer_addr(const coll_peer_info_t *peer, verbs_addr_t *a_p, int *has_p)
{
    const coll_tp_addr_t *blob = coll_peer_info_addr(peer, COLL_TP_VERBS);
    coll_rbuf_t r;
    coll_status_t st;

    *has_p = 0;
    if (!blob)
        return COLL_OK;
    r = (coll_rbuf_t){blob->data, blob->len, 0, 0};
    st = verbs_addr_decode(&r, a_p);
    if (st != COLL_OK)
        return coll_error(COLL_SUBSYS_INIT, st, "rank %u published a malformed verbs address "
                          "(%s)", peer->rank, coll_status_str(st));
    *has_p = (a_p->flags & VERBS_ADDR_HAS_DEVICE) != 0;
    return COLL_OK;
}

/* Yes when both ranks have a port of the same link layer. Ranks on one
 * host reach each other too (through the adapter's loopback): shm goes
 * first when it is allowed. */
static coll_status_t verbs_can_connect(coll_tp_iface_t *iface, const coll_peer_info_t *self,
                                       const coll_peer_info_t *peer, int *yes_p)
{
    verbs_iface_t *vi = (verbs_iface_t *)iface;
    verbs_addr_t a;
    int has;
    (void)self;

    *yes_p = 0;
    if (!vi->has_dev)
        return COLL_OK;
    COLL_CHECK(verbs_peer_addr(peer, &a, &has));
    *yes_p = has && a.link == vi->dev.link;
    return COLL_OK;
}

const coll_tp_ops_t coll_tp_verbs_ops = {
    .size = sizeof(coll_tp_ops_t),
    .name = "verbs",
    .id = COLL_TP_VERBS,
    .mem_kinds = COLL_MEM_BIT(COLL_MEM_HOST),
    .iface_open = verbs_iface_open,
    .iface_close = verbs_iface_close,
    .iface_addr = verbs_iface_addr,
    .iface_query = verbs_iface_query,
    .iface_progress = verbs_iface_progress,
    .can_connect = verbs_can_connect,
    .ep_connect = verbs_ep_connect,
    .ep_accept = verbs_ep_accept,
    .ep_ready = verbs_ep_ready,
    .ep_isend = verbs_ep_isend,
    .ep_irecv = verbs_ep_irecv,
    .ep_flush = verbs_ep_flush,
    .ep_close = verbs_ep_close,
    .ep_destroy = verbs_ep_destroy,
    COLL_TP_NO_MBOX,
};
