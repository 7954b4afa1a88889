/*
 * test_collectives.c: the reduction collectives against exact answers.
 * Every algorithm of allreduce, reduce and reduce_scatter (forced with
 * COLL_ALGO on a communicator split for it) x 1, 2, 3, 4, 5, 7, 8 ranks x
 * each transport (shm, tcp: forced with COLL_TRANSPORTS) x
 * every datatype x every op it supports x counts 0, 1, small odd primes and
 * a few MiB x in place and out of place x several roots. Inputs are chosen
 * (as nccl-tests does) so that the exact result is the same in any
 * reduction order: small integers for sums, powers of two for products,
 * any values for min/max; integers wrap, which is order-free too. Results
 * are compared bit for bit; an average is checked against the one correct
 * rounding of (exact sum) / n.
 *
 * COLL_TEST_SHORT runs a short form of it (below, short_pair), for
 * test_ofi and the sanitizers.
 *
 * Also: deterministic mode (every algorithm gives the bits of reducing in
 * rank order, on inputs whose sums do round), many non-blocking
 * collectives in flight with point-to-point traffic, and bad input.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reduce.h"

static const size_t small_counts[] = {0, 1, 3, 7, 13, 31};
/* The large count, in elements: 0.5-4 MiB, 8-64 pipeline chunks of 64 KiB
 * (rank_matrix); 1-8 MiB with COLL_TEST_LONG; in the short form still
 * 4-16 chunks. */
#define BIG_COUNT (1u << 19)
#define BIG_COUNT_LONG (1u << 20)
#define BIG_COUNT_SHORT (1u << 18)

/* ---- exact inputs and answers ---------------------------------------------- */

/* Rank r's element i, as a double: its value in the datatype is exact. */
static double input(coll_op_t op, int r, size_t i)
{
    switch (op) {
    case COLL_PROD: { /* 1, 2, 1/2 or -1 (powers of two: exact products) */
        static const double f[] = {1, 2, 0.5, -1};
        return f[(i * 3 + (size_t)r * 5) % 4];
    }
    case COLL_MIN:
    case COLL_MAX:
        return (double)((int)((i * 37 + (size_t)r * 101) % 255) - 127);
    default: /* SUM, AVG: small integers, sums stay exact even in bf16 */
        return (double)((int)((i * 7 + (size_t)r * 13) % 11) - 5);
    }
}

static int is_float(coll_datatype_t dt)
{
    return dt == COLL_FLOAT16 || dt == COLL_BFLOAT16 || dt == COLL_FLOAT32 || dt == COLL_FLOAT64;
}

static int is_unsigned(coll_datatype_t dt)
{
    return dt == COLL_UINT8 || dt == COLL_UINT32 || dt == COLL_UINT64;
}

/* Store x (an integer value or a float) as element i of buf. Integers wrap
 * like the library's (two's complement, modulo 2^bits). */
static void put(void *buf, coll_datatype_t dt, size_t i, double x)
{
    int64_t v = (int64_t)x;
    switch (dt) {
    case COLL_INT8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case COLL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case COLL_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case COLL_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case COLL_INT64: ((int64_t *)buf)[i] = v; break;
    case COLL_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case COLL_FLOAT16: ((uint16_t *)buf)[i] = coll_float_to_half((float)x); break;
    case COLL_BFLOAT16: ((uint16_t *)buf)[i] = coll_float_to_bf16((float)x); break;
    case COLL_FLOAT32: ((float *)buf)[i] = (float)x; break;
    default: ((double *)buf)[i] = x; break;
    }
}

/* Integer inputs for the integer types: ints of the same values (products
 * of 1,2,-1 only: 1/2 becomes 1 there). */
static double int_input(coll_datatype_t dt, coll_op_t op, int r, size_t i)
{
    double x = input(op, r, i);
    if (!is_float(dt) && op == COLL_PROD && x == 0.5)
        x = 1;
    if (is_unsigned(dt) && (op == COLL_MIN || op == COLL_MAX) && x < 0)
        x += 256; /* keep min/max meaningful in unsigned types */
    return x;
}

/* The inputs repeat with this period in the element index. */
static size_t period(coll_op_t op)
{
    return op == COLL_PROD ? 4 : op == COLL_MIN || op == COLL_MAX ? 255 : 11;
}

/* Fill n elements by computing one period and tiling it: checks of
 * multi-MiB results stay memory-bound. */
static void tile(void *buf, size_t n, size_t es, size_t per)
{
    for (size_t done = per; done < n; done *= 2)
        memcpy((char *)buf + done * es, buf, (done * 2 <= n ? done : n - done) * es);
}

static void fill(void *buf, coll_datatype_t dt, coll_op_t op, int r, size_t off, size_t n)
{
    size_t per = period(op) < n ? period(op) : n;
    for (size_t i = 0; i < per; i++)
        put(buf, dt, i, int_input(dt, op, r, off + i));
    tile(buf, n, coll_datatype_size(dt), per);
}

/* An integer value narrowed to dt (two's complement wrap), widened back. */
static int64_t narrow(coll_datatype_t dt, int64_t v)
{
    switch (dt) {
    case COLL_INT8: return (int8_t)v;
    case COLL_UINT8: return (uint8_t)v;
    case COLL_INT32: return (int32_t)v;
    case COLL_UINT32: return (uint32_t)v;
    default: return v; /* 64-bit types: the bits themselves */
    }
}

/* The exact answer for element i (global index gi) over p ranks. */
static void expect(void *buf, coll_datatype_t dt, coll_op_t op, int p, size_t i, size_t gi)
{
    size_t es = coll_datatype_size(dt);
    if (!is_float(dt)) {
        int64_t acc = narrow(dt, (int64_t)int_input(dt, op, 0, gi));
        for (int k = 1; k < p; k++) {
            int64_t x = narrow(dt, (int64_t)int_input(dt, op, k, gi));
            int less = dt == COLL_UINT64 ? (uint64_t)x < (uint64_t)acc : x < acc;
            if (op == COLL_SUM)
                acc = narrow(dt, (int64_t)((uint64_t)acc + (uint64_t)x));
            else if (op == COLL_PROD)
                acc = narrow(dt, (int64_t)((uint64_t)acc * (uint64_t)x));
            else if ((op == COLL_MIN) == less && x != acc)
                acc = x;
        }
        memcpy((char *)buf + i * es, &acc, es); /* little-endian: the low bytes */
        return;
    }
    double acc = input(op, 0, gi);
    for (int k = 1; k < p; k++) {
        double x = input(op, k, gi);
        acc = op == COLL_PROD ? acc * x : op == COLL_MIN ? fmin(acc, x)
              : op == COLL_MAX ? fmax(acc, x) : acc + x;
    }
    if (op == COLL_AVG) /* one rounding, as the library divides */
        acc = dt == COLL_FLOAT64 ? acc / p : (double)((float)acc / (float)p);
    put(buf, dt, i, acc);
}

/* ---- running one configuration --------------------------------------------------- */

typedef struct cfg {
    int coll;           /* 0 allreduce, 1 reduce, 2 reduce_scatter */
    coll_datatype_t dt;
    coll_op_t op;
    size_t count;
    int in_place, root;
} cfg_t;

static const char *coll_names[] = {"allreduce", "reduce", "reduce_scatter"};
/* the COLL_ALGO of the matrix's communicator, for the messages */
static const char *matrix_algo = "";

static void report_wrong(const cfg_t *c, size_t at, const void *got, const void *want, size_t es)
{
    uint64_t g = 0, w = 0;
    memcpy(&g, (const char *)got + at * es, es);
    memcpy(&w, (const char *)want + at * es, es);
    RANK_CHECK(0, "%s%s %s %s count %zu %s root %d: element %zu is %llx, expected %llx",
               matrix_algo, coll_names[c->coll], coll_reduce_datatype_name(c->dt),
               coll_reduce_op_name(c->op), c->count, c->in_place ? "in place" : "out of place",
               c->root, at, (unsigned long long)g, (unsigned long long)w);
}

static void run_cfg(coll_comm_t comm, int rank, int p, const cfg_t *c)
{
    size_t es = coll_datatype_size(c->dt), n = c->count;
    size_t total = c->coll == 2 ? n * (size_t)p : n; /* elements in sendbuf */
    size_t guard = 64;
    char *send = calloc(total * es + 2 * guard, 1), *recv = calloc(total * es + 2 * guard, 1);
    char *want = calloc(total * es + 1, 1);
    void *sb = send + guard, *rb;
    coll_status_t st;

    memset(recv, 0xa5, total * es + 2 * guard);
    fill(sb, c->dt, c->op, rank, 0, total);
    switch (c->coll) {
    case 0:
        rb = c->in_place ? sb : recv + guard;
        st = coll_allreduce(sb, rb, n, c->dt, c->op, comm);
        break;
    case 1:
        rb = c->in_place && rank == c->root ? sb : recv + guard;
        st = coll_reduce(sb, rb, n, c->dt, c->op, c->root, comm);
        break;
    default:
        rb = c->in_place ? (char *)sb + (size_t)rank * n * es : recv + guard;
        st = coll_reduce_scatter(sb, rb, n, c->dt, c->op, comm);
        break;
    }
    RANK_CHECK(st == COLL_OK, "%s%s %s %s count %zu: %s: %s", matrix_algo, coll_names[c->coll],
               coll_reduce_datatype_name(c->dt), coll_reduce_op_name(c->op), n,
               coll_status_str(st), coll_get_last_error(comm));
    if (c->coll != 1 || rank == c->root) {
        size_t base = c->coll == 2 ? (size_t)rank * n : 0, per = period(c->op);
        for (size_t i = 0; i < n && i < per; i++)
            expect(want, c->dt, c->op, p, i, base + i);
        tile(want, n, es, per < n ? per : n);
        if (memcmp(rb, want, n * es) != 0)
            for (size_t i = 0; i < n; i++)
                if (memcmp((char *)rb + i * es, want + i * es, es) != 0)
                    report_wrong(c, i, rb, want, es);
    }
    if (!c->in_place) { /* nothing outside the result was written */
        size_t written = c->coll == 1 && rank != c->root ? 0 : n * es;
        for (size_t i = 0; i < total * es + 2 * guard; i++)
            if (i < guard || i >= guard + written)
                RANK_CHECK((unsigned char)recv[i] == 0xa5, "%s%s %s count %zu wrote byte %zu "
                           "outside its result", matrix_algo, coll_names[c->coll],
                           coll_reduce_datatype_name(c->dt), n, i);
    }
    free(send);
    free(recv);
    free(want);
}

/* The three datatype-op pairs that also run the big count (budget):
 * float32 sum (the common case), a 16-bit average and a wrapping product;
 * between them element sizes 4, 2 and 1. */
static int key_pair(int dt, int op)
{
    return (dt == COLL_FLOAT32 && op == COLL_SUM) || (dt == COLL_BFLOAT16 && op == COLL_AVG) ||
           (dt == COLL_INT8 && op == COLL_PROD);
}

/* The short matrix (COLL_TEST_SHORT: test_ofi, the sanitizers): what a
 * transport carries, and where an algorithm slices its buffers, depend on
 * the datatype only through its size, and the plain suite checks every
 * answer in full. So: the key pairs and one 8-byte pair, the short rank
 * counts (harness.h), and every algorithm in one job per rank count (over
 * libfabric's tcp provider a communicator costs 0.2 s of CPU per rank,
 * most of it the provider clearing its buffers). */
static int short_pair(int dt, int op)
{
    return key_pair(dt, op) || (dt == COLL_FLOAT64 && op == COLL_MIN);
}

/* Every dt x op x count x in-place x root on one communicator. */
static void sweep(coll_comm_t comm, int rank, int p, int coll, int big)
{
    size_t big_count = getenv("COLL_TEST_LONG") ? BIG_COUNT_LONG
                       : harness_short()        ? BIG_COUNT_SHORT
                                                : BIG_COUNT;

    for (int dt = 0; dt < COLL_NUM_DATATYPES; dt++)
        for (int op = 0; op < COLL_NUM_OPS; op++) {
            if (!coll_reduce_supported((coll_datatype_t)dt, (coll_op_t)op) ||
                (harness_short() && !short_pair(dt, op)))
                continue;
            /* every pair with COLL_TEST_LONG (make test-long) */
            int with_big = big && (getenv("COLL_TEST_LONG") || key_pair(dt, op));
            int ncounts = (int)(sizeof(small_counts) / sizeof(small_counts[0])) + with_big;
            for (int k = 0; k < ncounts; k++)
                for (int ip = 0; ip < 2; ip++)
                    for (int root = 0; root < (coll == 1 ? p : 1); root += (p > 2 ? p - 1 : 1)) {
                        cfg_t c = {coll, (coll_datatype_t)dt, (coll_op_t)op,
                                   k < ncounts - with_big ? small_counts[k] : big_count, ip, root};
                        run_cfg(comm, rank, p, &c);
                    }
        }
}

static const struct {
    int coll;
    const char *algo;
    const char *window; /* COLL_PIPELINE_WINDOW for it; NULL: the default */
} algos[] = {
    {0, "allreduce:ring", NULL},
    {0, "allreduce:butterfly", NULL},
    {0, "allreduce:recursive_doubling", NULL},
    {0, "allreduce:parallel", NULL},
    {0, "allreduce:naive", NULL},
    {1, "reduce:binomial", NULL},
    {1, "reduce:rabenseifner", NULL},
    {2, "reduce_scatter:ring", NULL},
    {2, "reduce_scatter:recursive_halving", NULL},
    {2, "reduce_scatter:pairwise", NULL},
    {0, "allreduce:oneshot", NULL},
    {1, "reduce:oneshot", NULL},
    {2, "reduce_scatter:oneshot", NULL},
    /* one chunk in flight: each chunk's first send waits for the last */
    {0, "allreduce:ring", "1"},
};

/* A split of the world made after COLL_ALGO is set reads it at its init. */
static coll_comm_t comm_with(coll_comm_t world, int rank, const char *algo)
{
    coll_comm_t c;
    setenv("COLL_ALGO", algo, 1);
    /* mailboxes take vectors up to 16 KiB over shared memory only: the
     * larger ones and TCP go to the cost model's choice (test_shm checks
     * that oneshot itself runs) */
    if (strstr(algo, "oneshot"))
        setenv("COLL_ALGO_FALLBACK", "silent", 1);
    RANK_OK(coll_comm_split(world, 0, rank, &c));
    unsetenv("COLL_ALGO");
    unsetenv("COLL_ALGO_FALLBACK");
    return c;
}

/* The matrix runs once per transport that ranks on one host can use; a
 * transport that cannot connect fails init rather than falling back. */
#define NALGOS ((int)(sizeof(algos) / sizeof(algos[0])))

/* arg: a transport index times NALGOS plus an index into algos[], or
 * plus NALGOS for every algorithm one after the other */
static int rank_matrix(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int which = *(int *)arg % (NALGOS + 1), all = which == NALGOS;
    const char *const *transports;
    harness_transports(&transports);
    harness_use_transport(transports[*(int *)arg / (NALGOS + 1)]);
    coll_comm_t world = harness_init(rank, nranks, id);
    setenv("COLL_PIPELINE_CHUNK", "64K", 1); /* several chunks even for MiB vectors */
    for (int a = all ? 0 : which; a < (all ? NALGOS : which + 1); a++) {
        char label[64];
        snprintf(label, sizeof(label), "%s%s%s: ", algos[a].algo,
                 algos[a].window ? " window " : "", algos[a].window ? algos[a].window : "");
        matrix_algo = label;
        if (algos[a].window)
            setenv("COLL_PIPELINE_WINDOW", algos[a].window, 1);
        coll_comm_t c = comm_with(world, rank, algos[a].algo);
        unsetenv("COLL_PIPELINE_WINDOW");
        sweep(c, rank, nranks, algos[a].coll, 1);
        RANK_OK(coll_comm_destroy(c));
    }
    matrix_algo = "";
    RANK_OK(coll_comm_destroy(world));
    return 0;
}

/* _i: transport x rank count x algorithm (in the short form: transport x
 * rank count, every algorithm in the job) */
START_TEST(test_matrix)
{
    const char *const *transports;
    const int *counts;
    int per_algo = harness_short() ? 1 : NALGOS;
    int per_tp = per_algo * harness_rank_counts(&counts), tp = _i / per_tp, k = _i % per_tp;
    int which = harness_short() ? NALGOS : k % NALGOS, p = counts[k / per_algo];
    int arg = tp * (NALGOS + 1) + which;
    harness_transports(&transports);
    /* in the short form the failing rank's message names the algorithm */
    ck_assert_msg(harness_run(p, rank_matrix, &arg, 120) == 0, "%s%s on %d ranks over %s",
                  which < NALGOS ? algos[which].algo : "the short matrix",
                  which < NALGOS && algos[which].window ? " (window)" : "", p, transports[tp]);
}
END_TEST

/* ---- deterministic mode --------------------------------------------------------- */

/* Inputs whose sums round: random-looking floats of varied magnitude. */
static double messy(int r, size_t i)
{
    uint64_t h = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return ((double)(h % 2000001) - 1000000.0) * pow(2.0, (double)(int)(h % 13) - 6) / 7.0;
}

/* The rank-order reference: ((x0 op x1) op x2) ... with the library's own
 * kernel semantics for each step (tested on its own in test_reduce). */
static void rank_order(void *out, coll_datatype_t dt, coll_op_t op, int p, size_t n,
                       size_t base)
{
    size_t es = coll_datatype_size(dt);
    char *x = malloc(n * es + 1);
    for (size_t i = 0; i < n; i++)
        put(out, dt, i, messy(0, base + i));
    for (int k = 1; k < p; k++) {
        for (size_t i = 0; i < n; i++)
            put(x, dt, i, messy(k, base + i));
        coll_reduce_local(out, out, x, n, dt, op == COLL_AVG ? COLL_SUM : op);
    }
    if (op == COLL_AVG)
        coll_reduce_finish_avg(out, n, dt, p);
    free(x);
}

static int rank_deterministic(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    static const coll_datatype_t dts[] = {COLL_FLOAT32, COLL_FLOAT16, COLL_BFLOAT16, COLL_FLOAT64};
    static const coll_op_t ops[] = {COLL_SUM, COLL_AVG, COLL_PROD};
    coll_comm_t world = harness_init(rank, nranks, id);
    (void)arg;
    setenv("COLL_DETERMINISTIC", "1", 1);
    setenv("COLL_PIPELINE_CHUNK", "16K", 1);
    for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
        if (algos[a].window) /* the deterministic ring is a chain, without one */
            continue;
        coll_comm_t c = comm_with(world, rank, algos[a].algo);
        for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
            for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
                for (size_t n = 1; n <= 20011; n = n * 5 + 3) {
                    coll_datatype_t dt = dts[d];
                    coll_op_t op = ops[o];
                    size_t es = coll_datatype_size(dt), total = algos[a].coll == 2 ? n * nranks : n;
                    char *s = malloc(total * es), *r = malloc(total * es), *w = malloc(n * es);
                    for (size_t i = 0; i < total; i++)
                        put(s, dt, i, messy(rank, i));
                    int root = nranks - 1, mine = algos[a].coll != 1 || rank == root;
                    coll_status_t st = algos[a].coll == 0 ? coll_allreduce(s, r, n, dt, op, c)
                                       : algos[a].coll == 1 ? coll_reduce(s, r, n, dt, op, root, c)
                                       : coll_reduce_scatter(s, r, n, dt, op, c);
                    RANK_OK(st);
                    if (mine) {
                        rank_order(w, dt, op, nranks, n, algos[a].coll == 2 ? (size_t)rank * n : 0);
                        RANK_CHECK(memcmp(r, w, n * es) == 0, "%s %s %s count %zu: not the "
                                   "bits of the rank-order reduction", algos[a].algo,
                                   coll_reduce_datatype_name(dt), coll_reduce_op_name(op), n);
                    }
                    free(s);
                    free(r);
                    free(w);
                }
        RANK_OK(coll_comm_destroy(c));
    }
    RANK_OK(coll_comm_destroy(world));
    return 0;
}

START_TEST(test_deterministic)
{
    const int *counts;
    harness_rank_counts(&counts);
    ck_assert_int_eq(harness_run(counts[_i], rank_deterministic, NULL, 120), 0);
}
END_TEST

/* ---- many in flight, mixed with point-to-point ------------------------------------ */

#define FLIGHT 24

static int rank_flight(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    coll_request_t reqs[FLIGHT + 2];
    float *in[FLIGHT], *out[FLIGHT];
    int32_t token = rank, got = -1;
    (void)arg;

    setenv("COLL_PIPELINE_CHUNK", "32K", 1);
    for (int k = 0; k < FLIGHT; k++) {
        size_t n = (size_t)(k % 3 == 0 ? 100000 : 17 * (k + 1)), total = n * (size_t)nranks;
        in[k] = malloc(total * sizeof(float));
        out[k] = malloc(total * sizeof(float));
        fill(in[k], COLL_FLOAT32, COLL_SUM, rank, 0, total);
        if (k % 3 == 0)
            RANK_OK(coll_iallreduce(in[k], out[k], n, COLL_FLOAT32, COLL_SUM, comm, &reqs[k]));
        else if (k % 3 == 1)
            RANK_OK(coll_ireduce(in[k], out[k], n, COLL_FLOAT32, COLL_SUM, k % nranks, comm,
                                 &reqs[k]));
        else
            RANK_OK(coll_ireduce_scatter(in[k], out[k], n, COLL_FLOAT32, COLL_SUM, comm, &reqs[k]));
        if (k == FLIGHT / 2) { /* user messages in the middle of it all */
            RANK_OK(coll_irecv(&got, 1, COLL_INT32, (rank + nranks - 1) % nranks, 5, comm,
                               &reqs[FLIGHT]));
            RANK_OK(coll_isend(&token, 1, COLL_INT32, (rank + 1) % nranks, 5, comm,
                               &reqs[FLIGHT + 1]));
        }
    }
    RANK_OK(coll_waitall(FLIGHT + 2, reqs));
    RANK_CHECK(got == (rank + nranks - 1) % nranks, "token %d", got);
    for (int k = 0; k < FLIGHT; k++) {
        size_t n = (size_t)(k % 3 == 0 ? 100000 : 17 * (k + 1));
        size_t base = k % 3 == 2 ? (size_t)rank * n : 0;
        int check = k % 3 != 1 || rank == k % nranks;
        for (size_t i = 0; check && i < n; i++) {
            float w;
            expect(&w, COLL_FLOAT32, COLL_SUM, nranks, 0, base + i);
            RANK_CHECK(out[k][i] == w, "collective %d element %zu: %g, expected %g", k, i,
                       out[k][i], w);
        }
        free(in[k]);
        free(out[k]);
    }
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_in_flight)
{
    const int *counts;
    harness_rank_counts(&counts);
    ck_assert_int_eq(harness_run(counts[_i], rank_flight, NULL, 60), 0);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------ */

/* alltoallv under COLL_CHECK_ARGS: counts pair up rank by rank, yet a
 * mismatch between ranks 0 and 1 fails the call on rank 2 too (it would
 * otherwise move data and wait for them until COLL_TIMEOUT). */
static void check_alltoallv(coll_comm_t c, int rank, int nranks)
{
    int32_t out[16] = {0}, in[16];
    size_t sc[3], sd[3], rc[3], rd[3];
    coll_status_t st;

    for (int k = 0; k < nranks; k++) {
        sc[k] = rc[k] = 1;
        sd[k] = rd[k] = (size_t)k * 4;
    }
    if (rank == 0)
        sc[1] = 2; /* rank 1 expects 1 */
    st = coll_alltoallv(out, sc, sd, in, rc, rd, COLL_INT32, c);
    RANK_CHECK(st == COLL_ERR_INVALID_USAGE &&
               strstr(coll_get_last_error(c),
                      "rank 0 sends 2 elements to rank 1, whose recvcounts[0] is 1"),
               "alltoallv mismatch: %s: %s", coll_status_str(st), coll_get_last_error(c));
    if (rank == 2)
        RANK_CHECK(strstr(coll_get_last_error(c), "found by rank 1") != NULL, "finder: %s",
                   coll_get_last_error(c));
    sc[1] = 1;
    RANK_OK(coll_alltoallv(out, sc, sd, in, rc, rd, COLL_INT32, c)); /* still usable */
    /* the block to itself is checked locally */
    rc[rank] = 2;
    st = coll_alltoallv(out, sc, sd, in, rc, rd, COLL_INT32, c);
    RANK_CHECK(st == COLL_ERR_INVALID_ARG && strstr(coll_get_last_error(c), "recvcounts"),
               "self block: %s: %s", coll_status_str(st), coll_get_last_error(c));
}

/* Without COLL_CHECK_ARGS, a count that differs on rank 1 fails the call
 * where a message has the wrong size; that fails the communicator, and the
 * ranks still waiting learn it at once instead of at COLL_TIMEOUT (60 s
 * here, beyond the test's limit). */
static void mismatch_fails_fast(coll_comm_t world, int rank)
{
    int32_t buf[64] = {0};
    coll_comm_t c;
    coll_status_t st;

    setenv("COLL_TIMEOUT", "60s", 1);
    c = comm_with(world, rank, "allreduce:ring");
    unsetenv("COLL_TIMEOUT");
    st = coll_allreduce(buf, buf + 32, rank == 1 ? 9 : 8, COLL_INT32, COLL_SUM, c);
    RANK_CHECK(st == COLL_ERR_SIZE_MISMATCH || st == COLL_ERR_PEER_FAILED,
               "count mismatch: %s: %s", coll_status_str(st), coll_get_last_error(c));
    RANK_CHECK(coll_barrier(c) != COLL_OK, "the communicator should have failed");
    coll_comm_abort(c);
}

static int rank_bad(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t world = harness_init(rank, nranks, id), comm = world;
    int32_t buf[64] = {0};
    (void)arg;

    /* an op a datatype does not support */
    RANK_CHECK(coll_allreduce(buf, buf, 8, COLL_INT32, COLL_AVG, comm) == COLL_ERR_UNSUPPORTED &&
               strstr(coll_get_last_error(comm), "avg") && strstr(coll_get_last_error(comm), "int32"),
               "avg on int32: %s", coll_get_last_error(comm));
    RANK_CHECK(coll_allreduce(buf, buf, 8, COLL_INT32, (coll_op_t)99, comm) == COLL_ERR_INVALID_ARG,
               "unknown op");
    /* buffers that overlap without being the in-place form */
    RANK_CHECK(coll_allreduce(buf, buf + 1, 8, COLL_INT32, COLL_SUM, comm) == COLL_ERR_INVALID_ARG &&
               strstr(coll_get_last_error(comm), "overlap"), "overlap: %s",
               coll_get_last_error(comm));
    RANK_CHECK(coll_reduce_scatter(buf, buf + 1, 4, COLL_INT32, COLL_SUM, comm) ==
               COLL_ERR_INVALID_ARG, "reduce_scatter overlap");
    /* a root out of range */
    RANK_CHECK(coll_reduce(buf, buf + 32, 8, COLL_INT32, COLL_SUM, nranks, comm) ==
               COLL_ERR_INVALID_ARG && strstr(coll_get_last_error(comm), "root"), "root");
    /* none of that disturbed the communicator */
    RANK_OK(coll_allreduce(buf, buf + 32, 8, COLL_INT32, COLL_SUM, comm));

    /* a mismatched root, caught by COLL_CHECK_ARGS on every rank */
    coll_comm_t checked;
    setenv("COLL_CHECK_ARGS", "1", 1);
    RANK_OK(coll_comm_split(world, 0, rank, &checked));
    coll_status_t st = coll_reduce(buf, buf + 32, 8, COLL_INT32, COLL_SUM, rank % 2, checked);
    RANK_CHECK(st == COLL_ERR_INVALID_USAGE && strstr(coll_get_last_error(checked), "root"),
               "mismatched root: %s: %s", coll_status_str(st), coll_get_last_error(checked));
    RANK_OK(coll_reduce(buf, buf + 32, 8, COLL_INT32, COLL_SUM, 0, checked)); /* still usable */
    check_alltoallv(checked, rank, nranks);
    RANK_OK(coll_comm_destroy(checked));

    /* ranks that chose different algorithms: the names appear whole */
    setenv("COLL_CHECK_ARGS", "1", 1);
    checked = comm_with(world, rank, rank == 0 ? "allreduce:recursive_doubling"
                                               : "allreduce:ring");
    st = coll_allreduce(buf, buf + 32, 8, COLL_INT32, COLL_SUM, checked);
    RANK_CHECK(st == COLL_ERR_INVALID_USAGE &&
               strstr(coll_get_last_error(checked), "recursive_doubling"),
               "different algorithms: %s: %s", coll_status_str(st), coll_get_last_error(checked));
    RANK_OK(coll_comm_destroy(checked));
    unsetenv("COLL_CHECK_ARGS");

    mismatch_fails_fast(world, rank);
    RANK_OK(coll_comm_destroy(world));
    return 0;
}

START_TEST(test_bad_input)
{
    ck_assert_int_eq(harness_run(3, rank_bad, NULL, 30), 0);
}
END_TEST

/* ---- algorithm selection --------------------------------------------------------- */

static int rank_select(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t world = harness_init(rank, nranks, id), c;
    float x[256] = {1}, y[256];
    (void)arg;

    /* forced, but unusable for this call (deterministic recursive doubling
     * over the scratch cap): an error by default ... */
    setenv("COLL_DETERMINISTIC", "1", 1);
    setenv("COLL_DET_SCRATCH_MAX", "64", 1);
    c = comm_with(world, rank, "allreduce:recursive_doubling");
    coll_status_t st = coll_allreduce(x, y, 256, COLL_FLOAT32, COLL_SUM, c);
    RANK_CHECK(st == COLL_ERR_INVALID_USAGE && strstr(coll_get_last_error(c), "recursive_doubling")
               && strstr(coll_get_last_error(c), "COLL_DET_SCRATCH_MAX"),
               "forced and unusable: %s: %s", coll_status_str(st), coll_get_last_error(c));
    RANK_OK(coll_comm_destroy(c));
    /* ... or a logged fallback to the cheapest usable one */
    setenv("COLL_ALGO_FALLBACK", "warn", 1);
    c = comm_with(world, rank, "allreduce:recursive_doubling");
    RANK_OK(coll_allreduce(x, y, 256, COLL_FLOAT32, COLL_SUM, c));
    RANK_CHECK(y[0] == (float)nranks && y[1] == 0, "fallback result %g", y[0]);
    RANK_OK(coll_comm_destroy(c));
    unsetenv("COLL_ALGO_FALLBACK");
    /* the deterministic butterfly's rows count against the cap too */
    c = comm_with(world, rank, "allreduce:butterfly");
    st = coll_allreduce(x, y, 256, COLL_FLOAT32, COLL_SUM, c);
    RANK_CHECK(st == COLL_ERR_INVALID_USAGE && strstr(coll_get_last_error(c), "butterfly")
               && strstr(coll_get_last_error(c), "COLL_DET_SCRATCH_MAX"),
               "butterfly over the cap: %s: %s", coll_status_str(st), coll_get_last_error(c));
    RANK_OK(coll_comm_destroy(c));
    unsetenv("COLL_DET_SCRATCH_MAX");
    unsetenv("COLL_DETERMINISTIC");

    /* names COLL_ALGO does not know are rejected at init, with the choices */
    setenv("COLL_ALGO", "allreduce:quantum", 1);
    st = coll_comm_split(world, 0, rank, &c);
    RANK_CHECK(st == COLL_ERR_INVALID_ARG && strstr(coll_get_last_error(NULL), "ring"),
               "unknown algorithm: %s: %s", coll_status_str(st), coll_get_last_error(NULL));
    setenv("COLL_ALGO", "allreduse:ring", 1);
    st = coll_comm_split(world, 0, rank, &c);
    RANK_CHECK(st == COLL_ERR_INVALID_ARG && strstr(coll_get_last_error(NULL), "allreduse"),
               "unknown collective: %s", coll_get_last_error(NULL));
    unsetenv("COLL_ALGO");
    /* so is a fallback mode it does not know, instead of meaning "error" */
    setenv("COLL_ALGO_FALLBACK", "warning", 1);
    st = coll_comm_split(world, 0, rank, &c);
    RANK_CHECK(st == COLL_ERR_INVALID_ARG && strstr(coll_get_last_error(NULL), "warning") &&
               strstr(coll_get_last_error(NULL), "silent"),
               "unknown fallback: %s", coll_get_last_error(NULL));
    unsetenv("COLL_ALGO_FALLBACK");
    /* a window that is neither auto nor a size */
    setenv("COLL_PIPELINE_WINDOW", "wide", 1);
    st = coll_comm_split(world, 0, rank, &c);
    RANK_CHECK(st == COLL_ERR_INVALID_ARG &&
               strstr(coll_get_last_error(NULL), "COLL_PIPELINE_WINDOW='wide'"),
               "bad window: %s: %s", coll_status_str(st), coll_get_last_error(NULL));
    unsetenv("COLL_PIPELINE_WINDOW");
    RANK_OK(coll_comm_destroy(world));
    return 0;
}

START_TEST(test_selection)
{
    ck_assert_int_eq(harness_run(3, rank_select, NULL, 30), 0);
}
END_TEST

/* Every rank must choose the same algorithm: sweep counts across a cost
 * crossover (recursive doubling / butterfly near 36000 floats on 4 ranks),
 * where ranks with slightly different measured costs used to disagree and
 * fail or hang. */
static int rank_same_choice(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    static float a[45000], b[45000];
    (void)arg;
    setenv("COLL_TIMEOUT", "5s", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (size_t n = 30000; n <= 45000; n += 25) {
        coll_status_t st = coll_allreduce(a, b, n, COLL_FLOAT32, COLL_SUM, comm);
        RANK_CHECK(st == COLL_OK, "count %zu: %s", n, coll_get_last_error(comm));
    }
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_same_choice)
{
    ck_assert_int_eq(harness_run(4, rank_same_choice, NULL, 60), 0);
}
END_TEST

static Suite *collectives_suite(void)
{
    Suite *s = suite_create("collectives");
    TCase *tc = tcase_create("matrix");
    const int *counts;
    int nranks = harness_rank_counts(&counts);
    const char *const *tps;
    tcase_set_timeout(tc, 150);
    tcase_add_loop_test(tc, test_matrix, 0,
                        (harness_short() ? 1 : NALGOS) * nranks * harness_transports(&tps));
    suite_add_tcase(s, tc);

    tc = tcase_create("deterministic");
    tcase_set_timeout(tc, 150);
    /* from 2 ranks: one has nothing to compare */
    tcase_add_loop_test(tc, test_deterministic, counts[0] == 1, nranks);
    suite_add_tcase(s, tc);

    tc = tcase_create("in flight");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_in_flight, 0, nranks);
    suite_add_tcase(s, tc);

    tc = tcase_create("selection");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_selection);
    tcase_add_test(tc, test_same_choice);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad input");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_bad_input);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(collectives_suite());
}
