/*
 * coll_perf.c: nccl-tests-style benchmark of libcoll's collectives.
 *
 * One binary for every collective, chosen by the name it is run under
 * (all_reduce_perf, all_gather_perf, broadcast_perf, reduce_perf,
 * reduce_scatter_perf, alltoall_perf, scatter_perf, gather_perf,
 * sendrecv_perf, barrier_perf: links made by the Makefile) or by -C NAME.
 * Each rank is a process started by a launcher (collrun) and joins with
 * coll_comm_init_env(); rank 0 prints.
 *
 * For each datatype x op x root x size, out of place then in place, it
 * times `iters` calls after one untimed call, reports the time per call
 * combined across ranks (-a), the algorithm and bus bandwidths as
 * nccl-tests defines them (doc/PERFORMANCE.md there), the median and 99th
 * percentile of the per-iteration time (each iteration's slowest rank),
 * and, with -c, the number of wrong elements of one more call made on
 * freshly initialised buffers whose exact result is known (summed over
 * ranks, zero tolerance). The exit status is non-zero when any element
 * was wrong or any call failed.
 *
 * Only the public coll.h API is used: this measures what a program gets.
 * docs/benchmarks.md describes every flag and column.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "bench_data.h"
#include "bench_util.h"
#include "coll.h"

#define PROG "coll_perf"
#define MAX_AGG 1024          /* -m: requests in flight per iteration */
#define MAX_ITERS 10000000L   /* -n: one double per iteration is kept */
#define LINE_LEN 192          /* bytes of one rank's "# Rank" line */

/* ---- the collectives ------------------------------------------------------------ */

typedef enum {
    K_ALLREDUCE, K_ALLGATHER, K_BROADCAST, K_REDUCE, K_REDUCE_SCATTER,
    K_ALLTOALL, K_SCATTER, K_GATHER, K_SENDRECV, K_BARRIER, K_NKINDS
} kind_t;

enum {
    F_REDUCES = 1,  /* takes an op */
    F_ROOTED = 2,   /* takes a root */
    F_BLOCKS = 4,   /* count is per rank; one buffer holds nranks blocks */
    F_IN_PLACE = 8, /* has an in-place form */
};

typedef struct coll_info {
    const char *name;        /* nccl-tests' name, without _perf */
    const char *alias1, *alias2;
    const char *algo_key;    /* its name in COLL_ALGO; NULL: none */
    unsigned flags;
} coll_info_t;

static const coll_info_t colls[K_NKINDS] = {
    [K_ALLREDUCE] = {"all_reduce", "allreduce", NULL, "allreduce", F_REDUCES | F_IN_PLACE},
    [K_ALLGATHER] = {"all_gather", "allgather", NULL, "allgather", F_BLOCKS | F_IN_PLACE},
    [K_BROADCAST] = {"broadcast", "bcast", NULL, "broadcast", F_ROOTED | F_IN_PLACE},
    [K_REDUCE] = {"reduce", NULL, NULL, "reduce", F_REDUCES | F_ROOTED | F_IN_PLACE},
    [K_REDUCE_SCATTER] = {"reduce_scatter", "reducescatter", NULL, "reduce_scatter",
                          F_REDUCES | F_BLOCKS | F_IN_PLACE},
    [K_ALLTOALL] = {"alltoall", "all_to_all", NULL, "alltoall", F_BLOCKS | F_IN_PLACE},
    [K_SCATTER] = {"scatter", NULL, NULL, "scatter", F_ROOTED | F_BLOCKS | F_IN_PLACE},
    [K_GATHER] = {"gather", NULL, NULL, "gather", F_ROOTED | F_BLOCKS | F_IN_PLACE},
    /* point-to-point: rank r sends to r+1 and receives from r-1; a send
     * buffer that is also the receive buffer is not a defined form */
    [K_SENDRECV] = {"sendrecv", "send_recv", NULL, NULL, 0},
    [K_BARRIER] = {"barrier", NULL, NULL, "barrier", 0},
};

/* nccl-tests' order for -d all and -o all. */
static const coll_datatype_t all_types[] = {
    COLL_INT8, COLL_UINT8, COLL_INT32, COLL_UINT32, COLL_INT64, COLL_UINT64,
    COLL_FLOAT16, COLL_FLOAT32, COLL_FLOAT64, COLL_BFLOAT16,
};
static const coll_op_t all_ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_MIN, COLL_AVG};

static int find_coll(const char *name)
{
    for (int k = 0; k < K_NKINDS; k++)
        if (strcasecmp(name, colls[k].name) == 0 ||
            (colls[k].alias1 && strcasecmp(name, colls[k].alias1) == 0) ||
            (colls[k].alias2 && strcasecmp(name, colls[k].alias2) == 0))
            return k;
    return -1;
}

/* busbw / algbw, as nccl-tests defines it (doc/PERFORMANCE.md there). */
static double bus_factor(kind_t k, int n)
{
    switch (k) {
    case K_ALLREDUCE: return 2.0 * (n - 1) / n;
    case K_ALLGATHER:
    case K_REDUCE_SCATTER:
    case K_ALLTOALL:
    case K_SCATTER:
    case K_GATHER: return (double)(n - 1) / n;
    default: return 1; /* broadcast, reduce, sendrecv (and barrier: no bytes) */
    }
}

/* ---- options ---------------------------------------------------------------------- */

typedef struct opts {
    int kind;                        /* -1 until known */
    size_t min_bytes, max_bytes, step_bytes;
    long step_factor, iters, warmup, agg, check, average, blocking, mem;
    int type_all, op_all, root_all;  /* -d all, -o all, -r all */
    coll_datatype_t dt;
    coll_op_t op;
    long root;
    const char *algo, *transport, *json_path, *csv_path;
} opts_t;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: collrun -n N %s -C COLLECTIVE [options]   (or all_reduce_perf, ...)\n"
        "  -C, --collective NAME   all_reduce, all_gather, broadcast, reduce, reduce_scatter,\n"
        "                          alltoall, scatter, gather, sendrecv, barrier\n"
        "  -b, --minbytes SIZE     smallest size (default 32M; K, M, G suffixes)\n"
        "  -e, --maxbytes SIZE     largest size (default 32M)\n"
        "  -i, --stepbytes SIZE    increment between sizes (default 1M)\n"
        "  -f, --stepfactor N      multiply sizes by N instead (default: off)\n"
        "  -n, --iters N           timed iterations per size (default 20)\n"
        "  -w, --warmup_iters N    untimed iterations at the largest and the smallest size\n"
        "                          (default 5)\n"
        "  -m, --agg_iters N       calls per iteration (default 1)\n"
        "  -c, --check N           check N results (default 1; 0: no check)\n"
        "  -d, --datatype TYPE     int8 uint8 int32 uint32 int64 uint64 half float double\n"
        "                          bfloat16, or all (default float)\n"
        "  -o, --op OP             sum prod min max avg, or all (default sum)\n"
        "  -r, --root ROOT         root rank, or all (default 0)\n"
        "  -a, --average N         time across ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 1)\n"
        "  -z, --blocking N        1: blocking calls (default); 0: coll_i* + coll_wait(all)\n"
        "  -R, --local_register N  1: send and receive buffers from coll_mem_alloc, which\n"
        "                          ranks on one host read directly; 0: plain memory (default)\n"
        "  -A, --algo NAME         force this algorithm (COLL_ALGO; see collinfo --algos)\n"
        "  -T, --transport NAME    allowed transports (COLL_TRANSPORTS), e.g. shm, verbs, ofi or tcp\n"
        "                          (libfabric; COLL_OFI_PROVIDER picks its provider)\n"
        "      --csv FILE          also write the results as CSV ('-': stdout)\n"
        "      --json FILE         also write the results as JSON ('-': stdout)\n"
        "  -h, --help              this text\n",
        PROG);
}

static size_t parse_bytes(const char *flag, const char *text)
{
    size_t v;

    if (bench_parse_size(text, &v) != 0)
        bench_usage_error(PROG, "%s needs a size such as 4096, 64K, 1M or 2G, got '%s'", flag,
                          text);
    return v;
}

static void parse_type(opts_t *o, const char *text)
{
    o->type_all = strcasecmp(text, "all") == 0;
    if (!o->type_all && bench_parse_datatype(text, &o->dt) != 0)
        bench_usage_error(PROG, "unknown datatype '%s' (int8, uint8, int32, uint32, int64, "
                          "uint64, half, float, double, bfloat16 or all)", text);
}

static void parse_op(opts_t *o, const char *text)
{
    o->op_all = strcasecmp(text, "all") == 0;
    if (!o->op_all && bench_parse_op(text, &o->op) != 0)
        bench_usage_error(PROG, "unknown op '%s' (sum, prod, min, max, avg or all)", text);
}

static void parse_root(opts_t *o, const char *text)
{
    o->root_all = strcasecmp(text, "all") == 0 || strcmp(text, "-1") == 0;
    if (!o->root_all)
        o->root = bench_parse_num(PROG, "-r", text, 0, 1L << 20);
}

static void parse_collective(opts_t *o, const char *text)
{
    o->kind = find_coll(text);
    if (o->kind < 0)
        bench_usage_error(PROG, "unknown collective '%s' (all_reduce, all_gather, broadcast, "
                          "reduce, reduce_scatter, alltoall, scatter, gather, sendrecv, "
                          "barrier)", text);
}

/* The collective named by argv[0] (all_reduce_perf -> all_reduce), -1 if
 * the name is not one of them (coll_perf itself). */
static int kind_from_argv0(const char *argv0)
{
    char name[64];
    const char *base = bench_basename(argv0);
    size_t len = strlen(base);

    if (len < 6 || len - 5 >= sizeof(name) || strcmp(base + len - 5, "_perf") != 0)
        return -1;
    memcpy(name, base, len - 5);
    name[len - 5] = '\0';
    return find_coll(name);
}

static void opts_defaults(opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->kind = -1;
    o->min_bytes = o->max_bytes = 32u << 20; /* nccl-tests' defaults */
    o->step_bytes = 1u << 20;
    o->step_factor = 1;
    o->iters = 20;
    o->warmup = 5;
    o->agg = 1;
    o->check = 1;
    o->average = 1;
    o->blocking = 1;
    o->dt = COLL_FLOAT32;
    o->op = COLL_SUM;
}

/* One option; returns 0, or 1 for -h. */
static int apply_opt(opts_t *o, int c, const char *arg)
{
    switch (c) {
    case 'C': parse_collective(o, arg); break;
    case 'b': o->min_bytes = parse_bytes("-b", arg); break;
    case 'e': o->max_bytes = parse_bytes("-e", arg); break;
    case 'i': o->step_bytes = parse_bytes("-i", arg); break;
    case 'f': o->step_factor = bench_parse_num(PROG, "-f", arg, 1, 1L << 20); break;
    case 'n': o->iters = bench_parse_num(PROG, "-n", arg, 1, MAX_ITERS); break;
    case 'w': o->warmup = bench_parse_num(PROG, "-w", arg, 0, MAX_ITERS); break;
    case 'm': o->agg = bench_parse_num(PROG, "-m", arg, 1, MAX_AGG); break;
    case 'c': o->check = bench_parse_num(PROG, "-c", arg, 0, 1000); break;
    case 'a': o->average = bench_parse_num(PROG, "-a", arg, 0, 3); break;
    case 'z': o->blocking = bench_parse_num(PROG, "-z", arg, 0, 1); break;
    case 'R': o->mem = bench_parse_num(PROG, "-R", arg, 0, 1); break;
    case 'd': parse_type(o, arg); break;
    case 'o': parse_op(o, arg); break;
    case 'r': parse_root(o, arg); break;
    case 'A': o->algo = arg; break;
    case 'T': o->transport = arg; break;
    case 'J': o->json_path = arg; break;
    case 'S': o->csv_path = arg; break;
    case 'h': return 1;
    default: return 0;
    }
    return 0;
}

/* Checks between options, once all are known. */
static void opts_validate(opts_t *o)
{
    if (o->kind < 0)
        bench_usage_error(PROG, "name a collective with -C (or run as all_reduce_perf, ...)");
    if (o->min_bytes > o->max_bytes)
        bench_usage_error(PROG, "-b %zu (minbytes) is larger than -e %zu (maxbytes)", o->min_bytes,
                          o->max_bytes);
    if (o->min_bytes < o->max_bytes && o->step_factor <= 1 && o->step_bytes == 0)
        bench_usage_error(PROG, "-i 0 without -f would never reach -e");
    if (o->algo && !colls[o->kind].algo_key)
        bench_usage_error(PROG, "-A: %s has no algorithm to choose (it is point-to-point)",
                          colls[o->kind].name);
    if ((colls[o->kind].flags & F_REDUCES) && !o->type_all && !o->op_all &&
        !bench_op_supported(o->dt, o->op))
        bench_usage_error(PROG, "op avg is not supported for integer types (here %s)",
                          bench_datatype_name(o->dt));
}

static void parse_args(opts_t *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"collective", required_argument, 0, 'C'}, {"minbytes", required_argument, 0, 'b'},
        {"maxbytes", required_argument, 0, 'e'},   {"stepbytes", required_argument, 0, 'i'},
        {"stepfactor", required_argument, 0, 'f'}, {"iters", required_argument, 0, 'n'},
        {"warmup_iters", required_argument, 0, 'w'}, {"agg_iters", required_argument, 0, 'm'},
        {"check", required_argument, 0, 'c'},      {"average", required_argument, 0, 'a'},
        {"blocking", required_argument, 0, 'z'},   {"datatype", required_argument, 0, 'd'},
        {"local_register", required_argument, 0, 'R'},
        {"op", required_argument, 0, 'o'},         {"root", required_argument, 0, 'r'},
        {"algo", required_argument, 0, 'A'},       {"transport", required_argument, 0, 'T'},
        {"json", required_argument, 0, 'J'},       {"csv", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0},
    };
    int c;

    opts_defaults(o);
    o->kind = kind_from_argv0(argv[0]);
    opterr = 0; /* our own messages */
    while ((c = getopt_long(argc, argv, ":C:b:e:i:f:n:w:m:c:a:z:R:d:o:r:A:T:h", longopts,
                            NULL)) != -1) {
        if (c == '?' || c == ':') {
            char opt[64];
            if (optopt)
                snprintf(opt, sizeof(opt), "-%c", optopt);
            else
                snprintf(opt, sizeof(opt), "%s", argv[optind - 1]);
            bench_usage_error(PROG, c == ':' ? "option %s needs a value" : "unknown option %s",
                              opt);
        }
        if (apply_opt(o, c, optarg)) {
            int r = bench_env_rank();
            if (r <= 0)
                usage(stdout);
            exit(0);
        }
    }
    if (optind < argc)
        bench_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    opts_validate(o);
}

/* ---- one run ---------------------------------------------------------------------------- */

typedef struct bench {
    const opts_t *o;
    kind_t kind;
    unsigned flags;
    coll_comm_t comm;
    int rank, nranks;
    char *sendbuf, *recvbuf;            /* buf_bytes each */
    char *expected;                     /* CHECK_SLICE bytes: a slice of the expected result */
    size_t buf_bytes;
    double *iter_us;                    /* o->iters: time of each iteration, us per call */
    coll_request_t *reqs;               /* 2 * o->agg: in flight in one iteration */
    int corrupt_rank;                   /* COLL_PERF_CORRUPT: self-test of the check */
    FILE *csv, *json;                   /* rank 0 only */
    int json_rows;
    const char *transport, *algo;       /* as reported */
    long long failed_results;           /* results with #wrong > 0 */
    double busbw_sum;
    long busbw_count;
} bench_t;

/* Sizes of one call, derived from a requested size in bytes as nccl-tests
 * does: `count` is the call's count argument (per rank for the block
 * collectives), `bytes` the size reported, which is the larger of the
 * send and receive buffers (the whole nranks * count buffer where there
 * is one). */
typedef struct geom {
    size_t count, bytes;
} geom_t;

static geom_t geometry(const bench_t *b, size_t size, size_t es)
{
    geom_t g = {0, 0};

    if (b->kind == K_BARRIER)
        return g;
    g.count = size / es;
    if (b->flags & F_BLOCKS)
        g.count /= (size_t)b->nranks;
    g.bytes = g.count * es * ((b->flags & F_BLOCKS) ? (size_t)b->nranks : 1);
    return g;
}

/* One call's arguments, for one placement. */
typedef struct call {
    coll_datatype_t dt;
    coll_op_t op;
    int root, in_place;
    geom_t g;
    char *send, *recv;      /* the buffers passed */
    char *result;           /* where this rank's result lands; NULL: none here */
    size_t result_count;    /* elements of it */
} call_t;

/* Buffers of a placement. In place follows NCCL and docs/api.md: one
 * buffer; a rank's own block sits at rank * count elements where the
 * call's in-place form puts it. */
static void call_place(const bench_t *b, call_t *c)
{
    size_t es = coll_datatype_size(c->dt), n = (size_t)b->nranks;
    size_t own = (size_t)b->rank * c->g.count * es; /* bytes: offset of this rank's block */
    int is_root = b->rank == c->root;

    c->send = b->sendbuf;
    c->recv = b->recvbuf;
    if (c->in_place) {
        c->send = c->recv = b->recvbuf;
        if (b->kind == K_ALLGATHER || b->kind == K_GATHER)
            c->send = b->recvbuf + own;
        else if (b->kind == K_REDUCE_SCATTER || b->kind == K_SCATTER)
            c->recv = b->recvbuf + own;
    }
    c->result = c->recv;
    c->result_count = c->g.count;
    if (b->kind == K_ALLGATHER || b->kind == K_ALLTOALL || b->kind == K_GATHER)
        c->result_count = n * c->g.count;
    if ((b->kind == K_REDUCE || b->kind == K_GATHER) && !is_root)
        c->result = NULL; /* written on the root only */
    if (b->kind == K_BARRIER)
        c->result = NULL;
}

/* Start (req != NULL) or make (req == NULL) the call. req has two slots;
 * only sendrecv uses the second. */
static coll_status_t post(const bench_t *b, const call_t *c, coll_request_t *req)
{
    coll_comm_t m = b->comm;
    size_t n = c->g.count;
    int right = (b->rank + 1) % b->nranks, left = (b->rank + b->nranks - 1) % b->nranks;

    switch (b->kind) {
    case K_ALLREDUCE:
        return req ? coll_iallreduce(c->send, c->recv, n, c->dt, c->op, m, req)
                   : coll_allreduce(c->send, c->recv, n, c->dt, c->op, m);
    case K_ALLGATHER:
        return req ? coll_iallgather(c->send, c->recv, n, c->dt, m, req)
                   : coll_allgather(c->send, c->recv, n, c->dt, m);
    case K_BROADCAST:
        return req ? coll_ibroadcast(c->send, c->recv, n, c->dt, c->root, m, req)
                   : coll_broadcast(c->send, c->recv, n, c->dt, c->root, m);
    case K_REDUCE:
        return req ? coll_ireduce(c->send, c->recv, n, c->dt, c->op, c->root, m, req)
                   : coll_reduce(c->send, c->recv, n, c->dt, c->op, c->root, m);
    case K_REDUCE_SCATTER:
        return req ? coll_ireduce_scatter(c->send, c->recv, n, c->dt, c->op, m, req)
                   : coll_reduce_scatter(c->send, c->recv, n, c->dt, c->op, m);
    case K_ALLTOALL:
        return req ? coll_ialltoall(c->send, c->recv, n, c->dt, m, req)
                   : coll_alltoall(c->send, c->recv, n, c->dt, m);
    case K_SCATTER:
        return req ? coll_iscatter(c->send, c->recv, n, c->dt, c->root, m, req)
                   : coll_scatter(c->send, c->recv, n, c->dt, c->root, m);
    case K_GATHER:
        return req ? coll_igather(c->send, c->recv, n, c->dt, c->root, m, req)
                   : coll_gather(c->send, c->recv, n, c->dt, c->root, m);
    case K_SENDRECV: {
        if (!req)
            return coll_sendrecv(c->send, n, c->dt, right, 0, c->recv, n, c->dt, left, 0, m);
        coll_status_t st = coll_irecv(c->recv, n, c->dt, left, 0, m, &req[1]);
        return st != COLL_OK ? st : coll_isend(c->send, n, c->dt, right, 0, m, &req[0]);
    }
    default:
        return req ? coll_ibarrier(m, req) : coll_barrier(m);
    }
}

/* What a failed call reports, e.g. "coll_allreduce (float sum, count 8, root -1,
 * out of place)". */
static void die_call(const bench_t *b, const call_t *c, coll_status_t st)
{
    char what[192], fn[64];

    if (b->kind == K_SENDRECV)
        snprintf(fn, sizeof(fn), "%s", b->o->blocking ? "coll_sendrecv" : "coll_isend/coll_irecv");
    else
        snprintf(fn, sizeof(fn), "coll_%s%s", b->o->blocking ? "" : "i", colls[b->kind].algo_key);
    snprintf(what, sizeof(what), "%s (%s %s, count %zu, root %d, %s)", fn,
             bench_datatype_name(c->dt), (b->flags & F_REDUCES) ? bench_op_name(c->op) : "none",
             c->g.count, c->root, c->in_place ? "in place" : "out of place");
    bench_die(PROG, b->comm, what, st);
}

/* `agg` calls (started together when non-blocking), all completed. */
static void run_calls(bench_t *b, const call_t *c, long agg)
{
    coll_status_t st;

    if (b->o->blocking) {
        for (long a = 0; a < agg; a++)
            if ((st = post(b, c, NULL)) != COLL_OK)
                die_call(b, c, st);
        return;
    }
    for (long a = 0; a < 2 * agg; a++)
        b->reqs[a] = NULL;
    for (long a = 0; a < agg; a++)
        if ((st = post(b, c, &b->reqs[2 * a])) != COLL_OK)
            die_call(b, c, st);
    if ((st = coll_waitall((int)(2 * agg), b->reqs)) != COLL_OK)
        die_call(b, c, st);
}

static void check_ok(const bench_t *b, const char *what, coll_status_t st)
{
    if (st != COLL_OK)
        bench_die(PROG, b->comm, what, st);
}

/* ---- data and the check ---------------------------------------------------------------- */

/* The check compares the result against its expected value one slice at
 * a time, so that it maps CHECK_SLICE bytes rather than a third buffer of
 * the message's size: the peers' benchmarks map only their send and
 * receive buffers, and on a host whose kernel samples the pages processes
 * map (DAMON), each extra MiB mapped costs the links a little. */
#define CHECK_SLICE (64 * 1024) /* bytes; a multiple of every element size */

/* A result of nranks blocks of n elements, block j rank j's copy pattern
 * from its element `base` on: result elements first .. first+count-1
 * into out. */
static void fill_blocks(char *out, coll_datatype_t dt, size_t n, size_t base, size_t first,
                        size_t count)
{
    size_t es = coll_datatype_size(dt);

    while (count > 0) {
        size_t j = first / n, off = first % n, k = n - off < count ? n - off : count;

        bench_fill_copy(out, dt, (int)j, base + off, k);
        out += k * es;
        first += k;
        count -= k;
    }
}

/* This rank's expected result, elements first .. first+count-1, into out. */
static void fill_expected(const bench_t *b, const call_t *c, size_t first, size_t count,
                          char *out)
{
    size_t n = c->g.count, me = (size_t)b->rank;
    int left = (b->rank + b->nranks - 1) % b->nranks;

    switch (b->kind) {
    case K_ALLREDUCE:
    case K_REDUCE:
        bench_fill_reduce_expected(out, c->dt, c->op, b->nranks, first, count);
        break;
    case K_REDUCE_SCATTER: /* block `me` of the reduced vector */
        bench_fill_reduce_expected(out, c->dt, c->op, b->nranks, me * n + first, count);
        break;
    case K_BROADCAST:
        bench_fill_copy(out, c->dt, c->root, first, count);
        break;
    case K_SCATTER: /* block `me` of the root's data */
        bench_fill_copy(out, c->dt, c->root, me * n + first, count);
        break;
    case K_SENDRECV:
        bench_fill_copy(out, c->dt, left, first, count);
        break;
    case K_ALLGATHER:
    case K_GATHER: /* block j: rank j's data */
        fill_blocks(out, c->dt, n, 0, first, count);
        break;
    case K_ALLTOALL: /* block j: block `me` of rank j's data */
        fill_blocks(out, c->dt, n, me * n, first, count);
        break;
    default:
        break;
    }
}

/* Walk the result in slices of CHECK_SLICE bytes, the expected value of
 * each in b->expected: complement (prepare) or count the wrong elements. */
static size_t walk_result(const bench_t *b, const call_t *c, int count_wrong)
{
    size_t es = coll_datatype_size(c->dt), per = CHECK_SLICE / es, wrong = 0;

    for (size_t first = 0; first < c->result_count; first += per) {
        size_t k = c->result_count - first < per ? c->result_count - first : per;
        char *got = c->result + first * es;

        fill_expected(b, c, first, k, b->expected);
        if (count_wrong)
            wrong += bench_count_wrong(got, b->expected, k, es);
        else
            bench_complement(got, b->expected, k * es);
    }
    return wrong;
}

/* This rank's input at c->send. */
static void fill_input(const bench_t *b, const call_t *c)
{
    size_t n = c->g.count, all = n * (size_t)b->nranks;
    int me = b->rank;

    switch (b->kind) {
    case K_ALLREDUCE:
    case K_REDUCE:
        bench_fill_reduce_input(c->send, c->dt, c->op, b->nranks, me, 0, n);
        break;
    case K_REDUCE_SCATTER:
        bench_fill_reduce_input(c->send, c->dt, c->op, b->nranks, me, 0, all);
        break;
    case K_BROADCAST:
        if (me == c->root)
            bench_fill_copy(c->send, c->dt, me, 0, n);
        break;
    case K_SCATTER:
        if (me == c->root)
            bench_fill_copy(c->send, c->dt, me, 0, all);
        break;
    case K_ALLTOALL:
        bench_fill_copy(c->send, c->dt, me, 0, all);
        break;
    case K_ALLGATHER:
    case K_GATHER:
    case K_SENDRECV:
        bench_fill_copy(c->send, c->dt, me, 0, n);
        break;
    default:
        break;
    }
}

/* Fresh buffers for the call: a result area that differs from the
 * expected result in every byte, then the inputs (which, in place, land
 * inside the result area where the in-place form wants them). */
static void init_data(const bench_t *b, const call_t *c)
{
    if (c->result)
        walk_result(b, c, 0);
    fill_input(b, c);
}

/* Flip a bit of the result's first element and of its last, which lies
 * in the check's last slice: #wrong 2 (1 with one element). */
static void corrupt(const call_t *c)
{
    size_t es = coll_datatype_size(c->dt);

    c->result[0] ^= 1;
    if (c->result_count > 1)
        c->result[(c->result_count - 1) * es] ^= 1;
}

/* One checked call on fresh buffers: wrong elements summed over ranks. */
static long long check_once(bench_t *b, const call_t *c)
{
    int64_t wrong = 0;

    init_data(b, c);
    run_calls(b, c, 1);
    if (c->result && c->result_count > 0) {
        if (b->rank == b->corrupt_rank) /* COLL_PERF_CORRUPT: prove the check can fail */
            corrupt(c);
        wrong = (int64_t)walk_result(b, c, 1);
    }
    check_ok(b, "coll_allreduce (summing #wrong over ranks)",
             coll_allreduce(&wrong, &wrong, 1, COLL_INT64, COLL_SUM, b->comm));
    return wrong;
}

/* ---- timing ------------------------------------------------------------------------------- */

typedef struct result {
    int not_run;                    /* no such placement: N/A */
    double time_us, algbw, busbw;   /* us per call; GB/s (1e9 B/s) */
    double p50_us, p99_us;
    long long wrong;                /* -1: not checked */
} result_t;

/* Combine this rank's time per call across ranks as -a asks. */
static double combine_time(const bench_t *b, double t)
{
    static const coll_op_t ops[] = {COLL_SUM, COLL_SUM, COLL_MIN, COLL_MAX};

    if (b->o->average == 0) {
        check_ok(b, "coll_broadcast (rank 0's time)",
                 coll_broadcast(&t, &t, 1, COLL_FLOAT64, 0, b->comm));
        return t;
    }
    check_ok(b, "coll_allreduce (time across ranks)",
             coll_allreduce(&t, &t, 1, COLL_FLOAT64, ops[b->o->average], b->comm));
    return b->o->average == 1 ? t / b->nranks : t;
}

/* The timed loop: time per call (us, this rank), and b->iter_us[i] = each
 * iteration's time per call, the maximum over ranks. */
static double time_loop(bench_t *b, const call_t *c)
{
    long iters = b->o->iters, agg = b->o->agg;
    double t0, t;

    run_calls(b, c, 1); /* untimed: connections, caches, the algorithm's first choice */
    check_ok(b, "coll_barrier (before timing)", coll_barrier(b->comm));
    t0 = t = bench_now();
    for (long i = 0; i < iters; i++) {
        double start = t;
        run_calls(b, c, agg);
        t = bench_now();
        b->iter_us[i] = (t - start) * 1e6 / (double)agg;
    }
    t = (t - t0) * 1e6 / (double)(iters * agg);
    /* after timing, so that it costs the loop nothing */
    check_ok(b, "coll_allreduce (max of iteration times over ranks)",
             coll_allreduce(b->iter_us, b->iter_us, (size_t)iters, COLL_FLOAT64, COLL_MAX,
                            b->comm));
    return t;
}

static result_t measure(bench_t *b, call_t *c)
{
    result_t r = {0};
    double time_us;

    if (c->in_place && !(b->flags & F_IN_PLACE)) {
        r.not_run = 1;
        return r;
    }
    call_place(b, c);
    if (b->o->check)
        init_data(b, c); /* time real data, as nccl-tests does */
    time_us = time_loop(b, c);
    r.time_us = combine_time(b, time_us);
    r.p50_us = bench_percentile(b->iter_us, (size_t)b->o->iters, 50);
    r.p99_us = bench_percentile(b->iter_us, (size_t)b->o->iters, 99);
    r.algbw = r.time_us > 0 ? (double)c->g.bytes / 1e3 / r.time_us : 0; /* B/us / 1e3 = GB/s */
    r.busbw = r.algbw * bus_factor(b->kind, b->nranks);
    r.wrong = b->o->check ? 0 : -1;
    for (long k = 0; k < b->o->check && r.wrong == 0; k++)
        r.wrong = check_once(b, c);
    return r;
}

/* Untimed calls at one size, out of place (nccl-tests warms up at the
 * largest and at the smallest size). */
static void warm_up(bench_t *b, call_t c, size_t size)
{
    c.g = geometry(b, size, coll_datatype_size(c.dt));
    c.in_place = 0;
    call_place(b, &c);
    for (long i = 0; i < b->o->warmup; i++)
        run_calls(b, &c, 1);
}

/* ---- output (rank 0) ------------------------------------------------------------------------ */

/* nccl-tests' time format: fewer decimals as the number grows. */
static const char *fmt_time(char *buf, size_t len, double us)
{
    snprintf(buf, len, us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
    return buf;
}

#define ROW_HEAD "%12s  %12s  %8s  %6s  %6s"
#define ROW_PLACE "  %7s  %6s  %6s  %6s  %7s  %7s"

static void print_table_header(void)
{
    /* each placement's columns are 51 characters wide: center the labels */
    printf("#\n# %10s  %12s  %8s  %6s  %6s%32s%48s\n", "", "", "", "", "", "out-of-place",
           "in-place");
    printf("# %10s  %12s  %8s  %6s  %6s" ROW_PLACE ROW_PLACE "\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "p50", "p99", "time", "algbw",
           "busbw", "#wrong", "p50", "p99");
    printf("# %10s  %12s  %8s  %6s  %6s" ROW_PLACE ROW_PLACE "\n", "(B)", "(elements)", "", "",
           "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(GB/s)", "(GB/s)", "",
           "(us)", "(us)");
}

static void print_placement(const result_t *r)
{
    char t[32], a[32], bb[32], w[32], p50[32], p99[32];

    if (r->not_run) {
        printf(ROW_PLACE, "N/A", "N/A", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    snprintf(a, sizeof(a), "%6.2f", r->algbw);
    snprintf(bb, sizeof(bb), "%6.2f", r->busbw);
    if (r->wrong < 0)
        snprintf(w, sizeof(w), "N/A");
    else
        snprintf(w, sizeof(w), "%lld", r->wrong);
    printf(ROW_PLACE, fmt_time(t, sizeof(t), r->time_us), a, bb, w,
           fmt_time(p50, sizeof(p50), r->p50_us), fmt_time(p99, sizeof(p99), r->p99_us));
}

static const char *op_label(const bench_t *b, coll_op_t op)
{
    return (b->flags & F_REDUCES) ? bench_op_name(op) : "none";
}

static const char *type_label(const bench_t *b, coll_datatype_t dt)
{
    return b->kind == K_BARRIER ? "none" : bench_datatype_name(dt);
}

static void write_csv_row(const bench_t *b, const call_t *c, const result_t *r, const char *place)
{
    char wrong[32] = "";

    if (r->wrong >= 0)
        snprintf(wrong, sizeof(wrong), "%lld", r->wrong);
    fprintf(b->csv, "libcoll,%s,%s,%s,%d,%zu,%zu,%s,%s,%d,%s,%.3f,%.9g,%.9g,%.3f,%.3f,%s\n",
            bench_version(), b->transport, colls[b->kind].name, b->nranks, c->g.bytes,
            c->g.count, type_label(b, c->dt), op_label(b, c->op), c->root, place, r->time_us,
            r->algbw, r->busbw, r->p50_us, r->p99_us, wrong);
    fflush(b->csv);
}

static void write_json_row(bench_t *b, const call_t *c, const result_t *r, const char *place)
{
    FILE *f = b->json;

    fprintf(f, "%s\n    {\"size\":%zu,\"count\":%zu,\"type\":", b->json_rows++ ? "," : "",
            c->g.bytes, c->g.count);
    bench_json_string(f, type_label(b, c->dt));
    fprintf(f, ",\"redop\":");
    bench_json_string(f, op_label(b, c->op));
    fprintf(f, ",\"root\":%d,\"placement\":\"%s\",\"time_us\":%.3f,\"algbw\":%.9g,"
               "\"busbw\":%.9g,\"p50_us\":%.3f,\"p99_us\":%.3f,\"wrong\":",
            c->root, place, r->time_us, r->algbw, r->busbw, r->p50_us, r->p99_us);
    if (r->wrong >= 0)
        fprintf(f, "%lld}", r->wrong);
    else
        fprintf(f, "null}");
}

/* One table row (both placements), the CSV and JSON rows, the totals. */
static void report(bench_t *b, const call_t *c, const result_t res[2])
{
    static const char *const place[2] = {"out", "in"};
    char size[32], count[32], root[16];

    if (b->rank != 0)
        return;
    snprintf(size, sizeof(size), "%zu", c->g.bytes);
    snprintf(count, sizeof(count), "%zu", c->g.count);
    snprintf(root, sizeof(root), "%d", c->root);
    printf(ROW_HEAD, size, count, type_label(b, c->dt), op_label(b, c->op), root);
    print_placement(&res[0]);
    print_placement(&res[1]);
    printf("\n");
    for (int ip = 0; ip < 2; ip++) {
        if (res[ip].not_run)
            continue;
        b->failed_results += res[ip].wrong > 0;
        b->busbw_sum += res[ip].busbw;
        b->busbw_count++;
        if (b->csv)
            write_csv_row(b, c, &res[ip], place[ip]);
        if (b->json)
            write_json_row(b, c, &res[ip], place[ip]);
    }
}

/* ---- the sweep ---------------------------------------------------------------------------- */

static size_t next_size(const opts_t *o, size_t size)
{
    if (o->step_factor > 1) {
        if (size == 0)
            return 1;
        return size > SIZE_MAX / (size_t)o->step_factor ? SIZE_MAX : size * (size_t)o->step_factor;
    }
    return size > SIZE_MAX - o->step_bytes ? SIZE_MAX : size + o->step_bytes;
}

/* Every size for one datatype, op and root. */
static void sweep(bench_t *b, coll_datatype_t dt, coll_op_t op, int root)
{
    const opts_t *o = b->o;
    size_t es = coll_datatype_size(dt);
    call_t c = {.dt = dt, .op = op, .root = root};

    warm_up(b, c, o->max_bytes);
    warm_up(b, c, o->min_bytes);
    for (size_t size = o->min_bytes; size <= o->max_bytes;) {
        result_t res[2];
        c.g = geometry(b, size, es);
        for (int ip = 0; ip < 2; ip++) {
            c.in_place = ip;
            res[ip] = measure(b, &c);
        }
        report(b, &c, res);
        size_t next = next_size(o, size);
        if (next <= size || b->kind == K_BARRIER) /* barrier: one row, no bytes */
            break;
        size = next;
    }
}

static void run_all(bench_t *b)
{
    const opts_t *o = b->o;
    int ntypes = o->type_all ? (int)(sizeof(all_types) / sizeof(all_types[0])) : 1;
    int reduces = (b->flags & F_REDUCES) != 0;
    int nops = reduces && o->op_all ? (int)(sizeof(all_ops) / sizeof(all_ops[0])) : 1;
    int rooted = (b->flags & F_ROOTED) != 0;
    int root_lo = rooted ? (o->root_all ? 0 : (int)o->root) : -1;
    int root_hi = rooted ? (o->root_all ? b->nranks - 1 : (int)o->root) : -1;

    for (int t = 0; t < ntypes; t++) {
        coll_datatype_t dt = o->type_all ? all_types[t] : o->dt;
        for (int k = 0; k < nops; k++) {
            coll_op_t op = o->op_all ? all_ops[k] : o->op;
            if (reduces && !bench_op_supported(dt, op)) {
                if (b->rank == 0)
                    printf("# skipping %s on %s: libcoll has no integer average\n",
                           bench_op_name(op), bench_datatype_name(dt));
                continue;
            }
            for (int root = root_lo; root <= root_hi; root++)
                sweep(b, dt, op, root);
        }
    }
}

/* ---- setup ----------------------------------------------------------------------------------- */

/* The algorithm to report: -A, else what COLL_ALGO forces for this
 * collective (its last entry wins, as in the library), else "auto". */
static const char *algo_label(const opts_t *o, kind_t kind)
{
    static char found[64];
    const char *env = getenv("COLL_ALGO"), *key = colls[kind].algo_key;
    char copy[512], *save = NULL;

    if (o->algo)
        return o->algo;
    if (!env || !key || strlen(env) >= sizeof(copy))
        return "auto";
    snprintf(copy, sizeof(copy), "%s", env);
    snprintf(found, sizeof(found), "auto");
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon)
            continue;
        *colon = '\0';
        if (strcasecmp(tok, key) == 0 ||
            (kind == K_BROADCAST && strcasecmp(tok, "bcast") == 0))
            snprintf(found, sizeof(found), "%s", colon + 1);
    }
    return found;
}

/* -A: add collective:ALGO to COLL_ALGO (a later entry replaces an
 * earlier one), read by the library at init. */
static void set_algo(const opts_t *o)
{
    const char *old = getenv("COLL_ALGO");
    char value[1024];

    if (!o->algo)
        return;
    snprintf(value, sizeof(value), "%s%s%s:%s", old && old[0] ? old : "", old && old[0] ? "," : "",
             colls[o->kind].algo_key, o->algo);
    setenv("COLL_ALGO", value, 1);
}

static void *alloc_or_die(const bench_t *b, size_t bytes, const char *what)
{
    return bench_alloc_or_abort(PROG, b->comm, b->rank, bytes, what);
}

/* Every rank learns whether the buffers fit on every host, so that all
 * stop together with a message rather than one in the OOM killer. */
static void check_memory(const bench_t *b)
{
    size_t need = 2 * b->o->max_bytes; /* send, receive */
    int fits = b->o->max_bytes <= SIZE_MAX / 2 && bench_fits_memory(need), all = fits;

    check_ok(b, "coll_allreduce (memory check)",
             coll_allreduce(&fits, &all, 1, COLL_INT32, COLL_MIN, b->comm));
    if (all)
        return;
    if (!fits)
        fprintf(stderr, "%s: rank %d: -e %zu needs %zu bytes per rank (send and receive), more "
                        "than 80%% of this host's memory shared by its ranks\n",
                PROG, b->rank, b->o->max_bytes, need);
    coll_comm_destroy(b->comm);
    exit(BENCH_EXIT_USAGE);
}

/* A send or receive buffer of b->buf_bytes: plain, or from coll_mem_alloc (-R 1). */
static void *alloc_msg_buffer(const bench_t *b, const char *what)
{
    void *p = NULL;
    coll_status_t st;

    if (!b->o->mem)
        return alloc_or_die(b, b->buf_bytes, what);
    st = coll_mem_alloc(&p, b->buf_bytes ? b->buf_bytes : 1);
    if (st != COLL_OK) {
        fprintf(stderr, "%s: rank %d: coll_mem_alloc of %zu bytes for %s: %s (%s)\n", PROG,
                b->rank, b->buf_bytes, what, coll_status_str(st), coll_get_last_error(NULL));
        fflush(NULL);
        coll_comm_abort(b->comm);
        exit(BENCH_EXIT_FAIL);
    }
    memset(p, 0, b->buf_bytes); /* fault the pages in before timing */
    return p;
}

static void free_msg_buffer(const bench_t *b, void *p)
{
    if (b->o->mem)
        coll_mem_free(p);
    else
        free(p);
}

static void alloc_buffers(bench_t *b)
{
    check_memory(b);
    b->buf_bytes = b->o->max_bytes;
    b->sendbuf = alloc_msg_buffer(b, "the send buffer");
    b->recvbuf = alloc_msg_buffer(b, "the receive buffer");
    b->expected = alloc_or_die(b, b->o->check ? CHECK_SLICE : 0, "the expected result's slice");
    b->iter_us = alloc_or_die(b, (size_t)b->o->iters * sizeof(double), "iteration times");
    b->reqs = alloc_or_die(b, 2 * (size_t)b->o->agg * sizeof(coll_request_t), "requests");
}

static void free_buffers(bench_t *b)
{
    free_msg_buffer(b, b->sendbuf);
    free_msg_buffer(b, b->recvbuf);
    free(b->expected);
    free(b->iter_us);
    free(b->reqs);
}

/* Rank 0 prints one line per rank, gathered in rank order. */
static void print_ranks(const bench_t *b)
{
    char line[LINE_LEN] = {0}, host[64] = "?";
    char *all = NULL;

    gethostname(host, sizeof(host) - 1);
    snprintf(line, sizeof(line), "#  Rank %2d Pid %6d on %10s transport %s", b->rank,
             (int)getpid(), host, b->transport);
    if (b->rank == 0)
        all = alloc_or_die(b, (size_t)b->nranks * LINE_LEN, "rank lines");
    check_ok(b, "coll_gather (rank lines)",
             coll_gather(line, all, LINE_LEN, COLL_UINT8, 0, b->comm));
    if (b->rank != 0)
        return;
    printf("#\n# Using ranks\n");
    for (int r = 0; r < b->nranks; r++)
        printf("%.*s\n", LINE_LEN - 1, all + (size_t)r * LINE_LEN);
    free(all);
}

static void print_header(const bench_t *b)
{
    static const char *const combined[] = {"rank 0's", "mean", "min", "max"}; /* by -a */
    const opts_t *o = b->o;

    if (b->rank != 0)
        return;
    printf("# %s (libcoll %s): %s on %d ranks, algorithm %s, transport %s\n", PROG,
           bench_version(), colls[b->kind].name, b->nranks, b->algo, b->transport);
    printf("# nThread 1 nGpus 0 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %ld "
           "iters: %ld agg iters: %ld validation: %ld graph: 0\n",
           o->min_bytes, o->max_bytes, o->step_factor > 1 ? (size_t)o->step_factor : o->step_bytes,
           o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->agg, o->check);
    if (o->mem)
        printf("# Send and receive buffers from coll_mem_alloc (-R 1)\n");
    if (o->blocking)
        printf("# Blocking calls (-z 1): each call returns when its result is ready\n");
    else
        printf("# Non-blocking calls (-z 0): %ld coll_i* call(s) per iteration, then "
               "coll_waitall\n", o->agg);
    printf("# time: us per call, %s across ranks; p50/p99: over iterations, each the slowest "
           "rank's\n", combined[o->average]);
}

/* The output files (rank 0 opens them, all stop together if it cannot)
 * and their first lines. */
static void open_outputs(bench_t *b)
{
    bench_open_outputs(PROG, b->comm, b->rank, b->o->csv_path, b->o->json_path, &b->csv,
                       &b->json);
    if (b->csv)
        fprintf(b->csv, "library,version,transport,collective,nranks,size,count,type,redop,root,"
                        "placement,time_us,algbw,busbw,p50_us,p99_us,wrong\n");
    if (b->json) {
        fprintf(b->json, "{\"tool\":\"coll_perf\",\"library\":\"libcoll\",\"version\":\"%s\","
                         "\"collective\":\"%s\",\"nranks\":%d,\"transport\":",
                bench_version(), colls[b->kind].name, b->nranks);
        bench_json_string(b->json, b->transport);
        fprintf(b->json, ",\"algorithm\":");
        bench_json_string(b->json, b->algo);
        fprintf(b->json, ",\"blocking\":%ld,\"iters\":%ld,\"warmup_iters\":%ld,\"agg_iters\":%ld,"
                         "\"average\":%ld,\"local_register\":%ld,\"results\":[",
                b->o->blocking, b->o->iters, b->o->warmup, b->o->agg, b->o->average, b->o->mem);
    }
}

static int close_outputs(bench_t *b)
{
    return bench_close_outputs(PROG, b->csv, b->json);
}

static void init_comm(bench_t *b)
{
    coll_status_t st;

    set_algo(b->o);
    bench_set_transport(b->o->transport);
    if ((st = coll_comm_init_env(&b->comm, NULL)) != COLL_OK)
        bench_die(PROG, NULL, "coll_comm_init_env", st);
    coll_comm_rank(b->comm, &b->rank);
    coll_comm_size(b->comm, &b->nranks);
    if ((b->flags & F_ROOTED) && !b->o->root_all && b->o->root >= b->nranks) {
        if (b->rank == 0)
            fprintf(stderr, "%s: root %ld is out of range for %d ranks (run with -h for usage)\n",
                    PROG, b->o->root, b->nranks);
        coll_comm_destroy(b->comm);
        exit(BENCH_EXIT_USAGE);
    }
}

int main(int argc, char **argv)
{
    opts_t o;
    bench_t b = {0};
    int bad;

    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_args(&o, argc, argv);
    b.o = &o;
    b.kind = (kind_t)o.kind;
    b.flags = colls[o.kind].flags;
    b.corrupt_rank = bench_corrupt_rank(); /* flips one bit of its result before counting */
    b.transport = bench_transport_label(o.transport);
    b.algo = algo_label(&o, b.kind);
    init_comm(&b);
    alloc_buffers(&b);
    open_outputs(&b);
    print_header(&b);
    print_ranks(&b);
    if (b.rank == 0)
        print_table_header();
    run_all(&b);
    bad = b.rank == 0 ? close_outputs(&b) : 0;
    if (b.rank == 0) {
        printf("# Out of bounds values : %lld %s\n", b.failed_results,
               b.failed_results ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g\n#\n",
               b.busbw_count ? b.busbw_sum / (double)b.busbw_count : 0.0);
    }
    /* every rank exits with rank 0's verdict */
    int verdict = b.failed_results > 0 || bad;
    check_ok(&b, "coll_broadcast (verdict)",
             coll_broadcast(&verdict, &verdict, 1, COLL_INT32, 0, b.comm));
    free_buffers(&b);
    check_ok(&b, "coll_comm_destroy", coll_comm_destroy(b.comm));
    return verdict ? BENCH_EXIT_FAIL : 0;
}
