/*
 * placement.c: COLL_BIND, binding the calling thread to one CPU at init.
 *
 * Why a library binds at all: ranks that wait by polling and yielding
 * hand the CPU to each other so often when they share one that the
 * kernel sees both as cache-hot and may keep them there. On the 2-core
 * development machine 2 unbound ranks started by a plain fork took 1.5-1.7
 * us for a 16-byte all-reduce in most short launches instead of about 0.2
 * (docs/performance-sets.md). collrun and mpirun bind their ranks; torchrun,
 * Slurm without --cpu-bind and a user's own fork do not, so the library
 * offers to do it. Off by default: the binding is the thread's, and
 * threads and processes it starts later (data loaders) inherit it.
 *
 * Which CPU: local rank i (i-th among the ranks on our host, in rank
 * order) takes the i-th CPU of the thread's affinity mask, as collrun does.
 * A launcher or cgroup that narrowed the mask is respected: auto binds
 * only when every local rank can have a CPU of the mask to itself, so a
 * rank already bound to one CPU with others on its host stays as it is.
 * That also keeps a later communicator (a split, which numbers the local
 * ranks differently) from moving a thread bound by an earlier one: its
 * mask then holds one CPU, which core picks again.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <strings.h>

#include "comm.h"
#include "log.h"
#include "placement.h"

static const char *const bind_names[] = {"none", "auto", "core"};

coll_status_t coll_bind_parse(const char *spec, coll_bind_t *mode_p)
{
    for (int m = 0; m < (int)COLL_ARRAY_LEN(bind_names); m++)
        if (strcasecmp(spec, bind_names[m]) == 0) {
            *mode_p = (coll_bind_t)m;
            return COLL_OK;
        }
    return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                      "COLL_BIND='%s' is not one of none, auto, core", spec);
}

void coll_local_rank(const struct coll_comm *comm, int *index_p, int *count_p)
{
    uint64_t host = comm->peers[comm->rank].info.host_hash;
    int index = 0, count = 0;

    for (int r = 0; r < comm->nranks; r++) {
        if (comm->peers[r].info.host_hash != host)
            continue;
        if (r < comm->rank)
            index++;
        count++;
    }
    *index_p = index;
    *count_p = count;
}

/* The n-th CPU set in `set`, lowest first (n < CPU_COUNT(set)). */
static int nth_cpu(const cpu_set_t *set, int n)
{
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set) && n-- == 0)
            return c;
    return -1;
}

void coll_place_self(const struct coll_comm *comm)
{
    const char *mode = bind_names[comm->bind];
    cpu_set_t set;
    int index, nlocal, ncpus, cpu;

    if (comm->bind == COLL_BIND_NONE)
        return;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        COLL_WARN(COLL_SUBSYS_INIT, "rank %d: COLL_BIND=%s: cannot read the CPU affinity (%s); "
                  "running unbound", comm->rank, mode, strerror(errno));
        return;
    }
    coll_local_rank(comm, &index, &nlocal);
    ncpus = CPU_COUNT(&set);
    /* more ranks than CPUs: the kernel balances them better than a fixed
     * round robin (collrun.c has the measurement) */
    if (comm->bind == COLL_BIND_AUTO && (nlocal < 2 || nlocal > ncpus)) {
        COLL_INFO(COLL_SUBSYS_INIT, "rank %d: COLL_BIND=auto: %d rank(s) on this host and %d "
                  "CPU(s) in the affinity mask; not binding", comm->rank, nlocal, ncpus);
        return;
    }
    cpu = nth_cpu(&set, index % ncpus);
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        COLL_WARN(COLL_SUBSYS_INIT, "rank %d: COLL_BIND=%s: cannot bind to CPU %d (%s); running "
                  "unbound", comm->rank, mode, cpu, strerror(errno));
        return;
    }
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: COLL_BIND=%s: bound to CPU %d (local rank %d of %d, "
              "%d CPU(s) in the mask)", comm->rank, mode, cpu, index, nlocal, ncpus);
}
