/*
 * test_collrun.c: the launcher, end to end. Every test runs the real
 * build/bin/collrun as a subprocess; its ranks are small /bin/sh scripts
 * that leave evidence (their environment, their pids, marker files) in a
 * fresh temporary directory passed as TDIR through -x. Exit statuses,
 * messages and which processes are still alive are checked from outside.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "sha256.h"

#define ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_ARGS 32
#define MAX_RANKS 8
#define RUN_TIMEOUT_S 15

/* ---- helpers ----------------------------------------------------------- */

static void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static const char *collrun_path(void)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/bin/collrun", harness_build_dir());
    return path;
}

/* Start collrun with args (NULL-terminated, without argv[0]); its stdout
 * and stderr go to DIR/NAME.out and DIR/NAME.err. The child gets default
 * signal dispositions: a shell that started us in the background may have
 * left SIGINT ignored, and ranks could not trap it then. */
static pid_t collrun_spawn(const char *dir, const char *name, const char *const *args)
{
    const char *argv[MAX_ARGS + 2] = {collrun_path()};
    char out[PATH_MAX], err[PATH_MAX];
    int n = 0;

    while (args[n]) {
        ck_assert_int_lt(n, MAX_ARGS);
        argv[n + 1] = args[n];
        n++;
    }
    snprintf(out, sizeof(out), "%s/%s.out", dir, name);
    snprintf(err, sizeof(err), "%s/%s.err", dir, name);
    return harness_exec(argv, out, err);
}

/* The exit code of pid (128 + signal when killed); fails the test when
 * it runs past the deadline. */
static int collrun_wait(pid_t pid, int timeout_s)
{
    double deadline = harness_now() + timeout_s;
    int st;

    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (harness_now() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            ck_abort_msg("collrun still running after %d s", timeout_s);
        }
        nap_ms(10);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

typedef struct result {
    int code;       /* exit code, 128 + signal when killed */
    double secs;    /* wall time */
} result_t;

static result_t collrun_run(const char *dir, const char *const *args)
{
    double t0 = harness_now();
    result_t r;

    r.code = collrun_wait(collrun_spawn(dir, "run", args), RUN_TIMEOUT_S);
    r.secs = harness_now() - t0;
    return r;
}

/* The whole file DIR/NAME as a string ("" when missing); free it. */
static char *slurp(const char *dir, const char *name)
{
    char path[PATH_MAX];
    char *buf = NULL;
    size_t len = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "r");
    if (f) {
        ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
        len = (size_t)ftell(f);
        rewind(f);
    }
    buf = calloc(1, len + 1);
    ck_assert_ptr_nonnull(buf);
    if (f) {
        ck_assert_uint_eq(fread(buf, 1, len, f), len);
        fclose(f);
    }
    return buf;
}

static int count_str(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static int file_exists(const char *dir, const char *prefix, int rank)
{
    char path[PATH_MAX];
    struct stat sb;
    snprintf(path, sizeof(path), "%s/%s.%d", dir, prefix, rank);
    return stat(path, &sb) == 0 && sb.st_size > 0;
}

/* Wait until DIR/PREFIX.0 .. PREFIX.(n-1) all exist with content. */
static int wait_files(const char *dir, const char *prefix, int n, int timeout_s)
{
    double deadline = harness_now() + timeout_s;
    for (int r = 0; r < n; r++)
        while (!file_exists(dir, prefix, r)) {
            if (harness_now() > deadline)
                return 0;
            nap_ms(10);
        }
    return 1;
}

static pid_t read_pid(const char *dir, const char *prefix, int rank)
{
    char name[64];
    snprintf(name, sizeof(name), "%s.%d", prefix, rank);
    char *s = slurp(dir, name);
    pid_t pid = (pid_t)atoi(s);
    free(s);
    ck_assert_msg(pid > 1, "no pid in %s/%s", dir, name);
    return pid;
}

/* Alive and not a zombie (an orphan's zombie may wait for a slow reaper). */
static int pid_alive(pid_t pid)
{
    char path[64], buf[512];
    const char *paren;
    FILE *f;
    size_t n;

    if (kill(pid, 0) != 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    paren = strrchr(buf, ')');
    return !(paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X'));
}

/* Every pid gone within timeout_s. */
static void assert_gone(const pid_t *pids, int n, int timeout_s)
{
    double deadline = harness_now() + timeout_s;
    for (int i = 0; i < n; i++) {
        while (pid_alive(pids[i]) && harness_now() < deadline)
            nap_ms(10);
        ck_assert_msg(!pid_alive(pids[i]), "pid %d is still alive", (int)pids[i]);
    }
}

static void tdir_arg(char *buf, size_t len, const char *dir)
{
    snprintf(buf, len, "TDIR=%s", dir);
}

/* Shell: wait until N ranks have written their pid file. */
#define SH_WAIT_PIDS(n)                                                                    \
    "while [ $(ls \"$TDIR\" | grep -c '^pid\\.') -lt " #n " ]; do sleep 0.02; done; "

/* ---- (1) success --------------------------------------------------------- */

START_TEST(test_success)
{
    char dir[64];
    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    const char *args[] = {"-n", "3", "/bin/sh", "-c", "sleep 0.$COLL_RANK; exit 0", NULL};
    result_t r = collrun_run(dir, args);
    char *err = slurp(dir, "run.err");

    ck_assert_int_eq(r.code, 0);
    ck_assert_msg(err[0] == '\0', "unexpected messages: %s", err);
    free(err);

    const char *one[] = {"--np", "1", "--tag-output", "--", "true", NULL};
    ck_assert_int_eq(collrun_run(dir, one).code, 0);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (2) environment --------------------------------------------------------- */

#define ENV_LINE                                                                           \
    "echo \"$COLL_RANK $COLL_NRANKS $COLL_LOCAL_RANK $COLL_LOCAL_SIZE $COLL_MASTER_ADDR "  \
    "$COLL_MASTER_PORT $COLL_SECRET $FOO ${COLL_UNIQUE_ID:-none}\" >> \"$TDIR/env\""

typedef struct env_line {
    int rank, nranks, local_rank, local_size, port;
    char addr[64], secret[600], foo[32], uid[32];
} env_line_t;

/* Parse DIR/env, one line per rank; checks each rank 0..nranks-1 appears
 * exactly once and fills lines[rank]. */
static void env_read(const char *dir, int nranks, env_line_t *lines)
{
    char *text = slurp(dir, "env");
    int seen[MAX_RANKS] = {0}, count = 0;
    char *save = NULL;

    for (char *ln = strtok_r(text, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        env_line_t e;
        int n = sscanf(ln, "%d %d %d %d %63s %d %599s %31s %31s", &e.rank, &e.nranks,
                       &e.local_rank, &e.local_size, e.addr, &e.port, e.secret, e.foo, e.uid);
        ck_assert_msg(n == 9, "bad env line '%s'", ln);
        ck_assert_msg(e.rank >= 0 && e.rank < nranks, "rank %d out of range", e.rank);
        ck_assert_msg(!seen[e.rank]++, "rank %d seen twice", e.rank);
        lines[e.rank] = e;
        count++;
    }
    ck_assert_int_eq(count, nranks);
    free(text);
}

static int is_hex64(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

START_TEST(test_environment)
{
    enum { N = 5 };
    char dir[64], tdir[128], path[128];
    env_line_t lines[N], again[N];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    tdir_arg(tdir, sizeof(tdir), dir);
    /* A stale unique id in collrun's environment must not reach the ranks. */
    setenv("COLL_UNIQUE_ID", "stale", 1);
    const char *args[] = {"-n", "5", "-x", tdir, "-x", "FOO=bar=baz", "/bin/sh", "-c",
                          ENV_LINE, NULL};
    ck_assert_int_eq(collrun_run(dir, args).code, 0);
    env_read(dir, N, lines);
    for (int r = 0; r < N; r++) {
        ck_assert_int_eq(lines[r].nranks, N);
        ck_assert_int_eq(lines[r].local_rank, r);
        ck_assert_int_eq(lines[r].local_size, N);
        ck_assert_str_eq(lines[r].addr, "127.0.0.1");
        ck_assert_int_gt(lines[r].port, 0);
        ck_assert_int_lt(lines[r].port, 65536);
        ck_assert_int_eq(lines[r].port, lines[0].port);
        ck_assert_msg(is_hex64(lines[r].secret), "secret '%s'", lines[r].secret);
        ck_assert_str_eq(lines[r].secret, lines[0].secret);
        ck_assert_str_eq(lines[r].foo, "bar=baz");
        ck_assert_str_eq(lines[r].uid, "none");
    }

    /* A second job gets a fresh random secret. */
    snprintf(path, sizeof(path), "%s/env", dir);
    unlink(path);
    ck_assert_int_eq(collrun_run(dir, args).code, 0);
    env_read(dir, N, again);
    ck_assert_str_ne(again[0].secret, lines[0].secret);
    harness_tmpdir_remove(dir);
}
END_TEST

/* --secret, then COLL_SECRET from collrun's environment, pass through. */
START_TEST(test_secret_sources)
{
    static const char given[] = "00112233445566778899AABBCCDDEEFF0011";
    static const char inherited[] = "fedcba9876543210fedcba9876543210";
    char dir[64], tdir[128], path[128];
    env_line_t lines[2];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    tdir_arg(tdir, sizeof(tdir), dir);
    snprintf(path, sizeof(path), "%s/env", dir);
    setenv("COLL_SECRET", inherited, 1);
    const char *with[] = {"-n", "2", "--secret", given, "-x", tdir, "-x", "FOO=1",
                          "/bin/sh", "-c", ENV_LINE, NULL};
    ck_assert_int_eq(collrun_run(dir, with).code, 0);
    env_read(dir, 2, lines);
    ck_assert_str_eq(lines[0].secret, given);
    ck_assert_str_eq(lines[1].secret, given);

    unlink(path);
    const char *without[] = {"-n", "2", "-x", tdir, "-x", "FOO=1", "/bin/sh", "-c",
                             ENV_LINE, NULL};
    ck_assert_int_eq(collrun_run(dir, without).code, 0);
    env_read(dir, 2, lines);
    ck_assert_str_eq(lines[0].secret, inherited);
    ck_assert_str_eq(lines[1].secret, inherited);

    /* A malformed inherited secret is a usage error, not a silent default. */
    setenv("COLL_SECRET", "not-hex", 1);
    ck_assert_int_eq(collrun_run(dir, without).code, 2);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (3) a failing rank ends the job ------------------------------------------ */

START_TEST(test_failing_rank)
{
    enum { N = 4 };
    char dir[64], tdir[128];
    pid_t pids[2 * N];
    int np = 0;

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    tdir_arg(tdir, sizeof(tdir), dir);
    /* Rank 2 fails once every rank is up; the others sleep in a child,
     * which collrun must end too (it signals the rank's process group).
     * The long grace shows that SIGTERM, not the later SIGKILL, ends them. */
    const char *args[] = {
        "-n", "4", "--kill-grace", "20", "-x", tdir, "/bin/sh", "-c",
        "if [ \"$COLL_RANK\" = 2 ]; then echo $$ > \"$TDIR/pid.2\"; " SH_WAIT_PIDS(4)
        "exit 3; fi; sleep 30 & echo $! > \"$TDIR/child.$COLL_RANK\"; "
        "echo $$ > \"$TDIR/pid.$COLL_RANK\"; wait",
        NULL};
    result_t r = collrun_run(dir, args);
    char *err = slurp(dir, "run.err");
    char want[128];

    ck_assert_int_eq(r.code, 3);
    ck_assert_msg(r.secs < 10, "took %.1f s", r.secs);
    snprintf(want, sizeof(want), "collrun: rank 2 (pid %d) exited with status 3\n",
             (int)read_pid(dir, "pid", 2));
    ck_assert_msg(strstr(err, want), "stderr lacks '%s': %s", want, err);
    ck_assert_msg(count_str(err, "collrun: rank ") == 1, "one culprit only: %s", err);
    ck_assert_msg(strstr(err, "ended 3 other ranks"), "stderr: %s", err);
    for (int rank = 0; rank < N; rank++) {
        pids[np++] = read_pid(dir, "pid", rank);
        if (rank != 2)
            pids[np++] = read_pid(dir, "child", rank);
    }
    assert_gone(pids, np, 5);
    free(err);
    harness_tmpdir_remove(dir);
}
END_TEST

/* Ranks that ignore SIGTERM get SIGKILL after --kill-grace. */
START_TEST(test_kill_grace)
{
    enum { N = 3 };
    char dir[64], tdir[128];
    pid_t pids[N];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    tdir_arg(tdir, sizeof(tdir), dir);
    const char *args[] = {
        "-n", "3", "--kill-grace", "1", "-x", tdir, "/bin/sh", "-c",
        "trap '' TERM; echo $$ > \"$TDIR/pid.$COLL_RANK\"; "
        "if [ \"$COLL_RANK\" = 0 ]; then " SH_WAIT_PIDS(3) "exit 5; fi; "
        "while :; do sleep 0.05; done",
        NULL};
    result_t r = collrun_run(dir, args);
    char *err = slurp(dir, "run.err");

    ck_assert_int_eq(r.code, 5);
    ck_assert_msg(r.secs >= 0.9 && r.secs < 8, "took %.2f s, expected about 1 s", r.secs);
    ck_assert_msg(strstr(err, "rank 0 (pid") && strstr(err, "status 5"), "stderr: %s", err);
    ck_assert_msg(strstr(err, "SIGKILL"), "stderr: %s", err);
    for (int rank = 0; rank < N; rank++)
        pids[rank] = read_pid(dir, "pid", rank);
    assert_gone(pids, N, 5);
    free(err);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (4) a rank killed by a signal ---------------------------------------------- */

START_TEST(test_killed_rank)
{
    char dir[64], tdir[128], want[128];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    tdir_arg(tdir, sizeof(tdir), dir);
    const char *args[] = {
        "-n", "3", "-x", tdir, "/bin/sh", "-c",
        "echo $$ > \"$TDIR/pid.$COLL_RANK\"; "
        "if [ \"$COLL_RANK\" = 1 ]; then " SH_WAIT_PIDS(3) "kill -KILL $$; fi; sleep 30",
        NULL};
    result_t r = collrun_run(dir, args);
    char *err = slurp(dir, "run.err");

    ck_assert_int_eq(r.code, 128 + SIGKILL);
    ck_assert_msg(r.secs < 10, "took %.1f s", r.secs);
    snprintf(want, sizeof(want), "collrun: rank 1 (pid %d) was killed by signal 9 (%s)\n",
             (int)read_pid(dir, "pid", 1), strsignal(SIGKILL));
    ck_assert_msg(strstr(err, want), "stderr lacks '%s': %s", want, err);
    ck_assert_int_eq(count_str(err, "collrun: rank "), 1);
    free(err);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (5) tagged output ------------------------------------------------------------- */

START_TEST(test_tag_output)
{
    char dir[64];
    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    const char *args[] = {"-n", "3", "--tag-output", "/bin/sh", "-c",
                          "R=$COLL_RANK; printf 'a%s\\nb%s\\n' $R $R; printf 'e%s\\n' $R >&2; "
                          "printf 'p%s' $R",
                          NULL};
    result_t r = collrun_run(dir, args);
    char *out = slurp(dir, "run.out"), *err = slurp(dir, "run.err");

    ck_assert_int_eq(r.code, 0);
    for (int rank = 0; rank < 3; rank++) {
        char want[32];
        static const char *const outs[] = {"a", "b", "p"};
        for (int k = 0; k < 3; k++) {
            snprintf(want, sizeof(want), "[%d] %s%d\n", rank, outs[k], rank);
            ck_assert_msg(count_str(out, want) == 1, "stdout lacks '%s': %s", want, out);
        }
        snprintf(want, sizeof(want), "[%d] e%d\n", rank, rank);
        ck_assert_msg(count_str(err, want) == 1, "stderr lacks '%s': %s", want, err);
    }
    ck_assert_int_eq(count_str(out, "\n"), 9); /* nothing else, nothing untagged */
    ck_assert_int_eq(count_str(err, "\n"), 3);
    free(out);
    free(err);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- CPU binding ------------------------------------------------------------------ */

/* Each rank of `np` prints the CPUs it may run on, as the kernel lists
 * them (bind NULL: collrun's default). */
static char *bound_lists(const char *dir, const char *bind, int np)
{
    char n[16];
    const char *args[] = {"--bind-to", bind, "-n", n, "--tag-output", "/bin/sh", "-c",
                          "grep Cpus_allowed_list /proc/self/status", NULL};

    snprintf(n, sizeof(n), "%d", np);
    ck_assert_int_eq(collrun_run(dir, bind ? args : args + 2).code, 0);
    return slurp(dir, "run.out");
}

/* Checks that each of `np` ranks run with `bind` got the i-th of `cpus`
 * (round robin), or, with `all` not NULL, kept the whole list `all`. */
static void check_bound(const char *dir, const char *bind, int np, const int *cpus, int n,
                        const char *all)
{
    char want[96], *out = bound_lists(dir, bind, np);

    for (int rank = 0; rank < np; rank++) {
        if (all)
            snprintf(want, sizeof(want), "[%d] Cpus_allowed_list:\t%s\n", rank, all);
        else
            snprintf(want, sizeof(want), "[%d] Cpus_allowed_list:\t%d\n", rank, cpus[rank % n]);
        ck_assert_msg(count_str(out, want) == 1, "--bind-to %s, -n %d, %d CPUs: no '%s' in: %s",
                      bind ? bind : "(default)", np, n, want, out);
    }
    free(out);
}

/* core: local rank i on the i-th CPU of collrun's own, round robin; none:
 * every rank keeps them all; auto (the default): core from 2 ranks up to
 * as many as those CPUs, none otherwise. */
START_TEST(test_bind_to)
{
    char dir[64], all[64] = "";
    int cpus[CPU_SETSIZE], n = harness_own_cpus(cpus, CPU_SETSIZE); /* collrun inherits them */
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Cpus_allowed_list: %63s", all) == 1)
            break;
    fclose(f);
    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    check_bound(dir, "core", 5, cpus, n, NULL);
    check_bound(dir, "core", 1, cpus, n, NULL);
    check_bound(dir, "none", 5, cpus, n, all);
    for (int k = 0; k < 2; k++) {
        const char *bind = k ? "auto" : NULL;

        check_bound(dir, bind, 1, cpus, n, all);
        check_bound(dir, bind, 5, cpus, n, n >= 5 ? NULL : all);
        if (n >= 2)
            check_bound(dir, bind, 2, cpus, n, NULL);
        else
            printf("skipped: --bind-to auto with 2 ranks binds only where collrun may use 2 "
                   "CPUs; it may use %d\n", n);
    }
    harness_tmpdir_remove(dir);
}
END_TEST

/* Many ranks writing many lines at once: every line whole, under its own tag. */
START_TEST(test_tag_no_interleave)
{
    enum { N = 4, LINES = 3000 };
    char dir[64];
    int per_rank[N] = {0};
    char *save = NULL;

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    const char *args[] = {"-n", "4", "-t", "/bin/sh", "-c",
                          "seq 1 3000 | sed \"s/^/rank=$COLL_RANK line=/\"", NULL};
    ck_assert_int_eq(collrun_run(dir, args).code, 0);
    char *out = slurp(dir, "run.out");
    for (char *ln = strtok_r(out, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        int tag, rank, line;
        ck_assert_msg(sscanf(ln, "[%d] rank=%d line=%d", &tag, &rank, &line) == 3,
                      "mangled line '%s'", ln);
        ck_assert_msg(tag == rank && rank >= 0 && rank < N, "line '%s' under the wrong tag", ln);
        ck_assert_int_eq(line, ++per_rank[rank]); /* in order, none lost */
    }
    for (int rank = 0; rank < N; rank++)
        ck_assert_int_eq(per_rank[rank], LINES);
    free(out);
    harness_tmpdir_remove(dir);
}
END_TEST

/* A 200000-byte line comes out in tagged pieces of at most 64 KiB. */
START_TEST(test_tag_long_line)
{
    enum { LEN = 200000, PIECE = 64 * 1024 };
    char dir[64];
    size_t total = 0;
    int pieces = 0;
    char *save = NULL;

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    const char *args[] = {"-n", "1", "-t", "/bin/sh", "-c",
                          "head -c 200000 /dev/zero | tr '\\0' x; echo; printf tail", NULL};
    ck_assert_int_eq(collrun_run(dir, args).code, 0);
    char *out = slurp(dir, "run.out");
    char *last = NULL;
    for (char *ln = strtok_r(out, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
        last = ln;
        if (strcmp(ln, "[0] tail") == 0)
            continue;
        ck_assert_msg(strncmp(ln, "[0] ", 4) == 0, "untagged piece");
        size_t n = strlen(ln + 4);
        ck_assert_msg(strspn(ln + 4, "x") == n, "piece has foreign bytes");
        ck_assert_uint_le(n, PIECE);
        total += n;
        pieces++;
    }
    ck_assert_uint_eq(total, LEN);
    ck_assert_int_ge(pieces, (LEN + PIECE - 1) / PIECE);
    ck_assert_ptr_nonnull(last);
    ck_assert_str_eq(last, "[0] tail");
    free(out);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (6) signals sent to collrun reach every rank ----------------------------------- */

static const struct {
    int sig;
    const char *name;
} forwarded[] = {
    {SIGTERM, "TERM"}, {SIGINT, "INT"}, {SIGHUP, "HUP"}, {SIGUSR1, "USR1"},
};

START_TEST(test_forward_signal)
{
    enum { N = 3 };
    char dir[64], tdir[128], script[512];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    tdir_arg(tdir, sizeof(tdir), dir);
    snprintf(script, sizeof(script),
             "trap 'echo got > \"$TDIR/got.$COLL_RANK\"; exit 0' %s; "
             "echo $$ > \"$TDIR/pid.$COLL_RANK\"; while :; do sleep 0.05; done",
             forwarded[_i].name);
    const char *args[] = {"-n", "3", "-x", tdir, "/bin/sh", "-c", script, NULL};
    pid_t pid = collrun_spawn(dir, "run", args);

    ck_assert_msg(wait_files(dir, "pid", N, 10), "ranks did not start");
    ck_assert_int_eq(kill(pid, forwarded[_i].sig), 0);
    ck_assert_int_eq(collrun_wait(pid, RUN_TIMEOUT_S), 0);
    for (int rank = 0; rank < N; rank++)
        ck_assert_msg(file_exists(dir, "got", rank), "rank %d did not get SIG%s", rank,
                      forwarded[_i].name);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (7) a program that cannot start --------------------------------------------------- */

START_TEST(test_no_program)
{
    char dir[64], path[128];
    int fd;

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    const char *missing[] = {"-n", "2", "/nonexistent/prog", NULL};
    ck_assert_int_eq(collrun_run(dir, missing).code, 127);
    char *err = slurp(dir, "run.err");
    ck_assert_msg(strstr(err, "collrun: cannot start rank 0: /nonexistent/prog: No such file "
                              "or directory\n"),
                  "stderr: %s", err);
    free(err);

    snprintf(path, sizeof(path), "%s/not-executable", dir);
    fd = open(path, O_WRONLY | O_CREAT, 0644);
    ck_assert_int_ge(fd, 0);
    close(fd);
    const char *noexec[] = {"-n", "2", "-t", path, NULL};
    ck_assert_int_eq(collrun_run(dir, noexec).code, 127);
    err = slurp(dir, "run.err");
    ck_assert_msg(strstr(err, "Permission denied"), "stderr: %s", err);
    free(err);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (8) two hosts' worth of collrun on one machine --------------------------------- */

START_TEST(test_multi_node)
{
    enum { NODES = 2, NP = 2, N = NODES * NP };
    char dir[64], tdir[128], ident[128], hex[65];
    uint8_t digest[COLL_SHA256_BYTES];
    env_line_t lines[N];
    pid_t pid[NODES];
    const int port = 29517;

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    tdir_arg(tdir, sizeof(tdir), dir);
    for (int node = 0; node < NODES; node++) {
        char name[8], node_rank[8];
        snprintf(name, sizeof(name), "node%d", node);
        snprintf(node_rank, sizeof(node_rank), "%d", node);
        const char *args[] = {"--nnodes", "2", "--node-rank", node_rank, "--master-addr",
                              "127.0.0.1", "--master-port", "29517", "-n", "2", "-x", tdir,
                              "-x", "FOO=1", "/bin/sh", "-c", ENV_LINE, NULL};
        pid[node] = collrun_spawn(dir, name, args);
    }
    for (int node = 0; node < NODES; node++)
        ck_assert_int_eq(collrun_wait(pid[node], RUN_TIMEOUT_S), 0);

    /* Both hosts derive the same secret from the job's shape. */
    snprintf(ident, sizeof(ident), "collrun|127.0.0.1|%d|%d|%d", port, NODES, NP);
    coll_sha256(ident, strlen(ident), digest);
    for (int i = 0; i < COLL_SHA256_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    env_read(dir, N, lines);
    for (int r = 0; r < N; r++) {
        ck_assert_int_eq(lines[r].nranks, N);
        ck_assert_int_eq(lines[r].local_rank, r % NP);
        ck_assert_int_eq(lines[r].local_size, NP);
        ck_assert_str_eq(lines[r].addr, "127.0.0.1");
        ck_assert_int_eq(lines[r].port, port);
        ck_assert_str_eq(lines[r].secret, hex);
    }
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (9) ranks never outlive a killed collrun ------------------------------------------ */

START_TEST(test_collrun_killed)
{
    enum { N = 3 };
    char dir[64], tdir[128];
    pid_t pids[N];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    tdir_arg(tdir, sizeof(tdir), dir);
    const char *args[] = {"-n", "3", "-x", tdir, "/bin/sh", "-c",
                          "echo $$ > \"$TDIR/pid.$COLL_RANK\"; exec sleep 30", NULL};
    pid_t pid = collrun_spawn(dir, "run", args);

    ck_assert_msg(wait_files(dir, "pid", N, 10), "ranks did not start");
    for (int rank = 0; rank < N; rank++) {
        pids[rank] = read_pid(dir, "pid", rank);
        ck_assert_msg(pid_alive(pids[rank]), "rank %d is not running", rank);
    }
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(collrun_wait(pid, 5), 128 + SIGKILL);
    assert_gone(pids, N, 5);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- a real libcoll job --------------------------------------------------------------------- */

/* This program is also the rank: `test_collrun --as-rank` joins the job
 * through coll_comm_init_env, so the variables collrun sets are checked by
 * the code that reads them, bootstrap and secret included. */
static int as_rank(void)
{
    coll_comm_t comm = NULL;
    int rank = -1, size = -1;

    if (coll_comm_init_env(&comm, NULL) != COLL_OK) {
        fprintf(stderr, "coll_comm_init_env: %s\n", coll_get_last_error(NULL));
        return 1;
    }
    if (coll_comm_rank(comm, &rank) != COLL_OK || coll_comm_size(comm, &size) != COLL_OK ||
        rank != atoi(getenv("COLL_RANK")) || size != atoi(getenv("COLL_NRANKS")) ||
        coll_barrier(comm) != COLL_OK) {
        fprintf(stderr, "rank %d of %d: %s\n", rank, size, coll_get_last_error(NULL));
        return 2;
    }
    printf("rank %d of %d joined\n", rank, size);
    return coll_comm_destroy(comm) == COLL_OK ? 0 : 3;
}

static void self_exe(char *path, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", path, len - 1);
    ck_assert_int_gt(n, 0);
    path[n] = '\0';
}

/* Every rank printed "[r] rank r of n joined". */
static void assert_joined(const char *dir, const char *name, int first, int count, int n)
{
    char *out = slurp(dir, name);
    for (int r = first; r < first + count; r++) {
        char want[64];
        snprintf(want, sizeof(want), "[%d] rank %d of %d joined\n", r, r, n);
        ck_assert_msg(strstr(out, want), "%s lacks '%s': %s", name, want, out);
    }
    free(out);
}

/* One host, collrun's own port and random secret: several jobs in a row,
 * since a picked port that rank 0 cannot bind fails only now and then. */
START_TEST(test_libcoll_one_host)
{
    char dir[64], exe[PATH_MAX];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    self_exe(exe, sizeof(exe));
    const char *args[] = {"-n", "4", "-t", "-x", "COLL_TIMEOUT=10s", exe, "--as-rank", NULL};
    for (int job = 0; job < 8; job++) {
        result_t r = collrun_run(dir, args);
        char *err = slurp(dir, "run.err");
        ck_assert_msg(r.code == 0, "job %d: exit %d: %s", job, r.code, err);
        free(err);
        assert_joined(dir, "run.out", 0, 4, 4);
    }
    harness_tmpdir_remove(dir);
}
END_TEST

/* Two collruns as two hosts: the ranks meet at the given master port with
 * the secret both derived. */
START_TEST(test_libcoll_two_nodes)
{
    char dir[64], exe[PATH_MAX], port[16];
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    pid_t pid[2];
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    /* A port free on every address now, as rank 0 will bind the wildcard. */
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    snprintf(port, sizeof(port), "%d", ntohs(sa.sin_port));
    close(fd);

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    self_exe(exe, sizeof(exe));
    for (int node = 0; node < 2; node++) {
        char name[8], node_rank[8];
        snprintf(name, sizeof(name), "node%d", node);
        snprintf(node_rank, sizeof(node_rank), "%d", node);
        const char *args[] = {"--nnodes", "2", "--node-rank", node_rank, "--master-addr",
                              "127.0.0.1", "--master-port", port, "-n", "2", "-t", "-x",
                              "COLL_TIMEOUT=10s", exe, "--as-rank", NULL};
        pid[node] = collrun_spawn(dir, name, args);
    }
    for (int node = 0; node < 2; node++)
        ck_assert_int_eq(collrun_wait(pid[node], RUN_TIMEOUT_S), 0);
    assert_joined(dir, "node0.out", 0, 2, 4);
    assert_joined(dir, "node1.out", 2, 2, 4);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- (10) usage errors -------------------------------------------------------------------- */

static const struct {
    const char *args[12];
    const char *says; /* part of the one-line error */
} usage_cases[] = {
    {{"true"}, "-n N"},
    {{"-n", "0", "true"}, "-n '0'"},
    {{"-n", "4097", "true"}, "-n '4097'"},
    {{"-n", "2x", "true"}, "-n '2x'"},
    {{"-n", "2"}, "no program"},
    {{"-n"}, "needs a value"},
    {{"-n", "2", "--bogus", "true"}, "unknown option '--bogus'"},
    {{"-n", "2", "-q", "true"}, "unknown option '-q'"},
    {{"--help=x"}, "option '--help=x' takes no value"},
    {{"-n", "2", "-x", "NOVALUE", "true"}, "-x 'NOVALUE'"},
    {{"-n", "2", "--nnodes", "2", "--master-port", "1234", "true"}, "--master-addr"},
    {{"-n", "2", "--nnodes", "2", "--master-addr", "h", "true"}, "--master-port"},
    {{"-n", "2", "--nnodes", "2", "--node-rank", "2", "--master-addr", "h", "--master-port",
      "1", "true"},
     "--node-rank 2"},
    {{"-n", "2", "--master-port", "70000", "true"}, "--master-port '70000'"},
    {{"-n", "2", "--secret", "abc", "true"}, "--secret"},
    {{"-n", "2", "--kill-grace", "-1", "true"}, "--kill-grace '-1'"},
    {{"-n", "2", "--bind-to", "socket", "true"}, "--bind-to 'socket'"},
};

START_TEST(test_usage_error)
{
    char dir[64];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    result_t r = collrun_run(dir, usage_cases[_i].args);
    char *err = slurp(dir, "run.err");
    char *out = slurp(dir, "run.out");

    ck_assert_int_eq(r.code, 2);
    ck_assert_msg(strncmp(err, "collrun: ", 9) == 0, "stderr: %s", err);
    ck_assert_msg(strstr(err, usage_cases[_i].says) &&
                      strstr(err, usage_cases[_i].says) < strchr(err, '\n'),
                  "first line lacks '%s': %s", usage_cases[_i].says, err);
    ck_assert_msg(strstr(err, "--help"), "no usage hint: %s", err);
    ck_assert_msg(out[0] == '\0', "stdout: %s", out);
    free(err);
    free(out);
    harness_tmpdir_remove(dir);
}
END_TEST

START_TEST(test_help_version)
{
    char dir[64], want[64];

    harness_tmpdir_make(dir, sizeof(dir), "collrun-test");
    const char *version[] = {"--version", NULL};
    ck_assert_int_eq(collrun_run(dir, version).code, 0);
    char *out = slurp(dir, "run.out");
    snprintf(want, sizeof(want), "collrun (libcoll) %d.%d.%d\n", COLL_VERSION_MAJOR,
             COLL_VERSION_MINOR, COLL_VERSION_PATCH);
    ck_assert_str_eq(out, want);
    free(out);

    const char *help[] = {"--help", NULL};
    ck_assert_int_eq(collrun_run(dir, help).code, 0);
    out = slurp(dir, "run.out");
    ck_assert_msg(strstr(out, "usage: collrun -n N") && strstr(out, "--kill-grace"), "%s", out);
    free(out);
    harness_tmpdir_remove(dir);
}
END_TEST

/* ---- suite ------------------------------------------------------------------------------------ */

static TCase *tcase(Suite *s, const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return tc;
}

int main(int argc, char **argv)
{
    Suite *s;
    TCase *tc;

    if (argc == 2 && strcmp(argv[1], "--as-rank") == 0)
        return as_rank();
    s = suite_create("collrun");

    /* The tests choose these themselves. */
    unsetenv("COLL_SECRET");
    unsetenv("COLL_UNIQUE_ID");

    tc = tcase(s, "run");
    tcase_add_test(tc, test_success);
    tcase_add_test(tc, test_environment);
    tcase_add_test(tc, test_secret_sources);
    tcase_add_test(tc, test_multi_node);
    tcase_add_test(tc, test_libcoll_one_host);
    tcase_add_test(tc, test_libcoll_two_nodes);

    tc = tcase(s, "failure");
    tcase_add_test(tc, test_failing_rank);
    tcase_add_test(tc, test_kill_grace);
    tcase_add_test(tc, test_killed_rank);
    tcase_add_test(tc, test_no_program);
    tcase_add_test(tc, test_collrun_killed);

    tc = tcase(s, "output");
    tcase_add_test(tc, test_tag_output);
    tcase_add_test(tc, test_tag_no_interleave);
    tcase_add_test(tc, test_tag_long_line);
    tcase_add_test(tc, test_bind_to);

    tc = tcase(s, "signals");
    tcase_add_loop_test(tc, test_forward_signal, 0, ARRAY_LEN(forwarded));

    tc = tcase(s, "usage");
    tcase_add_loop_test(tc, test_usage_error, 0, ARRAY_LEN(usage_cases));
    tcase_add_test(tc, test_help_version);

    return harness_main(s);
}
