/*
 * perf_common.c: sweep, timing, exact checking and CSV output shared by
 * the peer benchmarks (mpi_perf.c, gloo_perf.cc); see perf_common.h.
 *
 * Timing, as libcoll's bench/coll_perf.c does it:
 *   1. before the sweep, w untimed calls at the largest size and w at the
 *      smallest (nccl-tests' warm-up);
 *   2. per size and placement (out = separate buffers, in = one): one
 *      untimed call, a barrier, then n calls back to back, each timed on
 *      every rank; -t SEC (not used by bench/compare.sh, so that every
 *      library runs the same count) cuts n so that the loop lasts about
 *      SEC, judged by the untimed call;
 *   3. time = mean per call of the timed loop, max over ranks (coll_perf
 *      -a 3); p50 and p99 = percentiles (nearest rank) over the calls of
 *      the per-call maximum over ranks; algbw = size / time, busbw =
 *      algbw * the nccl-tests factor;
 *   4. with -c 1: outputs reset to a sentinel, inputs rebuilt, one more
 *      call, every element compared with the exact result; wrong = the
 *      elements that differ, summed over ranks.
 * Input values are small integers, so float sums are exact in any order.
 */
#include "perf_common.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SENTINEL (-1.0f) /* inputs are >= 0: a sentinel left over is wrong */

static const char *coll_names[PERF_NCOLL] = {
    "all_reduce", "all_gather", "broadcast", "reduce", "reduce_scatter", "alltoall",
    "p2p_latency", "p2p_bw", "p2p_bibw",
};

/* ---- options ------------------------------------------------------------ */

int perf_coll_from_name(const char *name)
{
    for (int c = 0; c < PERF_NCOLL; c++)
        if (strcmp(name, coll_names[c]) == 0)
            return c;
    return -1;
}

const char *perf_coll_name(perf_coll_t coll)
{
    return coll_names[coll];
}

/* "64M" -> 67108864 (binary suffixes K, M, G as in nccl-tests). */
static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
    default: break;
    }
    return v < 0 ? 0 : (size_t)v;
}

static void usage(const char *prog, const char *why)
{
    if (why)
        fprintf(stderr, "%s: %s\n", prog, why);
    fprintf(stderr,
            "usage: %s [-C collective] [-b minbytes] [-e maxbytes] [-f factor]\n"
            "          [-n iters] [-w warmup] [-c 0|1] [-d float] [-o sum] [-r root]\n"
            "          [-t budget_seconds] [-T transport_label] [--placement out|in|both]\n"
            "          [--csv FILE] [--rank R --nranks N --store DIR [--host ADDR]]\n"
            "  collectives: all_reduce all_gather broadcast reduce reduce_scatter alltoall\n"
            "               p2p_latency p2p_bw p2p_bibw\n",
            prog);
    exit(2);
}

void perf_parse(int argc, char **argv, perf_opts_t *o, int quiet)
{
    static const struct option longs[] = {
        {"csv", required_argument, NULL, 'S'},     {"placement", required_argument, NULL, 'P'},
        {"rank", required_argument, NULL, 'R'},    {"nranks", required_argument, NULL, 'N'},
        {"store", required_argument, NULL, 'D'},   {"host", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    const char *prog = argv[0];
    int opt, c;

    memset(o, 0, sizeof(*o));
    o->min_bytes = 8;
    o->max_bytes = 64 << 20;
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->check = 1;
    o->coll = PERF_ALL_REDUCE;
    o->transport = "tcp";
    o->place_out = o->place_in = 1;
    o->rank = o->nranks = -1;
    o->host = "127.0.0.1";
    if (quiet) /* only rank 0 explains a bad command line */
        opterr = 0;
    while ((opt = getopt_long(argc, argv, "b:e:f:n:w:c:d:o:r:C:T:t:h", longs, NULL)) != -1) {
        switch (opt) {
        case 'b': o->min_bytes = parse_size(optarg); break;
        case 'e': o->max_bytes = parse_size(optarg); break;
        case 'f': o->factor = atof(optarg); break;
        case 'n': o->iters = atoi(optarg); o->iters_set = 1; break;
        case 'w': o->warmup = atoi(optarg); o->warmup_set = 1; break;
        case 'c': o->check = atoi(optarg); break;
        case 'r': o->root = atoi(optarg); break;
        case 'T': o->transport = optarg; break;
        case 't': o->budget_s = atof(optarg); break;
        case 'S': o->csv_path = optarg; break;
        case 'R': o->rank = atoi(optarg); break;
        case 'N': o->nranks = atoi(optarg); break;
        case 'D': o->store = optarg; break;
        case 'H': o->host = optarg; break;
        case 'd':
            if (strcmp(optarg, "float") != 0)
                usage(prog, "only -d float is measured against the peers");
            break;
        case 'o':
            if (strcmp(optarg, "sum") != 0)
                usage(prog, "only -o sum is measured against the peers");
            break;
        case 'C':
            if ((c = perf_coll_from_name(optarg)) < 0)
                usage(prog, "unknown collective");
            o->coll = (perf_coll_t)c;
            break;
        case 'P':
            o->place_out = strcmp(optarg, "in") != 0;
            o->place_in = strcmp(optarg, "out") != 0;
            if (strcmp(optarg, "in") && strcmp(optarg, "out") && strcmp(optarg, "both"))
                usage(prog, "--placement takes out, in or both");
            break;
        default: usage(prog, quiet ? NULL : "bad option"); break;
        }
    }
    if (optind < argc)
        usage(prog, "unexpected argument");
    if (o->factor < 2 || o->iters < 1 || o->warmup < 0 || o->min_bytes < 1 ||
        o->min_bytes > o->max_bytes)
        usage(prog, "need -f >= 2, -n >= 1, -w >= 0 and 1 <= -b <= -e");
}

double perf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- geometry, inputs and checks ------------------------------------------ */

/* Small non-negative integers: a sum over up to 65536 ranks stays below
 * 2^24, so every float sum is exact whatever the order. */
static float val(int rank, size_t i)
{
    return (float)((i * 7 + (size_t)rank * 13) % 251);
}

/* alltoall: the block that `src` sends to `dst`. */
static float val_a2a(int src, int dst, size_t i)
{
    return (float)((i * 5 + (size_t)src * 17 + (size_t)dst * 3) % 241);
}

static float sum_val(int nranks, size_t i)
{
    float s = 0;
    for (int r = 0; r < nranks; r++)
        s += val(r, i);
    return s;
}

static int is_chunked(perf_coll_t coll)
{
    return coll == PERF_ALL_GATHER || coll == PERF_REDUCE_SCATTER || coll == PERF_ALLTOALL;
}

/* Elements per chunk for a requested size; *size gets the bytes reported. */
static size_t geometry(perf_coll_t coll, size_t req_bytes, int nranks, size_t *size)
{
    size_t count = req_bytes / sizeof(float);
    if (is_chunked(coll))
        count /= (size_t)nranks;
    *size = count * sizeof(float) * (is_chunked(coll) ? (size_t)nranks : 1);
    return count;
}

static double bus_factor(perf_coll_t coll, int nranks)
{
    double n = nranks;
    switch (coll) {
    case PERF_ALL_REDUCE: return 2 * (n - 1) / n;
    case PERF_BROADCAST:
    case PERF_REDUCE: return 1;
    default: return (n - 1) / n;
    }
}

/* The NCCL-style pointers of one call (see perf_common.h). */
typedef struct row_bufs {
    float *send, *recv;
    size_t send_n, recv_n; /* elements */
} row_bufs_t;

static row_bufs_t row_bufs(perf_coll_t coll, int inplace, size_t count, int rank, int nranks,
                           float *S, float *R)
{
    size_t n = (size_t)nranks, whole = count * (is_chunked(coll) ? n : 1);
    row_bufs_t b = {S, R, whole, whole};

    if (coll == PERF_ALL_GATHER)
        b.send_n = count;
    if (coll == PERF_REDUCE_SCATTER)
        b.recv_n = count;
    if (!inplace)
        return b;
    b.send = b.recv = R;
    if (coll == PERF_ALL_GATHER)
        b.send = R + (size_t)rank * count;
    if (coll == PERF_REDUCE_SCATTER)
        b.recv = R + (size_t)rank * count;
    return b;
}

static void fill(float *p, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

/* Outputs to the sentinel first, then inputs (in place they overlap). */
static void fill_inputs(perf_coll_t coll, const row_bufs_t *b, size_t count, int rank,
                        int nranks, int root)
{
    fill(b->recv, b->recv_n, SENTINEL);
    switch (coll) {
    case PERF_BROADCAST:
        if (rank == root)
            for (size_t i = 0; i < count; i++)
                b->send[i] = val(root, i);
        break;
    case PERF_ALLTOALL:
        for (int d = 0; d < nranks; d++)
            for (size_t i = 0; i < count; i++)
                b->send[(size_t)d * count + i] = val_a2a(rank, d, i);
        break;
    default:
        for (size_t i = 0; i < b->send_n; i++)
            b->send[i] = val(rank, i);
        break;
    }
}

/* rs_at_start: an in-place reduce-scatter whose library leaves the result
 * at the start of the buffer (MPI, Gloo) rather than at rank * count. */
static long long count_wrong(perf_coll_t coll, const row_bufs_t *b, size_t count, int rank,
                             int nranks, int root, int rs_at_start)
{
    long long wrong = 0;
    const float *res = b->recv;

    switch (coll) {
    case PERF_ALL_REDUCE:
        for (size_t i = 0; i < count; i++)
            wrong += res[i] != sum_val(nranks, i);
        break;
    case PERF_REDUCE:
        if (rank == root)
            for (size_t i = 0; i < count; i++)
                wrong += res[i] != sum_val(nranks, i);
        break;
    case PERF_BROADCAST:
        for (size_t i = 0; i < count; i++)
            wrong += res[i] != val(root, i);
        break;
    case PERF_ALL_GATHER:
        for (int r = 0; r < nranks; r++)
            for (size_t i = 0; i < count; i++)
                wrong += res[(size_t)r * count + i] != val(r, i);
        break;
    case PERF_REDUCE_SCATTER:
        if (rs_at_start)
            res = b->send;
        for (size_t i = 0; i < count; i++)
            wrong += res[i] != sum_val(nranks, (size_t)rank * count + i);
        break;
    case PERF_ALLTOALL:
        for (int s = 0; s < nranks; s++)
            for (size_t i = 0; i < count; i++)
                wrong += res[(size_t)s * count + i] != val_a2a(s, rank, i);
        break;
    default: break;
    }
    return wrong;
}

/* ---- statistics and output ------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n). */
static double percentile(const double *v, int n, double p)
{
    int k = (int)ceil(p * n) - 1;
    return v[k < 0 ? 0 : (k >= n ? n - 1 : k)];
}

static FILE *csv_open(const perf_opts_t *o, int p2p)
{
    FILE *f;
    if (!o->csv_path)
        return NULL;
    if (!(f = fopen(o->csv_path, "w"))) {
        perror(o->csv_path);
        exit(1);
    }
    fputs(p2p ? "library,version,transport,test,size,latency_us,p50_us,p99_us,bandwidth_MBps,"
                "wrong\n"
              : "library,version,transport,collective,nranks,size,count,type,redop,root,"
                "placement,time_us,algbw,busbw,p50_us,p99_us,wrong\n",
          f);
    return f;
}

typedef struct row_result {
    size_t size, count;
    double time_us, p50_us, p99_us, algbw, busbw;
    long long wrong;
    int iters;
} row_result_t;

static void print_row(FILE *csv, const perf_opts_t *o, const perf_backend_t *be, int inplace,
                      const row_result_t *r)
{
    perf_coll_t c = o->coll;
    int reducing = c == PERF_ALL_REDUCE || c == PERF_REDUCE || c == PERF_REDUCE_SCATTER;
    int rooted = c == PERF_BROADCAST || c == PERF_REDUCE;

    printf("%12zu %12zu  float %4s %4d  %-3s %6d %12.2f %8.3f %8.3f %12.2f %12.2f %6lld\n",
           r->size, r->count, reducing ? "sum" : "none", rooted ? o->root : -1,
           inplace ? "in" : "out", r->iters, r->time_us, r->algbw, r->busbw, r->p50_us,
           r->p99_us, r->wrong);
    fflush(stdout);
    if (!csv)
        return;
    fprintf(csv, "%s,%s,%s,%s,%d,%zu,%zu,float,%s,%d,%s,%.3f,%.9g,%.9g,%.3f,%.3f,%lld\n",
            be->library, be->version, o->transport, coll_names[c], be->nranks, r->size,
            r->count, reducing ? "sum" : "none", rooted ? o->root : -1, inplace ? "in" : "out",
            r->time_us, r->algbw, r->busbw, r->p50_us, r->p99_us, r->wrong);
    fflush(csv); /* a run cut short by its timeout keeps the rows it finished */
}

/* ---- collectives ------------------------------------------------------------ */

typedef void (*call_fn)(const perf_opts_t *o, const perf_backend_t *be, void *ctx);

/* The timed part shared by collectives and p2p, as coll_perf does it: one
 * untimed call (connections, caches), then `iters` timed calls back to
 * back. With -t, the untimed call's time (max over ranks) caps the count
 * so that the loop lasts about that long. times[] gets the per-call
 * maximum over ranks (sorted); the return value is the mean per call of
 * the timed loop, max over ranks. */
static double time_calls(const perf_opts_t *o, const perf_backend_t *be, call_fn call, void *ctx,
                         double **times_p, int *iters_p)
{
    double first, t0, t;
    int iters = o->iters, floor_iters = o->iters < 3 ? o->iters : 3;
    double *times;

    t0 = perf_now();
    call(o, be, ctx);
    first = perf_now() - t0;
    if (o->budget_s > 0) {
        be->max_doubles(&first, 1); /* the same value everywhere: the same count */
        if (first > 0 && o->budget_s / first < iters)
            iters = o->budget_s / first < floor_iters ? floor_iters : (int)(o->budget_s / first);
    }
    times = calloc((size_t)iters + 1, sizeof(double));
    if (!times) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    be->barrier();
    t0 = t = perf_now();
    for (int i = 0; i < iters; i++) {
        double start = t;
        call(o, be, ctx);
        t = perf_now();
        times[i + 1] = t - start;
    }
    times[0] = (t - t0) / iters;
    be->max_doubles(times, iters + 1); /* one call: the mean and the per-call maxima */
    qsort(times + 1, (size_t)iters, sizeof(double), cmp_double);
    *times_p = times;
    *iters_p = iters;
    return times[0];
}

typedef struct coll_ctx {
    perf_coll_t coll;
    int inplace;
    row_bufs_t b;
    size_t count;
} coll_ctx_t;

static void coll_call(const perf_opts_t *o, const perf_backend_t *be, void *ctx)
{
    coll_ctx_t *c = (coll_ctx_t *)ctx;
    be->run(c->coll, c->inplace, c->b.send, c->b.recv, c->count, o->root);
}

static long long coll_row(const perf_opts_t *o, const perf_backend_t *be, int inplace,
                          size_t req_bytes, float *S, float *R, FILE *csv)
{
    coll_ctx_t c = {o->coll, inplace, {0}, 0};
    row_result_t r = {0};
    double *times, mean;

    c.count = geometry(o->coll, req_bytes, be->nranks, &r.size);
    if (c.count == 0 || !be->supports(o->coll, inplace))
        return 0;
    c.b = row_bufs(o->coll, inplace, c.count, be->rank, be->nranks, S, R);
    fill_inputs(o->coll, &c.b, c.count, be->rank, be->nranks, o->root);
    be->prepare(o->coll, inplace, c.b.send, c.b.recv, c.count, o->root);

    mean = time_calls(o, be, coll_call, &c, &times, &r.iters);

    if (o->check) {
        fill_inputs(o->coll, &c.b, c.count, be->rank, be->nranks, o->root);
        be->barrier();
        coll_call(o, be, &c);
        r.wrong = be->sum_ll(count_wrong(o->coll, &c.b, c.count, be->rank, be->nranks,
                                         o->root, inplace && be->rs_inplace_result_at_start));
    }
    r.count = c.count; /* the call's count argument, per rank for blocks */
    r.time_us = mean * 1e6;
    r.algbw = (double)r.size / mean / 1e9;
    r.busbw = r.algbw * bus_factor(o->coll, be->nranks);
    r.p50_us = percentile(times + 1, r.iters, 0.50) * 1e6;
    r.p99_us = percentile(times + 1, r.iters, 0.99) * 1e6;
    free(times);
    if (be->rank == 0)
        print_row(csv, o, be, inplace, &r);
    return r.wrong;
}

/* ---- point-to-point (OSU-style, ranks 0 and 1; the others only wait) -------- */

typedef struct p2p_ctx {
    unsigned char *sbuf, *rbuf;
    size_t bytes;
} p2p_ctx_t;

static void p2p_call(const perf_opts_t *o, const perf_backend_t *be, void *ctx)
{
    p2p_ctx_t *p = (p2p_ctx_t *)ctx;
    int me = be->rank, peer = 1 - me;
    char ack[4] = {0}; /* OSU's 4-byte ack */

    if (me > 1)
        return;
    switch (o->coll) {
    case PERF_P2P_LATENCY: /* one round trip: rank 0 sends first */
        if (me == 0) {
            be->isend(p->sbuf, p->bytes, peer, 1);
            be->waitall();
            be->irecv(p->rbuf, p->bytes, peer, 1);
        } else {
            be->irecv(p->rbuf, p->bytes, peer, 1);
            be->waitall();
            be->isend(p->sbuf, p->bytes, peer, 1);
        }
        be->waitall();
        break;
    case PERF_P2P_BW: /* a window 0 -> 1, then the ack 1 -> 0 */
        for (int w = 0; w < PERF_P2P_WINDOW; w++) {
            if (me == 0)
                be->isend(p->sbuf, p->bytes, peer, 1);
            else
                be->irecv(p->rbuf, p->bytes, peer, 1);
        }
        be->waitall();
        if (me == 0)
            be->irecv(ack, sizeof(ack), peer, 2);
        else
            be->isend(ack, sizeof(ack), peer, 2);
        be->waitall();
        break;
    default: /* bibw: a window of receives, then one of sends, both ways */
        for (int w = 0; w < PERF_P2P_WINDOW; w++)
            be->irecv(p->rbuf, p->bytes, peer, 1);
        for (int w = 0; w < PERF_P2P_WINDOW; w++)
            be->isend(p->sbuf, p->bytes, peer, 1);
        be->waitall();
        break;
    }
}

/* OSU's defaults, as libcoll's bench/p2p_perf.c uses them: fewer
 * iterations and warm-ups above 8 KiB; -n and -w override them. */
static int p2p_iters(const perf_opts_t *o, size_t bytes)
{
    int large = bytes > 8192;
    if (o->iters_set)
        return o->iters;
    if (o->coll == PERF_P2P_LATENCY)
        return large ? 1000 : 10000;
    return large ? 20 : 100;
}

static int p2p_warmup(const perf_opts_t *o, size_t bytes)
{
    int large = bytes > 8192;
    if (o->warmup_set)
        return o->warmup;
    if (o->coll == PERF_P2P_LATENCY)
        return large ? 10 : 100;
    return large ? 2 : 10;
}

/* Byte j of what `rank` sends at this size (both directions differ). */
static unsigned char p2p_byte(size_t j, int rank, size_t bytes)
{
    return (unsigned char)(j * 7 + (size_t)rank * 31 + bytes * 13 + 5);
}

/* One more exchange on fresh buffers (the receive buffer starts as the
 * complement of what must arrive); wrong bytes over all ranks. */
static long long p2p_check(const perf_opts_t *o, const perf_backend_t *be, p2p_ctx_t *p)
{
    long long wrong = 0;
    int me = be->rank, peer = 1 - me;
    int receives = me <= 1 && (o->coll != PERF_P2P_BW || me == 1); /* bw: only 1 receives */

    for (size_t j = 0; j < p->bytes && me <= 1; j++) {
        p->sbuf[j] = p2p_byte(j, me, p->bytes);
        p->rbuf[j] = (unsigned char)~p2p_byte(j, peer, p->bytes);
    }
    be->barrier();
    p2p_call(o, be, p);
    for (size_t j = 0; receives && j < p->bytes; j++)
        wrong += p->rbuf[j] != p2p_byte(j, peer, p->bytes);
    return be->sum_ll(wrong);
}

/* One size: per-size warm-up, `iters` timed iterations back to back.
 * latency = rank 0's loop time / (2 iters), p50/p99 over iterations of
 * the slower rank's half round trip; bandwidth = bytes moved / rank 0's
 * loop time, in MB/s (1e6 B/s), both directions for bibw. */
static long long p2p_row(const perf_opts_t *o, const perf_backend_t *be, size_t bytes,
                         unsigned char *sbuf, unsigned char *rbuf, FILE *csv)
{
    p2p_ctx_t p = {sbuf, rbuf, bytes};
    int iters = p2p_iters(o, bytes), lat = o->coll == PERF_P2P_LATENCY;
    double *samples = calloc((size_t)iters, sizeof(double)), t0, t, secs;
    long long wrong = 0;
    char l[32] = "", p50[32] = "", p99[32] = "", bw[32] = "";
    const char *test = lat ? "latency" : o->coll == PERF_P2P_BW ? "bw" : "bibw";

    if (!samples) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t j = 0; j < bytes; j++)
        sbuf[j] = p2p_byte(j, be->rank, bytes);
    for (int i = p2p_warmup(o, bytes); i > 0; i--)
        p2p_call(o, be, &p);
    be->barrier();
    t0 = t = perf_now();
    for (int i = 0; i < iters; i++) {
        double start = t;
        p2p_call(o, be, &p);
        t = perf_now();
        samples[i] = (t - start) * 1e6 / (lat ? 2 : 1);
    }
    secs = t - t0;
    if (lat) {
        be->max_doubles(samples, iters);
        qsort(samples, (size_t)iters, sizeof(double), cmp_double);
        snprintf(l, sizeof(l), "%.3f", secs * 1e6 / (2.0 * iters));
        snprintf(p50, sizeof(p50), "%.3f", percentile(samples, iters, 0.50));
        snprintf(p99, sizeof(p99), "%.3f", percentile(samples, iters, 0.99));
    } else {
        snprintf(bw, sizeof(bw), "%.3f",
                 (double)bytes * PERF_P2P_WINDOW * iters * (o->coll == PERF_P2P_BIBW ? 2 : 1) /
                     secs / 1e6);
    }
    free(samples);
    if (o->check)
        wrong = p2p_check(o, be, &p);
    if (be->rank == 0) {
        printf("%12zu %8s %6d %12s %12s %12s %12s %6lld\n", bytes, test, iters, l, p50, p99, bw,
               wrong);
        fflush(stdout);
        if (csv) {
            fprintf(csv, "%s,%s,%s,%s,%zu,%s,%s,%s,%s,%lld\n", be->library, be->version,
                    o->transport, test, bytes, l, p50, p99, bw, wrong);
            fflush(csv);
        }
    }
    return wrong;
}

/* ---- the sweep ------------------------------------------------------------------ */

/* nccl-tests' warm-up: w untimed calls at one size, before the sweep
 * (out of place, or in place where the library has only that). */
static void warm_up(const perf_opts_t *o, const perf_backend_t *be, size_t bytes, float *S,
                    float *R)
{
    coll_ctx_t c = {o->coll, 0, {0}, 0};
    size_t size;

    c.count = geometry(o->coll, bytes, be->nranks, &size);
    c.inplace = !be->supports(o->coll, 0);
    if (c.count == 0 || !be->supports(o->coll, c.inplace))
        return;
    c.b = row_bufs(o->coll, c.inplace, c.count, be->rank, be->nranks, S, R);
    fill_inputs(o->coll, &c.b, c.count, be->rank, be->nranks, o->root);
    be->prepare(o->coll, c.inplace, c.b.send, c.b.recv, c.count, o->root);
    for (int i = 0; i < o->warmup; i++)
        coll_call(o, be, &c);
}


/* Buffers of 2 MiB or more start on a 2 MiB boundary, as in libcoll's
 * own benchmarks (bench/common/bench_util.c says why: huge pages). */
#define BIG_PAGE (2u << 20)

static void *alloc_or_die(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, bytes >= BIG_PAGE ? BIG_PAGE : 4096, bytes ? bytes : 1)) {
        fprintf(stderr, "cannot allocate %zu bytes\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes); /* fault the pages in before timing */
    return p;
}

long long perf_run(const perf_opts_t *o, const perf_backend_t *be)
{
    int p2p = o->coll >= PERF_P2P_LATENCY;
    /* the largest buffer: n chunks of max_bytes / n, rounded down, or
     * max_bytes itself; a few more floats keep the arithmetic simple */
    size_t cap = o->max_bytes + 64;
    float *S = alloc_or_die(cap), *R = alloc_or_die(cap);
    FILE *csv = be->rank == 0 ? csv_open(o, p2p) : NULL;
    long long wrong = 0;
    double warm = 1;

    if (p2p && be->nranks < 2) {
        fprintf(stderr, "%s needs at least 2 ranks\n", coll_names[o->coll]);
        exit(2);
    }
    if (be->rank == 0) {
        printf("# %s %s, transport %s, %d ranks, %s, float, iters %d, warmup %d, budget %g s\n",
               be->library, be->version, o->transport, be->nranks, coll_names[o->coll],
               o->iters, o->warmup, o->budget_s);
        printf("# time = mean per call, max over ranks; p50/p99 over calls of the max over "
               "ranks; GB/s = 1e9 B/s\n");
        if (p2p)
            printf("#%11s %8s %6s %12s %12s %12s %12s %6s\n", "size", "test", "iters", "lat_us",
                   "p50_us", "p99_us", "MB/s", "wrong");
        else
            printf("#%11s %12s %6s %4s %4s  %-3s %6s %12s %8s %8s %12s %12s %6s\n", "size",
                   "count", "type", "op", "root", "pl", "iters", "time_us", "algbw", "busbw",
                   "p50_us", "p99_us", "wrong");
        fflush(stdout);
    }
    /* connections first (lazy in TCP transports), then all ranks together */
    for (int i = 0; i < 3; i++)
        be->max_doubles(&warm, 1);
    be->barrier();
    if (!p2p) { /* p2p warms up at every size, as OSU does */
        warm_up(o, be, o->max_bytes, S, R);
        warm_up(o, be, o->min_bytes, S, R);
    }

    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes;
         bytes = (size_t)((double)bytes * o->factor)) {
        if (p2p) {
            wrong += p2p_row(o, be, bytes, (unsigned char *)S, (unsigned char *)R, csv);
            continue;
        }
        if (o->place_out)
            wrong += coll_row(o, be, 0, bytes, S, R, csv);
        if (o->place_in)
            wrong += coll_row(o, be, 1, bytes, S, R, csv);
    }
    if (csv)
        fclose(csv);
    free(S);
    free(R);
    return wrong;
}
