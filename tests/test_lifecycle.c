/*
 * test_lifecycle.c: the edges of a communicator's life and of requests
 * that span several: destroy with messages still pending, abort while
 * destroy is flushing, a split inheriting its parent's deadline, waitall
 * across communicators whose progress depends on each other, sendrecv
 * with a bad half, the lifetime of coll_get_last_error's string, and
 * where init places the rank (COLL_BIND).
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

/* Destroy with a large send whose receive was never posted: the send
 * fails as pending-at-destroy; the peer's later receive fails as "left". */
static int rank_destroy_pending(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    size_t n = 1u << 20;
    char *buf = calloc(1, n);
    (void)arg;
    if (rank == 0) {
        coll_request_t req;
        RANK_OK(coll_isend(buf, n, COLL_UINT8, 1, 3, comm, &req));
        RANK_OK(coll_barrier(comm));        /* the RTS is out; rank 1 has not asked */
        RANK_OK(coll_comm_destroy(comm));
        coll_status_t st = coll_wait(&req);
        RANK_CHECK(st == COLL_ERR_INVALID_USAGE, "pending send ended with %s",
                   coll_status_str(st));
    } else {
        RANK_OK(coll_barrier(comm));
        usleep(300 * 1000);                 /* rank 0 is gone by now */
        coll_status_t st = coll_recv(buf, n, COLL_UINT8, 0, 3, comm);
        RANK_CHECK(st == COLL_ERR_PEER_FAILED && strstr(coll_get_last_error(comm), "left"),
                   "receive from a rank that left: %s: %s", coll_status_str(st),
                   coll_get_last_error(comm));
        RANK_CHECK(coll_comm_get_error(comm) == COLL_OK, "a graceful leave failed the "
                   "communicator");
        RANK_OK(coll_comm_destroy(comm));
    }
    free(buf);
    return 0;
}

START_TEST(test_destroy_pending)
{
    ck_assert_int_eq(harness_run(2, rank_destroy_pending, NULL, 30), 0);
}
END_TEST

/* ---- abort interrupts a destroy that is flushing ---------------------------- */

typedef struct aborter {
    coll_comm_t comm;
    double t_abort, took;
    coll_status_t st;
} aborter_t;

static void *abort_later(void *arg)
{
    aborter_t *a = arg;
    usleep(400 * 1000);
    a->t_abort = harness_now();
    a->st = coll_comm_abort(a->comm);
    a->took = harness_now() - a->t_abort;
    return NULL;
}

/* Rank 1 is stopped, so rank 0's queued data cannot drain and its destroy
 * waits in its flush; another thread aborts it. */
static int rank_abort_destroy(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    (void)arg;
    RANK_OK(coll_barrier(comm));
    if (rank == 1) {
        raise(SIGSTOP); /* the test process resumes us */
        coll_comm_destroy(comm);
        return 0;
    }
    usleep(100 * 1000); /* rank 1 is stopped */
    enum { MSGS = 400, SIZE = 60000 }; /* 24 MB of eager messages: more than fits */
    char *buf = calloc(1, SIZE);
    coll_request_t *reqs = calloc(MSGS, sizeof(*reqs));
    for (int i = 0; i < MSGS; i++)
        RANK_OK(coll_isend(buf, SIZE, COLL_UINT8, 1, 0, comm, &reqs[i]));
    aborter_t a = {comm, 0, 0, COLL_OK};
    pthread_t t;
    pthread_create(&t, NULL, abort_later, &a);
    coll_status_t st = coll_comm_destroy(comm);
    double done = harness_now();
    pthread_join(t, NULL);
    RANK_CHECK(st == COLL_ERR_ABORTED, "destroy returned %s", coll_status_str(st));
    RANK_CHECK(done - a.t_abort < 2.0, "destroy returned %.2f s after the abort",
               done - a.t_abort);
    RANK_CHECK(a.took < 5.0 && (a.st == COLL_OK || a.st == COLL_ERR_INVALID_COMM),
               "abort: %s after %.2f s", coll_status_str(a.st), a.took);
    for (int i = 0; i < MSGS; i++)
        coll_wait(&reqs[i]); /* outcomes vary; they must just complete */
    free(reqs);
    free(buf);
    return 0;
}

START_TEST(test_abort_during_destroy)
{
    pid_t pids[2];
    int st[2];
    harness_spawn(2, rank_abort_destroy, NULL, pids);
    int stopped;
    ck_assert_int_eq(waitpid(pids[1], &stopped, WUNTRACED), pids[1]);
    ck_assert(WIFSTOPPED(stopped));
    int r0;
    ck_assert_int_eq(waitpid(pids[0], &r0, 0), pids[0]);
    kill(pids[1], SIGCONT);
    pids[0] = 0;
    harness_wait(2, pids, 30, st);
    ck_assert_msg(WIFEXITED(r0) && WEXITSTATUS(r0) == 0, "rank 0 failed");
}
END_TEST

/* ---- a split inherits its parent's deadline ------------------------------------ */

static int rank_split_timeout(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id), child;
    int32_t x;
    (void)arg;
    RANK_OK(coll_comm_set_timeout(comm, 500));
    RANK_OK(coll_comm_split(comm, 0, rank, &child));
    if (rank == 1) {
        sleep(2); /* silent on the child */
        coll_comm_abort(child);
        coll_comm_destroy(comm);
        return 0;
    }
    double t0 = harness_now();
    coll_status_t st = coll_recv(&x, 1, COLL_INT32, 1, 0, child);
    double took = harness_now() - t0;
    RANK_CHECK(st == COLL_ERR_TIMEOUT && took < 1.5, "child recv: %s after %.2f s (expected "
               "a timeout after about 0.5 s)", coll_status_str(st), took);
    coll_comm_abort(child);
    coll_comm_destroy(comm);
    return 0;
}

START_TEST(test_split_inherits_timeout)
{
    ck_assert_int_eq(harness_run(2, rank_split_timeout, NULL, 30), 0);
}
END_TEST

/* ---- waitall across communicators --------------------------------------------- */

/* On communicator A rank 0 sends 8 MiB to rank 1; on B rank 1 sends 8 MiB
 * to rank 0. Each rank waits for both in one waitall: waiting for one
 * communicator at a time would deadlock (each rendezvous needs the other
 * side to progress the other communicator). */
static int rank_waitall_two(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t a = harness_init(rank, nranks, id), b;
    size_t n = 8u << 20;
    char *out = malloc(n), *in = malloc(n);
    coll_request_t reqs[2];
    (void)arg;
    RANK_OK(coll_comm_split(a, 0, rank, &b));
    RANK_OK(coll_comm_set_timeout(a, 5000));
    RANK_OK(coll_comm_set_timeout(b, 5000));
    memset(out, rank + 1, n);
    if (rank == 0) {
        RANK_OK(coll_isend(out, n, COLL_UINT8, 1, 0, a, &reqs[0]));
        RANK_OK(coll_irecv(in, n, COLL_UINT8, 1, 0, b, &reqs[1]));
    } else {
        RANK_OK(coll_irecv(in, n, COLL_UINT8, 0, 0, a, &reqs[0]));
        RANK_OK(coll_isend(out, n, COLL_UINT8, 0, 0, b, &reqs[1]));
    }
    double t0 = harness_now();
    RANK_OK(coll_waitall(2, reqs));
    RANK_CHECK(harness_now() - t0 < 3.0, "took %.1f s", harness_now() - t0);
    RANK_CHECK(in[0] == (char)(2 - rank) && in[n - 1] == (char)(2 - rank), "wrong data");
    RANK_OK(coll_comm_destroy(b));
    RANK_OK(coll_comm_destroy(a));
    free(out);
    free(in);
    return 0;
}

START_TEST(test_waitall_two_comms)
{
    ck_assert_int_eq(harness_run(2, rank_waitall_two, NULL, 30), 0);
}
END_TEST

/* ---- sendrecv with a bad half, and error message lifetime ------------------------ */

static int rank_sendrecv_bad(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id), other;
    int32_t x = rank, y = -1;
    (void)arg;
    RANK_OK(coll_comm_split(comm, 0, rank, &other));
    double t0 = harness_now();
    coll_status_t st = coll_sendrecv(&x, 1, COLL_INT32, 7, 0, &y, 1, COLL_INT32, 1 - rank, 0,
                                     comm);
    RANK_CHECK(st == COLL_ERR_INVALID_ARG && harness_now() - t0 < 0.5,
               "bad dest: %s after %.2f s", coll_status_str(st), harness_now() - t0);
    /* nothing was left posted: the next exchange on the same tag is clean */
    RANK_OK(coll_sendrecv(&x, 1, COLL_INT32, 1 - rank, 0, &y, 1, COLL_INT32, 1 - rank, 0, comm));
    RANK_CHECK(y == 1 - rank, "got %d", y);

    /* each communicator keeps its own last error */
    const char *msg = coll_get_last_error(comm);
    char copy[512];
    snprintf(copy, sizeof(copy), "%s", msg);
    RANK_CHECK(strstr(copy, "peer 7"), "message: %s", copy);
    RANK_CHECK(coll_send(&x, 1, COLL_INT32, 9, 0, other) == COLL_ERR_INVALID_ARG, "bad peer");
    RANK_CHECK(strcmp(msg, copy) == 0, "an error on another communicator changed this one's "
               "message to: %s", msg);
    RANK_OK(coll_comm_destroy(other));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_sendrecv_bad_half)
{
    ck_assert_int_eq(harness_run(2, rank_sendrecv_bad, NULL, 30), 0);
}
END_TEST

/* ---- COLL_BIND: init binds the rank's thread ---------------------------------- */

/* What a rank expects of its affinity after init: bound to cpus[rank %
 * 2], or left with the mask it had. `pre` > 0: the rank binds itself to
 * cpus[0] before init, as a launcher that put every rank on one CPU. */
typedef struct bind_case {
    const char *mode; /* COLL_BIND, NULL: unset */
    int nranks, bound, pre;
    int cpus[2];
} bind_case_t;

static int mask_is(const cpu_set_t *set, const int *cpus, int n)
{
    if (CPU_COUNT(set) != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (!CPU_ISSET(cpus[i], set))
            return 0;
    return 1;
}

/* Restrict the calling thread to cpus[0..n-1]; sched_setaffinity's result. */
static int bind_to(const int *cpus, int n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < n; i++)
        CPU_SET(cpus[i], &set);
    return sched_setaffinity(0, sizeof(set), &set);
}

static int rank_bind(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const bind_case_t *bc = arg;
    int mine = bc->cpus[rank % 2];
    const int *want = bc->bound ? &mine : bc->cpus;
    int nwant = bc->bound || bc->pre ? 1 : 2;
    cpu_set_t set;
    coll_comm_t comm, sub;

    if (bc->pre)
        RANK_CHECK(bind_to(bc->cpus, 1) == 0, "pre-bind");
    comm = harness_init(rank, nranks, id);
    RANK_CHECK(sched_getaffinity(0, sizeof(set), &set) == 0, "getaffinity");
    RANK_CHECK(mask_is(&set, want, nwant), "COLL_BIND=%s, %d ranks: rank %d may run on %d "
               "CPU(s), expected %d starting at CPU %d", bc->mode ? bc->mode : "(unset)",
               nranks, rank, CPU_COUNT(&set), nwant, want[0]);
    /* a split numbers the ranks differently: it must not move a bound one */
    RANK_OK(coll_comm_split(comm, 0, nranks - 1 - rank, &sub));
    RANK_CHECK(sched_getaffinity(0, sizeof(set), &set) == 0 && mask_is(&set, want, nwant),
               "rank %d moved by a split communicator's init", rank);
    RANK_OK(coll_comm_destroy(sub));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_bind)
{
    bind_case_t cases[] = {
        {NULL, 2, 0, 0, {0}},   {"none", 2, 0, 0, {0}}, {"auto", 2, 1, 0, {0}},
        {"AUTO", 3, 0, 0, {0}}, {"core", 3, 1, 0, {0}}, {"auto", 2, 0, 1, {0}},
    };
    int two[2], n = harness_own_cpus(two, 2);

    if (n < 2) {
        printf("skipped: COLL_BIND needs 2 CPUs; this process may run on 1\n");
        return;
    }
    /* the same 2 CPUs on any machine: 3 ranks are then too many */
    ck_assert_int_eq(bind_to(two, 2), 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bind_case_t *bc = &cases[i];
        memcpy(bc->cpus, two, sizeof(two));
        if (bc->mode)
            setenv("COLL_BIND", bc->mode, 1);
        else
            unsetenv("COLL_BIND");
        ck_assert_msg(harness_run(bc->nranks, rank_bind, bc, 30) == 0, "COLL_BIND=%s, %d ranks",
                      bc->mode ? bc->mode : "(unset)", bc->nranks);
    }
    unsetenv("COLL_BIND");
}
END_TEST

/* A word that is not a mode fails init at once, naming the variable. */
START_TEST(test_bind_bad_value)
{
    coll_unique_id_t id;
    coll_comm_t comm = NULL;

    ck_assert_int_eq(coll_get_unique_id(&id), COLL_OK);
    setenv("COLL_BIND", "socket", 1);
    ck_assert_int_eq(coll_comm_init_rank(&comm, 1, id, 0), COLL_ERR_INVALID_ARG);
    unsetenv("COLL_BIND");
    ck_assert_ptr_null(comm);
    ck_assert_msg(strstr(coll_get_last_error(NULL), "COLL_BIND='socket' is not one of none, "
                         "auto, core") != NULL, "message: %s", coll_get_last_error(NULL));
}
END_TEST

static Suite *lifecycle_suite(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_destroy_pending);
    tcase_add_test(tc, test_abort_during_destroy);
    tcase_add_test(tc, test_split_inherits_timeout);
    tcase_add_test(tc, test_waitall_two_comms);
    tcase_add_test(tc, test_sendrecv_bad_half);
    tcase_add_test(tc, test_bind);
    tcase_add_test(tc, test_bind_bad_value);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(lifecycle_suite());
}
