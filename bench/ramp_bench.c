/*
 * ramp_bench.c: how long this host takes to reach its steady rate of
 * copying between two CPUs, without any library.
 *
 * Two threads, bound to the first two CPUs this process may use, exchange
 * blocks the way a shared-memory ring moves them: each copies its block
 * into a shared slot, waits for the other's, copies the other's slot out,
 * and waits again. That is two copies per CPU and iteration, the work of
 * a 2-rank all-gather through shared memory. The run starts after a
 * chosen idle time and an optional activity on both CPUs, and prints the
 * mean time per exchange over successive groups of iterations.
 *
 * On the development VM the first 10-40 ms of such copying run at about
 * half the later rate, and the slow state returns after about a second
 * without copying: spinning on integers or vector registers, or bouncing
 * one cache line between the CPUs, does not leave it; copying within
 * each CPU's own memory does (docs/performance-sets.md, "What warms up").
 * A benchmark that times 20 calls after 5 warm-up calls therefore times
 * the host's ramp at its first size, whatever the library.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define PROG "ramp_bench"
#define WAIT_LIMIT_SEC 10.0 /* a peer thread that makes no progress this long is stuck */

typedef enum { PRE_NONE, PRE_SPIN, PRE_COPY } pre_t;

typedef struct {
    double idle_sec; /* sleep before anything, so the host starts idle */
    pre_t pre;       /* activity on both CPUs before the exchange */
    long pre_ms;     /* its length */
    size_t bytes;    /* block each CPU copies in and out per iteration */
    long iters;      /* exchanges timed */
    long groups;     /* they are reported in this many groups */
} opts_t;

typedef struct {
    const opts_t *o;
    int cpu;              /* CPU this side is bound to */
    char *slot_out;       /* shared slot this side writes */
    const char *slot_in;  /* shared slot the other side writes */
    atomic_long *mine;    /* this side's progress: 2 per iteration */
    atomic_long *theirs;  /* the other side's */
    double *times;        /* [iters] seconds per exchange; NULL on the untimed side */
    int failed;
} side_t;

static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;
static volatile unsigned long spin_sink;

static void usage(void)
{
    printf("usage: %s [-i IDLE_SEC] [-p none|spin|copy] [-t PRE_MS] [-s SIZE] [-n ITERS]\n"
           "                  [-g GROUPS]\n"
           "  -i  seconds to sleep first, so that the host starts idle (default 3)\n"
           "  -p  activity on both CPUs before the exchange: none, spin (integer\n"
           "      loop), copy (memcpy within each CPU's own buffers) (default none)\n"
           "  -t  length of that activity in ms (default 500)\n"
           "  -s  block each CPU copies in and out per exchange (default 512K)\n"
           "  -n  exchanges timed (default 2000)\n"
           "  -g  groups they are reported in (default 10)\n",
           PROG);
}

static pre_t parse_pre(const char *text)
{
    if (strcmp(text, "none") == 0)
        return PRE_NONE;
    if (strcmp(text, "spin") == 0)
        return PRE_SPIN;
    if (strcmp(text, "copy") == 0)
        return PRE_COPY;
    bench_usage_error(PROG, "-p takes none, spin or copy, not '%s'", text);
}

static void parse(int argc, char **argv, opts_t *o)
{
    *o = (opts_t){.idle_sec = 3, .pre = PRE_NONE, .pre_ms = 500, .bytes = 512 * 1024,
                  .iters = 2000, .groups = 10};
    int c;
    while ((c = getopt(argc, argv, "i:p:t:s:n:g:h")) != -1) {
        switch (c) {
        case 'i':
            o->idle_sec = (double)bench_parse_num(PROG, "-i", optarg, 0, 600);
            break;
        case 'p':
            o->pre = parse_pre(optarg);
            break;
        case 't':
            o->pre_ms = bench_parse_num(PROG, "-t", optarg, 0, 600000);
            break;
        case 's':
            if (bench_parse_size(optarg, &o->bytes) != 0 || o->bytes < 64 ||
                o->bytes > ((size_t)1 << 30))
                bench_usage_error(PROG, "-s takes a size from 64 to 1G, not '%s'", optarg);
            break;
        case 'n':
            o->iters = bench_parse_num(PROG, "-n", optarg, 1, 100000000);
            break;
        case 'g':
            o->groups = bench_parse_num(PROG, "-g", optarg, 1, 1000);
            break;
        case 'h':
            usage();
            exit(0);
        default:
            bench_usage_error(PROG, "unknown option");
        }
    }
    if (optind < argc)
        bench_usage_error(PROG, "unexpected argument '%s'", argv[optind]);
    if (o->groups > o->iters)
        bench_usage_error(PROG, "-g %ld is more than -n %ld", o->groups, o->iters);
}

/* The first two CPUs of this process's affinity mask, or -1. */
static int two_cpus(int cpus[2])
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    return n == 2 ? 0 : -1;
}

static int bind_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* Busy work on this CPU for o->pre_ms, of the kind -p names. */
static void pre_activity(const opts_t *o, char *a, char *b)
{
    double end = bench_now() + (double)o->pre_ms / 1000.0;
    unsigned long x = 1;
    while (bench_now() < end) {
        if (o->pre == PRE_COPY) {
            memcpy_fn(b, a, o->bytes);
        } else {
            for (int i = 0; i < 100000; i++)
                x = x * 6364136223846793005ul + 1442695040888963407ul;
        }
    }
    spin_sink = x;
}

/* Wait until the other side has reached `step`; 0, or -1 past the limit. */
static int wait_for(const side_t *s, long step)
{
    double limit = 0;
    for (unsigned polls = 0; atomic_load_explicit(s->theirs, memory_order_acquire) < step;
         polls++) {
        if ((polls & 0xffff) == 0) {
            double t = bench_now();
            if (limit == 0)
                limit = t + WAIT_LIMIT_SEC;
            else if (t > limit)
                return -1;
        }
    }
    return 0;
}

static void *run_side(void *arg)
{
    side_t *s = arg;
    const opts_t *o = s->o;
    char *src = aligned_alloc(4096, o->bytes), *dst = aligned_alloc(4096, o->bytes);

    if (src == NULL || dst == NULL || bind_to(s->cpu) != 0) {
        fprintf(stderr, "%s: cannot set up the side on CPU %d\n", PROG, s->cpu);
        s->failed = 1;
        atomic_store(s->mine, 2 * o->iters); /* let the other side finish */
        goto out;
    }
    memset(src, s->cpu & 0x7f, o->bytes);
    memset(dst, 0, o->bytes);
    if (o->pre != PRE_NONE)
        pre_activity(o, src, dst);
    for (long i = 1; i <= o->iters; i++) {
        double t0 = bench_now();
        memcpy_fn(s->slot_out, src, o->bytes);
        atomic_store_explicit(s->mine, 2 * i - 1, memory_order_release);
        if (wait_for(s, 2 * i - 1) != 0)
            goto stuck;
        memcpy_fn(dst, s->slot_in, o->bytes);
        atomic_store_explicit(s->mine, 2 * i, memory_order_release);
        if (wait_for(s, 2 * i) != 0)
            goto stuck;
        if (s->times != NULL)
            s->times[i - 1] = bench_now() - t0;
    }
    goto out;
stuck:
    fprintf(stderr, "%s: the thread on CPU %d waited %.0f s for the other one\n", PROG, s->cpu,
            WAIT_LIMIT_SEC);
    s->failed = 1;
out:
    free(src);
    free(dst);
    return NULL;
}

static void report(const opts_t *o, const double *times)
{
    long per = o->iters / o->groups;
    printf("# %zu bytes per CPU and direction, %ld exchanges; idle %.0f s, then %s",
           o->bytes, o->iters, o->idle_sec,
           o->pre == PRE_NONE ? "no activity" : o->pre == PRE_SPIN ? "an integer spin" : "memcpy");
    if (o->pre != PRE_NONE)
        printf(" for %ld ms", o->pre_ms);
    printf("\n# group  exchanges      ms at end   us per exchange   GB/s copied per CPU\n");
    double elapsed = 0;
    for (long g = 0; g < o->groups; g++) {
        long first = g * per, last = g == o->groups - 1 ? o->iters : first + per;
        double sum = 0;
        for (long i = first; i < last; i++)
            sum += times[i];
        elapsed += sum;
        double mean = sum / (double)(last - first);
        printf("%7ld  %5ld-%-5ld  %10.1f  %16.1f  %20.2f\n", g, first + 1, last, elapsed * 1e3,
               mean * 1e6, 2.0 * (double)o->bytes / mean / 1e9);
    }
}

int main(int argc, char **argv)
{
    opts_t o;
    int cpus[2], rc = BENCH_EXIT_FAIL;
    atomic_long progress[2];
    pthread_t peer;
    parse(argc, argv, &o);
    if (two_cpus(cpus) != 0) {
        fprintf(stderr, "%s: needs two CPUs in its affinity mask\n", PROG);
        return BENCH_EXIT_FAIL;
    }
    char *slots[2] = {aligned_alloc(4096, o.bytes), aligned_alloc(4096, o.bytes)};
    double *times = calloc((size_t)o.iters, sizeof(*times));
    if (slots[0] == NULL || slots[1] == NULL || times == NULL) {
        fprintf(stderr, "%s: out of memory for %zu-byte blocks\n", PROG, o.bytes);
        goto out;
    }
    memset(slots[0], 0, o.bytes);
    memset(slots[1], 0, o.bytes);
    atomic_init(&progress[0], 0);
    atomic_init(&progress[1], 0);
    side_t sides[2];
    for (int k = 0; k < 2; k++)
        sides[k] = (side_t){.o = &o, .cpu = cpus[k], .slot_out = slots[k],
                            .slot_in = slots[1 - k], .mine = &progress[k],
                            .theirs = &progress[1 - k], .times = k == 0 ? times : NULL};
    if (o.idle_sec > 0)
        nanosleep(&(struct timespec){.tv_sec = (time_t)o.idle_sec}, NULL);
    if (pthread_create(&peer, NULL, run_side, &sides[1]) != 0) {
        fprintf(stderr, "%s: cannot start the second thread\n", PROG);
        goto out;
    }
    run_side(&sides[0]);
    pthread_join(peer, NULL);
    if (!sides[0].failed && !sides[1].failed) {
        report(&o, times);
        rc = 0;
    }
out:
    free(slots[0]);
    free(slots[1]);
    free(times);
    return rc;
}
