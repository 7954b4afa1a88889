/*
 * test_p2p.c: point-to-point over shared memory and over real loopback TCP
 * (COLL_TRANSPORTS, the whole suite once each) and the self path:
 * every size class from 0 B to 64 MiB, many messages in flight both ways,
 * tag matching and ordering, and the neighbour exchange of a pipeline
 * that deadlocks with blocking sends.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Byte i of a message from `src` with `salt`: differs per sender, message
 * and offset, so a misplaced or stale chunk shows. */
/* ---- sizes ------------------------------------------------------------------ */

static const size_t sizes[] = {0, 1, 7, 4095, 65536, 65537, 1 << 20, (1 << 20) + 3, 64u << 20};

/* Ping-pong between ranks 0 and 1 at every size; rank 0 also sends to
 * itself. Ranks beyond 1 only take part in the final barrier. */
static int rank_sizes(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    uint8_t *buf = malloc(64u << 20), *self = malloc(64u << 20);
    (void)arg;
    RANK_CHECK(buf && self, "out of memory");
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]) && rank < 2; k++) {
        size_t n = sizes[k];
        int peer = 1 - rank;
        if (rank == 0) {
            harness_fill(buf, n, 0, (int)k);
            RANK_OK(coll_send(buf, n, COLL_UINT8, peer, (int)k, comm));
            memset(buf, 0, n);
            RANK_OK(coll_recv(buf, n, COLL_UINT8, peer, (int)k, comm));
            harness_verify(buf, n, 1, (int)k);
            /* to itself: isend first, then the receive (rendezvous when large) */
            coll_request_t req;
            harness_fill(buf, n, 0, (int)k + 100);
            RANK_OK(coll_isend(buf, n, COLL_UINT8, 0, 9, comm, &req));
            RANK_OK(coll_recv(self, n, COLL_UINT8, 0, 9, comm));
            RANK_OK(coll_wait(&req));
            harness_verify(self, n, 0, (int)k + 100);
        } else {
            RANK_OK(coll_recv(buf, n, COLL_UINT8, peer, (int)k, comm));
            harness_verify(buf, n, 0, (int)k);
            harness_fill(buf, n, 1, (int)k);
            RANK_OK(coll_send(buf, n, COLL_UINT8, peer, (int)k, comm));
        }
    }
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    free(buf);
    free(self);
    return 0;
}

START_TEST(test_sizes)
{
    ck_assert_int_eq(harness_run(_i, rank_sizes, NULL, 60), 0);
}
END_TEST

/* ---- many messages in flight ------------------------------------------------ */

#define FLIGHT 600

/* Ranks 0 and 1 each post FLIGHT sends and FLIGHT receives to the other at
 * once, sizes cycling through eager and rendezvous, tags cycling through
 * 5 values so equal-tag ordering is exercised, then wait for all. */
static size_t flight_size(int i)
{
    static const size_t s[] = {0, 3, 100, 8192, 70000, 300000};
    return s[i % 6];
}

static int rank_flight(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    int peer = 1 - rank;
    uint8_t **out = calloc(FLIGHT, sizeof(*out)), **in = calloc(FLIGHT, sizeof(*in));
    coll_request_t *reqs = calloc(2 * FLIGHT, sizeof(*reqs));
    (void)arg;

    for (int i = 0; i < FLIGHT; i++) {
        size_t n = flight_size(i);
        out[i] = malloc(n + 1);
        in[i] = malloc(n + 1);
        harness_fill(out[i], n, rank, i);
        /* receives and sends interleaved, as a pipelined application does */
        RANK_OK(coll_irecv(in[i], n, COLL_UINT8, peer, i % 5, comm, &reqs[2 * i]));
        RANK_OK(coll_isend(out[i], n, COLL_UINT8, peer, i % 5, comm, &reqs[2 * i + 1]));
    }
    RANK_OK(coll_waitall(2 * FLIGHT, reqs));
    for (int i = 0; i < FLIGHT; i++) {
        harness_verify(in[i], flight_size(i), peer, i);
        free(in[i]);
        free(out[i]);
    }
    RANK_OK(coll_comm_destroy(comm));
    free(in);
    free(out);
    free(reqs);
    return 0;
}

START_TEST(test_flight)
{
    ck_assert_int_eq(harness_run(2, rank_flight, NULL, 60), 0);
}
END_TEST

/* ---- NULL entries in coll_waitall -------------------------------------------------- */

/* NULL entries are skipped wherever they are, after a request too (a
 * regression: coll_waitall dereferenced a NULL that followed a request;
 * found by bench/coll_perf -z 0, which leaves the second slot of each
 * collective's request pair NULL). */
static int rank_waitall_nulls(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    int peer = 1 - rank;
    int32_t out = rank, in = -1;
    coll_request_t reqs[5] = {NULL, NULL, NULL, NULL, NULL};
    (void)arg;

    RANK_OK(coll_irecv(&in, 1, COLL_INT32, peer, 0, comm, &reqs[1]));
    RANK_OK(coll_isend(&out, 1, COLL_INT32, peer, 0, comm, &reqs[3]));
    RANK_OK(coll_waitall(5, reqs));
    RANK_CHECK(in == peer, "received %d, expected %d", (int)in, peer);
    for (int i = 0; i < 5; i++)
        RANK_CHECK(reqs[i] == NULL, "entry %d is not NULL after coll_waitall", i);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_waitall_nulls)
{
    ck_assert_int_eq(harness_run(2, rank_waitall_nulls, NULL, 30), 0);
}
END_TEST

/* ---- tags ------------------------------------------------------------------------ */

/* Rank 1 sends tag 1 then tag 2 (4 MiB: by rendezvous over TCP) then tag
 * 1 again; rank 0 receives tag 2 first, then both tag-1 messages:
 * different tags may be taken out of order, equal tags arrive in order. */
static int rank_tags(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    size_t big = 4u << 20; /* above every eager limit: a rendezvous */
    uint8_t *a = malloc(big), *b = malloc(big), *c = malloc(big);
    (void)arg;

    if (rank == 1) {
        harness_fill(a, 100, 1, 1);
        harness_fill(b, big, 1, 2);
        harness_fill(c, 200, 1, 3);
        coll_request_t r[3];
        RANK_OK(coll_isend(a, 100, COLL_UINT8, 0, 1, comm, &r[0]));
        RANK_OK(coll_isend(b, big, COLL_UINT8, 0, 2, comm, &r[1]));
        RANK_OK(coll_isend(c, 200, COLL_UINT8, 0, 1, comm, &r[2]));
        RANK_OK(coll_waitall(3, r));
    } else {
        RANK_OK(coll_recv(b, big, COLL_UINT8, 1, 2, comm));
        harness_verify(b, big, 1, 2);
        RANK_OK(coll_recv(a, 100, COLL_UINT8, 1, 1, comm));
        harness_verify(a, 100, 1, 1);
        RANK_OK(coll_recv(c, 200, COLL_UINT8, 1, 1, comm));
        harness_verify(c, 200, 1, 3);
    }
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    free(a);
    free(b);
    free(c);
    return 0;
}

START_TEST(test_tags)
{
    ck_assert_int_eq(harness_run(2, rank_tags, NULL, 30), 0);
}
END_TEST

/* ---- neighbour exchange -------------------------------------------------------- */

/* Every rank sends 8 MiB to the right and receives from the left, then the
 * reverse, with coll_sendrecv: with blocking sends of rendezvous-size
 * messages every rank would wait for its right neighbour forever. */
static int rank_ring(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    size_t n = 8u << 20;
    uint8_t *out = malloc(n), *in = malloc(n);
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    (void)arg;

    for (int round = 0; round < 3; round++) {
        harness_fill(out, n, rank, round);
        RANK_OK(coll_sendrecv(out, n, COLL_UINT8, right, round, in, n, COLL_UINT8, left, round,
                              comm));
        harness_verify(in, n, left, round);
        RANK_OK(coll_sendrecv(out, n, COLL_UINT8, left, 50 + round, in, n, COLL_UINT8, right,
                              50 + round, comm));
        harness_verify(in, n, right, round);
    }
    RANK_OK(coll_comm_destroy(comm));
    free(out);
    free(in);
    return 0;
}

START_TEST(test_ring)
{
    ck_assert_int_eq(harness_run(_i, rank_ring, NULL, 60), 0);
}
END_TEST

/* ---- datatypes and counts ---------------------------------------------------------- */

/* count is in elements: 3 int64 are 24 bytes on the wire. */
static int rank_types(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    int64_t v[3] = {1, -2, 1ll << 40}, w[3] = {0};
    double d[2] = {0.5, -1e300}, e[2] = {0};
    (void)arg;

    if (rank == 0) {
        RANK_OK(coll_send(v, 3, COLL_INT64, 1, 0, comm));
        RANK_OK(coll_send(d, 2, COLL_FLOAT64, 1, 0, comm));
    } else {
        RANK_OK(coll_recv(w, 3, COLL_INT64, 0, 0, comm));
        RANK_OK(coll_recv(e, 2, COLL_FLOAT64, 0, 0, comm));
        RANK_CHECK(memcmp(v, w, sizeof(v)) == 0 && memcmp(d, e, sizeof(d)) == 0, "values differ");
    }
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_types)
{
    ck_assert_int_eq(harness_run(2, rank_types, NULL, 30), 0);
}
END_TEST

static Suite *p2p_suite(void)
{
    Suite *s = suite_create("p2p");
    TCase *tc = tcase_create("p2p");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_sizes, 2, 4);
    tcase_add_test(tc, test_flight);
    tcase_add_test(tc, test_waitall_nulls);
    tcase_add_test(tc, test_tags);
    tcase_add_loop_test(tc, test_ring, 2, 6);
    tcase_add_test(tc, test_types);
    suite_add_tcase(s, tc);
    return s;
}

/* The whole suite once per transport that ranks on one host can use, or
 * over those COLL_TEST_TRANSPORTS lists (tests/rxe_vm.sh runs it over verbs). */
int main(void)
{
    const char *const *transports;
    int n = harness_transports(&transports), failed = 0;

    for (int i = 0; i < n; i++) {
        printf("p2p over %s\n", transports[i]);
        harness_use_transport(transports[i]);
        failed |= harness_main(p2p_suite()) != EXIT_SUCCESS;
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
