/*
 * verbs_dev.c: which device, port and GID an iface uses. The first active
 * port, in ibv_get_device_list order, that COLL_IB_HCA allows; its GID by
 * COLL_IB_GID_INDEX or verbs_gid_pick. Also the registrar the
 * registration cache calls (ibv_reg_mr on the iface's protection domain).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "param.h"
#include "verbs.h"

static int dev_link(uint8_t link_layer)
{
    if (link_layer == IBV_LINK_LAYER_INFINIBAND || link_layer == IBV_LINK_LAYER_UNSPECIFIED)
        return VERBS_LINK_IB;
    return link_layer == IBV_LINK_LAYER_ETHERNET ? VERBS_LINK_ETH : 0;
}

/* Gbit/s of an active port: lanes x per-lane rate (ibv_devinfo's table). */
static double port_gbps(const struct ibv_port_attr *pa)
{
    static const struct { int code; double gbps; } speeds[] = {
        {1, 2.5}, {2, 5}, {4, 10}, {8, 10.3125}, {16, 14.0625}, {32, 25.78125},
        {64, 53.125}, {128, 106.25},
    };
    static const struct { int code; int lanes; } widths[] = {{1, 1}, {2, 4}, {4, 8}, {8, 12},
                                                              {16, 2}};
    double lane = 10;
    int lanes = 1;
    for (size_t i = 0; i < COLL_ARRAY_LEN(speeds); i++)
        if (speeds[i].code == pa->active_speed)
            lane = speeds[i].gbps;
    for (size_t i = 0; i < COLL_ARRAY_LEN(widths); i++)
        if (widths[i].code == pa->active_width)
            lanes = widths[i].lanes;
    return lane * lanes;
}

static int gid_type_of(uint32_t t)
{
    if (t == IBV_GID_TYPE_ROCE_V2)
        return VERBS_GID_ROCE_V2;
    return t == IBV_GID_TYPE_ROCE_V1 ? VERBS_GID_ROCE_V1 : VERBS_GID_IB;
}

/* The GID index for `dev` (port and link set), or an error naming why. */
static coll_status_t dev_pick_gid(verbs_dev_t *dev, int want, int tbl_len, int rank)
{
    verbs_gid_entry_t tbl[256];
    int n = COLL_MIN(tbl_len, 256), idx;

    for (int i = 0; i < n; i++) {
        struct ibv_gid_entry e;
        memset(&tbl[i], 0, sizeof(tbl[i]));
        if (ibv_query_gid_ex(dev->ctx, dev->port, (uint32_t)i, &e, 0) == 0) {
            memcpy(tbl[i].raw, e.gid.raw, 16);
            tbl[i].type = gid_type_of(e.gid_type);
        }
    }
    if (want >= 0) {
        if (want >= n || verbs_gid_pick(&tbl[want], 1, 0) < 0)
            return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                              "rank %d: COLL_IB_GID_INDEX=%d: %s port %u has no such GID (table "
                              "of %d; show_gids lists them)", rank, want, dev->name, dev->port,
                              tbl_len);
        idx = want;
    } else {
        idx = verbs_gid_pick(tbl, n, dev->link == VERBS_LINK_IB);
        if (idx < 0)
            return coll_error(COLL_SUBSYS_INIT, COLL_ERR_UNSUPPORTED,
                              "rank %d: %s port %u has no usable GID (is the netdev up with an "
                              "address?)", rank, dev->name, dev->port);
    }
    dev->gid_index = idx;
    memcpy(dev->gid.raw, tbl[idx].raw, 16);
    return COLL_OK;
}

/* The first active port of `ctx` that the spec allows; 0 if none. */
static int dev_pick_port(struct ibv_context *ctx, const verbs_hca_spec_t *spec, const char *name,
                         struct ibv_port_attr *pa_p, char *seen, size_t seen_len)
{
    struct ibv_device_attr da;
    if (ibv_query_device(ctx, &da) != 0)
        return 0;
    for (int p = 1; p <= da.phys_port_cnt; p++) {
        struct ibv_port_attr pa;
        size_t used = strlen(seen);
        if (ibv_query_port(ctx, (uint8_t)p, &pa) != 0)
            continue;
        snprintf(seen + used, seen_len - used, "%s%s:%d %s", used ? ", " : "", name, p,
                 pa.state == IBV_PORT_ACTIVE ? "active" : "down");
        if (pa.state == IBV_PORT_ACTIVE && dev_link(pa.link_layer) &&
            verbs_hca_match(spec, name, p)) {
            *pa_p = pa;
            return p;
        }
    }
    return 0;
}

static coll_status_t dev_setup(verbs_dev_t *dev, struct ibv_context *ctx, int port,
                               const struct ibv_port_attr *pa, int gid_want, int rank)
{
    struct ibv_device_attr da;
    coll_status_t st;

    memset(dev, 0, sizeof(*dev));
    dev->ctx = ctx;
    snprintf(dev->name, sizeof(dev->name), "%s", ibv_get_device_name(ctx->device));
    dev->port = (uint8_t)port;
    dev->link = (uint8_t)dev_link(pa->link_layer);
    dev->mtu = (uint8_t)pa->active_mtu;
    dev->lid = pa->lid;
    dev->gbps = port_gbps(pa);
    dev->max_cqe = ibv_query_device(ctx, &da) == 0 ? da.max_cqe : 4096;
    COLL_CHECK(dev_pick_gid(dev, gid_want, pa->gid_tbl_len, rank));
    dev->pd = ibv_alloc_pd(ctx);
    if (!dev->pd) {
        st = coll_error(COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "rank %d: ibv_alloc_pd on %s: %s",
                        rank, dev->name, strerror(errno));
        return st;
    }
    return COLL_OK;
}

static coll_status_t no_device(const coll_tp_params_t *params, const char *why)
{
    if (params->required)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_UNSUPPORTED,
                          "rank %d: no verbs device: %s (COLL_TRANSPORTS='%s' requires one; "
                          "ibv_devices lists them)", params->rank, why,
                          coll_param_raw(COLL_PARAM_TRANSPORTS));
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: verbs transport off: %s", params->rank, why);
    return COLL_OK;
}

/* *found_p = 1 and *dev_p set when a port is usable; without one, an
 * error only if the transport is required. */
coll_status_t verbs_dev_open(const coll_tp_params_t *params, verbs_dev_t *dev_p, int *found_p)
{
    const char *hca = coll_param_raw(COLL_PARAM_IB_HCA);
    struct ibv_device **list;
    verbs_hca_spec_t spec;
    char seen[512] = "", why[640];
    int n = 0, gid_want;
    coll_status_t st = COLL_OK;

    COLL_CHECK(verbs_hca_parse(hca, &spec));
    COLL_CHECK(verbs_gid_index_parse(coll_param_raw(COLL_PARAM_IB_GID_INDEX), &gid_want));
    *found_p = 0;
    errno = 0;
    list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        snprintf(why, sizeof(why), "ibv_get_device_list found none%s%s%s",
                 list ? "" : " (", list ? "" : strerror(errno),
                 list ? "" : ": no RDMA driver loaded?)");
        if (list)
            ibv_free_device_list(list);
        return no_device(params, why);
    }
    for (int i = 0; i < n && !*found_p && st == COLL_OK; i++) {
        const char *name = ibv_get_device_name(list[i]);
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct ibv_port_attr pa;
        int port = ctx ? dev_pick_port(ctx, &spec, name, &pa, seen, sizeof(seen)) : 0;
        if (port) {
            st = dev_setup(dev_p, ctx, port, &pa, gid_want, params->rank);
            *found_p = st == COLL_OK;
        }
        if (ctx && !*found_p)
            ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (st != COLL_OK && !params->required) /* a port we cannot use: not our business then */
        return no_device(params, coll_error_thread());
    if (st != COLL_OK || *found_p)
        return st;
    snprintf(why, sizeof(why), "no active port%s%s%s (ports: %s)", hca[0] ? " matches COLL_IB_HCA='" : "",
             hca, hca[0] ? "'" : "", seen[0] ? seen : "none");
    return no_device(params, why);
}

void verbs_dev_close(verbs_dev_t *dev)
{
    if (dev->pd)
        ibv_dealloc_pd(dev->pd);
    if (dev->ctx)
        ibv_close_device(dev->ctx);
    memset(dev, 0, sizeof(*dev));
}

static coll_status_t mr_reg(void *ctx, void *addr, size_t len, void **handle_p, uint32_t *lkey_p,
                            uint32_t *rkey_p)
{
    verbs_dev_t *dev = ctx;
    struct ibv_mr *mr = ibv_reg_mr(dev->pd, addr, len,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr)
        return coll_error(COLL_SUBSYS_NET, errno == ENOMEM ? COLL_ERR_NO_MEMORY : COLL_ERR_SYSTEM,
                          "ibv_reg_mr of %zu bytes on %s: %s%s", len, dev->name, strerror(errno),
                          errno == ENOMEM ? " (locked memory limit: ulimit -l)" : "");
    *handle_p = mr;
    *lkey_p = mr->lkey;
    *rkey_p = mr->rkey;
    return COLL_OK;
}

static void mr_dereg(void *ctx, void *handle)
{
    (void)ctx;
    ibv_dereg_mr(handle);
}

const verbs_mr_ops_t verbs_mr_ibv_ops = {.reg = mr_reg, .dereg = mr_dereg};
