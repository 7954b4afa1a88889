/*
 * ofi_mr.c: memory registration for providers that need it (FI_MR_LOCAL:
 * verbs, efa; or COLL_OFI_MR=always), with a small cache so that the
 * buffers a training loop reuses are registered once.
 *
 * The cache holds COLL_OFI_MR_CACHE registrations (0: register each
 * message and release it at completion), looked up by address range
 * (page-aligned, so neighbouring buffers share one), least recently used
 * evicted first among those no operation holds. Like NCCL's and UCX's
 * caches without memory hooks, it trusts that a cached range still maps
 * the same pages: memory unmapped and mapped again at the same address
 * while cached must be re-registered, which this cache cannot see.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "ofi.h"

static coll_status_t mr_register(ofi_iface_t *iface, uintptr_t base, size_t len, ofi_mr_t *m)
{
    struct fid_mr *mr = NULL;
    /* without FI_MR_PROV_KEY the keys are ours to choose, and unique */
    int rc = fi_mr_reg(iface->domain, (void *)base, len, FI_SEND | FI_RECV, 0,
                       ++iface->mr_next_key, 0, &mr, NULL);

    if (rc == 0 && (iface->info->domain_attr->mr_mode & FI_MR_ENDPOINT)) {
        rc = fi_mr_bind(mr, &iface->ep->fid, 0);
        if (rc == 0)
            rc = fi_mr_enable(mr);
    }
    if (rc != 0) {
        if (mr)
            fi_close(&mr->fid);
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: ofi: registering %zu bytes "
                          "at %p with %s failed: %s", iface->super.params.rank, len,
                          (void *)base, ofi_prov_name(iface), fi_strerror(-rc));
    }
    memset(m, 0, sizeof(*m));
    m->base = base;
    m->len = len;
    m->mr = mr;
    m->desc = fi_mr_desc(mr);
    return COLL_OK;
}

static ofi_mr_t *mr_lookup(ofi_iface_t *iface, uintptr_t start, uintptr_t end)
{
    for (int i = 0; i < iface->nmrs; i++) {
        ofi_mr_t *m = &iface->mrs[i];
        if (m->base <= start && end <= m->base + m->len)
            return m;
    }
    return NULL;
}

/* A free slot: an empty one, else the least recently used idle entry. */
static ofi_mr_t *mr_slot(ofi_iface_t *iface)
{
    ofi_mr_t *victim = NULL;

    if (iface->nmrs < iface->mr_cap)
        return &iface->mrs[iface->nmrs++];
    for (int i = 0; i < iface->nmrs; i++) {
        ofi_mr_t *m = &iface->mrs[i];
        if (m->refs == 0 && (!victim || m->used < victim->used))
            victim = m;
    }
    if (victim)
        fi_close(&victim->mr->fid);
    return victim;
}

coll_status_t ofi_mr_get(ofi_iface_t *iface, const void *buf, size_t len, ofi_mr_t **mr_p)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)buf & ~(page - 1);
    uintptr_t end = ((uintptr_t)buf + (len ? len : 1) + page - 1) & ~(page - 1);
    ofi_mr_t fresh, *m = mr_lookup(iface, start, end);

    if (!m) {
        COLL_CHECK(mr_register(iface, start, end - start, &fresh));
        m = mr_slot(iface);
        if (m) {
            *m = fresh;
            m->cached = 1;
        } else { /* every slot is held by an operation, or the cache is off */
            m = malloc(sizeof(*m));
            if (!m) {
                fi_close(&fresh.mr->fid);
                return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
            }
            *m = fresh;
        }
    }
    m->refs++;
    m->used = ++iface->mr_clock;
    *mr_p = m;
    return COLL_OK;
}

void ofi_mr_put(ofi_iface_t *iface, ofi_mr_t *m)
{
    (void)iface;
    if (--m->refs == 0 && !m->cached) {
        fi_close(&m->mr->fid);
        free(m);
    }
}

void ofi_mr_cache_free(ofi_iface_t *iface)
{
    for (int i = 0; i < iface->nmrs; i++)
        fi_close(&iface->mrs[i].mr->fid);
    free(iface->mrs);
    iface->mrs = NULL;
    iface->nmrs = 0;
}
