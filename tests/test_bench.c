/*
 * test_bench.c: the benchmarks, end to end. Each test runs the real
 * benchmark binaries (coll_perf and p2p_perf, under their link names)
 * through build/bin/collrun, under timeout(1) so that a hang fails the
 * test instead of the run, and reads what they print and write:
 *
 * - every collective at 2 and 3 ranks (all-reduce also at 4), small
 *   sizes, blocking and non-blocking: exit 0, every table row and every
 *   CSV row has #wrong 0, the CSV header is exact and busbw = algbw x the
 *   collective's nccl-tests factor;
 * - every datatype (and op, and root: -d all -o all -r all) at one size,
 *   and algorithms forced with -A, also checking the JSON file;
 * - COLL_PERF_CORRUPT=1 (the self-test of the check) makes #wrong > 0 and
 *   the exit status non-zero, for coll_perf and for p2p_perf;
 * - p2p_latency, p2p_bw and p2p_bibw at 2 ranks with -c;
 * - tcp_ring_perf (plain TCP streams in a ring; libcoll only starts the
 *   job) at 3 ranks with 2 streams each: its CSV rows, #wrong 0, busbw =
 *   algbw x 2(n-1)/n, and COLL_PERF_CORRUPT makes it fail;
 * - bad flags: a clear message, a non-zero status, no crash, no hang;
 * - ramp_bench (no library, two threads): one row per group, covering
 *   every exchange, with positive times and rates; a bad flag is named.
 */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define OUT_LEN (256 * 1024)
#define RUN_TIMEOUT_S 60   /* one benchmark run, killed after this */
#define MAX_FIELDS 32

/* ---- running ------------------------------------------------------------------------- */

/* Run `collrun -n N BIN ARGS` with ENV (may be "") in a shell, stdout and
 * stderr into out. Returns the exit status (124: timed out; 128 + n: the
 * shell saw signal n). */
static int run_bench(const char *env, int nranks, const char *bin, const char *args, char *out)
{
    char cmd[2048];
    const char *b = harness_build_dir();

    snprintf(cmd, sizeof(cmd), "%s timeout -k 5 %d %s/bin/collrun -n %d %s/bin/%s %s 2>&1", env,
             RUN_TIMEOUT_S, b, nranks, b, bin, args);
    return harness_sh(cmd, out, OUT_LEN);
}

static char *out_buf(void)
{
    char *out = malloc(OUT_LEN);
    ck_assert_ptr_nonnull(out);
    return out;
}

/* The whole file as a string; free it. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long len;

    ck_assert_msg(f != NULL, "cannot read %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    rewind(f);
    buf = calloc(1, (size_t)len + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return buf;
}

/* Split `line` (modified) at `sep` characters; returns the field count. */
static int split(char *line, const char *sep, char **fields, int max, int keep_empty)
{
    int n = 0;
    char *p = line;

    if (!keep_empty) {
        for (char *save = NULL, *t = strtok_r(line, sep, &save); t && n < max;
             t = strtok_r(NULL, sep, &save))
            fields[n++] = t;
        return n;
    }
    while (n < max) { /* strsep keeps empty fields: "a,,b" is 3 */
        fields[n++] = strsep(&p, sep);
        if (!p)
            break;
    }
    return n;
}

/* ---- reading coll_perf's output ------------------------------------------------------ */

/* Table rows of coll_perf's stdout: lines that are not comments and have
 * the 17 columns (5 + 6 per placement). Fails on a #wrong other than 0,
 * or N/A where the placement was expected to run. Returns the rows. */
static int check_table(const char *out, int in_place_runs)
{
    char *copy = strdup(out), *save = NULL;
    int rows = 0;

    ck_assert_ptr_nonnull(copy);
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[MAX_FIELDS];
        int n = split(line, " ", f, MAX_FIELDS, 0);
        if (n == 0 || strspn(f[0], "0123456789") != strlen(f[0]))
            continue; /* comments, CSV on stdout, messages of collrun or the library */
        ck_assert_msg(n == 17, "table row with %d fields: %s\n%s", n, line, out);
        ck_assert_msg(strcmp(f[8], "0") == 0, "out-of-place #wrong '%s'\n%s", f[8], out);
        if (in_place_runs)
            ck_assert_msg(strcmp(f[14], "0") == 0, "in-place #wrong '%s'\n%s", f[14], out);
        else
            ck_assert_msg(strcmp(f[14], "N/A") == 0, "in-place #wrong '%s'\n%s", f[14], out);
        rows++;
    }
    free(copy);
    return rows;
}

static const char csv_header[] = "library,version,transport,collective,nranks,size,count,type,"
                                 "redop,root,placement,time_us,algbw,busbw,p50_us,p99_us,wrong";

/* nccl-tests' busbw / algbw for a collective on n ranks. */
static double bus_factor(const char *coll, int n)
{
    if (strcmp(coll, "all_reduce") == 0)
        return 2.0 * (n - 1) / n;
    if (strcmp(coll, "all_gather") == 0 || strcmp(coll, "reduce_scatter") == 0 ||
        strcmp(coll, "alltoall") == 0 || strcmp(coll, "scatter") == 0 ||
        strcmp(coll, "gather") == 0)
        return (double)(n - 1) / n;
    return 1; /* broadcast, reduce, sendrecv, barrier */
}

/* The CSV file: exact header, every row 17 fields with wrong 0, the
 * expected collective and rank count, busbw = algbw x factor. Returns
 * the rows. */
static int check_csv(const char *path, const char *coll, int nranks)
{
    char *text = slurp(path), *save = NULL;
    int rows = 0;
    char *line = strtok_r(text, "\n", &save);

    ck_assert_msg(line && strcmp(line, csv_header) == 0, "CSV header: %s", line ? line : "");
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char *f[MAX_FIELDS], copy[512];
        snprintf(copy, sizeof(copy), "%s", line);
        int n = split(line, ",", f, MAX_FIELDS, 1);
        ck_assert_msg(n == 17, "CSV row with %d fields: %s", n, copy);
        ck_assert_str_eq(f[0], "libcoll");
        ck_assert_str_eq(f[3], coll);
        ck_assert_int_eq(atoi(f[4]), nranks);
        ck_assert_msg(strcmp(f[10], "out") == 0 || strcmp(f[10], "in") == 0, "placement: %s", copy);
        ck_assert_msg(strcmp(f[16], "0") == 0, "CSV wrong '%s': %s", f[16], copy);
        double algbw = atof(f[12]), busbw = atof(f[13]), want = algbw * bus_factor(coll, nranks);
        ck_assert_msg(fabs(busbw - want) <= 1e-6 * fmax(1.0, fabs(want)),
                      "busbw %g, expected algbw %g x factor = %g: %s", busbw, algbw, want, copy);
        ck_assert_msg(atof(f[11]) > 0 || atol(f[5]) == 0, "time_us must be > 0: %s", copy);
        rows++;
    }
    free(text);
    return rows;
}

/* ---- every collective ----------------------------------------------------------------- */

typedef struct coll_case {
    const char *coll;   /* nccl-tests name */
    int nranks;
    int in_place;       /* has an in-place form */
    const char *extra;  /* more flags */
} coll_case_t;

/* 2 ranks blocking, 3 ranks non-blocking with 2 calls in flight. */
static const coll_case_t coll_cases[] = {
    {"all_reduce", 2, 1, ""},        {"all_reduce", 3, 1, "-z 0 -m 2"},
    {"all_reduce", 4, 1, "-a 3"},    {"all_gather", 2, 1, ""},
    {"all_gather", 3, 1, "-z 0 -m 2"}, {"broadcast", 2, 1, "-r 1"},
    {"broadcast", 3, 1, "-z 0 -m 2 -r 2"}, {"reduce", 2, 1, "-o max"},
    {"reduce", 3, 1, "-z 0 -m 2 -r 1"}, {"reduce_scatter", 2, 1, "-d bfloat16"},
    {"reduce_scatter", 3, 1, "-z 0 -m 2 -o prod"}, {"alltoall", 2, 1, ""},
    {"alltoall", 3, 1, "-z 0 -m 2 -d int8"}, {"scatter", 2, 1, "-r 1"},
    {"scatter", 3, 1, "-z 0 -m 2 -r 2"}, {"gather", 2, 1, ""},
    {"gather", 3, 1, "-z 0 -m 2 -r 1"}, {"sendrecv", 2, 0, ""},
    {"sendrecv", 3, 0, "-z 0 -m 2"}, {"barrier", 2, 0, ""},
    {"barrier", 3, 0, "-z 0"},
};

START_TEST(test_coll)
{
    const coll_case_t *c = &coll_cases[_i];
    char dir[64], csv[128], args[512], bin[64], *out = out_buf();
    int rc, rows, csv_rows;

    harness_tmpdir_make(dir, sizeof(dir), "test-bench");
    snprintf(csv, sizeof(csv), "%s/out.csv", dir);
    snprintf(bin, sizeof(bin), "%s_perf", c->coll);
    snprintf(args, sizeof(args), "-b 8 -e 64K -f 4 -n 3 -w 1 -c 1 %s --csv %s", c->extra, csv);
    rc = run_bench("", c->nranks, bin, args, out);
    ck_assert_msg(rc == 0, "%s -n %d %s: exit %d\n%s", bin, c->nranks, args, rc, out);
    ck_assert_msg(strstr(out, "# Out of bounds values : 0 OK"), "no OK verdict\n%s", out);
    rows = check_table(out, c->in_place);
    /* 8 B .. 64 KiB by 4: 7 sizes; the barrier has one row */
    ck_assert_int_eq(rows, strcmp(c->coll, "barrier") == 0 ? 1 : 7);
    csv_rows = check_csv(csv, c->coll, c->nranks);
    ck_assert_int_eq(csv_rows, rows * (c->in_place ? 2 : 1));
    harness_tmpdir_remove(dir);
    free(out);
}
END_TEST

/* The JSON file of a run: its head, the collective, one result per CSV
 * row (rows x placements), every result checked. */
static void check_json(const char *path, const char *coll, int nranks, const char *algo,
                       int results)
{
    static const char head[] = "{\"tool\":\"coll_perf\",\"library\":\"libcoll\",\"version\":\"";
    char *text = slurp(path), want[256];
    int n = 0;

    ck_assert_msg(strncmp(text, head, strlen(head)) == 0, "JSON: %.200s", text);
    snprintf(want, sizeof(want), "\"collective\":\"%s\",\"nranks\":%d,", coll, nranks);
    ck_assert_msg(strstr(text, want), "no %s in JSON: %.300s", want, text);
    snprintf(want, sizeof(want), "\"algorithm\":\"%s\",", algo);
    ck_assert_msg(strstr(text, want), "no %s in JSON: %.300s", want, text);
    ck_assert_ptr_nonnull(strstr(text, "\n]}\n"));
    for (const char *p = text; (p = strstr(p, "\"placement\":")) != NULL; p++)
        n++;
    ck_assert_int_eq(n, results);
    ck_assert_ptr_null(strstr(text, "\"wrong\":null"));
    free(text);
}

typedef struct sweep_case {
    const char *coll;
    int nranks;
    const char *args;
    int rows;           /* table rows expected */
    int in_place;
    const char *algo;   /* reported algorithm */
} sweep_case_t;

/* Every datatype (and op, and root) at one size; then forced algorithms
 * (-A) over sizes where the pipelined ones cut the data into chunks. */
static const sweep_case_t sweep_cases[] = {
    /* 10 types x 5 ops, no avg on the 6 integer types */
    {"all_reduce", 3, "-b 1K -e 1K -d all -o all", 44, 1, "auto"},
    {"reduce_scatter", 3, "-b 1K -e 1K -d all -o all", 44, 1, "auto"},
    {"reduce", 3, "-b 1K -e 1K -d all -o all -r all", 3 * 44, 1, "auto"},
    {"all_gather", 3, "-b 1K -e 1K -d all", 10, 1, "auto"},
    {"alltoall", 4, "-b 1K -e 1K -d all", 10, 1, "auto"},
    {"broadcast", 3, "-b 1K -e 1K -d all -r all", 30, 1, "auto"},
    {"scatter", 3, "-b 1K -e 1K -d all -r all", 30, 1, "auto"},
    {"gather", 3, "-b 1K -e 1K -d all -r all", 30, 1, "auto"},
    {"sendrecv", 3, "-b 1K -e 1K -d all", 10, 0, "auto"},
    {"all_reduce", 4, "-b 1K -e 1M -f 32 -A ring", 3, 1, "ring"},
    {"all_reduce", 3, "-b 1K -e 1M -f 32 -A butterfly -o avg -d half", 3, 1, "butterfly"},
    {"all_reduce", 4, "-b 1K -e 1M -f 32 -A recursive_doubling", 3, 1, "recursive_doubling"},
    {"all_reduce", 3, "-b 1K -e 1M -f 32 -A parallel -o min", 3, 1, "parallel"},
    {"reduce", 3, "-b 1K -e 1M -f 32 -A rabenseifner -r 2", 3, 1, "rabenseifner"},
    {"reduce_scatter", 4, "-b 1K -e 1M -f 32 -A recursive_halving", 3, 1, "recursive_halving"},
    {"reduce_scatter", 3, "-b 1K -e 1M -f 32 -A pairwise -d int64", 3, 1, "pairwise"},
    {"all_gather", 3, "-b 1K -e 1M -f 32 -A bruck", 3, 1, "bruck"},
    {"all_gather", 4, "-b 1K -e 1M -f 32 -A recursive_doubling", 3, 1, "recursive_doubling"},
    {"alltoall", 3, "-b 1K -e 1M -f 32 -A bruck", 3, 1, "bruck"},
    {"broadcast", 3, "-b 1K -e 1M -f 32 -A chain -r 1", 3, 1, "chain"},
    {"broadcast", 4, "-b 1K -e 1M -f 32 -A scatter_allgather", 3, 1, "scatter_allgather"},
    {"scatter", 3, "-b 1K -e 1M -f 32 -A linear -r 2", 3, 1, "linear"},
    {"gather", 3, "-b 1K -e 1M -f 32 -A linear -r 1", 3, 1, "linear"},
};

START_TEST(test_sweep)
{
    const sweep_case_t *c = &sweep_cases[_i];
    char dir[64], json[128], csv[128], args[512], bin[64], *out = out_buf();
    int rc, rows;

    harness_tmpdir_make(dir, sizeof(dir), "test-bench");
    snprintf(json, sizeof(json), "%s/out.json", dir);
    snprintf(csv, sizeof(csv), "%s/out.csv", dir);
    snprintf(bin, sizeof(bin), "%s_perf", c->coll);
    snprintf(args, sizeof(args), "%s -n 2 -w 1 -c 1 --json %s --csv %s", c->args, json, csv);
    rc = run_bench("", c->nranks, bin, args, out);
    ck_assert_msg(rc == 0, "%s -n %d %s: exit %d\n%s", bin, c->nranks, args, rc, out);
    rows = check_table(out, c->in_place);
    ck_assert_msg(rows == c->rows, "%d rows, expected %d\n%s", rows, c->rows, out);
    ck_assert_int_eq(check_csv(csv, c->coll, c->nranks), rows * (c->in_place ? 2 : 1));
    check_json(json, c->coll, c->nranks, c->algo, rows * (c->in_place ? 2 : 1));
    harness_tmpdir_remove(dir);
    free(out);
}
END_TEST

/* ---- the check can fail --------------------------------------------------------------- */

START_TEST(test_corrupt)
{
    char *out = out_buf();
    /* 256K: the check's expected values come in 64 KiB slices; the last
     * element lies in the fourth */
    int rc = run_bench("COLL_PERF_CORRUPT=1", 2, "all_reduce_perf",
                       "-b 64 -e 256K -f 64 -n 2 -w 1", out);
    int flagged = 0;

    ck_assert_msg(rc != 0 && rc < 124, "corrupted run exited %d\n%s", rc, out);
    ck_assert_msg(strstr(out, "# Out of bounds values : 6 FAILED"), "no FAILED verdict\n%s", out);
    /* rank 1 flipped the first and the last element of each result: #wrong 2 everywhere */
    char *copy = strdup(out), *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *f[MAX_FIELDS];
        if (split(line, " ", f, MAX_FIELDS, 0) != 17 || f[0][0] == '#')
            continue;
        ck_assert_msg(strcmp(f[8], "2") == 0 && strcmp(f[14], "2") == 0, "row: %s", line);
        flagged++;
    }
    ck_assert_int_eq(flagged, 3);
    free(copy);
    /* in bw only the upper rank of a pair receives data */
    rc = run_bench("COLL_PERF_CORRUPT=1", 2, "p2p_bw", "-m 1:64 -i 3 -x 1 -W 4 -c", out);
    ck_assert_msg(rc != 0 && rc < 124, "corrupted p2p run exited %d\n%s", rc, out);
    ck_assert_msg(strstr(out, "wrong bytes FAILED"), "no FAILED verdict\n%s", out);
    free(out);
}
END_TEST

/* ---- point-to-point -------------------------------------------------------------------- */

static const char *const p2p_tests[] = {"latency", "bw", "bibw"};

START_TEST(test_p2p)
{
    const char *test = p2p_tests[_i];
    char dir[64], csv[128], args[256], bin[64], *out = out_buf(), *text, *save = NULL;
    int rc, rows = 0;

    harness_tmpdir_make(dir, sizeof(dir), "test-bench");
    snprintf(csv, sizeof(csv), "%s/p2p.csv", dir);
    snprintf(bin, sizeof(bin), "p2p_%s", test);
    snprintf(args, sizeof(args), "-m 0:64K -i 10 -x 2 -W 8 -c --csv %s", csv);
    rc = run_bench("", 2, bin, args, out);
    ck_assert_msg(rc == 0, "%s: exit %d\n%s", bin, rc, out);
    ck_assert_msg(strstr(out, "# libcoll p2p "), "no OSU-style title\n%s", out);
    ck_assert_msg(strstr(out, "# Validation: 0 wrong bytes OK"), "no check verdict\n%s", out);
    text = slurp(csv);
    char *line = strtok_r(text, "\n", &save);
    ck_assert_str_eq(line, "library,version,transport,test,size,latency_us,p50_us,p99_us,"
                           "bandwidth_MBps,wrong");
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char *f[MAX_FIELDS];
        ck_assert_int_eq(split(line, ",", f, MAX_FIELDS, 1), 10);
        ck_assert_str_eq(f[3], test);
        ck_assert_int_eq(atol(f[4]), rows ? 1L << (rows - 1) : 0); /* 0, 1, 2, 4, ... */
        ck_assert_str_eq(f[9], "0");
        if (_i == 0) /* latency: the latency columns, no bandwidth */
            ck_assert_msg(atof(f[5]) > 0 && f[6][0] && f[7][0] && !f[8][0], "row %d", rows);
        else
            ck_assert_msg(!f[5][0] && (atof(f[8]) > 0 || rows == 0), "row %d", rows);
        rows++;
    }
    ck_assert_int_eq(rows, 18); /* 0 and 1 .. 64K */
    free(text);
    harness_tmpdir_remove(dir);
    free(out);
}
END_TEST

/* ---- tcp_ring_perf ----------------------------------------------------------------------- */

START_TEST(test_tcp_ring)
{
    char dir[64], csv[128], args[256], *out = out_buf(), *text, *save = NULL;
    int rc, rows = 0;

    harness_tmpdir_make(dir, sizeof(dir), "test-bench");
    snprintf(csv, sizeof(csv), "%s/ring.csv", dir);
    snprintf(args, sizeof(args), "-b 1M -e 4M -f 4 -n 2 -w 1 -c 1 -s 2 --csv %s", csv);
    rc = run_bench("", 3, "tcp_ring_perf", args, out);
    ck_assert_msg(rc == 0, "tcp_ring_perf: exit %d\n%s", rc, out);
    ck_assert_msg(strstr(out, "# wrong bytes: 0 OK"), "no check verdict\n%s", out);
    text = slurp(csv);
    char *line = strtok_r(text, "\n", &save);
    ck_assert_str_eq(line, "library,version,transport,collective,nranks,size,count,type,redop,"
                           "root,placement,time_us,algbw,busbw,p50_us,p99_us,wrong");
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        char *f[MAX_FIELDS];
        ck_assert_int_eq(split(line, ",", f, MAX_FIELDS, 1), 17);
        ck_assert_str_eq(f[3], "tcp_ring");
        ck_assert_int_eq(atol(f[4]), 3);
        ck_assert_int_eq(atol(f[5]), (1L << 20) << (2 * rows)); /* 1M, 4M */
        double algbw = atof(f[12]), busbw = atof(f[13]);
        /* the link carries 2(n-1)/n of the size, rounded down to whole bytes */
        ck_assert_msg(algbw > 0 && fabs(busbw / algbw - 4.0 / 3) < 1e-5, "row %s", line);
        ck_assert_str_eq(f[16], "0");
        rows++;
    }
    ck_assert_int_eq(rows, 2);
    free(text);
    harness_tmpdir_remove(dir);

    /* every receiver of rank 1's stream sees its flipped bytes */
    rc = run_bench("COLL_PERF_CORRUPT=1", 3, "tcp_ring_perf", "-b 1M -e 1M -n 1 -w 0", out);
    ck_assert_msg(rc == 1, "corrupted tcp_ring_perf exited %d\n%s", rc, out);
    ck_assert_msg(strstr(out, "FAILED") && !strstr(out, "# wrong bytes: 0 "),
                  "no FAILED verdict\n%s", out);
    free(out);
}
END_TEST

/* ---- bad flags ------------------------------------------------------------------------- */

typedef struct bad_case {
    const char *bin, *args;
    const char *message;    /* must appear in the output */
} bad_case_t;

static const bad_case_t bad_cases[] = {
    {"all_reduce_perf", "-d nosuch", "unknown datatype 'nosuch'"},
    {"all_reduce_perf", "-b 1M -e 1K", "is larger than -e"},
    {"coll_perf", "-C nosuch", "unknown collective 'nosuch'"},
    {"coll_perf", "-b 8 -e 8", "name a collective with -C"},
    {"all_reduce_perf", "-T nosuch -b 8 -e 8", "COLL_TRANSPORTS='nosuch' allows no transport"},
    {"all_reduce_perf", "-A quantum -b 8 -e 8", "allreduce has no algorithm 'quantum'"},
    {"all_reduce_perf", "-o avg -d int32", "avg is not supported"},
    {"all_reduce_perf", "-n 0", "-n needs a whole number"},
    {"all_reduce_perf", "-b 12Q", "-b needs a size"},
    {"all_reduce_perf", "--bogus", "unknown option --bogus"},
    {"broadcast_perf", "-r 7 -b 8 -e 8", "root 7 is out of range for 2 ranks"},
    {"p2p_latency", "-m 4K:1K", "MIN 4096 is larger than MAX 1024"},
    {"p2p_bw", "-T nosuch -m 8:8", "COLL_TRANSPORTS='nosuch' allows no transport"},
    {"p2p_perf", "-i 5", "name a test with -m"},
    {"tcp_ring_perf", "-s 17", "-s needs a whole number in 1..16, got '17'"},
    {"tcp_ring_perf", "-b 4M -e 1M", "-b 4194304 is above -e 1048576"},
    {"all_reduce_perf", "-b 8 -e 8 --csv /nonexistent-dir/x.csv",
     "cannot write /nonexistent-dir/x.csv"},
    {"p2p_bibw", "-m 8:8 --json /nonexistent-dir/x.json", "cannot write /nonexistent-dir/x.json"},
};

START_TEST(test_bad_flags)
{
    const bad_case_t *c = &bad_cases[_i];
    char *out = out_buf();
    int rc = run_bench("", 2, c->bin, c->args, out);

    /* 1 or 2: a clean exit; 124 would be a hang, >= 128 a crash */
    ck_assert_msg(rc == 1 || rc == 2, "%s %s: exit %d\n%s", c->bin, c->args, rc, out);
    ck_assert_msg(strstr(out, c->message), "%s %s: no '%s' in\n%s", c->bin, c->args, c->message,
                  out);
    free(out);
}
END_TEST

START_TEST(test_odd_pairs_and_help)
{
    char *out = out_buf();
    int rc = run_bench("", 3, "p2p_latency", "-m 8:8 -i 2", out);

    ck_assert_msg(rc == 2 && strstr(out, "needs an even number of ranks"), "exit %d\n%s", rc, out);
    rc = run_bench("", 1, "all_reduce_perf", "-h", out);
    ck_assert_msg(rc == 0 && strstr(out, "--maxbytes"), "exit %d\n%s", rc, out);
    free(out);
}
END_TEST

/* ramp_bench's rows: "group first-last ms us GB/s", groups in order,
 * the exchanges 1..200 split among them without gaps. */
START_TEST(test_ramp)
{
    cpu_set_t set;
    char cmd[512], *out = out_buf();

    ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    if (CPU_COUNT(&set) < 2) {
        printf("skipped: ramp_bench needs two CPUs, this process may use %d\n", CPU_COUNT(&set));
        free(out);
        return;
    }
    snprintf(cmd, sizeof(cmd), "timeout -k 5 %d %s/bin/ramp_bench -i 0 -p copy -t 5 -s 64K -n 200 "
             "-g 4 2>&1", RUN_TIMEOUT_S, harness_build_dir());
    int rc = harness_sh(cmd, out, OUT_LEN);
    ck_assert_msg(rc == 0, "ramp_bench: exit %d\n%s", rc, out);
    long next = 1, rows = 0;
    for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        long group, first, last;
        double ms, us, gbs;
        if (line[0] == '#')
            continue;
        ck_assert_msg(sscanf(line, "%ld %ld-%ld %lf %lf %lf", &group, &first, &last, &ms, &us,
                             &gbs) == 6, "ramp_bench row: '%s'", line);
        ck_assert_int_eq(group, rows);
        ck_assert_int_eq(first, next);
        ck_assert_msg(last >= first && ms > 0 && us > 0 && gbs > 0, "ramp_bench row: '%s'", line);
        next = last + 1;
        rows++;
    }
    ck_assert_int_eq(rows, 4);
    ck_assert_int_eq(next, 201);

    snprintf(cmd, sizeof(cmd), "timeout -k 5 %d %s/bin/ramp_bench -p bogus 2>&1", RUN_TIMEOUT_S,
             harness_build_dir());
    rc = harness_sh(cmd, out, OUT_LEN);
    ck_assert_msg(rc == 2 && strstr(out, "-p takes none, spin or copy, not 'bogus'"),
                  "ramp_bench -p bogus: exit %d\n%s", rc, out);
    free(out);
}
END_TEST

static Suite *bench_suite(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("coll_perf");
    tcase_set_timeout(tc, RUN_TIMEOUT_S + 10);
    tcase_add_loop_test(tc, test_coll, 0, (int)(sizeof(coll_cases) / sizeof(coll_cases[0])));
    tcase_add_loop_test(tc, test_sweep, 0, (int)(sizeof(sweep_cases) / sizeof(sweep_cases[0])));
    tcase_add_test(tc, test_corrupt);
    suite_add_tcase(s, tc);

    tc = tcase_create("p2p_perf");
    tcase_set_timeout(tc, RUN_TIMEOUT_S + 10);
    tcase_add_loop_test(tc, test_p2p, 0, 3);
    suite_add_tcase(s, tc);

    tc = tcase_create("tcp_ring_perf");
    tcase_set_timeout(tc, 2 * RUN_TIMEOUT_S + 10);
    tcase_add_test(tc, test_tcp_ring);
    suite_add_tcase(s, tc);

    tc = tcase_create("usage");
    tcase_set_timeout(tc, 2 * RUN_TIMEOUT_S + 10);
    tcase_add_loop_test(tc, test_bad_flags, 0, (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
    tcase_add_test(tc, test_odd_pairs_and_help);
    suite_add_tcase(s, tc);

    tc = tcase_create("ramp_bench");
    tcase_set_timeout(tc, 2 * RUN_TIMEOUT_S + 10);
    tcase_add_test(tc, test_ramp);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(bench_suite());
}
