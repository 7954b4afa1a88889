/*
 * registry.c: every algorithm, its restrictions and its cost, and how one
 * is chosen for a call (MPICH's three layers): a choice forced by
 * COLL_ALGO, checked against the algorithm's restrictions (an error, or a
 * logged fallback, as COLL_ALGO_FALLBACK says); otherwise the cheapest
 * usable algorithm by the alpha-beta-gamma model of algorithms.h, with
 * alpha and beta from the transports in use and gamma from the reduction
 * kernel. A change of choice is logged under ALGO with the whole table.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "algorithms.h"
#include "log.h"
#include "param.h"
#include "reduce.h"

/* ---- cost formulas (see each algorithm's header comment) ----------------- */

static double lg(double p)
{
    return coll_log2(p);
}

static double fold(const coll_cost_in_t *c, int reduces)
{
    double p2 = coll_pow2_floor((int)c->p);
    if (p2 == c->p)
        return 0;
    return 2 * c->alpha + 2 * c->n * c->beta + (reduces ? c->n * c->gamma : 0);
}

static double cost_barrier_dissemination(const coll_cost_in_t *c)
{
    return lg(c->p) * c->alpha;
}

static double cost_allreduce_naive(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return 2 * q * c->alpha + 2 * q * c->n * c->beta + q * c->n * c->gamma;
}

static double cost_allreduce_ring(const coll_cost_in_t *c)
{
    double q = c->p - 1, chunks = c->n / c->p / c->chunk;
    chunks = chunks < 1 ? 1 : chunks;
    return 2 * (q + chunks - 1) * c->alpha + 2 * c->n * q / c->p * c->beta +
           c->n * q / c->p * c->gamma;
}

static double cost_allreduce_parallel(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    /* the same volume as the ring, but p-1 messages per phase leave at once */
    return 2 * q * c->alpha + 2 * c->n * q / c->p * c->beta + c->n * q / c->p * c->gamma +
           q * c->alpha;
}

static double cost_allreduce_butterfly(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return 2 * lg(coll_pow2_floor((int)c->p)) * c->alpha + 2 * c->n * q / c->p * c->beta +
           c->n * q / c->p * c->gamma + fold(c, 1);
}

static double cost_allreduce_recursive_doubling(const coll_cost_in_t *c)
{
    double steps = lg(coll_pow2_floor((int)c->p));
    return steps * (c->alpha + c->n * c->beta + c->n * c->gamma) + fold(c, 1);
}

/* ---- restrictions ----------------------------------------------------------- */

/* Deterministic recursive doubling keeps p vectors. */
static int usable_rd(const coll_args_t *a, int nranks, const char **why)
{
    if (!a->deterministic || a->count * a->esize <= a->det_scratch_max / (size_t)nranks)
        return 1;
    *why = "in deterministic mode it keeps every rank's vector, which exceeds "
           "COLL_DET_SCRATCH_MAX";
    return 0;
}

/* ---- the table ------------------------------------------------------------------ */

static const coll_algo_t table[] = {
    {COLL_BARRIER, "dissemination", coll_barrier_dissemination, NULL,
     cost_barrier_dissemination},
    {COLL_ALLREDUCE, "ring", coll_allreduce_ring, NULL, cost_allreduce_ring},
    {COLL_ALLREDUCE, "butterfly", coll_allreduce_butterfly, NULL, cost_allreduce_butterfly},
    {COLL_ALLREDUCE, "recursive_doubling", coll_allreduce_recursive_doubling, usable_rd,
     cost_allreduce_recursive_doubling},
    {COLL_ALLREDUCE, "parallel", coll_allreduce_parallel, NULL, cost_allreduce_parallel},
    {COLL_ALLREDUCE, "naive", coll_allreduce_naive, NULL, cost_allreduce_naive},
};

const coll_algo_t *coll_algo_table(int *count_p)
{
    *count_p = (int)COLL_ARRAY_LEN(table);
    return table;
}

const coll_algo_t *coll_algo_find(coll_coll_t coll, const char *name)
{
    for (size_t i = 0; i < COLL_ARRAY_LEN(table); i++)
        if (table[i].coll == coll && strcasecmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

/* "bcast" is accepted for broadcast, as NCCL users type it. */
static int coll_by_name(const char *name, coll_coll_t *coll_p)
{
    for (int c = 0; c < COLL_NUM_COLLS; c++)
        if (strcasecmp(name, coll_coll_name((coll_coll_t)c)) == 0) {
            *coll_p = (coll_coll_t)c;
            return 0;
        }
    if (strcasecmp(name, "bcast") == 0) {
        *coll_p = COLL_BCAST;
        return 0;
    }
    return -1;
}

static void list_algos(coll_coll_t coll, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < COLL_ARRAY_LEN(table) && used < len; i++)
        if (table[i].coll == coll)
            used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                                     table[i].name);
}

coll_status_t coll_algo_parse_forced(const char *spec, const coll_algo_t *forced[COLL_NUM_COLLS])
{
    char buf[512], names[256];

    for (int c = 0; c < COLL_NUM_COLLS; c++)
        forced[c] = NULL;
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(item, ':');
        coll_coll_t coll;
        if (!colon || coll_by_name((*colon = '\0', item), &coll) != 0)
            return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                              "COLL_ALGO='%s': '%s' is not collective:algorithm (collectives: "
                              "barrier, broadcast, reduce, allreduce, allgather, reduce_scatter, "
                              "alltoall, alltoallv, scatter, gather)", spec, item);
        forced[coll] = coll_algo_find(coll, colon + 1);
        if (!forced[coll]) {
            list_algos(coll, names, sizeof(names));
            return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                              "COLL_ALGO='%s': %s has no algorithm '%s' (it has: %s)", spec,
                              coll_coll_name(coll), colon + 1, names[0] ? names : "none yet");
        }
    }
    return COLL_OK;
}

/* ---- choosing -------------------------------------------------------------------- */

/* The vector the cost formulas' n means: the whole buffer of the call. */
static double call_bytes(const coll_args_t *a, int p)
{
    double n = (double)a->count * (double)a->esize;
    switch (a->coll) {
    case COLL_ALLGATHER:
    case COLL_REDUCE_SCATTER:
    case COLL_ALLTOALL:
    case COLL_SCATTER:
    case COLL_GATHER:
        return n * p; /* count is per block */
    default:
        return n;
    }
}

_Static_assert(COLL_NUM_COLLS <= COLL_MAX_COLLS, "raise COLL_MAX_COLLS in comm.h");

static void cost_inputs(struct coll_comm *comm, const coll_args_t *a, coll_cost_in_t *c)
{
    size_t chunk = coll_chunk_elems(a) * a->esize;
    c->p = comm->nranks;
    c->n = call_bytes(a, comm->nranks);
    c->alpha = comm->alpha;
    c->beta = comm->beta;
    c->gamma = coll_reduce_gamma();
    c->chunk = (double)chunk;
}

static const coll_algo_t *cheapest(struct coll_comm *comm, const coll_args_t *a, char *tbl,
                                   size_t len)
{
    const coll_algo_t *best = NULL;
    double best_t = 0;
    coll_cost_in_t c;
    size_t used = 0;

    cost_inputs(comm, a, &c);
    for (size_t i = 0; i < COLL_ARRAY_LEN(table); i++) {
        const coll_algo_t *al = &table[i];
        const char *why = NULL;
        if (al->coll != a->coll)
            continue;
        if (al->usable && !al->usable(a, comm->nranks, &why)) {
            used += (size_t)snprintf(tbl + used, used < len ? len - used : 0, " %s=n/a",
                                     al->name);
            continue;
        }
        double t = al->cost(&c);
        used += (size_t)snprintf(tbl + used, used < len ? len - used : 0, " %s=%.1fus",
                                 al->name, t * 1e6);
        if (!best || t < best_t) {
            best = al;
            best_t = t;
        }
    }
    return best;
}

coll_status_t coll_algo_select(struct coll_comm *comm, const coll_args_t *a,
                               const coll_algo_t **algo_p)
{
    const coll_algo_t *forced = comm->forced[a->coll], *best;
    const char *why = NULL;
    char tbl[512] = "";

    if (forced && (!forced->usable || forced->usable(a, comm->nranks, &why))) {
        *algo_p = forced;
        return COLL_OK;
    }
    best = cheapest(comm, a, tbl, sizeof(tbl));
    if (forced) {
        const char *mode = coll_param_raw(COLL_PARAM_ALGO_FALLBACK);
        if (strcasecmp(mode, "warn") != 0 && strcasecmp(mode, "silent") != 0)
            return coll_comm_error(comm, COLL_SUBSYS_ALGO, COLL_ERR_INVALID_USAGE,
                                   "COLL_ALGO forces %s:%s, which cannot run this call: %s "
                                   "(set COLL_ALGO_FALLBACK=warn to fall back)",
                                   coll_coll_name(a->coll), forced->name, why);
        if (strcasecmp(mode, "warn") == 0)
            COLL_WARN(COLL_SUBSYS_ALGO, "rank %d: COLL_ALGO forces %s:%s, which cannot run "
                      "this call (%s); using %s", comm->rank, coll_coll_name(a->coll),
                      forced->name, why, best ? best->name : "none");
    }
    if (!best)
        return coll_comm_error(comm, COLL_SUBSYS_ALGO, COLL_ERR_UNSUPPORTED,
                               "no algorithm can run %s here", coll_coll_name(a->coll));
    if (comm->last_choice[a->coll] != best) {
        COLL_INFO(COLL_SUBSYS_ALGO, "rank %d: %s of %.0f bytes on %d ranks: %s (costs:%s; "
                  "alpha %.1f us, beta %.3f ns/B, gamma %.3f ns/B)", comm->rank,
                  coll_coll_name(a->coll), call_bytes(a, comm->nranks), comm->nranks,
                  best->name, tbl, comm->alpha * 1e6, comm->beta * 1e9,
                  coll_reduce_gamma() * 1e9);
        comm->last_choice[a->coll] = best;
    }
    COLL_TRACE(COLL_SUBSYS_ALGO, "rank %d: %s: %s (%s)", comm->rank, coll_coll_name(a->coll),
               best->name, tbl);
    *algo_p = best;
    return COLL_OK;
}

size_t coll_chunk_elems(const coll_args_t *a)
{
    size_t e = a->chunk_bytes / a->esize;
    return e ? e : 1;
}

/* gamma: seconds per byte of the float32 sum kernel, measured once per
 * process on 1 MiB (in cache: the pipelined algorithms reduce chunks that
 * were just received). */
static double gamma_s;
static pthread_once_t gamma_once = PTHREAD_ONCE_INIT;

static void measure_gamma(void)
{
    enum { N = 1 << 18 };
    float *a = calloc(N, sizeof(float)), *b = calloc(N, sizeof(float));
    double best = 1e9;

    for (int i = 0; a && b && i < 5; i++) {
        uint64_t t0 = coll_time_ns();
        coll_reduce_local(a, a, b, N, COLL_FLOAT32, COLL_SUM);
        double t = (double)(coll_time_ns() - t0) * 1e-9;
        best = t < best ? t : best;
    }
    gamma_s = (a && b) ? best / (N * sizeof(float)) : 1e-10;
    free(a);
    free(b);
}

double coll_reduce_gamma(void)
{
    pthread_once(&gamma_once, measure_gamma);
    return gamma_s;
}
