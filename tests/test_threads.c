/*
 * test_threads.c: what docs/api.md promises about threads. Different
 * communicators in different threads are independent; point-to-point on
 * one communicator from several threads at once is safe; and
 * coll_comm_abort from another thread ends a blocked call promptly while
 * other communicators of the process keep working; and (issue 6 item 9)
 * 100 aborts each during communicator creation, during a collective and
 * during destroy, each returning within 5 s with the process's threads and
 * file descriptors back to their count before, and a new communicator
 * working afterwards (leaks: the suite also runs under LeakSanitizer).
 * And the communicator's lock, biased to the first thread that calls
 * (libcoll/comm_lock.h), keeps a second thread out while the first holds
 * it, and is a mutex for both from then on.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "harness.h"

#define ROUNDS 300

typedef struct worker {
    coll_comm_t comm;
    int rank, peer, tag, rounds, failed;
    pthread_t thread;
} worker_t;

static size_t round_size(int i)
{
    static const size_t s[] = {4, 1000, 70000, 400000};
    return s[i % 4];
}

/* Ping-pong with the peer on one tag; rank 0 sends first. Values encode
 * the tag and round so that a message taken by the wrong thread shows. */
static void *ping_pong(void *arg)
{
    worker_t *w = arg;
    uint32_t *buf = malloc(400000);

    for (int i = 0; i < w->rounds && !w->failed; i++) {
        size_t n = round_size(i) / 4;
        uint32_t want = (uint32_t)(w->tag * 100000 + i);
        for (int pass = 0; pass < 2; pass++) {
            int sending = (pass == 0) == (w->rank == 0);
            if (sending) {
                for (size_t k = 0; k < n; k++)
                    buf[k] = want + (uint32_t)k;
                w->failed |= coll_send(buf, n, COLL_UINT32, w->peer, w->tag, w->comm) != COLL_OK;
            } else {
                w->failed |= coll_recv(buf, n, COLL_UINT32, w->peer, w->tag, w->comm) != COLL_OK;
                for (size_t k = 0; k < n && !w->failed; k++)
                    w->failed |= buf[k] != want + (uint32_t)k;
            }
        }
    }
    free(buf);
    return NULL;
}

static void run_workers(worker_t *w, int n)
{
    for (int t = 0; t < n; t++)
        RANK_CHECK(pthread_create(&w[t].thread, NULL, ping_pong, &w[t]) == 0, "pthread_create");
    for (int t = 0; t < n; t++) {
        pthread_join(w[t].thread, NULL);
        RANK_CHECK(!w[t].failed, "thread %d failed: %s", t, coll_get_last_error(w[t].comm));
    }
}

/* Two communicators (the world and a split of it), one thread each. */
static int rank_two_comms(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t world = harness_init(rank, nranks, id), other;
    worker_t w[2];
    (void)arg;
    RANK_OK(coll_comm_split(world, 0, rank, &other));
    for (int t = 0; t < 2; t++)
        w[t] = (worker_t){t ? other : world, rank, 1 - rank, 7, ROUNDS, 0, 0};
    run_workers(w, 2);
    RANK_OK(coll_comm_destroy(other));
    RANK_OK(coll_comm_destroy(world));
    return 0;
}

START_TEST(test_two_comms_two_threads)
{
    ck_assert_int_eq(harness_run(2, rank_two_comms, NULL, 60), 0);
}
END_TEST

/* Four threads share one communicator, each on its own tag. */
static int rank_shared_comm(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    worker_t w[4];
    (void)arg;
    for (int t = 0; t < 4; t++)
        w[t] = (worker_t){comm, rank, 1 - rank, t, ROUNDS, 0, 0};
    run_workers(w, 4);
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_shared_comm_threads)
{
    ck_assert_int_eq(harness_run(2, rank_shared_comm, NULL, 60), 0);
}
END_TEST

/* ---- the lock's bias ---------------------------------------------------------- */

typedef struct holder {
    coll_comm_t comm;
    int inside;     /* atomic: the first thread holds the lock */
    int saw_inside; /* the second thread got the lock while the first held it */
} holder_t;

static void *take_lock(void *arg)
{
    holder_t *h = arg;
    coll_comm_lock(h->comm);
    h->saw_inside = __atomic_load_n(&h->inside, __ATOMIC_ACQUIRE);
    coll_comm_unlock(h->comm);
    return NULL;
}

/* The thread that calls first holds the lock through the bias; a second
 * thread asks for it while it is held (for 200 ms) and must wait; then the
 * first thread's holds are the mutex too. */
static int rank_lock_bias(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    holder_t h = {comm, 0, 0};
    pthread_t t;
    (void)arg;

    RANK_OK(coll_barrier(comm)); /* claims the bias */
    if (!comm->bias.allowed && rank == 0)
        printf("test_threads: lock bias: skipped: this build or kernel locks with a mutex "
               "(ThreadSanitizer, or no membarrier(2)); only mutual exclusion is checked\n");
    coll_comm_lock(comm);
    RANK_CHECK(!comm->bias.allowed || comm->bias.held,
               "the calling thread's hold did not come through the bias");
    __atomic_store_n(&h.inside, 1, __ATOMIC_RELEASE);
    RANK_CHECK(pthread_create(&t, NULL, take_lock, &h) == 0, "pthread_create");
    usleep(200 * 1000);
    __atomic_store_n(&h.inside, 0, __ATOMIC_RELEASE);
    coll_comm_unlock(comm);
    pthread_join(t, NULL);
    RANK_CHECK(!h.saw_inside, "a second thread took the lock while the first held it");
    coll_comm_lock(comm);
    RANK_CHECK(!comm->bias.held, "the first thread still enters through the bias after a "
               "second thread took the lock");
    coll_comm_unlock(comm);
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_lock_bias)
{
    ck_assert_int_eq(harness_run(2, rank_lock_bias, NULL, 30), 0);
}
END_TEST

/* ---- abort from another thread --------------------------------------------- */

typedef struct blocked {
    coll_comm_t comm;
    coll_status_t st;
    double returned_at;
} blocked_t;

static void *blocked_recv(void *arg)
{
    blocked_t *b = arg;
    int32_t x;
    b->st = coll_recv(&x, 1, COLL_INT32, 1, 99, b->comm); /* rank 1 never sends it */
    b->returned_at = harness_now();
    return NULL;
}

static int rank_abort_thread(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t world = harness_init(rank, nranks, id), other;
    (void)arg;
    RANK_OK(coll_comm_split(world, 0, rank, &other));
    if (rank == 0) {
        blocked_t b = {world, COLL_OK, 0};
        pthread_t t;
        RANK_CHECK(pthread_create(&t, NULL, blocked_recv, &b) == 0, "pthread_create");
        usleep(300 * 1000);
        double t0 = harness_now();
        RANK_OK(coll_comm_abort(world));
        double abort_took = harness_now() - t0;
        pthread_join(t, NULL);
        RANK_CHECK(abort_took < 5.0, "abort took %.2f s", abort_took);
        RANK_CHECK(b.st == COLL_ERR_ABORTED, "blocked recv returned %s", coll_status_str(b.st));
        RANK_CHECK(b.returned_at - t0 < 1.0, "blocked recv returned %.2f s after abort",
                   b.returned_at - t0);
        RANK_CHECK(coll_barrier(world) == COLL_ERR_INVALID_COMM, "aborted handle still usable");
    } else {
        /* Waits on the world until rank 0's abort notice arrives. */
        int32_t x;
        coll_status_t st = coll_recv(&x, 1, COLL_INT32, 0, 98, world);
        RANK_CHECK(st == COLL_ERR_PEER_FAILED && strstr(coll_get_last_error(world), "rank 0 (") &&
                   strstr(coll_get_last_error(world), "aborted"), "rank 1 got %s: %s",
                   coll_status_str(st), coll_get_last_error(world));
        RANK_OK(coll_comm_destroy(world));
    }
    /* The process's other communicator is unaffected. */
    int32_t v = rank, got = -1;
    RANK_OK(coll_sendrecv(&v, 1, COLL_INT32, 1 - rank, 0, &got, 1, COLL_INT32, 1 - rank, 0, other));
    RANK_CHECK(got == 1 - rank, "got %d", got);
    RANK_OK(coll_comm_destroy(other));
    return 0;
}

START_TEST(test_abort_from_thread)
{
    ck_assert_int_eq(harness_run(2, rank_abort_thread, NULL, 30), 0);
}
END_TEST

/* ---- abort x100: during creation, a collective, destroy ------------------ */

#define ABORT_ROUNDS 100
#define ABORT_BOUND_S 5.0

/* DURING_INIT: rank 1 stays out of the split, so the abort lands while it
 * waits for rank 1; DURING_JOINED_INIT: both take part and the abort lands
 * anywhere in it, also while the new communicator connects (the split has
 * left the parent then: the parent's abort still ends it). */
enum abort_phase { DURING_INIT, DURING_JOINED_INIT, DURING_COLL, DURING_DESTROY };
static const char *const phase_names[] = {
    "communicator creation (coll_comm_split, rank 1 absent)",
    "communicator creation (coll_comm_split, both ranks)", "a collective (allreduce)",
    "destroy"};

/* Entries of a /proc/self directory (fd: open descriptors, task: threads),
 * not counting the descriptor that reads it. */
static int proc_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    RANK_CHECK(d != NULL, "cannot open %s", dir);
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return strcmp(dir, "/proc/self/fd") == 0 ? n - 1 : n;
}

typedef struct victim {
    coll_comm_t comm;
    int phase;
    float *buf;
    size_t count;
    int entered;      /* atomic: the thread is about to make its call */
    coll_status_t st;
    double returned_at;
    char msg[512];    /* the call's error */
} victim_t;

/* The call that the other thread aborts. */
static void *victim_call(void *arg)
{
    victim_t *v = arg;
    coll_comm_t child = NULL;

    __atomic_store_n(&v->entered, 1, __ATOMIC_RELEASE);
    if (v->phase == DURING_INIT || v->phase == DURING_JOINED_INIT)
        v->st = coll_comm_split(v->comm, 0, 0, &child);
    else if (v->phase == DURING_COLL)
        v->st = coll_allreduce(v->buf, v->buf, v->count, COLL_FLOAT32, COLL_SUM, v->comm);
    else
        v->st = coll_comm_destroy(v->comm);
    v->returned_at = harness_now();
    snprintf(v->msg, sizeof(v->msg), "%s", v->st ? coll_get_last_error(NULL) : "");
    if (child)
        coll_comm_destroy(child);
    return NULL;
}

/* Rank 0's round: the call runs in a thread, this thread aborts it. For
 * destroy, sends that rank 1 never receives first fill the link, so that
 * destroy waits in its flush. Returns the slower of the two returns;
 * counts the rounds whose call came after the abort in *late_rounds. */
static double abort_round(coll_comm_t comm, int phase, int round, float *buf, size_t count,
                          int *in_child_init, int *late_rounds)
{
    enum { SENDS = 64, SEND_BYTES = 16384 }; /* 1 MiB: more than a shm ring holds */
    coll_request_t reqs[SENDS];
    victim_t v = {comm, phase, buf, count, 0, COLL_OK, 0, ""};
    pthread_t t;
    int nreq = phase == DURING_DESTROY ? SENDS : 0;

    for (int i = 0; i < nreq; i++)
        RANK_OK(coll_isend(buf, SEND_BYTES / 4, COLL_FLOAT32, 1, 5, comm, &reqs[i]));
    RANK_CHECK(pthread_create(&t, NULL, victim_call, &v) == 0, "pthread_create");
    while (!__atomic_load_n(&v.entered, __ATOMIC_ACQUIRE))
        usleep(100);
    if (phase == DURING_JOINED_INIT) /* 0 to 1.9 ms: the whole split takes about 1 ms */
        usleep((unsigned)(round % 20) * 100);
    else
        usleep(1000 + (unsigned)(round % 5) * 1000); /* inside the call by now */
    double t0 = harness_now();
    coll_status_t ast = coll_comm_abort(comm);
    double abort_took = harness_now() - t0;
    pthread_join(t, NULL);
    double call_took = v.returned_at - t0;
    /* destroy ends the handle itself; abort then finds it gone */
    RANK_CHECK(ast == COLL_OK || (phase == DURING_DESTROY && ast == COLL_ERR_INVALID_COMM),
               "round %d: abort returned %s", round, coll_status_str(ast));
    /* The thread may reach the call only after the abort has ended (a
     * loaded machine, a sanitizer): the handle is dead by then. */
    int late = ast == COLL_OK && v.st == COLL_ERR_INVALID_COMM &&
               strstr(v.msg, "the communicator was destroyed or aborted");
    *late_rounds += late;
    RANK_CHECK(late || v.st == COLL_ERR_ABORTED ||
               ((phase == DURING_COLL || phase == DURING_JOINED_INIT) && v.st == COLL_OK),
               "round %d: the call during %s returned %s: %s", round, phase_names[phase],
               coll_status_str(v.st), v.msg);
    *in_child_init += strstr(v.msg, "parent communicator was aborted") ||
                      strstr(v.msg, "init aborted while");
    RANK_CHECK(abort_took < ABORT_BOUND_S && call_took < ABORT_BOUND_S, "round %d: abort took "
               "%.2f s, the call returned %.2f s after it", round, abort_took, call_took);
    for (int i = 0; i < nreq; i++)
        coll_wait(&reqs[i]); /* outcomes vary; they must complete and be freed */
    return abort_took > call_took ? abort_took : call_took;
}

/* Rank 1's split when it takes part: any outcome (rank 0 may be gone from
 * the new communicator before it connects), within its 1 s deadline + 5 s. */
static void peer_joined_split(coll_comm_t comm, int round)
{
    coll_comm_t child = NULL;
    int32_t x;
    RANK_OK(coll_comm_set_timeout(comm, 1000)); /* the split inherits it */
    double t0 = harness_now();
    coll_status_t st = coll_comm_split(comm, 0, 1, &child);
    RANK_CHECK(harness_now() - t0 < 1.0 + ABORT_BOUND_S, "round %d: rank 1's split returned "
               "%s after %.2f s", round, coll_status_str(st), harness_now() - t0);
    if (child) { /* rank 0 destroys or aborts its side */
        coll_recv(&x, 1, COLL_INT32, 0, 9, child);
        coll_comm_destroy(child);
    }
}

/* Rank 1's round: it takes part in the collective on even rounds (the
 * abort then lands while data moves, or after the call), stays out of it
 * on odd ones (rank 0 is surely blocked); it joins the inner split only in
 * DURING_JOINED_INIT, and never reads the sends before rank 0's destroy
 * has ended. */
static void peer_round(coll_comm_t world, coll_comm_t comm, int phase, int round, float *buf,
                       size_t count)
{
    coll_status_t st = COLL_OK;
    int32_t x;

    if (phase == DURING_DESTROY) {
        RANK_OK(coll_recv(&x, 1, COLL_INT32, 0, 7, world)); /* rank 0 is done */
    } else {
        if (phase == DURING_COLL && round % 2 == 0)
            st = coll_allreduce(buf, buf, count, COLL_FLOAT32, COLL_SUM, comm);
        if (phase == DURING_JOINED_INIT)
            peer_joined_split(comm, round);
        if (st == COLL_OK)
            st = coll_recv(&x, 1, COLL_INT32, 0, 8, comm); /* never sent: the abort ends it */
        RANK_CHECK(st == COLL_ERR_PEER_FAILED && strstr(coll_get_last_error(comm), "rank 0 ("),
                   "round %d: rank 1 got %s: %s", round, coll_status_str(st),
                   coll_get_last_error(comm));
    }
    coll_comm_destroy(comm);
}

static int rank_abort_rounds(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int phase = *(const int *)arg;
    size_t count = 1u << 20; /* 4 MiB all-reduce */
    float *buf = calloc(count, sizeof(float));
    double slowest = 0;
    int in_child_init = 0, late_rounds = 0;

    setenv("COLL_COST_PROBE", "0", 1); /* 300 communicators: keep their creation short */
    setenv("COLL_DEBUG", "NONE", 1);   /* 2 expected errors a round */
    coll_comm_t world = harness_init(rank, nranks, id);
    int threads = -1; /* from the end of round 0: a sanitizer starts a thread of its own */
    for (int round = 0; round < ABORT_ROUNDS; round++) {
        coll_comm_t comm;
        int32_t done = round;
        int fds = proc_entries("/proc/self/fd");
        RANK_OK(coll_comm_split(world, 0, rank, &comm));
        /* Rank 1 has left every call on comm (its init reads the ring
         * there, which would drain what destroy must wait for). */
        RANK_OK(coll_barrier(comm));
        if (rank == 1)
            RANK_OK(coll_send(&done, 1, COLL_INT32, 0, 6, world));
        else
            RANK_OK(coll_recv(&done, 1, COLL_INT32, 1, 6, world));
        if (rank == 0) {
            double took = abort_round(comm, phase, round, buf, count, &in_child_init,
                                      &late_rounds);
            slowest = took > slowest ? took : slowest;
            if (phase == DURING_DESTROY)
                RANK_OK(coll_send(&done, 1, COLL_INT32, 1, 7, world));
        } else {
            peer_round(world, comm, phase, round, buf, count);
        }
        RANK_OK(coll_barrier(world));
        int fds_after = proc_entries("/proc/self/fd");
        int threads_after = proc_entries("/proc/self/task");
        if (threads < 0)
            threads = threads_after;
        /* a joined thread's task may linger in /proc for a moment */
        for (int i = 0; i < 1000 && threads_after != threads; i++) {
            usleep(1000);
            threads_after = proc_entries("/proc/self/task");
        }
        RANK_CHECK(fds_after == fds && threads_after == threads, "round %d: rank %d had %d file "
                   "descriptors and %d threads before, %d and %d after", round, rank, fds,
                   threads, fds_after, threads_after);
    }
    /* A new communicator in the same process works. */
    coll_comm_t fresh;
    int32_t v = rank + 1;
    RANK_OK(coll_comm_split(world, 0, rank, &fresh));
    RANK_OK(coll_allreduce(&v, &v, 1, COLL_INT32, COLL_SUM, fresh));
    RANK_CHECK(v == 3, "all-reduce on a new communicator gave %d", v);
    RANK_OK(coll_comm_destroy(fresh));
    RANK_OK(coll_comm_destroy(world));
    /* A few late threads are a busy machine; most must be inside the call,
     * or this test no longer tests an abort during it. */
    RANK_CHECK(late_rounds <= ABORT_ROUNDS / 4, "%d of %d rounds: the call began after the "
               "abort had ended", late_rounds, ABORT_ROUNDS);
    if (rank == 0)
        printf("test_threads: abort during %s: %d rounds (%d began after the abort), slowest "
               "return %.3f s\n", phase_names[phase], ABORT_ROUNDS, late_rounds, slowest);
    if (rank == 0 && phase == DURING_JOINED_INIT)
        printf("test_threads:   %d of them landed while the new communicator connected\n",
               in_child_init);
    fflush(stdout);
    free(buf);
    return 0;
}

START_TEST(test_abort_rounds)
{
    int phase = _i;
    ck_assert_int_eq(harness_run(2, rank_abort_rounds, &phase, 170), 0);
}
END_TEST

static Suite *threads_suite(void)
{
    Suite *s = suite_create("threads");
    const char *names[] = {"two comms", "shared comm", "lock bias", "abort"};
    const TTest *tests[] = {test_two_comms_two_threads, test_shared_comm_threads,
                            test_lock_bias, test_abort_from_thread};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 90);
        tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tcase_create("abort x100");
    tcase_set_timeout(tc, 180); /* ThreadSanitizer is slow; plain runs take seconds */
    tcase_add_loop_test(tc, test_abort_rounds, DURING_INIT, DURING_DESTROY + 1);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(threads_suite());
}
