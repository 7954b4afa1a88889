/*
 * flight.c: the flight recorder (flight.h). Recording is two stores per
 * collective into a ring the communicator owns; the report is written
 * only when a wait times out, so it costs nothing until then.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "comm.h"
#include "flight.h"
#include "log.h"
#include "param.h"
#include "reduce.h"

void coll_flight_start(struct coll_comm *comm, uint32_t seq, const coll_args_t *a)
{
    coll_flight_entry_t *e;

    if (!comm->flight && !(comm->flight = calloc(COLL_FLIGHT_ENTRIES, sizeof(*e))))
        return; /* out of memory: the job runs on, without a history */
    e = &comm->flight[seq % COLL_FLIGHT_ENTRIES];
    *e = (coll_flight_entry_t){
        .seq = seq, .coll = a->coll, .count = a->count, .dt = a->dt, .op = a->op,
        .root = a->root, .algo = a->algo, .status = COLL_INPROGRESS,
        .start_ns = coll_time_coarse_ns(), /* two fine reads were 40 ns of a 0.3 us call */
    };
}

void coll_flight_end(struct coll_comm *comm, uint32_t seq, coll_status_t status)
{
    coll_flight_entry_t *e = comm->flight ? &comm->flight[seq % COLL_FLIGHT_ENTRIES] : NULL;

    if (e && e->seq == seq && e->start_ns) {
        e->status = status;
        e->end_ns = coll_time_coarse_ns();
    }
}

static void write_entry(FILE *f, const coll_flight_entry_t *e, uint64_t now)
{
    int reduces = coll_coll_reduces(e->coll);
    int rooted = e->coll == COLL_BCAST || e->coll == COLL_REDUCE || e->coll == COLL_SCATTER ||
                 e->coll == COLL_GATHER;

    fprintf(f, "#%u %s count %zu %s", e->seq, coll_coll_name(e->coll), e->count,
            coll_reduce_datatype_name(e->dt));
    if (reduces)
        fprintf(f, " %s", coll_reduce_op_name(e->op));
    if (rooted)
        fprintf(f, " root %d", e->root);
    fprintf(f, " algorithm %s: ", e->algo ? e->algo : "?");
    if (e->status == COLL_INPROGRESS)
        fprintf(f, "in flight for %.2f s\n", (double)(now - e->start_ns) * 1e-9);
    else
        fprintf(f, "%s after %.0f ms\n", e->status == COLL_OK ? "done" : coll_status_str(e->status),
                (double)(e->end_ns - e->start_ns) * 1e-6);
}

const char *coll_flight_report(struct coll_comm *comm, const char *why)
{
    static __thread char path[512];
    const char *pattern = coll_param_raw(COLL_PARAM_HANG_REPORT);
    uint64_t now = coll_time_coarse_ns();
    char host[64] = "?";
    FILE *f;

    if (!pattern[0])
        return NULL;
    coll_log_expand_path(pattern, comm->rank, path, sizeof(path));
    f = fopen(path, "w");
    if (!f) {
        COLL_WARN(COLL_SUBSYS_COLL, "rank %d: cannot write the hang report %s (COLL_HANG_REPORT)",
                  comm->rank, path);
        return NULL;
    }
    gethostname(host, sizeof(host) - 1);
    fprintf(f, "libcoll hang report: rank %d of %d, pid %d on %s\n", comm->rank, comm->nranks,
            (int)getpid(), host);
    fprintf(f, "timed out: %s\n", why);
    fprintf(f, "running:\n");
    coll_sched_write_running(comm, f);
    fprintf(f, "last collectives (oldest first; times to the kernel's clock tick, a few ms):\n");
    for (uint32_t k = 0; comm->flight && k < COLL_FLIGHT_ENTRIES; k++) {
        /* the ring's oldest entry follows the newest sequence number */
        const coll_flight_entry_t *e =
            &comm->flight[(comm->coll_seq + k) % COLL_FLIGHT_ENTRIES];
        if (e->start_ns)
            write_entry(f, e, now);
    }
    fclose(f);
    return path;
}
