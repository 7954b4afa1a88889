/*
 * harness.c: fork ranks, give them a unique id, reap them with a deadline.
 * The id is created after the fork so that no rank inherits the root
 * thread (a forked child only has the forking thread).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "harness.h"
#ifdef COLL_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

/* gcc defines __SANITIZE_ADDRESS__ under -fsanitize=address, clang has
 * __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define HARNESS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HARNESS_ASAN 1
#endif
#endif
#ifdef HARNESS_ASAN
#include <sanitizer/lsan_interface.h>
#endif

/* Set once this process has started a bootstrap root thread: a rank
 * forked after that inherits LeakSanitizer's record of a thread that does
 * not exist in the child, and the leak check would wait for it forever. */
static int threads_started;

double harness_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int harness_own_cpus(int *cpus, int max)
{
    cpu_set_t set;
    int n = 0;

    ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    for (int c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    return n;
}

int harness_bind_cpu(int cpu)
{
    cpu_set_t one;

    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof(one), &one);
}

int harness_sh(const char *cmd, char *out, size_t outlen)
{
    char sink[4096];
    size_t got = 0;
    FILE *p = popen(cmd, "r");

    ck_assert_msg(p != NULL, "popen(%s) failed", cmd);
    for (size_t n; (n = fread(out ? out + got : sink, 1, out ? outlen - 1 - got : sizeof(sink),
                              p)) > 0;)
        if (out)
            got += n;
    if (out)
        out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int harness_count_lines(const char *path, const char *needle)
{
    char line[4096];
    int n = 0;
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        n += strstr(line, needle) != NULL;
    if (f)
        fclose(f);
    return n;
}

const char *harness_build_dir(void)
{
    const char *b = getenv("COLL_TEST_BUILD");
    return b && b[0] ? b : "build";
}

static void rank_main(int rank, int nranks, int fd, harness_rank_fn fn, void *arg)
{
    coll_unique_id_t id;
    size_t off = 0;

    while (off < sizeof(id)) {
        ssize_t n = read(fd, (char *)&id + off, sizeof(id) - off);
        if (n <= 0)
            _exit(3); /* the test process died before sending the id */
        off += (size_t)n;
    }
    close(fd);
    int code = fn(rank, nranks, &id, arg) == 0 ? 0 : 1;
#ifdef HARNESS_ASAN
    /* Ranks leave by _exit (no atexit handlers of the test process), which
     * skips LeakSanitizer's check at exit: run it here, so that whatever a
     * rank's communicators left behind fails the rank. */
    if (!threads_started && __lsan_do_recoverable_leak_check() != 0)
        code = 5;
#endif
    _exit(code);
}

void harness_spawn(int nranks, harness_rank_fn fn, void *arg, pid_t *pids)
{
    harness_spawn_hook(nranks, fn, arg, pids, NULL, NULL);
}

void harness_spawn_hook(int nranks, harness_rank_fn fn, void *arg, pid_t *pids,
                        void (*before)(const coll_unique_id_t *id, void *ctx), void *ctx)
{
    int fds[HARNESS_MAX_RANKS][2];
    coll_unique_id_t id;

    ck_assert_int_le(nranks, HARNESS_MAX_RANKS);
    fflush(NULL);
    for (int r = 0; r < nranks; r++) {
        ck_assert_int_eq(pipe(fds[r]), 0);
        pid_t parent = getpid();
        pids[r] = fork();
        ck_assert_int_ge(pids[r], 0);
        if (pids[r] == 0) {
            /* A test that fails leaves by its assertion, without waiting:
             * its ranks must not outlive it (some loop until an error). */
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
                _exit(3);
            for (int q = 0; q <= r; q++) /* write ends: the parent's only */
                close(fds[q][1]);
            rank_main(r, nranks, fds[r][0], fn, arg);
        }
        close(fds[r][0]);
    }
    threads_started = 1;
    ck_assert_msg(coll_get_unique_id(&id) == COLL_OK, "coll_get_unique_id: %s",
                  coll_get_last_error(NULL));
    if (before)
        before(&id, ctx);
    for (int r = 0; r < nranks; r++) {
        ck_assert_int_eq(write(fds[r][1], &id, sizeof(id)), (ssize_t)sizeof(id));
        close(fds[r][1]);
    }
}

int harness_wait(int nranks, const pid_t *pids, int timeout_s, int *statuses)
{
    double deadline = harness_now() + timeout_s;
    int left = 0, failed = 0;
    int done[HARNESS_MAX_RANKS] = {0};

    for (int r = 0; r < nranks; r++) {
        statuses[r] = 0;
        if (pids[r] > 0)
            left++;
        else
            done[r] = 1;
    }
    while (left > 0 && harness_now() < deadline) {
        for (int r = 0; r < nranks; r++) {
            int st;
            if (done[r] || waitpid(pids[r], &st, WNOHANG) != pids[r])
                continue;
            done[r] = 1;
            statuses[r] = st;
            left--;
            if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                continue;
            failed++;
            if (WIFSIGNALED(st))
                fprintf(stderr, "harness: rank %d (pid %d) killed by signal %d\n", r,
                        (int)pids[r], WTERMSIG(st));
            else
                fprintf(stderr, "harness: rank %d (pid %d) exited with status %d\n", r,
                        (int)pids[r], WEXITSTATUS(st));
        }
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
    }
    for (int r = 0; r < nranks; r++) {
        if (done[r])
            continue;
        fprintf(stderr, "harness: rank %d (pid %d) still running after %d s: killed\n", r,
                (int)pids[r], timeout_s);
        kill(pids[r], SIGKILL);
        waitpid(pids[r], NULL, 0);
        statuses[r] = -1;
        failed++;
    }
    return failed;
}

int harness_run(int nranks, harness_rank_fn fn, void *arg, int timeout_s)
{
    pid_t pids[HARNESS_MAX_RANKS];
    int statuses[HARNESS_MAX_RANKS];
    harness_spawn(nranks, fn, arg, pids);
    return harness_wait(nranks, pids, timeout_s, statuses);
}

coll_comm_t harness_init(int rank, int nranks, const coll_unique_id_t *id)
{
    coll_comm_t comm = NULL;
    RANK_OK(coll_comm_init_rank(&comm, nranks, *id, rank));
    return comm;
}

int harness_main(Suite *suite)
{
    SRunner *sr = srunner_create(suite);
    int failed;

    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

void harness_tmpdir_make(char *dir, size_t len, const char *prefix)
{
    snprintf(dir, len, "/tmp/%s-XXXXXX", prefix);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb, (void)type, (void)ftw;
    return remove(path);
}

void harness_tmpdir_remove(const char *dir)
{
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

pid_t harness_exec(const char *const *argv, const char *out_path, const char *err_path)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        sigset_t none;
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = strcmp(out_path, err_path) == 0 ? o
                                                : open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
            _exit(99);
        for (int sig = 1; sig < NSIG; sig++)
            signal(sig, SIG_DFL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp(argv[0], (char *const *)argv);
        _exit(98);
    }
    return pid;
}

uint8_t harness_pattern(int src, int salt, size_t i)
{
    return (uint8_t)(i * 31 + (size_t)src * 7 + (size_t)salt * 13 + (i >> 12));
}

void harness_fill(uint8_t *buf, size_t n, int src, int salt)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = harness_pattern(src, salt, i);
}

void harness_verify(const uint8_t *buf, size_t n, int src, int salt)
{
    for (size_t i = 0; i < n; i++)
        RANK_CHECK(buf[i] == harness_pattern(src, salt, i), "byte %zu of %zu from rank %d "
                   "(message %d): got %u, expected %u", i, n, src, salt, buf[i],
                   harness_pattern(src, salt, i));
}

int harness_report_fd = -1, harness_ready_fd = -1;

int harness_kill_mid_transfer(int nranks, int victim, harness_rank_fn fn, void *arg,
                              pid_t *pids, int *statuses, int wait_s, double *t_kill)
{
    int rep[2], ready[2];

    ck_assert_int_eq(pipe(rep), 0);
    ck_assert_int_eq(pipe(ready), 0);
    harness_report_fd = rep[1];
    harness_ready_fd = ready[1];
    harness_spawn(nranks, fn, arg, pids);
    close(rep[1]);
    close(ready[1]);
    harness_report_fd = harness_ready_fd = -1;
    ck_assert_msg(harness_await(ready[0], nranks, 60) == 0, "a rank failed before its "
                  "transfers were under way");
    close(ready[0]);
    *t_kill = harness_now();
    kill(pids[victim], SIGKILL);
    harness_wait(nranks, pids, wait_s, statuses);
    ck_assert_msg(WIFSIGNALED(statuses[victim]), "victim was not killed");
    return rep[0];
}

void harness_report(coll_comm_t comm, int rank, coll_status_t st)
{
    char line[1024];
    int n = snprintf(line, sizeof(line), "%d %.6f %d %s\n", rank, harness_now(), (int)st,
                     coll_get_last_error(comm));
    ssize_t w = write(harness_report_fd, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1));
    (void)w;
}

coll_status_t harness_stream_ring(coll_comm_t comm, int rank, int nranks, size_t bytes)
{
    return harness_stream_ring_mem(comm, rank, nranks, bytes, 0);
}

coll_status_t harness_stream_ring_mem(coll_comm_t comm, int rank, int nranks, size_t bytes,
                                      int mem_alloc)
{
    char *out = NULL, *in = NULL;
    coll_status_t st = COLL_OK;

    if (mem_alloc) {
        RANK_OK(coll_mem_alloc((void **)&out, bytes));
        RANK_OK(coll_mem_alloc((void **)&in, bytes));
    } else {
        out = malloc(bytes);
        in = malloc(bytes);
    }
    RANK_CHECK(out && in, "out of memory");
    memset(out, rank, bytes);
    for (int i = 0; st == COLL_OK; i++) {
        coll_request_t reqs[2] = {NULL, NULL};
        st = coll_irecv(in, bytes, COLL_UINT8, (rank + nranks - 1) % nranks, i & 0xffff, comm,
                        &reqs[0]);
        if (st == COLL_OK)
            st = coll_isend(out, bytes, COLL_UINT8, (rank + 1) % nranks, i & 0xffff, comm,
                            &reqs[1]);
        coll_status_t wst = coll_waitall(2, reqs);
        st = st == COLL_OK ? wst : st;
        if (i == 0 && st == COLL_OK)
            RANK_CHECK(write(harness_ready_fd, "r", 1) == 1, "ready");
    }
    harness_report(comm, rank, st);
    if (mem_alloc) {
        coll_mem_free(out);
        coll_mem_free(in);
    } else {
        free(out); /* ranks are leak-checked under ASan */
        free(in);
    }
    return st;
}

int harness_verbs_devices(void)
{
#ifdef COLL_HAVE_VERBS
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (list)
        ibv_free_device_list(list);
    return n;
#else
    return 0;
#endif
}

int harness_await(int fd, int n, int timeout_s)
{
    double deadline = harness_now() + timeout_s;
    char c;

    for (int got = 0; got < n;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left_ms = (int)((deadline - harness_now()) * 1e3);
        if (left_ms <= 0 || poll(&p, 1, left_ms) <= 0) {
            fprintf(stderr, "harness: %d of %d ranks under way after %d s\n", got, n, timeout_s);
            return -1;
        }
        if (read(fd, &c, 1) != 1) {
            fprintf(stderr, "harness: %d of %d ranks under way when the rest exited\n", got, n);
            return -1;
        }
        got++;
    }
    return 0;
}

double harness_check_kill_reports(int fd, double t_kill, double max_s, const char *expect,
                                  int nreports)
{
    char buf[8192];
    size_t got = 0;
    double slowest = 0;
    int reports = 0;

    for (ssize_t n; (n = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0;)
        got += (size_t)n;
    close(fd);
    buf[got] = '\0';
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        int r, st, off = 0;
        double t;
        ck_assert_int_eq(sscanf(line, "%d %lf %d %n", &r, &t, &st, &off), 3);
        ck_assert_msg(t - t_kill < max_s, "rank %d learned after %.1f s: %s", r, t - t_kill, line);
        ck_assert_msg(st == COLL_ERR_PEER_FAILED, "rank %d got status %d: %s", r, st, line);
        ck_assert_msg(strstr(line + off, expect), "rank %d's error does not name '%s': %s", r,
                      expect, line + off);
        slowest = t - t_kill > slowest ? t - t_kill : slowest;
        reports++;
    }
    ck_assert_int_eq(reports, nreports);
    return slowest;
}

int harness_transports(const char *const **list_p)
{
    static const char *list[8];
    static char buf[256];
    static int n = -1;
    const char *env = getenv("COLL_TEST_TRANSPORTS");

    if (n < 0) {
        snprintf(buf, sizeof(buf), "%s", env && env[0] ? env : "shm,tcp");
        n = 0;
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && n < 8;
             t = strtok_r(NULL, ",", &save))
            list[n++] = t;
    }
    *list_p = list;
    return n;
}

int harness_short(void)
{
    const char *env = getenv("COLL_TEST_SHORT");
    if (!env || !env[0] || strcmp(env, "0") == 0)
        return 0;
    return strcmp(env, "2") == 0 ? 2 : 1;
}

int harness_rank_counts(const int **counts_p)
{
    static const int all[] = {1, 2, 3, 4, 5, 7, 8}, some[] = {2, 3, 4, 8}, least[] = {2, 3, 4};
    /* by harness_short()'s level */
    static const struct {
        const int *counts;
        int n;
    } forms[] = {{all, (int)(sizeof(all) / sizeof(all[0]))},
                 {some, (int)(sizeof(some) / sizeof(some[0]))},
                 {least, (int)(sizeof(least) / sizeof(least[0]))}};
    int level = harness_short();

    *counts_p = forms[level].counts;
    return forms[level].n;
}

void harness_use_transport(const char *spec)
{
    const char *colon = strchr(spec, ':');
    char name[32];

    snprintf(name, sizeof(name), "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
    setenv("COLL_TRANSPORTS", name, 1);
    if (colon)
        setenv("COLL_OFI_PROVIDER", colon + 1, 1);
    else
        unsetenv("COLL_OFI_PROVIDER");
}
