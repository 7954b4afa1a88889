/*
 * test_fault.c: failures are named, within a deadline. A rank SIGKILLed in
 * the middle of 64 MiB transfers is named (rank and host:port) by every
 * survivor within 10 s; a silent peer turns into a timeout that names the
 * peer and the operation, after which the communicator fails fast; and
 * collrun names the rank that died.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"
#include "wire.h"

/* Survivors report on this pipe, one line each (the SIGSTOP and mismatch
 * cases; the SIGKILL case reports on harness_report_fd). */
static int report_fd = -1;

/* 64 MiB fp32 all-reduces back to back until one fails; then abort,
 * timed. Reports "<rank> <time> <status> <abort seconds> <message>". */
static int rank_allreduce_until_error(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    size_t count = (64u << 20) / sizeof(float);
    float *buf = malloc(count * sizeof(float));
    char line[1024];
    (void)arg;

    RANK_CHECK(buf != NULL, "out of memory");
    for (size_t i = 0; i < count; i++)
        buf[i] = 1.0f;
    for (int calls = 0;; calls++) {
        coll_status_t st = coll_allreduce(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm);
        if (st == COLL_OK) {
            if (calls == 0) /* under way: harness_kill_mid_transfer may kill */
                RANK_CHECK(write(harness_ready_fd, "r", 1) == 1, "ready");
            continue;
        }
        double t_err = harness_now();
        snprintf(line, sizeof(line), "%s", coll_get_last_error(comm));
        /* Later calls fail fast with the same error (far below any timeout;
         * the bound leaves room for a loaded CI machine). */
        coll_status_t again = coll_barrier(comm);
        RANK_CHECK(again == st && harness_now() - t_err < 2.0, "second call returned %s after "
                   "%.2f s", coll_status_str(again), harness_now() - t_err);
        double t0 = harness_now();
        RANK_OK(coll_comm_abort(comm));
        double abort_s = harness_now() - t0;
        char out[1200];
        int n = snprintf(out, sizeof(out), "%d %.6f %d %.6f %s\n", rank, t_err, (int)st, abort_s,
                         line);
        ssize_t w = write(harness_report_fd, out,
                          (size_t)(n < (int)sizeof(out) ? n : (int)sizeof(out) - 1));
        (void)w;
        free(buf); /* ranks are leak-checked under ASan */
        return 0;
    }
}

/* Does s start with "host:port)"? */
static int names_host_port(const char *s)
{
    char host[128];
    int port = 0, end = 0;
    return sscanf(s, "%127[^:() ]:%d)%n", host, &port, &end) == 2 && end > 0 && port > 0;
}

/* Issue 6, item 1: SIGKILL one of 4 ranks during a 64 MiB all-reduce:
 * every survivor's call returns COLL_ERR_PEER_FAILED naming that rank and
 * where it ran (TCP: host:port; shared memory: pid and host) within 10 s
 * of the kill, and coll_comm_abort then returns within 5 s. */
/* Each victim rank over TCP and shared memory; one over libfabric's tcp
 * provider. Not over its shm provider: a victim killed while it holds a
 * shm region's spin lock leaves it held, and a survivor's next send to
 * that region spins in libfabric for ever (5 of 45 runs here; see
 * docs/transports.md). */
static const struct kill_case {
    const char *transport;
    int victim;
} kill_cases[] = {
    {"tcp", 1}, {"tcp", 2}, {"tcp", 3}, {"shm", 1}, {"shm", 2}, {"shm", 3},
#ifdef COLL_HAVE_OFI
    {"ofi:tcp", 1},
#endif
};

START_TEST(test_sigkill_named)
{
    const char *transport = kill_cases[_i].transport;
    int nranks = 4, victim = kill_cases[_i].victim, statuses[8];
    int tcp = strcmp(transport, "tcp") == 0, shm = strcmp(transport, "shm") == 0;
    pid_t pids[8];
    char buf[8192] = "";
    size_t got = 0;

    double t_kill;

    harness_use_transport(transport);
    int reports_fd = harness_kill_mid_transfer(nranks, victim, rank_allreduce_until_error, NULL,
                                               pids, statuses, 30, &t_kill);
    unsetenv("COLL_TRANSPORTS");
    unsetenv("COLL_OFI_PROVIDER");
    for (ssize_t n; (n = read(reports_fd, buf + got, sizeof(buf) - 1 - got)) > 0;)
        got += (size_t)n;
    close(reports_fd);
    buf[got] = '\0';

    char expect[64];
    int reports = 0;
    double slowest = 0, slowest_abort = 0;
    snprintf(expect, sizeof(expect), shm ? "rank %d (pid %d on " : "rank %d (", victim,
             (int)pids[victim]);
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        int r, st, off = 0;
        double t, abort_s;
        ck_assert_int_eq(sscanf(line, "%d %lf %d %lf %n", &r, &t, &st, &abort_s, &off), 4);
        ck_assert_msg(t - t_kill < 10.0, "rank %d learned after %.1f s: %s", r, t - t_kill, line);
        ck_assert_msg(abort_s < 5.0, "rank %d: abort took %.2f s", r, abort_s);
        slowest = t - t_kill > slowest ? t - t_kill : slowest;
        slowest_abort = abort_s > slowest_abort ? abort_s : slowest_abort;
        ck_assert_msg(st == COLL_ERR_PEER_FAILED, "rank %d got status %d: %s", r, st, line);
        const char *named = strstr(line + off, expect);
        ck_assert_msg(named && (!tcp || names_host_port(named + strlen(expect))),
                      "rank %d's error does not name rank %d as '%s%s': %s", r, victim, expect,
                      tcp ? "host:port)" : "host)", line + off);
        reports++;
    }
    for (int r = 0; r < nranks; r++)
        if (r != victim)
            ck_assert_msg(WIFEXITED(statuses[r]) && WEXITSTATUS(statuses[r]) == 0,
                          "survivor %d failed", r);
    ck_assert_int_eq(reports, nranks - 1);
    printf("sigkill of rank %d of 4 in a 64 MiB all-reduce over %s: the last survivor named it "
           "%.1f ms after the kill; abort took at most %.1f ms\n", victim, transport,
           slowest * 1e3, slowest_abort * 1e3);
}
END_TEST

/* ---- deadlines ------------------------------------------------------------------ */

static int rank_silent_peer(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_config_t config = COLL_CONFIG_INITIALIZER;
    coll_comm_t comm;
    int32_t x = 0;
    (void)arg;

    config.timeout_ms = 1000;
    RANK_OK(coll_comm_init_rank_config(&comm, nranks, id, rank, &config));
    if (rank == 1) {
        /* Silent for 3 s, then finds the communicator failed by rank 0. */
        sleep(3);
        coll_status_t st = coll_send(&x, 1, COLL_INT32, 0, 5, comm);
        /* rank 0's timeout is the job's: it says so (see coll_tp_abort_status) */
        RANK_CHECK(st == COLL_ERR_TIMEOUT && strstr(coll_get_last_error(comm), "rank 0 ("),
                   "rank 1 got %s: %s", coll_status_str(st), coll_get_last_error(comm));
        RANK_OK(coll_comm_destroy(comm));
        return 0;
    }
    double t0 = harness_now();
    coll_status_t st = coll_recv(&x, 1, COLL_INT32, 1, 5, comm);
    double took = harness_now() - t0;
    const char *msg = coll_get_last_error(comm);
    RANK_CHECK(st == COLL_ERR_TIMEOUT, "recv returned %s", coll_status_str(st));
    RANK_CHECK(took > 0.9 && took < 2.5, "timed out after %.2f s, expected about 1 s", took);
    RANK_CHECK(strstr(msg, "rank 0: coll_recv") && strstr(msg, "rank 1 (") && strstr(msg, "receiving 4 "
               "bytes") && strstr(msg, "tag 5"), "message lacks the rank, peer or operation: %s",
               msg);
    t0 = harness_now();
    st = coll_send(&x, 1, COLL_INT32, 1, 6, comm);
    RANK_CHECK(st == COLL_ERR_TIMEOUT && harness_now() - t0 < 1.0,
               "a call after the timeout returned %s after %.2f s", coll_status_str(st),
               harness_now() - t0);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_timeout_named)
{
    ck_assert_int_eq(harness_run(2, rank_silent_peer, NULL, 30), 0);
}
END_TEST

/* Issue 6, item 2: rank 2 of 4 is stopped (SIGSTOP) between two
 * all-reduces, with a 5 s operation timeout: within 7 s each of the others
 * gets COLL_ERR_TIMEOUT naming the operation, its sequence number and the
 * rank that has not arrived. Cases 0: TCP, 1: shared memory. */
#define STOP_VICTIM 2

typedef struct stop_pipes {
    int ready_w, go_r;
} stop_pipes_t;

static int rank_stopped_peer(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const stop_pipes_t *pp = arg;
    coll_config_t config = COLL_CONFIG_INITIALIZER;
    float v[4096] = {0};
    coll_comm_t comm;
    char c = 'r';

    if (rank == STOP_VICTIM)
        close(report_fd); /* it never reports: the test reads the pipe to its end */
    config.timeout_ms = 5000;
    RANK_OK(coll_comm_init_rank_config(&comm, nranks, id, rank, &config));
    RANK_OK(coll_allreduce(v, v, 4096, COLL_FLOAT32, COLL_SUM, comm)); /* #0 */
    RANK_CHECK(write(pp->ready_w, &c, 1) == 1, "ready");
    RANK_CHECK(read(pp->go_r, &c, 1) == 1, "go"); /* the victim is stopped here */
    double t0 = harness_now();
    coll_status_t st = coll_allreduce(v, v, 4096, COLL_FLOAT32, COLL_SUM, comm); /* #1 */
    double took = harness_now() - t0;
    const char *msg = coll_get_last_error(comm);
    char line[1200];
    int n = snprintf(line, sizeof(line), "%d %.6f %d %s\n", rank, took, (int)st, msg);
    RANK_CHECK(write(report_fd, line, (size_t)COLL_MIN(n, (int)sizeof(line) - 1)) > 0, "report");
    coll_comm_abort(comm);
    return 0;
}

START_TEST(test_sigstop_named)
{
    int nranks = 4, ready[2], go[2], rep[2], statuses[4], reports = 0;
    stop_pipes_t pp;
    pid_t pids[4];
    char buf[8192] = "", c;
    size_t got = 0;
    double slowest = 0;

    setenv("COLL_TRANSPORTS", _i == 0 ? "tcp" : "shm", 1);
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(go), 0);
    ck_assert_int_eq(pipe(rep), 0);
    pp = (stop_pipes_t){ready[1], go[0]};
    report_fd = rep[1];
    harness_spawn(nranks, rank_stopped_peer, &pp, pids);
    unsetenv("COLL_TRANSPORTS");
    close(ready[1]);
    close(rep[1]);
    for (int r = 0; r < nranks; r++)
        ck_assert_msg(read(ready[0], &c, 1) == 1, "a rank failed before the stop");
    kill(pids[STOP_VICTIM], SIGSTOP);
    /* stopped for sure before the go bytes exist: it must not take one */
    int wst;
    ck_assert_int_eq(waitpid(pids[STOP_VICTIM], &wst, WUNTRACED), pids[STOP_VICTIM]);
    ck_assert(WIFSTOPPED(wst));
    for (int r = 0; r < nranks - 1; r++)
        ck_assert_int_eq(write(go[1], "g", 1), 1);
    /* until every live rank has exited (the victim closed its copy) */
    for (ssize_t n; (n = read(rep[0], buf + got, sizeof(buf) - 1 - got)) > 0;)
        got += (size_t)n;
    buf[got] = '\0';
    kill(pids[STOP_VICTIM], SIGKILL);
    harness_wait(nranks, pids, 30, statuses);
    close(rep[0]);
    close(ready[0]);
    close(go[0]);
    close(go[1]);

    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        int r, st, off = 0;
        double took;
        ck_assert_int_eq(sscanf(line, "%d %lf %d %n", &r, &took, &st, &off), 3);
        ck_assert_msg(st == COLL_ERR_TIMEOUT, "rank %d got %s: %s", r,
                      coll_status_str((coll_status_t)st), line + off);
        ck_assert_msg(took < 7.0, "rank %d learned after %.2f s: %s", r, took, line + off);
        ck_assert_msg(strstr(line + off, "allreduce #1 ") &&
                      strstr(line + off, "ranks that have not arrived: 2;"),
                      "rank %d's error does not name the operation, its sequence number and "
                      "the missing rank 2: %s", r, line + off);
        slowest = took > slowest ? took : slowest;
        reports++;
    }
    ck_assert_int_eq(reports, nranks - 1);
    printf("sigstop of rank 2 of 4 over %s, 5 s timeout: the last survivor's all-reduce "
           "returned after %.2f s\n", _i == 0 ? "tcp" : "shm", slowest);
}
END_TEST

/* COLL_HANG_REPORT: rank 1 takes part in three all-reduces and then falls
 * silent; rank 0's fourth times out and its report must list the four
 * (three done, #3 in flight) and name rank 1 as the one it waits for. */
static int rank_hang_report(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_config_t config = COLL_CONFIG_INITIALIZER;
    const char *dir = arg;
    char path[256], text[8192] = "";
    float v[1024] = {0};
    coll_comm_t comm;
    FILE *f;

    snprintf(path, sizeof(path), "%s/hang.%%r.txt", dir);
    setenv("COLL_HANG_REPORT", path, 1);
    config.timeout_ms = 1000;
    RANK_OK(coll_comm_init_rank_config(&comm, nranks, id, rank, &config));
    for (int k = 0; k < 3; k++)
        RANK_OK(coll_allreduce(v, v, 1024, COLL_FLOAT32, COLL_SUM, comm));
    if (rank == 1) {
        sleep(3); /* silent past rank 0's deadline */
        coll_comm_destroy(comm);
        return 0;
    }
    RANK_CHECK(coll_allreduce(v, v, 1024, COLL_FLOAT32, COLL_SUM, comm) == COLL_ERR_TIMEOUT,
               "the fourth all-reduce did not time out");
    snprintf(path, sizeof(path), "%s/hang.0.txt", dir);
    f = fopen(path, "r");
    RANK_CHECK(f != NULL, "no hang report at %s", path);
    text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
    fclose(f);
    RANK_CHECK(strstr(text, "libcoll hang report: rank 0 of 2") && strstr(text, "timed out: ") &&
               strstr(text, "#0 allreduce count 1024 float32 sum") && strstr(text, ": done after") &&
               strstr(text, "#3 allreduce count 1024 float32 sum") && strstr(text, "in flight for") &&
               strstr(text, "waits for: ") && strstr(text, "rank 1 ("),
               "hang report lacks what it must say:\n%s", text);
    coll_comm_destroy(comm);
    return 0;
}

START_TEST(test_hang_report)
{
    char dir[64];

    harness_tmpdir_make(dir, sizeof(dir), "test-fault");
    ck_assert_int_eq(harness_run(2, rank_hang_report, dir, 30), 0);
    harness_tmpdir_remove(dir);
}
END_TEST

/* coll_comm_set_timeout changes the deadline of later waits; the barrier
 * names itself in the message. */
static int rank_set_timeout(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    (void)arg;
    RANK_OK(coll_comm_set_timeout(comm, 500));
    if (rank == 2) {
        sleep(2);
        coll_comm_abort(comm);
        return 0;
    }
    double t0 = harness_now();
    coll_status_t st = coll_barrier(comm);
    double took = harness_now() - t0;
    /* Rank 0 or 1 times out first; the other may hear of it first. */
    RANK_CHECK(st == COLL_ERR_TIMEOUT || st == COLL_ERR_PEER_FAILED, "barrier returned %s",
               coll_status_str(st));
    RANK_CHECK(took < 1.8, "barrier failed after %.2f s, expected about 0.5 s", took);
    RANK_CHECK(strstr(coll_get_last_error(comm), "barrier #0"), "message does not name the "
               "barrier: %s", coll_get_last_error(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_set_timeout)
{
    ck_assert_int_eq(harness_run(3, rank_set_timeout, NULL, 30), 0);
}
END_TEST

/* ---- mismatched calls (issue 6, item 6) ---------------------------------------- */

/* Rank 2 of 4 makes a call that differs from the others' in one field.
 * With COLL_CHECK_ARGS=1 every rank gets COLL_ERR_INVALID_USAGE naming
 * rank 2 and the field within 2 s, and the communicator still works;
 * with it off, an error or a timeout (never a crash, and under ASan no
 * out-of-bounds access: the odd rank's buffers are exactly its count). */
enum { MM_COUNT, MM_DATATYPE, MM_OP, MM_ROOT, MM_BCAST, MM_CASES };
static const char *const mm_field[MM_CASES] = {"count", "datatype", "op", "root",
                                               "called broadcast"};
#define MM_ODD 2
#define MM_COUNT_N 4096

static coll_status_t mm_call(int kase, int odd, void *buf, coll_comm_t comm)
{
    size_t n = odd && kase == MM_COUNT ? MM_COUNT_N + 1000 : MM_COUNT_N;
    coll_datatype_t dt = odd && kase == MM_DATATYPE ? COLL_FLOAT64 : COLL_FLOAT32;
    coll_op_t op = odd && kase == MM_OP ? COLL_MAX : COLL_SUM;

    if (kase == MM_ROOT)
        return coll_reduce(buf, (char *)buf + n * 8, n, dt, op, odd ? 1 : 0, comm);
    if (odd && kase == MM_BCAST)
        return coll_broadcast(buf, buf, n, dt, 0, comm);
    return coll_allreduce(buf, buf, n, dt, op, comm);
}

static int rank_mismatch(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int kase = *(const int *)arg % MM_CASES, checked = *(const int *)arg < MM_CASES;
    coll_config_t config = COLL_CONFIG_INITIALIZER;
    coll_comm_t comm;
    /* what the call may touch: 2 x count x 8 bytes, and no more (ASan) */
    size_t n = rank == MM_ODD && kase == MM_COUNT ? MM_COUNT_N + 1000 : MM_COUNT_N;
    double *buf = calloc(2 * n, sizeof(double));
    char want[32];

    config.timeout_ms = 2000;
    RANK_CHECK(buf != NULL, "out of memory");
    RANK_OK(coll_comm_init_rank_config(&comm, nranks, id, rank, &config));
    /* everyone is here: the clock below is the call's (without the check
     * a fast rank may fail the communicator before a slow one has left) */
    coll_status_t st = coll_barrier(comm);
    RANK_CHECK(st == COLL_OK || !checked, "barrier: %s", coll_get_last_error(comm));
    double t0 = harness_now();
    if (st == COLL_OK)
        st = mm_call(kase, rank == MM_ODD, buf, comm);
    double took = harness_now() - t0;
    const char *msg = coll_get_last_error(comm);
    if (checked) {
        snprintf(want, sizeof(want), "rank %d ", MM_ODD);
        RANK_CHECK(st == COLL_ERR_INVALID_USAGE, "%s mismatch returned %s: %s", mm_field[kase],
                   coll_status_str(st), msg);
        RANK_CHECK(took < 2.0, "%s mismatch reported after %.2f s", mm_field[kase], took);
        RANK_CHECK(strstr(msg, "COLL_CHECK_ARGS") && strstr(msg, want) &&
                   strstr(msg, mm_field[kase]), "the message does not name rank %d and the "
                   "field '%s': %s", MM_ODD, mm_field[kase], msg);
        if (rank == 0) {
            printf("%s mismatch reported in %.1f ms: %s\n", mm_field[kase], took * 1e3, msg);
            fflush(stdout);
        }
        RANK_OK(mm_call(kase, 0, buf, comm)); /* nothing moved: still usable */
        RANK_OK(coll_comm_destroy(comm));
    } else {
        /* some ranks may finish (a reduce's leaves); the test checks that
         * one rank at least failed, except for an op mismatch, which
         * nothing can see without the check: it must just not crash */
        char line[16];
        int len = snprintf(line, sizeof(line), "%d\n", st != COLL_OK);
        RANK_CHECK(write(report_fd, line, (size_t)len) == len, "report");
        RANK_CHECK(took < 6.0, "%s mismatch without COLL_CHECK_ARGS returned after %.2f s",
                   mm_field[kase], took);
        coll_comm_destroy(comm); /* a leaf that finished leaves without failing the others */
    }
    free(buf);
    return 0;
}

/* cases 0..4: COLL_CHECK_ARGS=1, one per field; 5..9: the same, off */
START_TEST(test_mismatch)
{
    int kase = _i, fds[2], failed = 0;
    char buf[64] = "";

    ck_assert_int_eq(pipe(fds), 0);
    report_fd = fds[1];
    setenv("COLL_CHECK_ARGS", kase < MM_CASES ? "1" : "0", 1);
    ck_assert_int_eq(harness_run(4, rank_mismatch, &kase, 30), 0);
    unsetenv("COLL_CHECK_ARGS");
    close(fds[1]);
    ck_assert_int_ge(read(fds[0], buf, sizeof(buf) - 1), 0);
    close(fds[0]);
    for (const char *c = buf; *c; c++)
        failed += *c == '1';
    ck_assert_msg(kase < MM_CASES || kase % MM_CASES == MM_OP || failed > 0,
                  "%s mismatch without COLL_CHECK_ARGS: no rank saw an error",
                  mm_field[kase % MM_CASES]);
}
END_TEST

/* ---- version skew (issue 6, item 7) ------------------------------------------------ */

/* One process speaks another wire protocol version (the test-only
 * coll_wire_test_speak_version): case 0, rank 2 of 4; case 1, the
 * bootstrap root (this process). Init fails on every rank within 5 s with
 * COLL_ERR_VERSION_MISMATCH and both versions in the message. */
#define SKEW_VERSION (COLL_WIRE_VERSION + 1)

static int rank_skewed(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int odd = *(const int *)arg == 0 && rank == 2;
    char v_ours[32], v_theirs[32];
    coll_comm_t comm;

    if (odd)
        coll_wire_test_speak_version(SKEW_VERSION);
    double t0 = harness_now();
    coll_status_t st = coll_comm_init_rank(&comm, nranks, *id, rank);
    double took = harness_now() - t0;
    const char *msg = coll_get_last_error(NULL);
    snprintf(v_ours, sizeof(v_ours), "version %d", COLL_WIRE_VERSION);
    snprintf(v_theirs, sizeof(v_theirs), "version %d", SKEW_VERSION);
    RANK_CHECK(st == COLL_ERR_VERSION_MISMATCH, "init returned %s: %s", coll_status_str(st), msg);
    RANK_CHECK(took < 5.0, "init failed after %.2f s", took);
    RANK_CHECK(strstr(msg, v_ours) && strstr(msg, v_theirs), "the message lacks '%s' or '%s': "
               "%s", v_ours, v_theirs, msg);
    if (rank == 0 || odd) {
        printf("version skew: rank %d failed in %.1f ms: %s\n", rank, took * 1e3, msg);
        fflush(stdout);
    }
    return 0;
}

static void skew_root(const coll_unique_id_t *id, void *ctx)
{
    (void)id;
    if (*(const int *)ctx == 1) /* before any rank has the id, so before any connection */
        coll_wire_test_speak_version(SKEW_VERSION);
}

START_TEST(test_version_skew)
{
    int kase = _i, statuses[4];
    pid_t pids[4];

    harness_spawn_hook(4, rank_skewed, &kase, pids, skew_root, &kase);
    ck_assert_int_eq(harness_wait(4, pids, 30, statuses), 0);
}
END_TEST

/* ---- collrun names the dead rank -------------------------------------------------- */

START_TEST(test_collrun_names_dead_rank)
{
    char cmd[1024], out[8192] = "";
    const char *b = harness_build_dir();

    snprintf(cmd, sizeof(cmd), "%s/bin/collrun -n 4 %s/tests/helper_rank kill 2 2>&1", b, b);
    double t0 = harness_now();
    int st = harness_sh(cmd, out, sizeof(out));
    ck_assert_msg(st > 0, "collrun exited %d:\n%s", st, out);
    ck_assert_msg(strstr(out, "rank 2") && strstr(out, "signal 9"),
                  "collrun output does not name rank 2 and its signal:\n%s", out);
    ck_assert_msg(harness_now() - t0 < 20, "took %.1f s", harness_now() - t0);
}
END_TEST

static Suite *fault_suite(void)
{
    Suite *s = suite_create("fault");
    TCase *tc = tcase_create("fault");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_sigkill_named, 0,
                        (int)(sizeof(kill_cases) / sizeof(kill_cases[0])));
    tcase_add_test(tc, test_timeout_named);
    tcase_add_test(tc, test_hang_report);
    tcase_add_test(tc, test_set_timeout);
    tcase_add_loop_test(tc, test_mismatch, 0, 2 * MM_CASES);
    tcase_add_loop_test(tc, test_version_skew, 0, 2);
    tcase_add_test(tc, test_collrun_names_dead_rank);
    suite_add_tcase(s, tc);
    tc = tcase_create("stopped peer");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_sigstop_named, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(fault_suite());
}
