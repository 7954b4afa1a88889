/*
 * self.c: the transport a rank uses to talk to itself. Messages up to
 * SELF_EAGER_LIMIT are copied at send time so that a blocking send to
 * oneself before the receive completes; larger ones wait for the receive
 * and are copied once, straight into it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "transport.h"
#include "util/match.h"

#define SELF_EAGER_LIMIT (64 * 1024)

typedef struct self_ep {
    coll_tp_ep_t super;
    coll_match_t match;
    int closed;
} self_ep_t;

typedef struct self_iface {
    coll_tp_iface_t super;
} self_iface_t;

static coll_status_t self_iface_open(const coll_tp_params_t *params, coll_tp_iface_t **iface_p)
{
    self_iface_t *iface = calloc(1, sizeof(*iface));
    if (!iface)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate self iface");
    iface->super.params = *params;
    *iface_p = &iface->super;
    return COLL_OK;
}

static coll_status_t self_iface_close(coll_tp_iface_t *iface)
{
    free(iface);
    return COLL_OK;
}

static coll_status_t self_iface_addr(coll_tp_iface_t *iface, coll_tp_addr_t *addr_p)
{
    (void)iface;
    memset(addr_p, 0, sizeof(*addr_p));
    addr_p->tp_id = COLL_TP_SELF;
    return COLL_OK;
}

static coll_status_t self_iface_query(coll_tp_iface_t *iface, coll_tp_perf_t *perf_p)
{
    (void)iface;
    perf_p->latency_s = 0.1e-6;
    perf_p->bandwidth_Bps = 8e9; /* one memcpy */
    perf_p->overhead_s = 0.1e-6;
    perf_p->pull = 1;
    return COLL_OK;
}

static coll_status_t self_iface_progress(coll_tp_iface_t *iface, int *progressed_p)
{
    (void)iface;
    *progressed_p = 0;
    return COLL_OK;
}

static coll_status_t self_can_connect(coll_tp_iface_t *iface, const coll_peer_info_t *self,
                                      const coll_peer_info_t *peer, int *yes_p)
{
    (void)iface;
    *yes_p = (self->rank == peer->rank);
    return COLL_OK;
}

static coll_status_t self_ep_create(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                                    coll_tp_ep_t **ep_p)
{
    self_ep_t *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate self endpoint");
    ep->super.iface = iface;
    ep->super.peer = (int)peer->rank;
    snprintf(ep->super.desc, sizeof(ep->super.desc), "rank %u (itself)", peer->rank);
    coll_match_init(&ep->match, NULL);
    *ep_p = &ep->super;
    return COLL_OK;
}

static coll_status_t self_ep_ready(coll_tp_ep_t *ep)
{
    (void)ep;
    return COLL_OK;
}

/* Deliver `len` bytes from `src` into a matched receive. */
static void self_deliver(coll_tp_req_t *recv, const void *src, size_t len)
{
    if (len != recv->len) {
        recv->bytes_done = len;
        recv->complete(recv, COLL_ERR_SIZE_MISMATCH);
        return;
    }
    coll_copy(recv->buf, src, len);
    recv->bytes_done = len;
    recv->complete(recv, COLL_OK);
}

static coll_status_t self_ep_isend(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    self_ep_t *ep = (self_ep_t *)tep;
    coll_tp_req_t *recv = coll_match_take_posted(&ep->match, req->tag);
    coll_unexp_t *ux;

    if (recv) {
        self_deliver(recv, req->buf, req->len);
        req->bytes_done = req->len;
        req->complete(req, COLL_OK);
        return COLL_OK;
    }
    ux = calloc(1, sizeof(*ux));
    if (!ux)
        return coll_error(COLL_SUBSYS_P2P, COLL_ERR_NO_MEMORY, "cannot queue a self message");
    ux->tag = req->tag;
    ux->len = req->len;
    if (req->len <= SELF_EAGER_LIMIT) {
        ux->data = malloc(req->len ? req->len : 1);
        if (!ux->data) {
            free(ux);
            return coll_error(COLL_SUBSYS_P2P, COLL_ERR_NO_MEMORY,
                              "cannot buffer a %zu-byte self message", req->len);
        }
        coll_copy(ux->data, req->buf, req->len);
        coll_list_push_back(&ep->match.unexpected, &ux->link);
        req->bytes_done = req->len;
        req->complete(req, COLL_OK);
    } else {
        ux->ctx = req; /* completes when the receive takes it */
        coll_list_push_back(&ep->match.unexpected, &ux->link);
    }
    return COLL_OK;
}

static coll_status_t self_ep_irecv(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    self_ep_t *ep = (self_ep_t *)tep;
    coll_unexp_t *ux = coll_match_take_unexpected(&ep->match, req->tag);

    if (!ux) {
        if (ep->closed) {
            req->complete(req, COLL_ERR_INVALID_USAGE);
            return COLL_OK;
        }
        coll_list_push_back(&ep->match.posted, &req->link);
        return COLL_OK;
    }
    if (ux->data) {
        self_deliver(req, ux->data, ux->len);
        free(ux->data);
    } else {
        coll_tp_req_t *send = ux->ctx;
        self_deliver(req, send->buf, send->len);
        send->bytes_done = send->len;
        send->complete(send, COLL_OK);
    }
    free(ux);
    return COLL_OK;
}

static coll_status_t self_ep_flush(coll_tp_ep_t *ep)
{
    (void)ep;
    return COLL_OK;
}

static coll_status_t self_ep_close(coll_tp_ep_t *tep, coll_status_t why, const char *reason)
{
    self_ep_t *ep = (self_ep_t *)tep;
    (void)reason;
    if (ep->closed)
        return COLL_OK;
    ep->closed = 1;
    coll_match_fail_posted(&ep->match, why == COLL_OK ? COLL_ERR_INVALID_USAGE : why);
    /* Large sends still waiting for their receive fail the same way. */
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, &ep->match.unexpected) {
        coll_unexp_t *ux = coll_container_of(pos, coll_unexp_t, link);
        if (ux->ctx) {
            coll_list_del(pos);
            coll_tp_req_t *send = ux->ctx;
            send->complete(send, why == COLL_OK ? COLL_ERR_INVALID_USAGE : why);
            free(ux);
        }
    }
    return COLL_OK;
}

static coll_status_t self_ep_destroy(coll_tp_ep_t *tep)
{
    self_ep_t *ep = (self_ep_t *)tep;
    self_ep_close(tep, COLL_ERR_ABORTED, NULL);
    coll_match_free_unexpected(&ep->match);
    free(ep);
    return COLL_OK;
}

const coll_tp_ops_t coll_tp_self_ops_table = {
    .size = sizeof(coll_tp_ops_t),
    .name = "self",
    .id = COLL_TP_SELF,
    .mem_kinds = COLL_MEM_BIT(COLL_MEM_HOST),
    .iface_open = self_iface_open,
    .iface_close = self_iface_close,
    .iface_addr = self_iface_addr,
    .iface_query = self_iface_query,
    .iface_progress = self_iface_progress,
    .can_connect = self_can_connect,
    .ep_connect = self_ep_create,
    .ep_accept = self_ep_create,
    .ep_ready = self_ep_ready,
    .ep_isend = self_ep_isend,
    .ep_irecv = self_ep_irecv,
    .ep_flush = self_ep_flush,
    .ep_close = self_ep_close,
    .ep_destroy = self_ep_destroy,
    COLL_TP_NO_MBOX,
};
