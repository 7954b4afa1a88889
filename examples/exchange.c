/*
 * exchange.c: the demo job (make demo). Started by a launcher (collrun,
 * torchrun, srun, mpirun), it measures every pair of ranks in turn
 * (one-way latency of 8-byte messages, one-way bandwidth of 16 MiB
 * messages), then has every rank exchange 16 MiB with every other rank at
 * once, checks every byte received, and rank 0 prints what was measured.
 *
 *   collrun -n 4 build/bin/exchange [--size BYTES] [--iters N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        coll_status_t st_ = (call);                                                        \
        if (st_ != COLL_OK) {                                                              \
            fprintf(stderr, "exchange: %s: %s\n  %s\n", #call, coll_status_str(st_),      \
                    coll_get_last_error(NULL));                                            \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median one-way latency in seconds: half of each round trip. */
static double pair_latency(coll_comm_t comm, int me, int peer, int first, int iters)
{
    double *rtt = malloc((size_t)iters * sizeof(*rtt)), med;
    uint64_t msg = 0;

    for (int i = -10; i < iters; i++) { /* 10 warm-up round trips */
        double t0 = now();
        if (me == first) {
            CHECK(coll_send(&msg, 1, COLL_UINT64, peer, 1, comm));
            CHECK(coll_recv(&msg, 1, COLL_UINT64, peer, 1, comm));
        } else {
            CHECK(coll_recv(&msg, 1, COLL_UINT64, peer, 1, comm));
            CHECK(coll_send(&msg, 1, COLL_UINT64, peer, 1, comm));
        }
        if (i >= 0)
            rtt[i] = now() - t0;
    }
    qsort(rtt, (size_t)iters, sizeof(*rtt), cmp_double);
    med = rtt[iters / 2] / 2;
    free(rtt);
    return med;
}

/* One-way bandwidth in bytes/s: `reps` messages, then a 1-byte ack. */
static double pair_bandwidth(coll_comm_t comm, int me, int peer, int first, char *buf,
                             size_t size, int reps)
{
    char ack = 0;
    double t0 = now();

    for (int i = 0; i < reps; i++) {
        if (me == first)
            CHECK(coll_send(buf, size, COLL_UINT8, peer, 2, comm));
        else
            CHECK(coll_recv(buf, size, COLL_UINT8, peer, 2, comm));
    }
    if (me == first)
        CHECK(coll_recv(&ack, 1, COLL_UINT8, peer, 3, comm));
    else
        CHECK(coll_send(&ack, 1, COLL_UINT8, peer, 3, comm));
    return (double)size * reps / (now() - t0);
}

static uint8_t pattern(int from, int to, size_t i)
{
    return (uint8_t)(i * 131 + (size_t)from * 17 + (size_t)to * 5 + (i >> 16));
}

/* Everyone sends `size` bytes to everyone at once; returns bytes/s sent
 * by this rank and counts bytes that differ from what the sender wrote. */
static double all_to_all(coll_comm_t comm, int me, int n, size_t size, size_t *wrong)
{
    char **out = calloc((size_t)n, sizeof(*out)), **in = calloc((size_t)n, sizeof(*in));
    coll_request_t *reqs = calloc((size_t)(2 * n), sizeof(*reqs));
    double t0, took;
    int k = 0;

    for (int p = 0; p < n; p++) {
        out[p] = malloc(size);
        in[p] = malloc(size);
        for (size_t i = 0; i < size; i++)
            out[p][i] = (char)pattern(me, p, i);
    }
    CHECK(coll_barrier(comm));
    t0 = now();
    for (int p = 0; p < n; p++) {
        if (p == me)
            continue;
        CHECK(coll_irecv(in[p], size, COLL_UINT8, p, 4, comm, &reqs[k++]));
        CHECK(coll_isend(out[p], size, COLL_UINT8, p, 4, comm, &reqs[k++]));
    }
    CHECK(coll_waitall(k, reqs));
    took = now() - t0;
    *wrong = 0;
    for (int p = 0; p < n; p++) {
        for (size_t i = 0; p != me && i < size; i++)
            *wrong += (uint8_t)in[p][i] != pattern(p, me, i);
        free(out[p]);
        free(in[p]);
    }
    free(out);
    free(in);
    free(reqs);
    return (double)size * (n - 1) / took;
}

int main(int argc, char **argv)
{
    size_t size = 16u << 20;
    int iters = 200, me, n, major, minor, patch;
    coll_comm_t comm;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--size") == 0)
            size = strtoull(argv[i + 1], NULL, 0);
        else if (strcmp(argv[i], "--iters") == 0)
            iters = atoi(argv[i + 1]);
    }
    if (iters < 1 || size < 1) {
        fprintf(stderr, "usage: exchange [--size BYTES] [--iters N]\n");
        return 2;
    }
    CHECK(coll_comm_init_env(&comm, NULL));
    CHECK(coll_comm_rank(comm, &me));
    CHECK(coll_comm_size(comm, &n));
    coll_get_version(&major, &minor, &patch);

    char *buf = malloc(size);
    memset(buf, me, size);
    double *lat = calloc((size_t)(n * n), sizeof(*lat)), *bw = calloc((size_t)(n * n), sizeof(*bw));
    /* Pairs one at a time, in the same order on every rank. */
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            if (me == a || me == b) {
                int peer = me == a ? b : a;
                lat[a * n + b] = pair_latency(comm, me, peer, a, iters);
                bw[a * n + b] = pair_bandwidth(comm, me, peer, a, buf, size, 8);
            }
            CHECK(coll_barrier(comm));
        }
    /* Rank 0 collects every pair's figures from the pair's first rank. */
    if (me == 0) {
        for (int a = 1; a < n; a++)
            for (int b = a + 1; b < n; b++) {
                CHECK(coll_recv(&lat[a * n + b], 1, COLL_FLOAT64, a, 5, comm));
                CHECK(coll_recv(&bw[a * n + b], 1, COLL_FLOAT64, a, 5, comm));
            }
    } else {
        for (int b = me + 1; b < n; b++) {
            CHECK(coll_send(&lat[me * n + b], 1, COLL_FLOAT64, 0, 5, comm));
            CHECK(coll_send(&bw[me * n + b], 1, COLL_FLOAT64, 0, 5, comm));
        }
    }
    size_t wrong, total_wrong = 0;
    double rate = all_to_all(comm, me, n, size, &wrong), min_rate = rate;
    if (me == 0) {
        for (int p = 1; p < n; p++) {
            double r;
            uint64_t w;
            CHECK(coll_recv(&r, 1, COLL_FLOAT64, p, 6, comm));
            CHECK(coll_recv(&w, 1, COLL_UINT64, p, 6, comm));
            min_rate = r < min_rate ? r : min_rate;
            total_wrong += w;
        }
        total_wrong += wrong;
        printf("libcoll %d.%d.%d demo: %d ranks\n\n", major, minor, patch, n);
        printf("  pair   latency, 8 B one way   bandwidth, %zu MiB one way\n", size >> 20);
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                printf("  %d-%d    %8.1f us             %8.2f GB/s\n", a, b,
                       lat[a * n + b] * 1e6, bw[a * n + b] * 1e-9);
        printf("\n  all-to-all: every rank sent %d x %zu MiB while receiving as much;\n"
               "  slowest rank sent at %.2f GB/s; %zu of %zu received bytes wrong\n",
               n - 1, size >> 20, min_rate * 1e-9, total_wrong, (size_t)n * (n - 1) * size);
    } else {
        uint64_t w = wrong;
        CHECK(coll_send(&rate, 1, COLL_FLOAT64, 0, 6, comm));
        CHECK(coll_send(&w, 1, COLL_UINT64, 0, 6, comm));
    }
    CHECK(coll_comm_destroy(comm));
    free(buf);
    free(lat);
    free(bw);
    return total_wrong == 0 ? 0 : 1;
}
