/*
 * verbs_mr.c: the memory registration cache (verbs_cfg.h). Registering
 * pins pages and costs tens of microseconds per megabyte, so a buffer used
 * again (the same collective buffer every iteration) should find its
 * registration. The cache is a short LRU list searched linearly: it holds
 * at most COLL_IB_MR_CACHE unused entries (a few hundred at most), and a
 * search is cheap next to the transfer that needs it.
 */
#include <stdlib.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "verbs_cfg.h"

void verbs_mr_cache_init(verbs_mr_cache_t *c, const verbs_mr_ops_t *ops, void *ctx, int cap)
{
    long page = sysconf(_SC_PAGESIZE);
    c->ops = ops;
    c->ctx = ctx;
    coll_list_init(&c->lru);
    c->n = 0;
    c->cap = cap < 0 ? 0 : cap;
    c->page = page > 0 ? (size_t)page : 4096;
    c->hits = c->misses = 0;
}

static void mr_drop(verbs_mr_cache_t *c, verbs_mr_t *mr)
{
    coll_list_del(&mr->link);
    c->ops->dereg(c->ctx, mr->handle);
    c->n--;
    free(mr);
}

void verbs_mr_cache_fini(verbs_mr_cache_t *c)
{
    while (!coll_list_empty(&c->lru))
        mr_drop(c, coll_list_first(&c->lru, verbs_mr_t, link));
}

/* Unused entries beyond the cap go, least recently used first. */
static void mr_trim(verbs_mr_cache_t *c)
{
    int unused = 0;
    coll_list_t *pos;
    for (pos = c->lru.next; pos != &c->lru; pos = pos->next)
        unused += coll_container_of(pos, verbs_mr_t, link)->refs == 0;
    for (pos = c->lru.prev; pos != &c->lru && unused > c->cap;) {
        verbs_mr_t *mr = coll_container_of(pos, verbs_mr_t, link);
        pos = pos->prev;
        if (mr->refs == 0) {
            mr_drop(c, mr);
            unused--;
        }
    }
}

static verbs_mr_t *mr_find(verbs_mr_cache_t *c, uintptr_t start, uintptr_t end)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, &c->lru) {
        verbs_mr_t *mr = coll_container_of(pos, verbs_mr_t, link);
        if (mr->start <= start && end <= mr->end)
            return mr;
    }
    return NULL;
}

/* Unused entries inside [start, end) are superseded by a new one covering it. */
static void mr_drop_covered(verbs_mr_cache_t *c, uintptr_t start, uintptr_t end)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, &c->lru) {
        verbs_mr_t *mr = coll_container_of(pos, verbs_mr_t, link);
        if (mr->refs == 0 && start <= mr->start && mr->end <= end)
            mr_drop(c, mr);
    }
}

static coll_status_t mr_register(verbs_mr_cache_t *c, uintptr_t start, uintptr_t end,
                                 verbs_mr_t **mr_p)
{
    verbs_mr_t *mr = calloc(1, sizeof(*mr));
    coll_status_t st;

    if (!mr)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate a registration");
    st = c->ops->reg(c->ctx, (void *)start, end - start, &mr->handle, &mr->lkey, &mr->rkey);
    if (st != COLL_OK) {
        free(mr);
        return st;
    }
    mr->start = start;
    mr->end = end;
    c->n++;
    *mr_p = mr;
    return COLL_OK;
}

coll_status_t verbs_mr_get(verbs_mr_cache_t *c, const void *addr, size_t len, verbs_mr_t **mr_p)
{
    uintptr_t a = (uintptr_t)addr, start, end;
    verbs_mr_t *mr;

    if (len == 0 || a + len < a || a + len > UINTPTR_MAX - c->page)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_INVALID_ARG,
                          "cannot register %zu bytes at %p", len, addr);
    start = a & ~(uintptr_t)(c->page - 1);
    end = (a + len + c->page - 1) & ~(uintptr_t)(c->page - 1);
    mr = mr_find(c, start, end);
    if (mr) {
        c->hits++;
        coll_list_del(&mr->link);
    } else {
        c->misses++;
        mr_drop_covered(c, start, end);
        COLL_CHECK(mr_register(c, start, end, &mr));
    }
    coll_list_insert_after(&c->lru, &mr->link);
    mr->refs++;
    *mr_p = mr;
    return COLL_OK;
}

void verbs_mr_put(verbs_mr_cache_t *c, verbs_mr_t *mr)
{
    mr->refs--;
    if (mr->refs == 0)
        mr_trim(c);
}
