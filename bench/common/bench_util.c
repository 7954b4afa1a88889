/*
 * bench_util.c: helpers shared by the benchmarks (see bench_util.h).
 */
#include "bench_util.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Multiplier of a size suffix: none or B (1), K, M, G (powers of 1024),
 * the letter optionally followed by B or iB; 0 for anything else. */
static size_t size_unit(const char *s)
{
    size_t unit;

    switch (toupper((unsigned char)s[0])) {
    case '\0': return 1;
    case 'B': return s[1] == '\0' ? 1 : 0;
    case 'K': unit = (size_t)1 << 10; break;
    case 'M': unit = (size_t)1 << 20; break;
    case 'G': unit = (size_t)1 << 30; break;
    default: return 0;
    }
    s++;
    return (!*s || strcasecmp(s, "B") == 0 || strcasecmp(s, "iB") == 0) ? unit : 0;
}

int bench_parse_size(const char *text, size_t *bytes)
{
    char *end;
    unsigned long long v;
    size_t unit;

    if (!text || !isdigit((unsigned char)text[0]))
        return -1; /* no sign, no blank: strtoull would accept "-1" */
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || end == text)
        return -1;
    unit = size_unit(end);
    if (unit == 0 || v > SIZE_MAX / unit)
        return -1;
    *bytes = (size_t)v * unit;
    return 0;
}

int bench_parse_long(const char *text, long min, long max, long *value)
{
    char *end;
    long v;

    if (!text || text[0] == '\0')
        return -1;
    errno = 0;
    v = strtol(text, &end, 10);
    if (errno != 0 || *end != '\0' || end == text || v < min || v > max)
        return -1;
    *value = v;
    return 0;
}

int bench_env_rank(void)
{
    static const char *const vars[] = {"COLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                       "SLURM_PROCID"};
    long r;

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (bench_parse_long(getenv(vars[i]), 0, 1L << 30, &r) == 0)
            return (int)r;
    return -1;
}

int bench_corrupt_rank(void)
{
    long r;
    return bench_parse_long(getenv("COLL_PERF_CORRUPT"), 0, 1L << 30, &r) == 0 ? (int)r : -1;
}

const char *bench_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void bench_set_transport(const char *transport)
{
    if (transport)
        setenv("COLL_TRANSPORTS", transport, 1);
}

const char *bench_transport_label(const char *transport)
{
    const char *env = getenv("COLL_TRANSPORTS");
    if (transport)
        return transport;
    return env && env[0] ? env : "auto";
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_percentile(double *values, size_t n, double p)
{
    size_t rank;

    if (n == 0)
        return 0;
    qsort(values, n, sizeof(double), cmp_double);
    /* nearest rank: ceil(p/100 * n), 1-based; computed in integers
     * (p in hundredths) so that 50% of 20 values is exactly rank 10 */
    size_t p100 = (size_t)(p * 100.0 + 0.5);
    rank = (p100 * n + 9999) / 10000;
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return values[rank - 1];
}

FILE *bench_open_output(const char *prog, const char *path)
{
    FILE *f;

    if (strcmp(path, "-") == 0)
        return stdout;
    f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
    return f;
}

/* Buffers of 2 MiB or more start on a 2 MiB boundary, in this benchmark
 * and in the peers' (bench/peers/perf_common.c), so that where the kernel
 * backs them with huge pages (transparent huge pages set to always, or
 * glibc.malloc.hugetlb=1) every library's blocks lie in huge pages, and
 * single-copy reads compare the libraries, not where each benchmark's
 * buffers fell: a 2-rank all-gather of 1 MiB read its 512 KiB blocks in
 * 47-70 us at the median from 4 KiB pages, in 30-37 from huge pages. */
#define BIG_PAGE (2u << 20)

void *bench_alloc_or_abort(const char *prog, coll_comm_t comm, int rank, size_t bytes,
                           const char *what)
{
    void *p = NULL;

    if (posix_memalign(&p, bytes >= BIG_PAGE ? BIG_PAGE : 4096, bytes ? bytes : 1) != 0) {
        fprintf(stderr, "%s: rank %d: cannot allocate %zu bytes for %s\n", prog, rank, bytes,
                what);
        fflush(NULL);
        coll_comm_abort(comm);
        exit(BENCH_EXIT_FAIL);
    }
    memset(p, 0, bytes ? bytes : 1); /* fault the pages in before timing */
    return p;
}

void bench_open_outputs(const char *prog, coll_comm_t comm, int rank, const char *csv_path,
                        const char *json_path, FILE **csv_p, FILE **json_p)
{
    coll_status_t st;
    int ok = 1;

    if (rank == 0) {
        if (csv_path && !(*csv_p = bench_open_output(prog, csv_path)))
            ok = 0;
        if (ok && json_path && !(*json_p = bench_open_output(prog, json_path)))
            ok = 0;
    }
    st = coll_broadcast(&ok, &ok, 1, COLL_INT32, 0, comm);
    if (st != COLL_OK)
        bench_die(prog, comm, "coll_broadcast (output files ready)", st);
    if (!ok) { /* rank 0 said which file */
        coll_comm_destroy(comm);
        exit(BENCH_EXIT_FAIL);
    }
}

int bench_close_output(FILE *f)
{
    if (!f)
        return 0;
    if (f == stdout)
        return fflush(f) == 0 ? 0 : -1;
    return fclose(f) == 0 ? 0 : -1;
}

int bench_close_outputs(const char *prog, FILE *csv, FILE *json)
{
    int bad = 0;

    if (json) {
        fprintf(json, "\n]}\n");
        bad |= bench_close_output(json);
    }
    bad |= bench_close_output(csv);
    if (bad)
        fprintf(stderr, "%s: writing the output files failed\n", prog);
    return bad;
}

void bench_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

void bench_die(const char *prog, coll_comm_t comm, const char *what, coll_status_t st)
{
    int rank = -1;
    char who[32] = "";

    if (comm && coll_comm_rank(comm, &rank) == COLL_OK)
        snprintf(who, sizeof(who), "rank %d: ", rank);
    fprintf(stderr, "%s: %s%s failed: %s\n  %s\n", prog, who, what, coll_status_str(st),
            coll_get_last_error(comm));
    fflush(NULL);
    if (comm)
        coll_comm_abort(comm);
    exit(BENCH_EXIT_FAIL);
}

int bench_fits_memory(size_t bytes)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE), local = 1;
    double total;

    if (pages <= 0 || page <= 0)
        return 1; /* unknown: let the allocation decide */
    bench_parse_long(getenv("COLL_LOCAL_SIZE"), 1, 1L << 20, &local);
    total = (double)pages * (double)page;
    return (double)bytes * (double)local <= 0.8 * total;
}

const char *bench_version(void)
{
    static char text[32];
    int major = 0, minor = 0, patch = 0;

    coll_get_version(&major, &minor, &patch);
    snprintf(text, sizeof(text), "%d.%d.%d", major, minor, patch);
    return text;
}

void bench_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (run with -h for usage)\n");
    exit(BENCH_EXIT_USAGE);
}

long bench_parse_num(const char *prog, const char *flag, const char *text, long min, long max)
{
    long v;

    if (bench_parse_long(text, min, max, &v) != 0)
        bench_usage_error(prog, "%s needs a whole number in %ld..%ld, got '%s'", flag, min, max,
                          text);
    return v;
}
