/*
 * harness.h: running real multi-process jobs inside Check tests. A test
 * forks N rank processes, hands them one unique id over pipes, and
 * collects their exit statuses; a rank reports failure by exiting
 * non-zero (RANK_CHECK prints why). Every wait has a deadline: a rank
 * still alive at the deadline is killed and counted as failed.
 */
#ifndef COLL_TEST_HARNESS_H
#define COLL_TEST_HARNESS_H

#include <check.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "coll.h"

#define HARNESS_MAX_RANKS 64

/* The body of one rank: 0 on success. */
typedef int (*harness_rank_fn)(int rank, int nranks, const coll_unique_id_t *id, void *arg);

/* Fork `nranks` ranks running fn, give them a fresh unique id, wait up to
 * timeout_s. Returns how many ranks failed (non-zero exit, signal, or
 * still running at the deadline). */
int harness_run(int nranks, harness_rank_fn fn, void *arg, int timeout_s);

/* The same in two steps, for tests that act on running ranks (kill one). */
void harness_spawn(int nranks, harness_rank_fn fn, void *arg, pid_t *pids);
/* As harness_spawn, calling before(id, ctx) once the id exists and before
 * the ranks get it (to aim strangers at the root during init). */
void harness_spawn_hook(int nranks, harness_rank_fn fn, void *arg, pid_t *pids,
                        void (*before)(const coll_unique_id_t *id, void *ctx), void *ctx);
/* Wait for every pid (0 entries skipped) until the deadline, killing the
 * rest then. statuses[i] gets the waitpid status, or -1 if killed at the
 * deadline. Returns how many did not exit with status 0. */
int harness_wait(int nranks, const pid_t *pids, int timeout_s, int *statuses);

/* Transports the matrices run over: COLL_TEST_TRANSPORTS (comma separated;
 * "ofi:tcp" is the libfabric transport with its tcp provider), default
 * "shm,tcp". Returns how many; *list_p stays valid. */
int harness_transports(const char *const **list_p);
/* Force one of them (COLL_TRANSPORTS, and COLL_OFI_PROVIDER for "ofi:X"). */
void harness_use_transport(const char *spec);

/* COLL_TEST_SHORT: the matrices' short form, for runs whose point is not
 * the algorithms' answers, which the plain suite checks in full: a
 * transport's own coverage (test_ofi, 1) and the sanitizers (2). Returns
 * the level, 0 for the whole matrices. */
int harness_short(void);
/* The rank counts the matrices run at: 1, 2, 3, 4, 5, 7 and 8; in the
 * short form 2, 3, 4 and 8 (one rank uses no transport; 3 is the odd case
 * of the folding algorithms), at level 2 only 2, 3 and 4 (8 ranks on 2
 * cores were half of the sanitized matrices' time). Returns how many;
 * *counts_p stays valid. */
int harness_rank_counts(const int **counts_p);
/* Init a communicator for a rank (exits the rank on failure). */
coll_comm_t harness_init(int rank, int nranks, const coll_unique_id_t *id);

/* Directory with the built binaries (COLL_TEST_BUILD, default "build"). */
const char *harness_build_dir(void);

/* Run a shell command, capture its output (stdout; add 2>&1 for stderr)
 * into out, NUL-terminated; out may be NULL. Returns the exit status, or
 * -1 if it did not exit normally. */
int harness_sh(const char *cmd, char *out, size_t outlen);

/* Lines of the file at `path` that contain `needle` (0 if unreadable). */
int harness_count_lines(const char *path, const char *needle);

/* Seconds since an arbitrary point (monotonic). */
double harness_now(void);

/* The first `max` CPUs this process may run on, lowest first, into cpus;
 * returns how many (the test fails if the mask cannot be read). */
int harness_own_cpus(int *cpus, int max);

/* Bind the calling process to CPU `cpu` alone; sched_setaffinity's result. */
int harness_bind_cpu(int cpu);

/* Start argv (argv[0] searched in PATH) with stdout to out_path and stderr
 * to err_path (the same path: one file for both). The child gets default
 * signal dispositions and an empty mask: a shell that started us in the
 * background may have left SIGINT ignored, and a child could not trap it
 * then. Returns the pid; fails the test if fork fails. */
pid_t harness_exec(const char *const *argv, const char *out_path, const char *err_path);

/* A fresh directory /tmp/<prefix>-XXXXXX into dir (fails the test if it
 * cannot be made), and its removal with everything in it. */
void harness_tmpdir_make(char *dir, size_t len, const char *prefix);
void harness_tmpdir_remove(const char *dir);

/* Fail the rank with a message unless cond holds. */
#define RANK_CHECK(cond, ...)                                                          \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "[pid %d] check failed at %s:%d: %s: ", (int)getpid(),     \
                    __FILE__, __LINE__, #cond);                                        \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
            _exit(1);                                                                  \
        }                                                                              \
    } while (0)

/* Fail the rank unless a libcoll call returns COLL_OK. */
#define RANK_OK(call)                                                                  \
    do {                                                                               \
        coll_status_t rank_ok_st_ = (call);                                            \
        RANK_CHECK(rank_ok_st_ == COLL_OK, "%s -> %s: %s", #call,                      \
                   coll_status_str(rank_ok_st_), coll_get_last_error(NULL));           \
    } while (0)

/* A Check suite runner shared by every test program. */
int harness_main(Suite *suite);

/* Message bytes that differ per sender, message (salt) and offset, so that
 * a misplaced, stale or foreign chunk shows: fill a buffer, or check one
 * (a rank exits through RANK_CHECK at the first wrong byte, naming it). */
uint8_t harness_pattern(int src, int salt, size_t i);
void harness_fill(uint8_t *buf, size_t n, int src, int salt);
void harness_verify(const uint8_t *buf, size_t n, int src, int salt);

/* A rank killed mid-transfer (test_fault, test_shm, test_verbs).
 * harness_kill_mid_transfer spawns nranks ranks running fn, waits (up to
 * 60 s) until each has written a byte to harness_ready_fd, which it does
 * once its transfers are under way, SIGKILLs `victim`, and waits for all
 * (wait_s). The survivors report on harness_report_fd; the returned fd
 * reads those reports (close it). *t_kill: when the victim was killed. */
extern int harness_report_fd, harness_ready_fd;
int harness_kill_mid_transfer(int nranks, int victim, harness_rank_fn fn, void *arg,
                              pid_t *pids, int *statuses, int wait_s, double *t_kill);

/* A rank body for it: sends `bytes` to its right neighbour while receiving
 * from its left, again and again, until a call fails; that failure goes to
 * harness_report_fd as "<rank> <time> <status> <message>" and is returned. */
coll_status_t harness_stream_ring(coll_comm_t comm, int rank, int nranks, size_t bytes);
/* The same from buffers that coll_mem_alloc gave (mem_alloc 1). */
coll_status_t harness_stream_ring_mem(coll_comm_t comm, int rank, int nranks, size_t bytes,
                                      int mem_alloc);
/* Write that report (a rank body's failure) to harness_report_fd. */
void harness_report(coll_comm_t comm, int rank, coll_status_t st);

/* Reads n bytes from fd, one per rank that is under way, within timeout_s;
 * 0 if they all came. Tests kill or stop a rank after this rather than after
 * a fixed sleep, which a slow init on a loaded machine outlasts. */
int harness_await(int fd, int n, int timeout_s);

/* RDMA devices that libibverbs lists here (0 without libibverbs): tests
 * over the verbs transport run where there is one, print "skipped:"
 * elsewhere. */
int harness_verbs_devices(void);
/* Read the reports from fd until EOF (closing it): exactly nreports, each
 * COLL_ERR_PEER_FAILED within max_s of t_kill with `expect` in its message.
 * Returns the slowest, in seconds. */
double harness_check_kill_reports(int fd, double t_kill, double max_s, const char *expect,
                                  int nreports);

#endif /* COLL_TEST_HARNESS_H */
