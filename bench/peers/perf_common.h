/*
 * perf_common.h: the part of the peer benchmarks that does not depend on
 * the library being measured.
 *
 * bench/peers/mpi_perf.c (built against Open MPI and against MPICH) and
 * bench/peers/gloo_perf.cc (Gloo) measure the same collectives the same
 * way as libcoll's own bench/coll_perf.c, so that their CSV rows can be put
 * side by side: same options, same sizes, same input values (exact in any
 * reduction order, checked with zero tolerance), same timing, same CSV.
 * Each peer supplies a small table of functions (perf_backend_t); the
 * sweep, timing, checking and output live in perf_common.c.
 *
 * Buffers follow NCCL's conventions (nccl-tests doc/PERFORMANCE.md):
 *   size  = bytes of the largest buffer of the call: the per-rank buffer
 *           for all_reduce, broadcast and reduce; the whole n * chunk
 *           buffer for all_gather, reduce_scatter and alltoall
 *   in place: all_gather sends from recv + rank * chunk, reduce_scatter
 *           receives into send + rank * chunk, the others use one buffer.
 */
#ifndef PEERS_PERF_COMMON_H
#define PEERS_PERF_COMMON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PERF_ALL_REDUCE,
    PERF_ALL_GATHER,
    PERF_BROADCAST,
    PERF_REDUCE,
    PERF_REDUCE_SCATTER,
    PERF_ALLTOALL,
    PERF_P2P_LATENCY, /* OSU-style ping-pong, ranks 0 and 1 */
    PERF_P2P_BW,      /* a window of sends 0 -> 1, then a 4-byte ack */
    PERF_P2P_BIBW,    /* windows both ways at once */
    PERF_NCOLL
} perf_coll_t;

/* Window of back-to-back messages for the bandwidth tests (OSU's default). */
#define PERF_P2P_WINDOW 64

/* The options every peer benchmark understands (a subset of coll_perf's,
 * plus the few that Gloo needs because it has no launcher). */
typedef struct perf_opts {
    size_t min_bytes, max_bytes; /* -b, -e */
    double factor;               /* -f: multiply the size by this each step */
    int iters, warmup, check;    /* -n, -w, -c */
    int iters_set, warmup_set;   /* given: p2p then uses them, not OSU's */
    int root;                    /* -r: root of broadcast and reduce */
    perf_coll_t coll;            /* -C */
    const char *transport;       /* -T: the label written in the CSV */
    const char *csv_path;        /* --csv */
    double budget_s;             /* -t: cap on the timed loop per row, 0 = off */
    int place_out, place_in;     /* --placement out|in|both */
    /* Gloo only: its processes are started by our script, not a launcher. */
    int rank, nranks;            /* --rank, --nranks */
    const char *store;           /* --store: directory for the FileStore */
    const char *host;            /* --host: address to bind */
} perf_opts_t;

/* What a peer library provides. Collective calls get NCCL-style pointers
 * (see above) and count = elements per rank chunk (the whole buffer for
 * all_reduce, broadcast and reduce). */
typedef struct perf_backend {
    const char *library;         /* CSV "library": openmpi, mpich, gloo */
    char version[64];            /* CSV "version": 4.1.4 */
    int rank, nranks;
    void (*barrier)(void);
    /* Element-wise maximum over ranks, in place, result on every rank. */
    void (*max_doubles)(double *v, int n);
    long long (*sum_ll)(long long v);
    /* 0 when the library has no such call: the row is left out. */
    int (*supports)(perf_coll_t coll, int inplace);
    /* Called before the first call of a row (Gloo binds buffers there). */
    void (*prepare)(perf_coll_t coll, int inplace, float *send, float *recv, size_t count,
                    int root);
    void (*run)(perf_coll_t coll, int inplace, float *send, float *recv, size_t count, int root);
    /* MPI's in-place reduce-scatter leaves the result at the start of the
     * buffer, not at rank * chunk as NCCL does: 1 says so. */
    int rs_inplace_result_at_start;
    /* Point-to-point for the p2p tests: start a send or a receive of
     * `bytes` from/to buf, then wait for all started ones. */
    void (*isend)(const void *buf, size_t bytes, int peer, int tag);
    void (*irecv)(void *buf, size_t bytes, int peer, int tag);
    void (*waitall)(void);
} perf_backend_t;

/* Parse argv into opts (exits with a usage message on a bad option; only
 * rank 0 should print, so pass quiet = 1 elsewhere). */
void perf_parse(int argc, char **argv, perf_opts_t *opts, int quiet);

/* "all_reduce" -> PERF_ALL_REDUCE; -1 if unknown. */
int perf_coll_from_name(const char *name);
const char *perf_coll_name(perf_coll_t coll);

/* Run the whole sweep; returns the number of wrong elements seen (rank 0). */
long long perf_run(const perf_opts_t *opts, const perf_backend_t *be);

/* Monotonic seconds. */
double perf_now(void);

#ifdef __cplusplus
}
#endif

#endif /* PEERS_PERF_COMMON_H */
