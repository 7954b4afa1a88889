/*
 * reduce_bench.c: speed of the local reduction kernels against memcpy.
 *
 * For each size it times memcpy (c = a), fp32 sum out of place (c = a + b)
 * and in place (a += b), then fp16, bf16, fp64 and int32 sums at the
 * largest size. Rates are bytes of OUTPUT per second (GB/s = 1e9 B/s): a
 * sum reads twice what it writes, so at sizes beyond the caches it moves
 * 3x (in place) to 4x (with write-allocate) the bytes shown. Each number
 * is the median of several repetitions; a repetition repeats the call
 * until it has produced at least 256 MiB, so that small sizes are not
 * timer noise. Buffers are written before timing (pages faulted in,
 * caches warm) and a checksum of the results is printed so that no work
 * can be dropped.
 *
 * With -d it times instead memcpy and libcoll's own bulk copy (copy.h)
 * with the destination 0 to 1024 bytes after the source modulo the page:
 * glibc's memcpy is many times slower at some of those distances on some
 * CPUs, and libcoll's copy avoids them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "copy.h"
#include "reduce.h"

#define MIB (1024.0 * 1024.0)

static int reps = 9;
static double checksum;

/* Called through a volatile pointer: the compiler cannot inline it, turn
 * it into something cheaper or drop it. */
static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;

static void (*volatile lib_copy_fn)(void *, const void *, size_t) = coll_copy;

static double now_sec(void)
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

typedef enum { KIND_MEMCPY, KIND_LIB_COPY, KIND_SUM, KIND_SUM_INPLACE } kind_t;

/* Median GB/s of output for one kind on `bytes` bytes of output. */
static double measure(kind_t kind, coll_datatype_t dt, char *a, char *b, char *c, size_t bytes)
{
    size_t count = bytes / coll_datatype_size(dt);
    size_t iters = (size_t)(256.0 * MIB / (double)bytes);
    double rates[64];

    if (iters < 1)
        iters = 1;
    for (int r = -1; r < reps; r++) { /* r = -1: untimed warm-up */
        double t0 = now_sec();
        for (size_t i = 0; i < iters; i++) {
            coll_status_t st = COLL_OK;
            if (kind == KIND_MEMCPY)
                memcpy_fn(c, a, bytes);
            else if (kind == KIND_LIB_COPY)
                lib_copy_fn(c, a, bytes);
            else if (kind == KIND_SUM)
                st = coll_reduce_local(c, a, b, count, dt, COLL_SUM);
            else
                st = coll_reduce_local(a, a, b, count, dt, COLL_SUM);
            if (st != COLL_OK) {
                fprintf(stderr, "reduce_bench: coll_reduce_local failed: %s\n",
                        coll_status_str(st));
                exit(1);
            }
        }
        double t = now_sec() - t0;
        if (r >= 0)
            rates[r] = (double)bytes * (double)iters / t / 1e9;
    }
    /* Use the output: one byte per 4 KiB page. */
    const char *out = kind == KIND_SUM_INPLACE ? a : c;
    for (size_t i = 0; i < bytes; i += 4096)
        checksum += (unsigned char)out[i];
    qsort(rates, (size_t)reps, sizeof(rates[0]), cmp_double);
    return rates[reps / 2];
}

/* Values whose sums stay ordinary numbers (no inf, no subnormals, whose
 * slow paths would not be representative) even after many in-place adds. */
static void fill(char *p, size_t bytes, coll_datatype_t dt, unsigned seed)
{
    size_t n = bytes / coll_datatype_size(dt);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        float v = 1.0f + (float)((seed >> 8) & 0xffff) / 65536.0f;
        switch (dt) {
        case COLL_FLOAT32:
            ((float *)p)[i] = v;
            break;
        case COLL_FLOAT64:
            ((double *)p)[i] = v;
            break;
        case COLL_FLOAT16:
            ((uint16_t *)p)[i] = coll_float_to_half(v);
            break;
        case COLL_BFLOAT16:
            ((uint16_t *)p)[i] = coll_float_to_bf16(v);
            break;
        default:
            ((int32_t *)p)[i] = (int32_t)(seed >> 4);
            break;
        }
    }
}

/* -d: GB/s of memcpy and of coll_copy by the page offset of the
 * destination after the source's (both buffers page-aligned). */
static void copy_distances(char *a, char *c, size_t max_bytes)
{
    static const size_t sizes[] = {4u << 10, 128u << 10, 1u << 20};
    static const size_t dist[] = {0, 8, 16, 24, 32, 48, 64, 1024};

    printf("reduce_bench: memcpy and libcoll's copy, GB/s (1e9 B/s), median of %d, by the\n"
           "destination's offset after the source's modulo 4 KiB\n\n", reps);
    printf("%10s %8s %10s %10s\n", "size", "offset", "memcpy", "libcoll");
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        for (size_t d = 0; d < sizeof(dist) / sizeof(dist[0]); d++) {
            if (sizes[s] + dist[d] > max_bytes)
                continue;
            fill(a, sizes[s], COLL_FLOAT32, 1);
            double m = measure(KIND_MEMCPY, COLL_FLOAT32, a, NULL, c + dist[d], sizes[s]);
            double l = measure(KIND_LIB_COPY, COLL_FLOAT32, a, NULL, c + dist[d], sizes[s]);
            printf("%7.0f KiB %8zu %10.2f %10.2f\n", (double)sizes[s] / 1024.0, dist[d], m, l);
        }
    }
    printf("\n(checksum %.0f)\n", checksum);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: reduce_bench [-r REPS] [-S] [-m MIB] [-d]\n"
            "  Times memcpy and the local reduction kernels (coll_reduce_local).\n"
            "  -r REPS  repetitions per measurement, median reported (default 9, max 64)\n"
            "  -S       force the portable scalar kernels\n"
            "  -m MIB   largest size in MiB of output (default 64; sizes 0.25, 1, 4, ... up to it)\n"
            "  -d       instead: memcpy and libcoll's copy (copy.h) with the destination\n"
            "           0-1024 bytes after the source modulo 4 KiB, at 4 KiB, 128 KiB, 1 MiB\n"
            "  -h       this help\n"
            "  Rates are GB/s (1e9 bytes/s) of output; ratio = sum / memcpy.\n");
}

int main(int argc, char **argv)
{
    size_t max_mib = 64;
    int opt, distances = 0;

    while ((opt = getopt(argc, argv, "r:Sm:dh")) != -1) {
        switch (opt) {
        case 'r':
            reps = atoi(optarg);
            if (reps < 1 || reps > 64) {
                usage(stderr);
                return 2;
            }
            break;
        case 'S':
            coll_reduce_force_scalar(1);
            break;
        case 'm':
            max_mib = (size_t)atol(optarg);
            if (max_mib < 1) {
                usage(stderr);
                return 2;
            }
            break;
        case 'd':
            distances = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }

    size_t max_bytes = max_mib << 20;
    char *a = aligned_alloc(4096, max_bytes);
    char *b = aligned_alloc(4096, max_bytes);
    char *c = aligned_alloc(4096, max_bytes);
    if (!a || !b || !c) {
        fprintf(stderr, "reduce_bench: cannot allocate 3 x %zu MiB: %s\n", max_mib, strerror(errno));
        return 1;
    }
    memset(c, 1, max_bytes);
    if (distances) {
        copy_distances(a, c, max_bytes);
        free(a);
        free(b);
        free(c);
        return 0;
    }

    printf("reduce_bench: kernels %s, median of %d, GB/s of output (1e9 B/s)\n\n",
           coll_reduce_impl(), reps);
    printf("%10s %10s %12s %7s %12s %7s\n", "size", "memcpy", "fp32 c=a+b", "ratio", "fp32 a+=b",
           "ratio");
    for (size_t bytes = 256u << 10;; bytes *= 4) {
        if (bytes > max_bytes)
            bytes = max_bytes;
        fill(a, bytes, COLL_FLOAT32, 1);
        fill(b, bytes, COLL_FLOAT32, 2);
        double cp = measure(KIND_MEMCPY, COLL_FLOAT32, a, b, c, bytes);
        double s = measure(KIND_SUM, COLL_FLOAT32, a, b, c, bytes);
        double ip = measure(KIND_SUM_INPLACE, COLL_FLOAT32, a, b, c, bytes);
        printf("%7.2f MiB %10.2f %12.2f %7.2f %12.2f %7.2f\n", (double)bytes / MIB, cp, s, s / cp,
               ip, ip / cp);
        if (bytes == max_bytes)
            break;
    }

    static const struct {
        coll_datatype_t dt;
        const char *name;
    } types[] = {
        {COLL_FLOAT32, "fp32"}, {COLL_FLOAT16, "fp16"}, {COLL_BFLOAT16, "bf16"},
        {COLL_FLOAT64, "fp64"}, {COLL_INT32, "int32"},
    };
    printf("\nsum c = a + b at %zu MiB of output:\n", max_mib);
    printf("%10s %10s %10s\n", "type", "GB/s", "Gelem/s");
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        fill(a, max_bytes, types[i].dt, 3);
        fill(b, max_bytes, types[i].dt, 4);
        double s = measure(KIND_SUM, types[i].dt, a, b, c, max_bytes);
        printf("%10s %10.2f %10.2f\n", types[i].name, s, s / (double)coll_datatype_size(types[i].dt));
    }
    printf("\n(checksum %.0f)\n", checksum);
    free(a);
    free(b);
    free(c);
    return 0;
}
