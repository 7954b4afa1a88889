/*
 * bench_util.h: what coll_perf and p2p_perf share: parsing sizes and
 * numbers from the command line, clocks, percentiles, output files, JSON
 * strings, and failing a job cleanly. Bench code uses only the public
 * coll.h API, so that it measures what a user program would get.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <stdio.h>

#include "coll.h"

/* Exit codes: 1 = a run failed or found wrong data, 2 = bad usage. */
#define BENCH_EXIT_FAIL 1
#define BENCH_EXIT_USAGE 2

/* Seconds on a monotonic clock. */
double bench_now(void);

/* "4096", "64K", "1M", "2G" (powers of 1024, optional trailing B or iB).
 * Returns 0 and sets *bytes, or -1 for anything else (including
 * overflow). */
int bench_parse_size(const char *text, size_t *bytes);

/* A whole decimal integer in [min, max]: 0 and *value, or -1. */
int bench_parse_long(const char *text, long min, long max, long *value);

/* Report a usage error as "PROG: message (run with -h for usage)" and
 * exit with BENCH_EXIT_USAGE. Every rank parses the same arguments and
 * prints it: the launcher may stop the others before rank 0 speaks. */
void bench_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* bench_parse_long, or a usage error naming the flag. */
long bench_parse_num(const char *prog, const char *flag, const char *text, long min, long max);

/* The rank a launcher gave this process (COLL_RANK, RANK, PMI_RANK, ...),
 * read before init so that only one rank prints usage text; -1 when the
 * environment does not say. */
int bench_env_rank(void);

/* COLL_PERF_CORRUPT=RANK, the self-test of a benchmark's check: the rank
 * that corrupts one bit of what it checks, or -1 when unset or invalid. */
int bench_corrupt_rank(void);

/* The last path component of argv[0]. */
const char *bench_basename(const char *path);

/* Restrict the transports before init (COLL_TRANSPORTS); NULL: leave the
 * environment as it is. The library rejects an unknown name at init with
 * its own message. */
void bench_set_transport(const char *transport);

/* The transport to report: the -T value, else COLL_TRANSPORTS, else
 * "auto". */
const char *bench_transport_label(const char *transport);

/* The p-th percentile (0 < p <= 100) of n values, nearest-rank method:
 * the smallest value with at least p% of the values at or below it.
 * Sorts `values` in place; 0 when n is 0. */
double bench_percentile(double *values, size_t n, double p);

/* Open an output file named on the command line; "-" is stdout. Prints
 * the reason and returns NULL on failure. */
FILE *bench_open_output(const char *prog, const char *path);
/* A page-aligned, zeroed (so faulted in before timing) buffer; on failure
 * a message naming the rank, then abort the communicator (the others fail
 * at once instead of at their deadline) and exit(BENCH_EXIT_FAIL). */
void *bench_alloc_or_abort(const char *prog, coll_comm_t comm, int rank, size_t bytes,
                           const char *what);
/* Rank 0 opens the CSV and JSON files (a NULL path: none); every rank
 * learns whether it could, and all exit(BENCH_EXIT_FAIL) together if not. */
void bench_open_outputs(const char *prog, coll_comm_t comm, int rank, const char *csv_path,
                        const char *json_path, FILE **csv_p, FILE **json_p);
/* Close what bench_open_output opened; 0 on success. */
int bench_close_output(FILE *f);

/* End the JSON document ("results" array and object) and close both
 * files (either may be NULL); non-zero, with a message, if writing failed. */
int bench_close_outputs(const char *prog, FILE *csv, FILE *json);
/* Write s as a JSON string literal (quotes and escapes included). */
void bench_json_string(FILE *f, const char *s);

/* A collective or point-to-point call failed on this rank: print the
 * status and the library's message, abort the communicator so that the
 * other ranks fail fast instead of waiting for their deadline, and exit
 * with BENCH_EXIT_FAIL. Never returns. */
void bench_die(const char *prog, coll_comm_t comm, const char *what, coll_status_t st)
    __attribute__((noreturn));

/* Whether `bytes` per rank, times the ranks on this host (COLL_LOCAL_SIZE,
 * else 1), stays within 80% of this host's memory. Buffers are touched
 * before timing, so an allocation that only overcommit lets through
 * would end in the OOM killer instead of a message. */
int bench_fits_memory(size_t bytes);

/* The library version as "X.Y.Z". */
const char *bench_version(void);

#endif /* BENCH_UTIL_H */
