/*
 * mpi_perf.c: the peer benchmark for MPI, built twice, against Open MPI
 * (mpicc.openmpi) and against MPICH (mpicc.mpich), into $BUILD/peers/.
 * It takes coll_perf's options and writes coll_perf's CSV (see
 * perf_common.h), so that bench/compare.sh can set its rows beside
 * libcoll's. Which transport MPI uses is decided by the launcher's
 * settings (bench/compare.sh); -T only labels the rows.
 *
 *   mpirun -np 4 mpi_perf.openmpi -C all_reduce -b 8 -e 64M -f 4 --csv out.csv
 *
 * How each collective maps to MPI (in place = MPI_IN_PLACE):
 *   all_reduce      MPI_Allreduce
 *   all_gather      MPI_Allgather
 *   broadcast       MPI_Bcast; MPI has no out-of-place broadcast, so the
 *                   "out" row is the root's memcpy(recv, send) + MPI_Bcast,
 *                   what a program wanting separate buffers has to write
 *   reduce          MPI_Reduce (in place: MPI_IN_PLACE at the root only)
 *   reduce_scatter  MPI_Reduce_scatter_block (in place, MPI leaves the
 *                   result at the start of the buffer)
 *   alltoall        MPI_Alltoall
 *   p2p_*           MPI_Isend / MPI_Irecv / MPI_Waitall
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf_common.h"

#define FINALIZE_WATCHDOG_S 15
#define MAX_REQS (2 * PERF_P2P_WINDOW + 4)

static MPI_Request reqs[MAX_REQS];
/* Real statuses, not MPI_STATUSES_IGNORE: gcc 12 warns about MPICH's
 * (MPI_Status *)1 as an out-of-bounds access. */
static MPI_Status stats[MAX_REQS];
static int nreqs;

static void mpi_barrier(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
}

static void mpi_max_doubles(double *v, int n)
{
    MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

static long long mpi_sum_ll(long long v)
{
    long long s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

static int mpi_supports(perf_coll_t coll, int inplace)
{
    (void)coll, (void)inplace;
    return 1;
}

static void mpi_prepare(perf_coll_t coll, int inplace, float *send, float *recv, size_t count,
                        int root)
{
    (void)coll, (void)inplace, (void)send, (void)recv, (void)count, (void)root;
}

static void mpi_run(perf_coll_t coll, int inplace, float *send, float *recv, size_t count,
                    int root)
{
    MPI_Comm w = MPI_COMM_WORLD;
    int c = (int)count, rank;
    void *in = inplace ? MPI_IN_PLACE : (void *)send;

    switch (coll) {
    case PERF_ALL_REDUCE:
        MPI_Allreduce(in, recv, c, MPI_FLOAT, MPI_SUM, w);
        break;
    case PERF_ALL_GATHER:
        if (inplace)
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, c, MPI_FLOAT, w);
        else
            MPI_Allgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, w);
        break;
    case PERF_BROADCAST:
        MPI_Comm_rank(w, &rank);
        if (!inplace && rank == root)
            memcpy(recv, send, count * sizeof(float));
        MPI_Bcast(recv, c, MPI_FLOAT, root, w);
        break;
    case PERF_REDUCE:
        MPI_Comm_rank(w, &rank);
        if (inplace && rank != root) /* MPI_IN_PLACE is for the root only */
            MPI_Reduce(send, NULL, c, MPI_FLOAT, MPI_SUM, root, w);
        else
            MPI_Reduce(in, recv, c, MPI_FLOAT, MPI_SUM, root, w);
        break;
    case PERF_REDUCE_SCATTER:
        /* in place, MPI wants the whole buffer (our send pointer) */
        MPI_Reduce_scatter_block(in, inplace ? send : recv, c, MPI_FLOAT, MPI_SUM, w);
        break;
    case PERF_ALLTOALL:
        if (inplace)
            MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, c, MPI_FLOAT, w);
        else
            MPI_Alltoall(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, w);
        break;
    default: break;
    }
}

static void mpi_isend(const void *buf, size_t bytes, int peer, int tag)
{
    MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[nreqs++]);
}

static void mpi_irecv(void *buf, size_t bytes, int peer, int tag)
{
    MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[nreqs++]);
}

static void mpi_waitall(void)
{
    MPI_Waitall(nreqs, reqs, stats);
    nreqs = 0;
}

/* "Open MPI v4.1.4, package: ..." or "MPICH Version:\t4.0.2\n..." -> "4.1.4" */
static void short_version(char *out, size_t len)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    const char *p;
    int n = 0;
    size_t k = 0;

    MPI_Get_library_version(lib, &n);
    for (p = lib; *p && !(*p >= '0' && *p <= '9'); p++)
        ;
    while (k + 1 < len && ((*p >= '0' && *p <= '9') || *p == '.'))
        out[k++] = *p++;
    out[k] = '\0';
    if (k == 0)
        snprintf(out, len, "unknown");
}

/* MPICH 4.0.2 over UCX's TCP sometimes never returns from MPI_Finalize
 * (shared/peers/RESULTS.md, observation 6). Every row is written and
 * flushed before it, so a stuck finalize is reported and cut short. */
static void finalize_stuck(int sig)
{
    static const char msg[] = "mpi_perf: MPI_Finalize did not return; exiting\n";
    (void)sig;
    if (write(2, msg, sizeof(msg) - 1) < 0)
        _exit(0);
    _exit(0);
}

int main(int argc, char **argv)
{
    perf_opts_t opts;
    perf_backend_t be = {
#ifdef OPEN_MPI
        .library = "openmpi",
#elif defined(MPICH)
        .library = "mpich",
#else
        .library = "mpi",
#endif
        .barrier = mpi_barrier,
        .max_doubles = mpi_max_doubles,
        .sum_ll = mpi_sum_ll,
        .supports = mpi_supports,
        .prepare = mpi_prepare,
        .run = mpi_run,
        .rs_inplace_result_at_start = 1,
        .isend = mpi_isend,
        .irecv = mpi_irecv,
        .waitall = mpi_waitall,
    };
    long long wrong;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &be.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &be.nranks);
    short_version(be.version, sizeof(be.version));
    perf_parse(argc, argv, &opts, be.rank != 0);
    if (opts.max_bytes / sizeof(float) > 0x7fffffff) {
        if (be.rank == 0)
            fprintf(stderr, "mpi_perf: -e too large for an int count\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    wrong = perf_run(&opts, &be);
    fflush(NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    signal(SIGALRM, finalize_stuck);
    alarm(FINALIZE_WATCHDOG_S);
    MPI_Finalize();
    return be.rank == 0 && wrong ? 1 : 0;
}
