/*
 * p2p_perf.c: OSU-style point-to-point benchmarks of libcoll.
 *
 * Three tests, chosen by the name the binary is run under (p2p_latency,
 * p2p_bw, p2p_bibw: links made by the Makefile) or by -m latency|bw|bibw:
 *
 *   latency  ping-pong (as osu_latency): the lower rank sends `size`
 *            bytes, the peer sends them back; one-way latency = round
 *            trip / 2, averaged over the iterations.
 *   bw       (as osu_bw): the lower rank starts a window of non-blocking
 *            sends, the peer a window of receives; after both windows
 *            complete the peer sends a 4-byte ack. MB/s = 1e6 B/s of
 *            data moved one way, window * iterations messages.
 *   bibw     (as osu_bibw): both ranks start a window of receives and a
 *            window of sends at once; MB/s counts both directions.
 *
 * With 2 ranks this is the OSU test. With more (an even number), rank r
 * pairs with rank r + n/2 and every pair runs at the same time: latency
 * is the mean over pairs, bandwidth the sum over pairs. An odd count is
 * refused. Only the public coll.h API is used.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench_util.h"
#include "coll.h"

#define PROG "p2p_perf"
#define MAX_WINDOW 4096
#define MAX_ITERS 10000000L
#define LARGE_MESSAGE 8192        /* bytes: OSU's switch to fewer iterations */
#define DEFAULT_MAX (4u << 20)    /* bytes: OSU's largest message */
#define TAG_DATA 1
#define TAG_ACK 2
#define ACK_BYTES 4

typedef enum { T_LATENCY, T_BW, T_BIBW, T_NTESTS } test_t;

static const char *const test_names[T_NTESTS] = {"latency", "bw", "bibw"};
static const char *const test_titles[T_NTESTS] = {"latency", "bandwidth",
                                                  "bi-directional bandwidth"};

typedef struct opts {
    int test;                  /* -1 until known */
    size_t min_size, max_size;
    int min_set, max_set;      /* given with -m */
    long iters, warmup;        /* -1: OSU's defaults, by message size */
    long window;
    int check;
    const char *transport, *csv_path, *json_path;
} opts_t;

/* ---- options ----------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: collrun -n 2 %s -m latency|bw|bibw [options]   (or p2p_latency, p2p_bw, p2p_bibw)\n"
        "  -m, --test TEST       latency, bw or bibw\n"
        "  -m [MIN:]MAX          message sizes, doubling from MIN (default 0:4M for latency,\n"
        "                        1:4M for bw and bibw; K, M, G suffixes)\n"
        "  -i ITERS              timed iterations per size (default: latency 10000, 1000 above\n"
        "                        8K; bw and bibw 100, 20 above 8K)\n"
        "  -x WARMUP             untimed iterations first (default: latency 100, 10 above 8K;\n"
        "                        bw and bibw 10, 2 above 8K)\n"
        "  -W WINDOW             messages in flight per iteration, bw and bibw (default 64)\n"
        "  -c                    check every received byte of one more exchange per size\n"
        "  -T TRANSPORT          allowed transports (COLL_TRANSPORTS), e.g. shm, verbs, ofi or tcp\n"
        "                        (libfabric; COLL_OFI_PROVIDER picks its provider)\n"
        "      --csv FILE        also write the results as CSV ('-': stdout)\n"
        "      --json FILE       also write the results as JSON ('-': stdout)\n"
        "  -h, --help            this text\n"
        "With more than 2 ranks (an even number), rank r pairs with rank r + n/2.\n",
        PROG);
}

static int find_test(const char *name)
{
    for (int t = 0; t < T_NTESTS; t++)
        if (strcasecmp(name, test_names[t]) == 0)
            return t;
    return -1;
}

/* -m: a test name, or [MIN:]MAX as OSU's -m. */
static void parse_m(opts_t *o, const char *arg)
{
    const char *colon = strchr(arg, ':');
    char min[64];

    if (find_test(arg) >= 0) {
        o->test = find_test(arg);
        return;
    }
    if (colon) {
        if ((size_t)(colon - arg) >= sizeof(min))
            bench_usage_error(PROG, "-m: bad sizes '%s'", arg);
        memcpy(min, arg, (size_t)(colon - arg));
        min[colon - arg] = '\0';
        if (bench_parse_size(min, &o->min_size) != 0)
            bench_usage_error(PROG, "-m needs latency, bw, bibw or [MIN:]MAX sizes, got '%s'", arg);
        o->min_set = 1;
    }
    if (bench_parse_size(colon ? colon + 1 : arg, &o->max_size) != 0)
        bench_usage_error(PROG, "-m needs latency, bw, bibw or [MIN:]MAX sizes, got '%s'", arg);
    o->max_set = 1;
}

/* The test named by argv[0] (p2p_bw -> bw), -1 otherwise. */
static int test_from_argv0(const char *argv0)
{
    const char *base = bench_basename(argv0);
    return strncmp(base, "p2p_", 4) == 0 ? find_test(base + 4) : -1;
}

static void parse_args(opts_t *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"test", required_argument, 0, 'm'}, {"csv", required_argument, 0, 'S'},
        {"json", required_argument, 0, 'J'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c;

    memset(o, 0, sizeof(*o));
    o->test = test_from_argv0(argv[0]);
    o->iters = o->warmup = -1;
    o->window = 64;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":m:i:x:W:T:ch", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': parse_m(o, optarg); break;
        case 'i': o->iters = bench_parse_num(PROG, "-i", optarg, 1, MAX_ITERS); break;
        case 'x': o->warmup = bench_parse_num(PROG, "-x", optarg, 0, MAX_ITERS); break;
        case 'W': o->window = bench_parse_num(PROG, "-W", optarg, 1, MAX_WINDOW); break;
        case 'T': o->transport = optarg; break;
        case 'c': o->check = 1; break;
        case 'S': o->csv_path = optarg; break;
        case 'J': o->json_path = optarg; break;
        case 'h':
            if (bench_env_rank() <= 0)
                usage(stdout);
            exit(0);
        case ':': bench_usage_error(PROG, "option -%c needs a value", optopt);
        default:
            if (optopt)
                bench_usage_error(PROG, "unknown option -%c", optopt);
            bench_usage_error(PROG, "unknown option %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        bench_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    if (o->test < 0)
        bench_usage_error(PROG, "name a test with -m latency, -m bw or -m bibw (or run as "
                          "p2p_latency, ...)");
    if (!o->min_set) /* OSU: latency from 0 bytes, bandwidth from 1 */
        o->min_size = o->test == T_LATENCY ? 0 : 1;
    if (!o->max_set)
        o->max_size = DEFAULT_MAX;
    if (o->min_size > o->max_size)
        bench_usage_error(PROG, "-m: MIN %zu is larger than MAX %zu", o->min_size, o->max_size);
}

/* ---- the run ----------------------------------------------------------------------------- */

typedef struct bench {
    const opts_t *o;
    coll_comm_t comm;
    int rank, nranks, peer, lower;  /* lower: the rank that times its pair */
    char *sbuf, *rbuf;              /* max(max_size, ACK_BYTES) bytes each */
    double *samples;                /* us, per timed iteration */
    coll_request_t *reqs;           /* 2 * window */
    int corrupt_rank;
    FILE *csv, *json;
    int json_rows;
    const char *transport;
    long long wrong_total;
} bench_t;

typedef struct result {
    double latency_us, p50_us, p99_us, mbps;
    long long wrong;                /* -1: not checked */
} result_t;

static void ok_or_die(const bench_t *b, const char *what, coll_status_t st)
{
    if (st != COLL_OK)
        bench_die(PROG, b->comm, what, st);
}

static long iters_for(const bench_t *b, size_t size)
{
    int large = size > LARGE_MESSAGE;
    if (b->o->iters > 0)
        return b->o->iters;
    if (b->o->test == T_LATENCY)
        return large ? 1000 : 10000;
    return large ? 20 : 100;
}

static long warmup_for(const bench_t *b, size_t size)
{
    int large = size > LARGE_MESSAGE;
    if (b->o->warmup >= 0)
        return b->o->warmup;
    if (b->o->test == T_LATENCY)
        return large ? 10 : 100;
    return large ? 2 : 10;
}

/* Blocking send of `size` bytes of sbuf to the peer, or receive into rbuf. */
static void send_peer(const bench_t *b, size_t size, int tag, const char *what)
{
    ok_or_die(b, what, coll_send(b->sbuf, size, COLL_UINT8, b->peer, tag, b->comm));
}

static void recv_peer(const bench_t *b, size_t size, int tag, const char *what)
{
    ok_or_die(b, what, coll_recv(b->rbuf, size, COLL_UINT8, b->peer, tag, b->comm));
}

/* One ping-pong: the lower rank sends first. */
static void pingpong(bench_t *b, size_t size)
{
    if (b->lower) {
        send_peer(b, size, TAG_DATA, "coll_send (ping)");
        recv_peer(b, size, TAG_DATA, "coll_recv (pong)");
    } else {
        recv_peer(b, size, TAG_DATA, "coll_recv (ping)");
        send_peer(b, size, TAG_DATA, "coll_send (pong)");
    }
}

/* One window one way, then the receiver's ack. */
static void window_one_way(bench_t *b, size_t size)
{
    coll_comm_t m = b->comm;
    long w = b->o->window;

    for (long j = 0; j < w; j++) {
        coll_status_t st = b->lower
            ? coll_isend(b->sbuf, size, COLL_UINT8, b->peer, TAG_DATA, m, &b->reqs[j])
            : coll_irecv(b->rbuf, size, COLL_UINT8, b->peer, TAG_DATA, m, &b->reqs[j]);
        ok_or_die(b, b->lower ? "coll_isend" : "coll_irecv", st);
    }
    ok_or_die(b, "coll_waitall (window)", coll_waitall((int)w, b->reqs));
    if (b->lower)
        recv_peer(b, ACK_BYTES, TAG_ACK, "coll_recv (ack)");
    else
        send_peer(b, ACK_BYTES, TAG_ACK, "coll_send (ack)");
}

/* One window each way at once. */
static void window_both_ways(bench_t *b, size_t size)
{
    coll_comm_t m = b->comm;
    long w = b->o->window;

    for (long j = 0; j < w; j++)
        ok_or_die(b, "coll_irecv",
                  coll_irecv(b->rbuf, size, COLL_UINT8, b->peer, TAG_DATA, m, &b->reqs[w + j]));
    for (long j = 0; j < w; j++)
        ok_or_die(b, "coll_isend",
                  coll_isend(b->sbuf, size, COLL_UINT8, b->peer, TAG_DATA, m, &b->reqs[j]));
    ok_or_die(b, "coll_waitall (windows)", coll_waitall((int)(2 * w), b->reqs));
}

static void one_iteration(bench_t *b, size_t size)
{
    switch (b->o->test) {
    case T_LATENCY: pingpong(b, size); break;
    case T_BW: window_one_way(b, size); break;
    default: window_both_ways(b, size); break;
    }
}

/* Warm-up, then the timed iterations: seconds on this rank, and
 * b->samples[i] = iteration i in us (one way for latency). */
static double time_size(bench_t *b, size_t size, long iters)
{
    double t0, t;

    for (long i = warmup_for(b, size); i > 0; i--)
        one_iteration(b, size);
    ok_or_die(b, "coll_barrier (before timing)", coll_barrier(b->comm));
    t0 = t = bench_now();
    for (long i = 0; i < iters; i++) {
        double start = t;
        one_iteration(b, size);
        t = bench_now();
        b->samples[i] = (t - start) * 1e6 / (b->o->test == T_LATENCY ? 2 : 1);
    }
    return t - t0;
}

/* ---- the check --------------------------------------------------------------------------- */

/* Byte j of what rank r sends at this size: differs between the two
 * directions and between sizes. */
static void fill_pattern(char *buf, size_t size, int r, int complement)
{
    for (size_t j = 0; j < size; j++) {
        unsigned char v = (unsigned char)(j * 7 + (size_t)r * 31 + size * 13 + 5);
        buf[j] = (char)(complement ? ~v : v);
    }
}

/* Received bytes that differ from what `from` sent. */
static long long count_wrong(const bench_t *b, size_t size, int from)
{
    long long wrong = 0;

    if (b->rank == b->corrupt_rank && size > 0)
        b->rbuf[0] ^= 1; /* COLL_PERF_CORRUPT: prove the check can fail */
    for (size_t j = 0; j < size; j++)
        wrong += (unsigned char)b->rbuf[j] !=
                 (unsigned char)(j * 7 + (size_t)from * 31 + size * 13 + 5);
    return wrong;
}

/* One more exchange of the test's kind on fresh buffers: the receive
 * buffer starts as the complement of what must arrive, so every byte
 * that does not arrive is counted. Returns wrong bytes over all ranks. */
static long long check_size(bench_t *b, size_t size)
{
    int64_t wrong = 0;
    int receives = b->o->test != T_BW || !b->lower; /* bw: only the upper rank receives data */

    fill_pattern(b->sbuf, size, b->rank, 0);
    fill_pattern(b->rbuf, size, b->peer, 1);
    one_iteration(b, size);
    if (receives)
        wrong = count_wrong(b, size, b->peer);
    ok_or_die(b, "coll_allreduce (summing wrong bytes)",
              coll_allreduce(&wrong, &wrong, 1, COLL_INT64, COLL_SUM, b->comm));
    return wrong;
}

/* ---- results ----------------------------------------------------------------------------- */

static result_t measure(bench_t *b, size_t size)
{
    result_t r = {0, 0, 0, 0, -1};
    long iters = iters_for(b, size);
    int npairs = b->nranks / 2;
    double secs = time_size(b, size, iters), mine = 0;

    if (b->lower) /* the lower rank of each pair speaks for it */
        mine = b->o->test == T_LATENCY
            ? secs * 1e6 / (2.0 * (double)iters)
            : (double)size * (double)b->o->window * (double)iters *
                  (b->o->test == T_BIBW ? 2 : 1) / secs / 1e6;
    else
        for (long i = 0; i < iters; i++)
            b->samples[i] = 0;
    ok_or_die(b, "coll_allreduce (combining pairs)",
              coll_allreduce(&mine, &mine, 1, COLL_FLOAT64, COLL_SUM, b->comm));
    if (b->o->test == T_LATENCY) {
        ok_or_die(b, "coll_allreduce (slowest pair per iteration)",
                  coll_allreduce(b->samples, b->samples, (size_t)iters, COLL_FLOAT64, COLL_MAX,
                                 b->comm));
        r.latency_us = mine / npairs;
        r.p50_us = bench_percentile(b->samples, (size_t)iters, 50);
        r.p99_us = bench_percentile(b->samples, (size_t)iters, 99);
    } else {
        r.mbps = mine;
    }
    if (b->o->check)
        r.wrong = check_size(b, size);
    return r;
}

static void print_header(const bench_t *b)
{
    const opts_t *o = b->o;

    printf("# libcoll p2p %s test v%s\n", test_titles[o->test], bench_version());
    printf("# %d ranks: %d pair%s (rank r with rank r+%d), transport %s", b->nranks,
           b->nranks / 2, b->nranks > 2 ? "s" : "", b->nranks / 2, b->transport);
    if (o->test != T_LATENCY)
        printf(", window %ld", o->window);
    printf("%s\n", b->nranks > 2 ? (o->test == T_LATENCY ? "; latency: mean over pairs"
                                                          : "; bandwidth: sum over pairs")
                                 : "");
    if (o->test == T_LATENCY)
        printf("%-10s%20s%20s%20s", "# Size", "Latency (us)", "p50 (us)", "p99 (us)");
    else
        printf("%-10s%20s", "# Size", "Bandwidth (MB/s)");
    printf("%s\n", o->check ? "     #wrong" : "");
}

static void print_row(const bench_t *b, size_t size, const result_t *r)
{
    if (b->o->test == T_LATENCY)
        printf("%-10zu%20.2f%20.2f%20.2f", size, r->latency_us, r->p50_us, r->p99_us);
    else
        printf("%-10zu%20.2f", size, r->mbps);
    if (r->wrong >= 0)
        printf("%11lld", r->wrong);
    printf("\n");
}

static void write_csv_row(const bench_t *b, size_t size, const result_t *r)
{
    char lat[32] = "", p50[32] = "", p99[32] = "", bw[32] = "", wrong[32] = "";

    if (b->o->test == T_LATENCY) {
        snprintf(lat, sizeof(lat), "%.3f", r->latency_us);
        snprintf(p50, sizeof(p50), "%.3f", r->p50_us);
        snprintf(p99, sizeof(p99), "%.3f", r->p99_us);
    } else {
        snprintf(bw, sizeof(bw), "%.3f", r->mbps);
    }
    if (r->wrong >= 0)
        snprintf(wrong, sizeof(wrong), "%lld", r->wrong);
    fprintf(b->csv, "libcoll,%s,%s,%s,%zu,%s,%s,%s,%s,%s\n", bench_version(), b->transport,
            test_names[b->o->test], size, lat, p50, p99, bw, wrong);
    fflush(b->csv);
}

static void write_json_row(bench_t *b, size_t size, const result_t *r)
{
    FILE *f = b->json;

    fprintf(f, "%s\n    {\"size\":%zu,", b->json_rows++ ? "," : "", size);
    if (b->o->test == T_LATENCY)
        fprintf(f, "\"latency_us\":%.3f,\"p50_us\":%.3f,\"p99_us\":%.3f,\"bandwidth_MBps\":null,",
                r->latency_us, r->p50_us, r->p99_us);
    else
        fprintf(f, "\"latency_us\":null,\"p50_us\":null,\"p99_us\":null,\"bandwidth_MBps\":%.3f,",
                r->mbps);
    if (r->wrong >= 0)
        fprintf(f, "\"wrong\":%lld}", r->wrong);
    else
        fprintf(f, "\"wrong\":null}");
}

static void report(bench_t *b, size_t size, const result_t *r)
{
    if (b->rank != 0)
        return;
    print_row(b, size, r);
    if (b->csv)
        write_csv_row(b, size, r);
    if (b->json)
        write_json_row(b, size, r);
}

/* ---- setup ------------------------------------------------------------------------------- */

static void *alloc_or_die(const bench_t *b, size_t bytes, const char *what)
{
    return bench_alloc_or_abort(PROG, b->comm, b->rank, bytes, what);
}

/* Every rank learns whether the two buffers fit on every host. */
static void check_memory(const bench_t *b)
{
    size_t max = b->o->max_size;
    int fits = max <= SIZE_MAX / 2 && bench_fits_memory(2 * max), all = fits;

    ok_or_die(b, "coll_allreduce (memory check)",
              coll_allreduce(&fits, &all, 1, COLL_INT32, COLL_MIN, b->comm));
    if (all)
        return;
    if (!fits)
        fprintf(stderr, "%s: rank %d: messages of %zu bytes need twice that per rank, more than "
                        "80%% of this host's memory shared by its ranks\n", PROG, b->rank, max);
    coll_comm_destroy(b->comm);
    exit(BENCH_EXIT_USAGE);
}

static long max_iters(const opts_t *o)
{
    if (o->iters > 0)
        return o->iters;
    return o->test == T_LATENCY ? 10000 : 100;
}

static void init_comm(bench_t *b)
{
    coll_status_t st;

    bench_set_transport(b->o->transport);
    if ((st = coll_comm_init_env(&b->comm, NULL)) != COLL_OK)
        bench_die(PROG, NULL, "coll_comm_init_env", st);
    coll_comm_rank(b->comm, &b->rank);
    coll_comm_size(b->comm, &b->nranks);
    if (b->nranks < 2 || b->nranks % 2 != 0) {
        if (b->rank == 0)
            fprintf(stderr, "%s: needs an even number of ranks, at least 2 (rank r pairs with "
                            "rank r + n/2); got %d\n", PROG, b->nranks);
        coll_comm_destroy(b->comm);
        exit(BENCH_EXIT_USAGE);
    }
    b->lower = b->rank < b->nranks / 2;
    b->peer = b->lower ? b->rank + b->nranks / 2 : b->rank - b->nranks / 2;
}

/* The output files (rank 0 opens them, all stop together if it cannot)
 * and their first lines. */
static void open_outputs(bench_t *b)
{
    bench_open_outputs(PROG, b->comm, b->rank, b->o->csv_path, b->o->json_path, &b->csv,
                       &b->json);
    if (b->csv)
        fprintf(b->csv, "library,version,transport,test,size,latency_us,p50_us,p99_us,"
                        "bandwidth_MBps,wrong\n");
    if (b->json) {
        fprintf(b->json, "{\"tool\":\"p2p_perf\",\"library\":\"libcoll\",\"version\":\"%s\","
                         "\"test\":\"%s\",\"nranks\":%d,\"pairs\":%d,\"transport\":",
                bench_version(), test_names[b->o->test], b->nranks, b->nranks / 2);
        bench_json_string(b->json, b->transport);
        fprintf(b->json, ",\"window\":%ld,\"results\":[", b->o->window);
    }
}

static int close_outputs(bench_t *b)
{
    return bench_close_outputs(PROG, b->csv, b->json);
}

static void run_sizes(bench_t *b)
{
    for (size_t size = b->o->min_size; size <= b->o->max_size;) {
        result_t r = measure(b, size);
        b->wrong_total += r.wrong > 0 ? r.wrong : 0;
        report(b, size, &r);
        size_t next = size ? size * 2 : 1;
        if (next <= size)
            break;
        size = next;
    }
}

int main(int argc, char **argv)
{
    opts_t o;
    bench_t b = {0};
    int bad = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_args(&o, argc, argv);
    b.o = &o;
    b.corrupt_rank = bench_corrupt_rank(); /* flips a received bit */
    b.transport = bench_transport_label(o.transport);
    init_comm(&b);
    check_memory(&b);
    size_t buf_bytes = o.max_size > ACK_BYTES ? o.max_size : ACK_BYTES;
    b.sbuf = alloc_or_die(&b, buf_bytes, "the send buffer");
    b.rbuf = alloc_or_die(&b, buf_bytes, "the receive buffer");
    b.samples = alloc_or_die(&b, (size_t)max_iters(&o) * sizeof(double), "iteration times");
    b.reqs = alloc_or_die(&b, 2 * (size_t)o.window * sizeof(coll_request_t), "requests");
    open_outputs(&b);
    if (b.rank == 0)
        print_header(&b);
    run_sizes(&b);
    if (b.rank == 0) {
        bad = close_outputs(&b);
        if (o.check)
            printf("# Validation: %lld wrong bytes %s\n", b.wrong_total,
                   b.wrong_total ? "FAILED" : "OK");
    }
    int verdict = b.wrong_total > 0 || bad; /* every rank knows the sums; rank 0 the files */
    ok_or_die(&b, "coll_broadcast (verdict)",
              coll_broadcast(&verdict, &verdict, 1, COLL_INT32, 0, b.comm));
    free(b.sbuf);
    free(b.rbuf);
    free(b.samples);
    free(b.reqs);
    ok_or_die(&b, "coll_comm_destroy", coll_comm_destroy(b.comm));
    return verdict ? BENCH_EXIT_FAIL : 0;
}
