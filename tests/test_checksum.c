/*
 * test_checksum.c: COLL_CHECKSUM=1 (issue 6 item 12). The CRC-32C itself
 * (a published check value, the instruction against the table); then, over
 * TCP, shared memory and verbs (where a device is: make test runs this
 * program in a Soft-RoCE guest too), with small (eager) and large messages: clean
 * traffic stays exact with checksums on; a byte flipped by the test hook
 * COLL_TEST_CORRUPT_FRAME is reported as COLL_ERR_DATA_CORRUPTION naming the
 * link, and the message is never delivered, while without checksums the same
 * flip goes through unnoticed (so the hook really corrupts, and the checksum
 * is what catches it); ranks that disagree on COLL_CHECKSUM fail init, both,
 * at once, with both values in the message.
 */
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "harness.h"

#define MSGS 8
/* The hook counts frames of 64 bytes and more, which with COLL_COST_PROBE=0
 * init does not send: this is the test's own traffic (for 1 MiB messages, a
 * chunk of the first message). */
#define CORRUPT_AT "3"

typedef struct job {
    const char *transport; /* COLL_TRANSPORTS */
    size_t bytes;          /* per message */
    int checksum;          /* COLL_CHECKSUM on both ranks */
    int corrupt;           /* rank 1 sets COLL_TEST_CORRUPT_FRAME */
} job_t;

/* ---- the CRC ----------------------------------------------------------------- */

START_TEST(test_crc32c_values)
{
    /* the check value of CRC-32C (RFC 3720, and every CRC catalogue) */
    ck_assert_uint_eq(coll_crc32c(0, "123456789", 9), 0xe3069283u);
    ck_assert_uint_eq(coll_crc32c_table(0, "123456789", 9), 0xe3069283u);
    ck_assert_uint_eq(coll_crc32c(0, "", 0), 0);
    /* 32 zero bytes: RFC 3720 B.4 */
    uint8_t zeros[32] = {0};
    ck_assert_uint_eq(coll_crc32c(0, zeros, 32), 0x8a9136aau);

    size_t n = 100000;
    uint8_t *buf = malloc(n);
    srand(7);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)rand();
    for (size_t off = 0; off < 9; off++) {
        for (size_t len = 0; len < 70; len++)
            ck_assert_uint_eq(coll_crc32c(0, buf + off, len), coll_crc32c_table(0, buf + off, len));
        /* in two pieces, split anywhere, equals in one */
        uint32_t whole = coll_crc32c(0, buf + off, n - off);
        size_t cut = 1000 + off * 13;
        ck_assert_uint_eq(coll_crc32c(coll_crc32c(0, buf + off, cut), buf + off + cut,
                                      n - off - cut), whole);
        ck_assert_uint_eq(coll_crc32c_table(0, buf + off, n - off), whole);
    }
    /* one flipped bit changes it */
    uint32_t before = coll_crc32c(0, buf, n);
    buf[n / 2] ^= 0x10;
    ck_assert_uint_ne(coll_crc32c(0, buf, n), before);
    free(buf);
}
END_TEST

/* ---- jobs ---------------------------------------------------------------------- */

static void job_env(const job_t *j, int rank)
{
    setenv("COLL_TRANSPORTS", j->transport, 1);
    setenv("COLL_CHECKSUM", j->checksum ? "1" : "0", 1);
    setenv("COLL_COST_PROBE", "0", 1);
    setenv("COLL_SHM_CMA", "0", 1); /* large shm messages go through the ring */
    setenv("COLL_TIMEOUT", "10s", 1);
    if (j->corrupt && rank == 1)
        setenv("COLL_TEST_CORRUPT_FRAME", CORRUPT_AT, 1);
}

/* Bytes of buf that differ from what rank 0 sent as message m. */
static size_t wrong_bytes(const uint8_t *buf, size_t n, int m)
{
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += buf[i] != harness_pattern(0, m, i);
    return wrong;
}

/* Rank 1 after the receive of message m failed: corruption, named. */
static void check_corruption_reported(coll_comm_t comm, coll_status_t st, int m, double took)
{
    const char *msg = coll_get_last_error(comm);
    RANK_CHECK(st == COLL_ERR_DATA_CORRUPTION, "message %d: %s: %s", m, coll_status_str(st), msg);
    RANK_CHECK(strstr(msg, "data corruption on the link from rank 0 (") &&
               strstr(msg, "to rank 1") && strstr(msg, "CRC-32C") &&
               strstr(msg, "not delivered"), "message does not name the link: %s", msg);
    RANK_CHECK(took < 2.0, "corruption reported after %.2f s", took);
    RANK_CHECK(coll_comm_get_error(comm) == COLL_ERR_DATA_CORRUPTION, "communicator state %s",
               coll_status_str(coll_comm_get_error(comm)));
}

/* Rank 0 sends MSGS messages, then waits for rank 1's verdict; rank 1
 * receives them in order and checks every byte. */
static int rank_messages(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const job_t *j = arg;
    coll_comm_t comm;
    uint8_t *buf = malloc(j->bytes);
    int32_t verdict = -1;

    job_env(j, rank);
    comm = harness_init(rank, nranks, id);
    /* rank 1 asks for the messages once its init is over, so that the
     * flipped frame is seen by its receives, not by the end of its init */
    if (rank == 1)
        RANK_OK(coll_send(&verdict, 1, COLL_INT32, 0, 99, comm));
    else
        RANK_OK(coll_recv(&verdict, 1, COLL_INT32, 1, 99, comm));
    if (rank == 0) {
        for (int m = 0; m < MSGS; m++) {
            harness_fill(buf, j->bytes, 0, m);
            coll_status_t st = coll_send(buf, j->bytes, COLL_UINT8, 1, m, comm);
            if (st != COLL_OK) /* a large send the receiver failed */
                RANK_CHECK(j->corrupt && j->checksum, "send %d: %s", m, coll_status_str(st));
        }
        coll_status_t st = coll_recv(&verdict, 1, COLL_INT32, 1, 100, comm);
        if (j->corrupt && j->checksum) {
            /* rank 1 failed its communicator and told us why */
            RANK_CHECK(st == COLL_ERR_PEER_FAILED &&
                       strstr(coll_get_last_error(comm), "data corruption"),
                       "rank 0 got %s: %s", coll_status_str(st), coll_get_last_error(comm));
            coll_comm_abort(comm);
        } else {
            RANK_CHECK(st == COLL_OK && verdict == 0, "verdict %d (%s)", verdict,
                       coll_status_str(st));
            RANK_OK(coll_comm_destroy(comm));
        }
        free(buf);
        return 0;
    }
    size_t wrong = 0;
    for (int m = 0; m < MSGS; m++) {
        memset(buf, 0, j->bytes);
        double t0 = harness_now();
        coll_status_t st = coll_recv(buf, j->bytes, COLL_UINT8, 0, m, comm);
        if (j->corrupt && j->checksum && st != COLL_OK) {
            check_corruption_reported(comm, st, m, harness_now() - t0);
            RANK_CHECK(wrong == 0, "%zu wrong bytes delivered before the failure", wrong);
            coll_comm_abort(comm);
            free(buf);
            return 0;
        }
        RANK_CHECK(st == COLL_OK, "message %d: %s: %s", m, coll_status_str(st),
                   coll_get_last_error(comm));
        wrong += wrong_bytes(buf, j->bytes, m);
    }
    RANK_CHECK(!(j->corrupt && j->checksum), "every message was delivered despite the "
               "corrupted frame");
    /* without checksums the flipped byte is delivered: exactly one */
    RANK_CHECK(wrong == (j->corrupt ? 1u : 0u), "%zu wrong bytes (expected %d)", wrong,
               j->corrupt);
    verdict = 0;
    RANK_OK(coll_send(&verdict, 1, COLL_INT32, 0, 100, comm));
    RANK_OK(coll_comm_destroy(comm));
    free(buf);
    return 0;
}

/* A clean all-reduce with checksums on is exact (no false alarm). */
static int rank_allreduce(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const job_t *j = arg;
    size_t n = j->bytes / 4;
    int32_t *x = malloc(n * 4);

    job_env(j, rank);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (size_t i = 0; i < n; i++)
        x[i] = (int32_t)(i % 1000) * (rank + 1);
    RANK_OK(coll_allreduce(x, x, n, COLL_INT32, COLL_SUM, comm));
    for (size_t i = 0; i < n; i++)
        RANK_CHECK(x[i] == (int32_t)(i % 1000) * 3, "element %zu: %d", i, x[i]);
    RANK_OK(coll_comm_destroy(comm));
    free(x);
    return 0;
}

static const job_t jobs[] = {
    {"tcp", 1000, 1, 1},       {"tcp", 1u << 20, 1, 1},   {"shm", 1000, 1, 1},
    {"shm", 1u << 20, 1, 1},   {"tcp", 1000, 0, 1},       {"shm", 1u << 20, 0, 1},
    {"tcp", 1u << 20, 1, 0},   {"shm", 1000, 1, 0},       {"verbs", 1000, 1, 1},
    {"verbs", 1u << 20, 1, 1}, {"verbs", 1000, 0, 1},     {"verbs", 1u << 20, 0, 1},
    {"verbs", 1u << 20, 1, 0}, {"verbs", 1000, 1, 0},
};

/* Jobs over verbs need a device (make test-rxe brings one up). */
static int runnable(const job_t *j, const char *name)
{
    if (strcmp(j->transport, "verbs") != 0 || harness_verbs_devices() > 0)
        return 1;
    printf("test_checksum: %s: skipped: no verbs device\n", name);
    return 0;
}

static const char *job_name(const job_t *j, char *buf, size_t len)
{
    snprintf(buf, len, "%s, %zu-byte messages, COLL_CHECKSUM=%d%s", j->transport, j->bytes,
             j->checksum, j->corrupt ? ", one byte flipped" : "");
    return buf;
}

START_TEST(test_corrupt_frame)
{
    char name[128];
    const job_t *j = &jobs[_i];
    if (!runnable(j, job_name(j, name, sizeof(name))))
        return;
    printf("test_checksum: %s\n", name);
    fflush(stdout);
    ck_assert_msg(harness_run(2, rank_messages, (void *)j, 30) == 0, "%s", name);
}
END_TEST

START_TEST(test_clean_allreduce)
{
    static const char *const transports[] = {"tcp", "shm", "verbs"};
    job_t j = {transports[_i], 4u << 20, 1, 0};
    char name[128];
    snprintf(name, sizeof(name), "a clean 4 MiB all-reduce over %s", j.transport);
    if (!runnable(&j, name))
        return;
    ck_assert_int_eq(harness_run(2, rank_allreduce, &j, 30), 0);
}
END_TEST

/* ---- disagreement -------------------------------------------------------------- */

static int rank_disagree(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = NULL;
    (void)arg;
    setenv("COLL_CHECKSUM", rank == 0 ? "1" : "0", 1);
    setenv("COLL_TIMEOUT", "30s", 1);
    double t0 = harness_now();
    coll_status_t st = coll_comm_init_rank(&comm, nranks, *id, rank);
    double took = harness_now() - t0;
    const char *msg = coll_get_last_error(NULL);
    RANK_CHECK(st == COLL_ERR_INVALID_ARG && comm == NULL, "init: %s: %s", coll_status_str(st),
               msg);
    RANK_CHECK(strstr(msg, "COLL_CHECKSUM differs") &&
               strstr(msg, rank == 0 ? "rank 1 (" : "rank 0 (") &&
               strstr(msg, rank == 0 ? "has 0, this rank has 1" : "has 1, this rank has 0"),
               "message: %s", msg);
    RANK_CHECK(took < 5.0, "init failed after %.1f s", took);
    return 0;
}

START_TEST(test_disagree)
{
    ck_assert_int_eq(harness_run(2, rank_disagree, NULL, 30), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checksum");
    TCase *tc = tcase_create("checksum");
    tcase_set_timeout(tc, 40);
    tcase_add_test(tc, test_crc32c_values);
    tcase_add_loop_test(tc, test_corrupt_frame, 0, (int)(sizeof(jobs) / sizeof(jobs[0])));
    tcase_add_loop_test(tc, test_clean_allreduce, 0, 3);
    tcase_add_test(tc, test_disagree);
    suite_add_tcase(s, tc);
    return harness_main(s);
}
