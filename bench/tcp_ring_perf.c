/*
 * tcp_ring_perf.c: the ceiling a ring all-reduce can reach on a job's
 * links, measured with plain TCP streams and no collective library.
 *
 * For an all-reduce of SIZE bytes over n ranks, every rank sends
 * 2(n-1)/n * SIZE bytes to rank r+1 while it receives as many from rank
 * r-1: the bytes a bandwidth-optimal all-reduce puts on each link, with
 * nothing to wait for but the link (no reduction, no step that depends on
 * another rank's data). Its busbw is therefore the all-reduce's busbw
 * (nccl-tests' definition) at the links' best, and an all-reduce's busbw
 * divided by it is the fraction of that ceiling the library reached, in
 * the same run on the same links (bench/cluster.sh runs it like any
 * benchmark: `bench/cluster.sh -- tcp_ring_perf -b 64M -e 64M`).
 *
 * libcoll only starts the job: it tells each rank its neighbours' listening
 * addresses (an all-gather), lines the ranks up before each size (a
 * barrier) and combines times; the streams are sockets of this program's
 * own, one or more per neighbour (-s), each with an equal share. Each
 * iteration is one send and one receive of the whole share, as a blocking
 * call would be; iterations follow each other without a barrier. Time per
 * iteration: the mean over the timed ones of the slowest rank (as
 * coll_perf -a 3). IPv4 only: the address is the one this host routes
 * toward the job's master address (COLL_MASTER_ADDR or MASTER_ADDR).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_util.h"
#include "coll.h"

#define PROG "tcp_ring_perf"
#define MAX_SOCKS 16
#define MAX_ITERS 100000L
#define IO_BYTES (1u << 20)    /* bytes per send() or recv() call */
#define STALL_MS 60000         /* no byte moved for this long: the run fails */

typedef struct opts {
    size_t min_bytes, max_bytes;
    long factor, iters, warmup, check, nsocks;
    const char *csv_path;
} opts_t;

typedef struct ring {
    coll_comm_t comm;
    int rank, nranks;
    int next, prev;                    /* rank+1 and rank-1, mod nranks */
    int out[MAX_SOCKS], in[MAX_SOCKS]; /* to next, from prev */
    int nsocks;
    unsigned char *sendbuf, *recvbuf;  /* IO_BYTES each */
} ring_t;

static void usage(FILE *f)
{
    fprintf(f,
        "usage: collrun -n N %s [options]    (or under bench/cluster.sh)\n"
        "  -b, --minbytes SIZE     smallest all-reduce size (default 64M; K, M, G suffixes)\n"
        "  -e, --maxbytes SIZE     largest all-reduce size (default 64M)\n"
        "  -f, --stepfactor F      multiply the size by F (default 2)\n"
        "  -n, --iters N           timed iterations per size (default 5)\n"
        "  -w, --warmup_iters N    untimed iterations per size first (default 2)\n"
        "  -c, --check 0|1         check every byte of one more iteration (default 1)\n"
        "  -s, --sockets N         streams to each neighbour, 1..%d (default 1)\n"
        "  -a, --average 3         time = mean per iteration of the slowest rank (the only way)\n"
        "      --csv FILE          also write the results as CSV ('-': stdout)\n"
        "  -h, --help              this text\n"
        "Each rank sends 2(n-1)/n of SIZE to rank r+1 and receives as much from r-1.\n",
        PROG, MAX_SOCKS);
}

static void parse_args(opts_t *o, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, 0, 'b'}, {"maxbytes", required_argument, 0, 'e'},
        {"stepfactor", required_argument, 0, 'f'}, {"iters", required_argument, 0, 'n'},
        {"warmup_iters", required_argument, 0, 'w'}, {"check", required_argument, 0, 'c'},
        {"sockets", required_argument, 0, 's'}, {"average", required_argument, 0, 'a'},
        {"csv", required_argument, 0, 'S'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;

    *o = (opts_t){.min_bytes = 64u << 20, .max_bytes = 64u << 20, .factor = 2, .iters = 5,
                  .warmup = 2, .check = 1, .nsocks = 1};
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":b:e:f:n:w:c:s:a:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b':
        case 'e':
            if (bench_parse_size(optarg, c == 'b' ? &o->min_bytes : &o->max_bytes))
                bench_usage_error(PROG, "-%c '%s' is not a size", c, optarg);
            break;
        case 'f': o->factor = bench_parse_num(PROG, "-f", optarg, 2, 1024); break;
        case 'n': o->iters = bench_parse_num(PROG, "-n", optarg, 1, MAX_ITERS); break;
        case 'w': o->warmup = bench_parse_num(PROG, "-w", optarg, 0, MAX_ITERS); break;
        case 'c': o->check = bench_parse_num(PROG, "-c", optarg, 0, 1); break;
        case 's': o->nsocks = bench_parse_num(PROG, "-s", optarg, 1, MAX_SOCKS); break;
        case 'a': bench_parse_num(PROG, "-a", optarg, 3, 3); break;
        case 'S': o->csv_path = optarg; break;
        case 'h':
            if (bench_env_rank() <= 0)
                usage(stdout);
            exit(0);
        case ':': bench_usage_error(PROG, "option -%c needs a value", optopt);
        default: bench_usage_error(PROG, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        bench_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    if (o->min_bytes > o->max_bytes)
        bench_usage_error(PROG, "-b %zu is above -e %zu", o->min_bytes, o->max_bytes);
}

/* A run-time failure on this rank: say what, abort the job, exit. */
static void __attribute__((noreturn)) fail(const ring_t *g, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: rank %d: ", PROG, g->rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(NULL);
    coll_comm_abort(g->comm);
    exit(BENCH_EXIT_FAIL);
}

static void check_ok(const ring_t *g, const char *what, coll_status_t st)
{
    if (st != COLL_OK)
        bench_die(PROG, g->comm, what, st);
}

/* The IPv4 address this host sends from toward the job's master. */
static struct in_addr local_addr(const ring_t *g)
{
    const char *master = getenv("COLL_MASTER_ADDR");
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
    struct sockaddr_in me;
    socklen_t len = sizeof(me);
    int fd, rc;

    if (!master && !(master = getenv("MASTER_ADDR")))
        master = "127.0.0.1";
    if ((rc = getaddrinfo(master, "9", &hints, &ai)) != 0)
        fail(g, "cannot resolve the master address '%s' to IPv4: %s", master, gai_strerror(rc));
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    rc = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc == 0)
        rc = getsockname(fd, (struct sockaddr *)&me, &len);
    freeaddrinfo(ai);
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        fail(g, "no IPv4 route toward the master address '%s': %s", master, strerror(errno));
    return me.sin_addr;
}

/* Non-blocking: a rank blocked in a send while its own receiver fills
 * would stall the ring. */
static void set_stream_opts(const ring_t *g, int fd)
{
    int one = 1, fl = fcntl(fd, F_GETFL);

    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
        fail(g, "cannot set up a stream socket: %s", strerror(errno));
}

/* Listen, learn every rank's address, connect -s streams to rank+1 and
 * accept as many from rank-1. Every rank listens before the all-gather,
 * so a connect completes at once; an accept waits at most STALL_MS. */
static void connect_ring(ring_t *g)
{
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr = local_addr(g)}, *all;
    socklen_t len = sizeof(me);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);

    if (lfd < 0 || bind(lfd, (struct sockaddr *)&me, sizeof(me)) ||
        listen(lfd, MAX_SOCKS) || getsockname(lfd, (struct sockaddr *)&me, &len))
        fail(g, "cannot listen on %s: %s", inet_ntoa(me.sin_addr), strerror(errno));
    if (!(all = calloc((size_t)g->nranks, sizeof(*all))))
        fail(g, "out of memory");
    check_ok(g, "coll_allgather (listening addresses)",
             coll_allgather(&me, all, sizeof(me), COLL_UINT8, g->comm));
    const struct sockaddr_in *next = &all[g->next];
    for (int i = 0; i < g->nsocks; i++) {
        g->out[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (g->out[i] < 0 || connect(g->out[i], (const struct sockaddr *)next, sizeof(*next)))
            fail(g, "cannot connect to rank %d at %s:%d: %s", g->next,
                 inet_ntoa(next->sin_addr), ntohs(next->sin_port), strerror(errno));
        set_stream_opts(g, g->out[i]);
    }
    for (int i = 0; i < g->nsocks; i++) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, STALL_MS) == 0)
            fail(g, "rank %d did not connect within %d s", g->prev, STALL_MS / 1000);
        if ((g->in[i] = accept(lfd, NULL, NULL)) < 0)
            fail(g, "accept: %s", strerror(errno));
        set_stream_opts(g, g->in[i]);
    }
    free(all);
    close(lfd);
}

/* The byte at position `pos` of rank `src`'s stream: a pattern a lost,
 * doubled or misplaced block cannot reproduce. */
static unsigned char pattern(int src, size_t pos)
{
    return (unsigned char)((pos * 131u + (pos >> 12) * 7u + (size_t)src * 29u) & 0xff);
}

/* Stream k's share of `bytes` over n streams: bytes/n, the last the rest. */
static size_t stream_share(size_t bytes, int n, int k)
{
    size_t share = bytes / (size_t)n;
    return k == n - 1 ? bytes - share * (size_t)(n - 1) : share;
}

/* One iteration: `bytes` out on the out-sockets and in on the in-sockets,
 * each stream its share. With `check`, every received byte is compared;
 * returns the wrong ones. */
static size_t exchange(ring_t *g, size_t bytes, int check)
{
    int n = g->nsocks;
    size_t sent[MAX_SOCKS], rcvd[MAX_SOCKS], wrong = 0;
    struct pollfd pfd[2 * MAX_SOCKS];

    for (int k = 0; k < n; k++)
        sent[k] = rcvd[k] = 0;
    for (;;) {
        int np = 0;
        for (int k = 0; k < n; k++) {
            size_t want = stream_share(bytes, n, k);
            if (sent[k] < want)
                pfd[np++] = (struct pollfd){.fd = g->out[k], .events = POLLOUT};
            if (rcvd[k] < want)
                pfd[np++] = (struct pollfd){.fd = g->in[k], .events = POLLIN};
        }
        if (np == 0)
            return wrong;
        int rc = poll(pfd, (nfds_t)np, STALL_MS);
        if (rc == 0)
            fail(g, "no byte moved to rank %d or from rank %d for %d s", g->next, g->prev,
                 STALL_MS / 1000);
        if (rc < 0 && errno != EINTR)
            fail(g, "poll: %s", strerror(errno));
        for (int i = 0; i < np && rc > 0; i++) {
            if (!pfd[i].revents)
                continue;
            int k, out = pfd[i].events == POLLOUT;
            for (k = 0; k < n && (out ? g->out[k] : g->in[k]) != pfd[i].fd; k++)
                ;
            size_t *done = out ? &sent[k] : &rcvd[k], left = stream_share(bytes, n, k) - *done;
            /* stream position p carries pattern(src, p % IO_BYTES) */
            size_t at = *done % IO_BYTES, room = out ? IO_BYTES - at : IO_BYTES;
            size_t chunk = left < room ? left : room;
            ssize_t got = out ? send(pfd[i].fd, g->sendbuf + at, chunk, MSG_NOSIGNAL)
                              : recv(pfd[i].fd, g->recvbuf, chunk, 0);
            if (got == 0 && !out)
                fail(g, "rank %d closed its stream %d", g->prev, k);
            if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                fail(g, "%s rank %d: %s", out ? "send to" : "receive from",
                     out ? g->next : g->prev, strerror(errno));
            if (got <= 0)
                continue;
            if (check && !out)
                for (ssize_t b = 0; b < got; b++)
                    wrong += g->recvbuf[b] != pattern(g->prev, (*done + (size_t)b) % IO_BYTES);
            *done += (size_t)got;
        }
    }
}

/* One more iteration, every byte checked. The rank named by
 * COLL_PERF_CORRUPT (a self-test of the check, as in coll_perf) flips a
 * bit of its stream's first byte of every MiB. */
static int64_t checked_exchange(ring_t *g, size_t bytes, int corrupt)
{
    if (corrupt)
        g->sendbuf[0] ^= 1;
    int64_t wrong = (int64_t)exchange(g, bytes, 1);
    if (corrupt)
        g->sendbuf[0] ^= 1;
    return wrong;
}

int main(int argc, char **argv)
{
    opts_t o;
    ring_t g = {.rank = bench_env_rank()};
    FILE *csv = NULL, *json = NULL;
    double *iter_t;
    long long total_wrong = 0;

    parse_args(&o, argc, argv);
    check_ok(&g, "coll_comm_init_env", coll_comm_init_env(&g.comm, NULL));
    check_ok(&g, "coll_comm_rank", coll_comm_rank(g.comm, &g.rank));
    check_ok(&g, "coll_comm_size", coll_comm_size(g.comm, &g.nranks));
    if (g.nranks < 2)
        fail(&g, "needs at least 2 ranks (got %d)", g.nranks);
    g.nsocks = (int)o.nsocks;
    g.next = (g.rank + 1) % g.nranks;
    g.prev = (g.rank + g.nranks - 1) % g.nranks;
    int corrupt = bench_corrupt_rank() == g.rank;
    g.sendbuf = bench_alloc_or_abort(PROG, g.comm, g.rank, IO_BYTES, "the send buffer");
    g.recvbuf = bench_alloc_or_abort(PROG, g.comm, g.rank, IO_BYTES, "the receive buffer");
    if (!(iter_t = calloc((size_t)o.iters, sizeof(*iter_t))))
        fail(&g, "out of memory");
    for (size_t b = 0; b < IO_BYTES; b++)
        g.sendbuf[b] = pattern(g.rank, b);
    connect_ring(&g);
    bench_open_outputs(PROG, g.comm, g.rank, o.csv_path, NULL, &csv, &json);
    if (csv)
        fprintf(csv, "library,version,transport,collective,nranks,size,count,type,redop,root,"
                     "placement,time_us,algbw,busbw,p50_us,p99_us,wrong\n");
    if (g.rank == 0)
        printf("# %s: %d ranks, %d stream(s) to each neighbour\n"
               "# %12s %14s %12s %12s %12s %8s\n", PROG, g.nranks, g.nsocks, "size(B)",
               "link bytes", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
    for (size_t size = o.min_bytes;; size *= (size_t)o.factor) {
        /* 2(n-1)/n of the size: what the ring all-reduce sends on a link */
        size_t link = size / (size_t)g.nranks * 2 * (size_t)(g.nranks - 1);
        for (long i = 0; i < o.warmup; i++)
            exchange(&g, link, 0);
        check_ok(&g, "coll_barrier (before timing)", coll_barrier(g.comm));
        double t0 = bench_now(), t = t0;
        for (long i = 0; i < o.iters; i++) {
            double start = t;
            exchange(&g, link, 0);
            t = bench_now();
            iter_t[i] = (t - start) * 1e6;
        }
        double us = (t - t0) * 1e6 / (double)o.iters;
        int64_t wrong = o.check ? checked_exchange(&g, link, corrupt) : 0;
        check_ok(&g, "coll_allreduce (time)", coll_allreduce(&us, &us, 1, COLL_FLOAT64, COLL_MAX,
                                                             g.comm));
        check_ok(&g, "coll_allreduce (iteration times)",
                 coll_allreduce(iter_t, iter_t, (size_t)o.iters, COLL_FLOAT64, COLL_MAX, g.comm));
        check_ok(&g, "coll_allreduce (#wrong)",
                 coll_allreduce(&wrong, &wrong, 1, COLL_INT64, COLL_SUM, g.comm));
        double algbw = (double)size / 1e3 / us, busbw = (double)link / 1e3 / us;
        double p50 = bench_percentile(iter_t, (size_t)o.iters, 50);
        double p99 = bench_percentile(iter_t, (size_t)o.iters, 99);
        if (g.rank == 0)
            printf("  %12zu %14zu %12.1f %12.4f %12.4f %8lld\n", size, link, us, algbw, busbw,
                   o.check ? (long long)wrong : -1LL);
        if (csv) {
            char wr[32] = ""; /* empty: not checked, as coll_perf writes it */
            if (o.check)
                snprintf(wr, sizeof(wr), "%lld", (long long)wrong);
            fprintf(csv, "tcp,%s,tcp,tcp_ring,%d,%zu,%zu,uint8,none,-1,out,%.3f,%.9g,%.9g,%.3f,"
                         "%.3f,%s\n", bench_version(), g.nranks, size, size, us, algbw, busbw,
                    p50, p99, wr);
            fflush(csv);
        }
        total_wrong += wrong;
        if (size >= o.max_bytes || size > o.max_bytes / (size_t)o.factor)
            break;
    }
    for (int i = 0; i < g.nsocks; i++) {
        close(g.out[i]);
        close(g.in[i]);
    }
    free(iter_t);
    if (g.rank == 0 && o.check)
        printf("# wrong bytes: %lld %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    int rc = bench_close_outputs(PROG, csv, json) || total_wrong;
    check_ok(&g, "coll_comm_destroy", coll_comm_destroy(g.comm));
    return rc ? BENCH_EXIT_FAIL : 0;
}
