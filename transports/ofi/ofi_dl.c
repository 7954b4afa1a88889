/*
 * ofi_dl.c: libfabric, opened with dlopen when the transport is first
 * used rather than linked. Linked, it loaded with every program (and with
 * it libpsm, libpsm2, libefa, librdmacm and libnuma, whatever the host
 * has): measured on the 2-core development machine, a 256 KiB all-reduce
 * over shared memory between 2 ranks that never touched libfabric went
 * from 11 to 23-33 us per call with the library merely preloaded
 * (LD_PRELOAD, the same binary, alternating runs).
 *
 * The wrappers replace libfabric's six exported functions (ofi.h renames
 * them); they are called only after ofi_dl_load succeeded, except
 * fi_freeinfo(NULL) and fi_strerror, which cope without the library.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "error.h"
#include "log.h"
#include "ofi.h"

#define OFI_LIBRARY "libfabric.so.1"

static struct {
    int tried, loaded;
    char why[256];
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
                   struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    const char *(*strerror)(int);
    uint32_t (*version)(void);
} dl;
static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;

static void *sym(void *h, const char *name, int *missing)
{
    void *p = dlsym(h, name);
    if (!p && !*missing) {
        snprintf(dl.why, sizeof(dl.why), "%s has no %s", OFI_LIBRARY, name);
        *missing = 1;
    }
    return p;
}

static void load_once(void)
{
    int missing = 0;
    void *h = dlopen(OFI_LIBRARY, RTLD_NOW | RTLD_LOCAL);

    dl.tried = 1;
    if (!h) {
        snprintf(dl.why, sizeof(dl.why), "%s", dlerror());
        return;
    }
    *(void **)&dl.getinfo = sym(h, "fi_getinfo", &missing);
    *(void **)&dl.freeinfo = sym(h, "fi_freeinfo", &missing);
    *(void **)&dl.dupinfo = sym(h, "fi_dupinfo", &missing);
    *(void **)&dl.fabric = sym(h, "fi_fabric", &missing);
    *(void **)&dl.strerror = sym(h, "fi_strerror", &missing);
    *(void **)&dl.version = sym(h, "fi_version", &missing);
    if (missing) {
        dlclose(h);
        return;
    }
    dl.loaded = 1; /* kept open for the life of the process, as linking would */
}

coll_status_t ofi_dl_load(int rank, int required, int *loaded_p)
{
    pthread_mutex_lock(&dl_lock);
    if (!dl.tried)
        load_once();
    pthread_mutex_unlock(&dl_lock);
    *loaded_p = dl.loaded;
    if (dl.loaded || !required)
        return COLL_OK;
    return coll_error(COLL_SUBSYS_NET, COLL_ERR_UNSUPPORTED, "rank %d: ofi: cannot load "
                      "libfabric: %s (install libfabric1)", rank, dl.why);
}

int coll_fi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                    const struct fi_info *hints, struct fi_info **info)
{
    return dl.getinfo(version, node, service, flags, hints, info);
}

void coll_fi_freeinfo(struct fi_info *info)
{
    if (info)
        dl.freeinfo(info);
}

struct fi_info *coll_fi_dupinfo(const struct fi_info *info)
{
    return dl.dupinfo(info);
}

int coll_fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    return dl.fabric(attr, fabric, context);
}

uint32_t coll_fi_version(void)
{
    return dl.version();
}

const char *coll_fi_strerror(int errnum)
{
    return dl.loaded ? dl.strerror(errnum) : "libfabric is not loaded";
}
