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

/* Priority order: the first transport that can reach a peer wins. Faster,
 * more local transports go first as they are added (cuda_ipc, shm, verbs,
 * ofi, then tcp). */
static const coll_tp_ops_t *const registry[] = {
    &coll_tp_shm_ops,
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

coll_status_t coll_peer_info_decode(coll_rbuf_t *r, coll_peer_info_t *info)
{
    memset(info, 0, sizeof(*info));
    info->rank = (uint32_t)coll_get_uint(r, 4);
    info->pid = (uint32_t)coll_get_uint(r, 4);
    info->host_hash = coll_get_uint(r, 8);
    coll_get_bytes(r, info->hostname, sizeof(info->hostname));
    info->hostname[sizeof(info->hostname) - 1] = '\0';
    info->naddrs = (uint32_t)coll_get_uint(r, 4);
    if (r->underflow || info->naddrs > COLL_TP_MAX)
        return COLL_ERR_PROTOCOL;
    for (uint32_t i = 0; i < info->naddrs; i++) {
        info->addrs[i].tp_id = (uint16_t)coll_get_uint(r, 2);
        info->addrs[i].len = (uint16_t)coll_get_uint(r, 2);
        if (info->addrs[i].len > COLL_TP_ADDR_MAX)
            return COLL_ERR_PROTOCOL;
        coll_get_bytes(r, info->addrs[i].data, info->addrs[i].len);
    }
    return r->underflow ? COLL_ERR_PROTOCOL : COLL_OK;
}

const coll_tp_addr_t *coll_peer_info_addr(const coll_peer_info_t *info, uint16_t tp_id)
{
    for (uint32_t i = 0; i < info->naddrs; i++)
        if (info->addrs[i].tp_id == tp_id)
            return &info->addrs[i];
    return NULL;
}
