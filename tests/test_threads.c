/*
 * test_threads.c: what docs/api.md promises about threads. Different
 * communicators in different threads are independent; point-to-point on
 * one communicator from several threads at once is safe; and
 * coll_comm_abort from another thread ends a blocked call promptly while
 * other communicators of the process keep working.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

static Suite *threads_suite(void)
{
    Suite *s = suite_create("threads");
    const char *names[] = {"two comms", "shared comm", "abort"};
    const TTest *tests[] = {test_two_comms_two_threads, test_shared_comm_threads,
                            test_abort_from_thread};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        TCase *tc = tcase_create(names[i]);
        tcase_set_timeout(tc, 90);
        tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    return harness_main(threads_suite());
}
