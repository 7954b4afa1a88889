/*
 * transport.c: the registry of compiled-in transports and the codec for
 * the peer info every rank publishes through the bootstrap.
 */
#include <string.h>

#include "error.h"
#include "log.h"
#include "transport.h"

extern const coll_tp_ops_t coll_tp_shm_ops;
extern const coll_tp_ops_t coll_tp_tcp_ops;
extern const coll_tp_ops_t coll_tp_self_ops_table;
#ifdef COLL_HAVE_VERBS
extern const coll_tp_ops_t coll_tp_verbs_ops;
#endif
#ifdef COLL_HAVE_OFI
extern const coll_tp_ops_t coll_tp_ofi_ops;
#endif

/* Priority order: the first transport that can reach a peer wins. Faster,
 * more local transports go first as they are added (cuda_ipc, shm, verbs,
 * ofi, then tcp). ofi says yes by itself only for RDMA-class providers
 * (ofi_iface.c), so it sits before tcp without taking its place. */
static const coll_tp_ops_t *const registry[] = {
    &coll_tp_shm_ops,
#ifdef COLL_HAVE_VERBS
    &coll_tp_verbs_ops,
#endif
#ifdef COLL_HAVE_OFI
    &coll_tp_ofi_ops,
#endif
    &coll_tp_tcp_ops,
};

const coll_tp_ops_t *const *coll_tp_registry(int *count_p)
{
    *count_p = (int)COLL_ARRAY_LEN(registry);
    return registry;
}

const coll_tp_ops_t *coll_tp_self_ops(void)
{
    return &coll_tp_self_ops_table;
}

const coll_tp_ops_t *coll_tp_lookup(const char *name)
{
    for (size_t i = 0; i < COLL_ARRAY_LEN(registry); i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}

coll_status_t coll_tp_no_mbox_query(coll_tp_ep_t *ep, size_t *bytes_p)
{
    (void)ep;
    (void)bytes_p;
    return COLL_ERR_UNSUPPORTED;
}

coll_status_t coll_tp_no_mbox_put(coll_tp_ep_t *ep, uint64_t seq, const void *buf, size_t len)
{
    (void)ep;
    (void)seq;
    (void)buf;
    (void)len;
    return COLL_ERR_UNSUPPORTED;
}

coll_status_t coll_tp_no_mbox_get(coll_tp_ep_t *ep, uint64_t seq, const void **buf_p,
                                  size_t *len_p)
{
    (void)ep;
    (void)seq;
    (void)buf_p;
    (void)len_p;
    return COLL_ERR_UNSUPPORTED;
}

coll_status_t coll_tp_no_mbox_release(coll_tp_ep_t *ep, uint64_t seq)
{
    (void)ep;
    (void)seq;
    return COLL_ERR_UNSUPPORTED;
}

void coll_peer_info_encode(const coll_peer_info_t *info, coll_wbuf_t *w)
{
    coll_put_uint(w, info->rank, 4);
    coll_put_uint(w, info->pid, 4);
    coll_put_uint(w, info->host_hash, 8);
    coll_put_bytes(w, info->hostname, sizeof(info->hostname));
    coll_put_uint(w, info->naddrs, 4);
    for (uint32_t i = 0; i < info->naddrs && i < COLL_TP_MAX; i++) {
        coll_put_uint(w, info->addrs[i].tp_id, 2);
        coll_put_uint(w, info->addrs[i].len, 2);
        coll_put_bytes(w, info->addrs[i].data, info->addrs[i].len);
    }
}

/* Strict: a hostname without its terminating NUL or an address blob over
 * its cap is malformed (the encoder never writes one), and *info is
 * written only when the whole record parsed. */
coll_status_t coll_peer_info_decode(coll_rbuf_t *r, coll_peer_info_t *info)
{
    coll_peer_info_t out;

    memset(&out, 0, sizeof(out));
    out.rank = (uint32_t)coll_get_uint(r, 4);
    out.pid = (uint32_t)coll_get_uint(r, 4);
    out.host_hash = coll_get_uint(r, 8);
    coll_get_bytes(r, out.hostname, sizeof(out.hostname));
    out.naddrs = (uint32_t)coll_get_uint(r, 4);
    if (r->underflow || out.hostname[sizeof(out.hostname) - 1] != '\0' ||
        out.naddrs > COLL_TP_MAX)
        return COLL_ERR_PROTOCOL;
    for (uint32_t i = 0; i < out.naddrs; i++) {
        out.addrs[i].tp_id = (uint16_t)coll_get_uint(r, 2);
        out.addrs[i].len = (uint16_t)coll_get_uint(r, 2);
        if (out.addrs[i].len > COLL_TP_ADDR_MAX)
            return COLL_ERR_PROTOCOL;
        coll_get_bytes(r, out.addrs[i].data, out.addrs[i].len);
    }
    if (r->underflow)
        return COLL_ERR_PROTOCOL;
    *info = out;
    return COLL_OK;
}

const coll_tp_addr_t *coll_peer_info_addr(const coll_peer_info_t *info, uint16_t tp_id)
{
    for (uint32_t i = 0; i < info->naddrs; i++)
        if (info->addrs[i].tp_id == tp_id)
            return &info->addrs[i];
    return NULL;
}
