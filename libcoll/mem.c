/*
 * mem.c: coll_mem_alloc and coll_mem_free, and the table of regions they
 * keep (mem.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll.h"
#include "error.h"
#include "log.h"
#include "mem.h"

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static coll_mem_region_t *regions; /* [nregions], unordered */
static size_t nregions, regions_cap;
static uint64_t next_id = 1;

int coll_mem_find(const void *buf, size_t len, coll_mem_region_t *out)
{
    uint64_t a = (uint64_t)(uintptr_t)buf;
    int found = 0;

    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nregions && !found; i++) {
        const coll_mem_region_t *r = &regions[i];
        if (coll_span_within(a, len, r->base, r->len)) {
            *out = *r;
            found = 1;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

/* Append r to the table: 0, or -1 when the table cannot grow. */
static int table_add(coll_mem_region_t *r)
{
    int ret = 0;

    pthread_mutex_lock(&mem_lock);
    if (nregions == regions_cap) {
        size_t cap = regions_cap ? 2 * regions_cap : 16;
        coll_mem_region_t *t = realloc(regions, cap * sizeof(*t));
        if (!t) {
            ret = -1;
            goto out;
        }
        regions = t;
        regions_cap = cap;
    }
    r->id = next_id++;
    regions[nregions++] = *r;
out:
    pthread_mutex_unlock(&mem_lock);
    return ret;
}

/* Take the region that starts at p out of the table: 1 and *out, or 0. */
static int table_take(const void *p, coll_mem_region_t *out)
{
    uint64_t a = (uint64_t)(uintptr_t)p;
    int found = 0;

    pthread_mutex_lock(&mem_lock);
    for (size_t i = 0; i < nregions; i++) {
        if (regions[i].base == a) {
            *out = regions[i];
            regions[i] = regions[--nregions];
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

coll_status_t coll_mem_alloc(void **ptr, size_t bytes)
{
    coll_status_t st = COLL_OK;
    coll_mem_region_t r = {.fd = -1};
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p = MAP_FAILED;
    struct stat sb;

    if (!ptr || bytes == 0)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG, "coll_mem_alloc: %s",
                          !ptr ? "ptr is NULL" : "0 bytes asked for");
    if (bytes > SIZE_MAX - page)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "coll_mem_alloc: %zu bytes is more than any host has", bytes);
    r.len = (bytes + page - 1) & ~(page - 1);
    r.fd = memfd_create("coll_mem", MFD_CLOEXEC);
    if (r.fd < 0) {
        st = coll_error(COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "coll_mem_alloc: memfd_create: %s",
                        strerror(errno));
        goto out;
    }
    if (ftruncate(r.fd, (off_t)r.len) != 0 || fstat(r.fd, &sb) != 0) {
        st = coll_error(COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "coll_mem_alloc: cannot size a "
                        "memfd to %llu bytes: %s", (unsigned long long)r.len, strerror(errno));
        goto out;
    }
    r.ino = (uint64_t)sb.st_ino;
    p = mmap(NULL, r.len, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    if (p == MAP_FAILED) {
        st = coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "coll_mem_alloc: cannot map "
                        "%llu bytes: %s", (unsigned long long)r.len, strerror(errno));
        goto out;
    }
    r.base = (uint64_t)(uintptr_t)p;
    if (table_add(&r) != 0) {
        st = coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY,
                        "coll_mem_alloc: cannot grow the table of regions");
        goto out;
    }
    COLL_TRACE(COLL_SUBSYS_INIT, "coll_mem_alloc: region %llu, %llu bytes at %p (memfd %d)",
               (unsigned long long)r.id, (unsigned long long)r.len, p, r.fd);
    *ptr = p;
out:
    if (st != COLL_OK) {
        if (p != MAP_FAILED)
            munmap(p, r.len);
        if (r.fd >= 0)
            close(r.fd);
    }
    return st;
}

coll_status_t coll_mem_free(void *ptr)
{
    coll_mem_region_t r, inside;

    if (!ptr)
        return COLL_OK;
    if (!table_take(ptr, &r)) {
        if (coll_mem_find(ptr, 1, &inside))
            return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG, "coll_mem_free: %p "
                              "points %llu bytes into a region from coll_mem_alloc, not at "
                              "its start (%p)", ptr,
                              (unsigned long long)((uintptr_t)ptr - inside.base),
                              (void *)(uintptr_t)inside.base);
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG, "coll_mem_free: %p was not "
                          "allocated by coll_mem_alloc, or was freed already", ptr);
    }
    munmap((void *)(uintptr_t)r.base, r.len);
    close(r.fd);
    return COLL_OK;
}
