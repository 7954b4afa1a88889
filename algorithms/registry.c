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
#include "reduce.h"

/* ---- the families ----------------------------------------------------------- */

static const coll_algo_t *const *const families[] = {
    coll_algos_core, coll_algos_reduce, coll_algos_rooted, coll_algos_exchange,
};

void coll_algo_foreach(coll_coll_t coll, void (*fn)(const coll_algo_t *algo, void *arg), void *arg)
{
    for (size_t f = 0; f < COLL_ARRAY_LEN(families); f++)
        for (const coll_algo_t *const *al = families[f]; *al; al++)
            if (coll == COLL_NUM_COLLS || (*al)->coll == coll)
                fn(*al, arg);
}

typedef struct find_ctx {
    const char *name;
    const coll_algo_t *found;
} find_ctx_t;

static void find_one(const coll_algo_t *al, void *arg)
{
    find_ctx_t *f = arg;
    if (!f->found && strcasecmp(al->name, f->name) == 0)
        f->found = al;
}

const coll_algo_t *coll_algo_find(coll_coll_t coll, const char *name)
{
    find_ctx_t f = {name, NULL};
    coll_algo_foreach(coll, find_one, &f);
    return f.found;
}

double coll_cost_fold(const coll_cost_in_t *c, int reduces)
{
    if (coll_pow2_floor((int)c->p) == (int)c->p)
        return 0;
    return 2 * c->alpha + 2 * c->n * c->beta + (reduces ? c->n * c->gamma : 0);
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

typedef struct names_ctx {
    char *buf;
    size_t len, used;
} names_ctx_t;

static void add_name(const coll_algo_t *al, void *arg)
{
    names_ctx_t *n = arg;
    if (n->used < n->len)
        n->used += (size_t)snprintf(n->buf + n->used, n->len - n->used, "%s%s",
                                    n->used ? ", " : "", al->name);
}

static void list_algos(coll_coll_t coll, char *buf, size_t len)
{
    names_ctx_t n = {buf, len, 0};
    buf[0] = '\0';
    coll_algo_foreach(coll, add_name, &n);
}

/* Parses into a local table and copies it out only when the whole spec
 * parsed; a spec longer than the buffer is refused rather than cut. */
coll_status_t coll_algo_parse_forced(const char *spec, const coll_algo_t *forced[COLL_NUM_COLLS])
{
    const coll_algo_t *out[COLL_NUM_COLLS] = {0};
    char buf[512], names[256];

    if (strlen(spec) >= sizeof(buf))
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                          "COLL_ALGO is %zu characters long, at most %zu are read", strlen(spec),
                          sizeof(buf) - 1);
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
        out[coll] = coll_algo_find(coll, colon + 1);
        if (!out[coll]) {
            list_algos(coll, names, sizeof(names));
            return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                              "COLL_ALGO='%s': %s has no algorithm '%s' (it has: %s)", spec,
                              coll_coll_name(coll), colon + 1, names[0] ? names : "none yet");
        }
    }
    memcpy(forced, out, sizeof(out));
    return COLL_OK;
}

coll_status_t coll_algo_parse_fallback(const char *spec, int *mode_p)
{
    static const char *const names[] = {"error", "warn", "silent"};

    for (int m = 0; m < (int)COLL_ARRAY_LEN(names); m++)
        if (strcasecmp(spec, names[m]) == 0) {
            *mode_p = m;
            return COLL_OK;
        }
    return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                      "COLL_ALGO_FALLBACK='%s' is not one of error, warn, silent", spec);
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
    c->gamma = comm->gamma;
    c->copy = comm->copy;
    c->chunk = (double)chunk;
    c->det = a->deterministic;
    c->crowd = comm->crowd;
    c->pull = comm->pull;
    c->one_host = comm->one_host;
}

typedef struct cheapest_ctx {
    struct coll_comm *comm;
    const coll_args_t *a;
    coll_cost_in_t c;
    const coll_algo_t *best;
    double best_t;
    char *tbl;        /* NULL: no table wanted (formatting costs microseconds) */
    size_t len, used;
} cheapest_ctx_t;

static void consider(const coll_algo_t *al, void *arg)
{
    cheapest_ctx_t *x = arg;
    const char *why = NULL;
    size_t room = x->used < x->len ? x->len - x->used : 0;

    if (al->usable && !al->usable(x->a, x->comm->nranks, &why)) {
        if (x->tbl)
            x->used += (size_t)snprintf(x->tbl + x->used, room, " %s=n/a", al->name);
        return;
    }
    double t = al->cost(&x->c);
    if (x->tbl)
        x->used += (size_t)snprintf(x->tbl + x->used, room, " %s=%.1fus", al->name, t * 1e6);
    if (!x->best || t < x->best_t) {
        x->best = al;
        x->best_t = t;
    }
}

static const coll_algo_t *cheapest(struct coll_comm *comm, const coll_args_t *a, char *tbl,
                                   size_t len)
{
    cheapest_ctx_t x = {.comm = comm, .a = a, .tbl = tbl, .len = len};
    cost_inputs(comm, a, &x.c);
    coll_algo_foreach(a->coll, consider, &x);
    return x.best;
}

/* The cost inputs and usable() depend on the call only through its
 * size and the deterministic flag (alltoallv's counts are not memoized);
 * at TRACE every choice is logged, so nothing is memoized. */
static int memo_hit(const struct coll_comm *comm, const coll_args_t *a)
{
    const struct coll_algo_memo *m = &comm->algo_memo[a->coll];
    return m->algo && !a->sendcounts && m->count == a->count && m->esize == a->esize &&
           m->det == a->deterministic && !coll_log_enabled(COLL_LOG_TRACE, COLL_SUBSYS_ALGO);
}

static void memo_store(struct coll_comm *comm, const coll_args_t *a, const coll_algo_t *best)
{
    struct coll_algo_memo *m = &comm->algo_memo[a->coll];
    m->algo = a->sendcounts ? NULL : best;
    m->count = a->count;
    m->esize = a->esize;
    m->det = a->deterministic;
}

coll_status_t coll_algo_select(struct coll_comm *comm, const coll_args_t *a,
                               const coll_algo_t **algo_p)
{
    const coll_algo_t *forced = comm->forced[a->coll], *best;
    const char *why = NULL;
    char tbl[512];

    tbl[0] = '\0'; /* not `= ""`, which clears all 512 bytes on every call */
    if (forced && (!forced->usable || forced->usable(a, comm->nranks, &why))) {
        *algo_p = forced;
        return COLL_OK;
    }
    if (!forced && memo_hit(comm, a)) {
        *algo_p = comm->algo_memo[a->coll].algo;
        return COLL_OK;
    }
    /* the table is formatted only when it may be logged: a changed choice
     * at INFO, every choice at TRACE */
    best = cheapest(comm, a, NULL, 0);
    if (best && (comm->last_choice[a->coll] != best || forced ||
                 coll_log_enabled(COLL_LOG_TRACE, COLL_SUBSYS_ALGO)))
        best = cheapest(comm, a, tbl, sizeof(tbl));
    if (forced) {
        if (comm->algo_fallback == COLL_ALGO_FALLBACK_ERROR)
            return coll_comm_error(comm, COLL_SUBSYS_ALGO, COLL_ERR_INVALID_USAGE,
                                   "COLL_ALGO forces %s:%s, which cannot run this call: %s "
                                   "(set COLL_ALGO_FALLBACK=warn to fall back)",
                                   coll_coll_name(a->coll), forced->name, why);
        if (comm->algo_fallback == COLL_ALGO_FALLBACK_WARN)
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
                  best->name, tbl, comm->alpha * 1e6, comm->beta * 1e9, comm->gamma * 1e9);
        comm->last_choice[a->coll] = best;
    }
    COLL_TRACE(COLL_SUBSYS_ALGO, "rank %d: %s: %s (%s)", comm->rank, coll_coll_name(a->coll),
               best->name, tbl);
    if (!forced)
        memo_store(comm, a, best);
    *algo_p = best;
    return COLL_OK;
}

size_t coll_chunk_elems(const coll_args_t *a)
{
    size_t e = a->chunk_bytes / a->esize;
    return e ? e : 1;
}

void coll_sched_one_rank(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    coll_vid_t c = coll_sched_copy(s, a->recvbuf, a->sendbuf, a->count * a->esize, COLL_NODEPS);
    coll_sched_finish_avg(s, a->recvbuf, a->count, COLL_DEPS(c));
}

/* gamma and copy: seconds per byte of the float32 sum kernel and of
 * memcpy, measured once per process on 1 MiB (in cache: the pipelined
 * algorithms work on chunks that were just received). */
static double gamma_s, copy_s;
static pthread_once_t measure_once = PTHREAD_ONCE_INIT;

static void measure(void)
{
    enum { N = 1 << 18 };
    float *a = calloc(N, sizeof(float)), *b = calloc(N, sizeof(float));
    double best_r = 1e9, best_c = 1e9;

    for (int i = 0; a && b && i < 5; i++) {
        uint64_t t0 = coll_time_ns();
        coll_reduce_local(a, a, b, N, COLL_FLOAT32, COLL_SUM);
        uint64_t t1 = coll_time_ns();
        memcpy(a, b, N * sizeof(float));
        uint64_t t2 = coll_time_ns();
        best_r = COLL_MIN(best_r, (double)(t1 - t0) * 1e-9);
        best_c = COLL_MIN(best_c, (double)(t2 - t1) * 1e-9);
    }
    gamma_s = (a && b) ? best_r / (N * sizeof(float)) : 1e-10;
    copy_s = (a && b) ? best_c / (N * sizeof(float)) : 1e-10;
    free(a);
    free(b);
}

void coll_measure_local_costs(double *gamma_p, double *copy_p)
{
    pthread_once(&measure_once, measure);
    *gamma_p = gamma_s;
    *copy_p = copy_s;
}
