/*
 * test_badinput.c: bad input gets a specific status code and a message that
 * names the problem, never a crash or a hang. Every case checks the exact
 * code, then the last error message (of the communicator, or of the thread
 * for calls without a valid one), and where it matters that the call left
 * its output untouched and the communicator still works afterwards.
 *
 * Argument checks need no peer, so most jobs have one or two ranks; the
 * size-mismatch cases run over TCP (eager and rendezvous) and over self.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define JOB_TIMEOUT_S 20
#define CASE_TIMEOUT_S 30
#define TAG 3

#define ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- checking an error ------------------------------------------------------ */

/* Is `value` in `msg` as a number of its own (not part of a longer number,
 * an address or a port)? */
static int has_number(const char *msg, unsigned long long value)
{
    char num[32];
    size_t len = (size_t)snprintf(num, sizeof(num), "%llu", value);

    for (const char *p = strstr(msg, num); p; p = strstr(p + 1, num)) {
        char before = p == msg ? ' ' : p[-1];
        char after = p[len];
        if (strchr("0123456789.:", before) == NULL && (after < '0' || after > '9'))
            return 1;
    }
    return 0;
}

/* NULL when `got` is `want` and the last error (of comm, or of the calling
 * thread when comm is NULL) is non-empty, starts with `prefix` (unless it
 * is NULL) and contains every word; else what is wrong. */
static const char *error_mismatch(const char *call, coll_status_t got, coll_status_t want,
                                  coll_comm_t comm, const char *prefix,
                                  const char *const *words)
{
    static char why[1536];
    const char *msg = coll_get_last_error(comm);

    if (got != want) {
        snprintf(why, sizeof(why), "%s returned %s, expected %s (last error: '%s')", call,
                 coll_status_str(got), coll_status_str(want), msg ? msg : "(NULL)");
        return why;
    }
    if (!msg || !msg[0]) {
        snprintf(why, sizeof(why), "%s returned %s but coll_get_last_error(%s) is empty", call,
                 coll_status_str(got), comm ? "comm" : "NULL");
        return why;
    }
    if (prefix && strncmp(msg, prefix, strlen(prefix)) != 0) {
        snprintf(why, sizeof(why), "%s: message '%s' does not start with '%s'", call, msg,
                 prefix);
        return why;
    }
    for (; *words; words++) {
        if (!strstr(msg, *words)) {
            snprintf(why, sizeof(why), "%s: message '%s' does not mention '%s'", call, msg,
                     *words);
            return why;
        }
    }
    return NULL;
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* In a rank: `call` returns `want`, with a message containing the words. */
#define RANK_EXPECT(call, want, comm, prefix, ...)                                     \
    do {                                                                               \
        coll_status_t re_got_ = (call);                                                \
        const char *re_why_ = error_mismatch(#call, re_got_, (want), (comm), (prefix), \
                                             WORDS(__VA_ARGS__));                      \
        RANK_CHECK(re_why_ == NULL, "%s", re_why_);                                    \
    } while (0)

/* The same in a test body. */
#define CK_EXPECT(call, want, comm, prefix, ...)                                       \
    do {                                                                               \
        coll_status_t ce_got_ = (call);                                                \
        const char *ce_why_ = error_mismatch(#call, ce_got_, (want), (comm), (prefix), \
                                             WORDS(__VA_ARGS__));                      \
        ck_assert_msg(ce_why_ == NULL, "%s", ce_why_);                                 \
    } while (0)

/* ---- helpers for rank bodies ------------------------------------------------- */

/* Every rank sends to every rank (itself included) and checks what it got:
 * the communicator still delivers the right message to the right rank. */
static void exchange_check(coll_comm_t comm, int rank, int nranks, int tag)
{
    int32_t in[HARNESS_MAX_RANKS], out = rank * 1000 + tag;
    coll_request_t reqs[2 * HARNESS_MAX_RANKS];

    for (int p = 0; p < nranks; p++) {
        in[p] = -1;
        RANK_OK(coll_irecv(&in[p], 1, COLL_INT32, p, tag, comm, &reqs[2 * p]));
        RANK_OK(coll_isend(&out, 1, COLL_INT32, p, tag, comm, &reqs[2 * p + 1]));
    }
    RANK_OK(coll_waitall(2 * nranks, reqs));
    for (int p = 0; p < nranks; p++)
        RANK_CHECK(in[p] == p * 1000 + tag, "from rank %d got %d, expected %d", p, in[p],
                   p * 1000 + tag);
}

static void comm_prefix(int rank, char *buf, size_t len)
{
    snprintf(buf, len, "rank %d: ", rank);
}

/* A value no call returns: shows that a failed call left its output alone. */
static char sentinel_byte;
#define SENTINEL_COMM ((coll_comm_t)(void *)&sentinel_byte)

/* ==== library functions: no communicator ===================================== */

static const struct {
    coll_status_t code;
    const char *name;
} status_names[] = {
#define STATUS_ROW(c) {c, #c}
    STATUS_ROW(COLL_OK),
    STATUS_ROW(COLL_INPROGRESS),
    STATUS_ROW(COLL_ERR_INVALID_ARG),
    STATUS_ROW(COLL_ERR_INVALID_USAGE),
    STATUS_ROW(COLL_ERR_INVALID_COMM),
    STATUS_ROW(COLL_ERR_NO_MEMORY),
    STATUS_ROW(COLL_ERR_SYSTEM),
    STATUS_ROW(COLL_ERR_TIMEOUT),
    STATUS_ROW(COLL_ERR_PEER_FAILED),
    STATUS_ROW(COLL_ERR_ABORTED),
    STATUS_ROW(COLL_ERR_UNSUPPORTED),
    STATUS_ROW(COLL_ERR_PROTOCOL),
    STATUS_ROW(COLL_ERR_VERSION_MISMATCH),
    STATUS_ROW(COLL_ERR_AUTH),
    STATUS_ROW(COLL_ERR_UNREACHABLE),
    STATUS_ROW(COLL_ERR_SIZE_MISMATCH),
    STATUS_ROW(COLL_ERR_INTERNAL),
    STATUS_ROW(COLL_ERR_DATA_CORRUPTION),
#undef STATUS_ROW
};

/* Each code's string starts with its name, then ':' or the end. */
START_TEST(test_status_str_names)
{
    const char *s = coll_status_str(status_names[_i].code);
    size_t len = strlen(status_names[_i].name);

    ck_assert_ptr_nonnull(s);
    ck_assert_msg(strncmp(s, status_names[_i].name, len) == 0 &&
                  (s[len] == '\0' || s[len] == ':'),
                  "coll_status_str(%d) = '%s', expected it to start with %s",
                  (int)status_names[_i].code, s, status_names[_i].name);
}
END_TEST

START_TEST(test_status_str_distinct)
{
    /* Every code from COLL_OK down to the last error is in the table. */
    ck_assert_int_eq(ARRAY_LEN(status_names), 2 - (int)COLL_ERR_DATA_CORRUPTION);
    for (int i = 0; i < ARRAY_LEN(status_names); i++)
        for (int j = 0; j < i; j++)
            ck_assert_str_ne(coll_status_str(status_names[i].code),
                             coll_status_str(status_names[j].code));
    static const int unknown[] = {-999, -17, 2, 1000, INT_MIN, INT_MAX};
    for (int i = 0; i < ARRAY_LEN(unknown); i++) {
        const char *s = coll_status_str((coll_status_t)unknown[i]);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_gt((int)strlen(s), 0);
        for (int j = 0; j < ARRAY_LEN(status_names); j++)
            ck_assert_str_ne(s, coll_status_str(status_names[j].code));
    }
}
END_TEST

START_TEST(test_version)
{
    int major = -1, minor = -1, patch = -1;

    ck_assert_int_eq(coll_get_version(&major, &minor, &patch), COLL_OK);
    ck_assert_int_eq(major, COLL_VERSION_MAJOR);
    ck_assert_int_eq(minor, COLL_VERSION_MINOR);
    ck_assert_int_eq(patch, COLL_VERSION_PATCH);
    ck_assert_int_eq(major * 10000 + minor * 100 + patch, COLL_VERSION_CODE);

    major = minor = patch = -1;
    CK_EXPECT(coll_get_version(NULL, &minor, &patch), COLL_ERR_INVALID_ARG, NULL, NULL, "NULL");
    CK_EXPECT(coll_get_version(&major, NULL, &patch), COLL_ERR_INVALID_ARG, NULL, NULL, "NULL");
    CK_EXPECT(coll_get_version(&major, &minor, NULL), COLL_ERR_INVALID_ARG, NULL, NULL, "NULL");
    /* Outputs are written only on success. */
    ck_assert_int_eq(major, -1);
    ck_assert_int_eq(minor, -1);
    ck_assert_int_eq(patch, -1);
}
END_TEST

static const struct {
    coll_datatype_t dt;
    size_t size;
} datatype_sizes[] = {
    {COLL_INT8, 1},     {COLL_UINT8, 1},    {COLL_INT32, 4},
    {COLL_UINT32, 4},   {COLL_INT64, 8},    {COLL_UINT64, 8},
    {COLL_FLOAT16, 2},  {COLL_BFLOAT16, 2}, {COLL_FLOAT32, 4},
    {COLL_FLOAT64, 8},
    {(coll_datatype_t)COLL_NUM_DATATYPES, 0},
    {(coll_datatype_t)-1, 0},
    {(coll_datatype_t)1000, 0},
    {(coll_datatype_t)INT_MIN, 0},
};

START_TEST(test_datatype_size)
{
    ck_assert_msg(coll_datatype_size(datatype_sizes[_i].dt) == datatype_sizes[_i].size,
                  "coll_datatype_size(%d) = %zu, expected %zu", (int)datatype_sizes[_i].dt,
                  coll_datatype_size(datatype_sizes[_i].dt), datatype_sizes[_i].size);
}
END_TEST

/* ==== a NULL or ended communicator ============================================ */

enum comm_op {
    OP_SEND,
    OP_RECV,
    OP_ISEND,
    OP_IRECV,
    OP_SENDRECV,
    OP_BARRIER,
    OP_RANK,
    OP_SIZE,
    OP_SPLIT,
    OP_SET_TIMEOUT,
    OP_GET_ERROR,
    OP_DESTROY,
    OP_ABORT,
    OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    [OP_SEND] = "coll_send",
    [OP_RECV] = "coll_recv",
    [OP_ISEND] = "coll_isend",
    [OP_IRECV] = "coll_irecv",
    [OP_SENDRECV] = "coll_sendrecv",
    [OP_BARRIER] = "coll_barrier",
    [OP_RANK] = "coll_comm_rank",
    [OP_SIZE] = "coll_comm_size",
    [OP_SPLIT] = "coll_comm_split",
    [OP_SET_TIMEOUT] = "coll_comm_set_timeout",
    [OP_GET_ERROR] = "coll_comm_get_error",
    [OP_DESTROY] = "coll_comm_destroy",
    [OP_ABORT] = "coll_comm_abort",
};

/* Call `op` on comm with otherwise valid arguments; *touched is set when
 * the call wrote an output although it failed. */
static coll_status_t call_op(int op, coll_comm_t comm, int *touched)
{
    int32_t buf[2] = {1, 2};
    int out = -7;
    coll_request_t req = NULL;
    coll_comm_t newcomm = SENTINEL_COMM;
    coll_status_t st = COLL_ERR_INTERNAL;

    switch (op) {
    case OP_SEND: st = coll_send(buf, 1, COLL_INT32, 0, TAG, comm); break;
    case OP_RECV: st = coll_recv(buf, 1, COLL_INT32, 0, TAG, comm); break;
    case OP_ISEND: st = coll_isend(buf, 1, COLL_INT32, 0, TAG, comm, &req); break;
    case OP_IRECV: st = coll_irecv(buf, 1, COLL_INT32, 0, TAG, comm, &req); break;
    case OP_SENDRECV:
        st = coll_sendrecv(buf, 1, COLL_INT32, 0, TAG, buf + 1, 1, COLL_INT32, 0, TAG, comm);
        break;
    case OP_BARRIER: st = coll_barrier(comm); break;
    case OP_RANK: st = coll_comm_rank(comm, &out); break;
    case OP_SIZE: st = coll_comm_size(comm, &out); break;
    case OP_SPLIT: st = coll_comm_split(comm, 0, 0, &newcomm); break;
    case OP_SET_TIMEOUT: st = coll_comm_set_timeout(comm, 1000); break;
    case OP_GET_ERROR: st = coll_comm_get_error(comm); break;
    case OP_DESTROY: st = coll_comm_destroy(comm); break;
    case OP_ABORT: st = coll_comm_abort(comm); break;
    }
    *touched = out != -7 || req != NULL || newcomm != SENTINEL_COMM;
    return st;
}

START_TEST(test_null_comm)
{
    int touched = 0;
    CK_EXPECT(call_op(_i, NULL, &touched), COLL_ERR_INVALID_COMM, NULL, NULL, op_names[_i],
              "NULL");
    ck_assert_msg(!touched, "%s wrote an output although it failed", op_names[_i]);
}
END_TEST

/* How a communicator ends before it is used again. */
static const struct {
    const char *name;
    int abort;
    const char *word; /* the message says so */
} enders[] = {
    {"destroy", 0, "destroyed"},
    {"abort", 1, "aborted"},
};

static int rank_ended_comm(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const int *row = arg;
    coll_comm_t world = harness_init(rank, nranks, id), comm;

    RANK_OK(coll_comm_split(world, 0, rank, &comm));
    if (enders[*row].abort) {
        /* Both ranks must be done creating comm (its init exchanges the
         * cost model) before either aborts it: a peer's abort may overtake
         * our last message to it, which fails the job, not this test.
         * The barrier on world says so without touching comm. */
        RANK_OK(coll_barrier(world));
        RANK_OK(coll_comm_abort(comm));
    } else {
        exchange_check(comm, rank, nranks, TAG);
        RANK_OK(coll_comm_destroy(comm));
    }
    /* Every call, destroy and abort again included, fails the same way. */
    for (int op = 0; op < OP_COUNT; op++) {
        int touched = 0;
        RANK_EXPECT(call_op(op, comm, &touched), COLL_ERR_INVALID_COMM, comm, NULL,
                    op_names[op], enders[*row].word);
        RANK_CHECK(!touched, "%s wrote an output although it failed", op_names[op]);
        RANK_CHECK(coll_get_last_error(NULL)[0] != '\0', "%s: no thread error message",
                   op_names[op]);
    }
    RANK_OK(coll_comm_destroy(world));
    return 0;
}

START_TEST(test_ended_comm)
{
    int row = _i;
    ck_assert_int_eq(harness_run(2, rank_ended_comm, &row, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== point-to-point arguments ================================================= */

#define PEER_OTHER (-1000) /* the other rank of the 2-rank job */
#define PEER_NRANKS (-1001)

static const struct {
    const char *name;
    int null_buf;
    size_t count;
    coll_datatype_t dt;
    int peer;
    int tag;
    const char *word, *word2;
} bad_p2p[] = {
    {"NULL buffer", 1, 5, COLL_INT32, PEER_OTHER, TAG, "NULL", "count"},
    {"count SIZE_MAX", 0, SIZE_MAX, COLL_INT32, PEER_OTHER, TAG, "too large", NULL},
    {"count (size_t)-4", 0, (size_t)-4, COLL_INT8, PEER_OTHER, TAG, "too large", NULL},
    {"count 2^62", 0, (size_t)1 << 62, COLL_INT32, PEER_OTHER, TAG, "too large", NULL},
    {"count 2^62 int8", 0, (size_t)1 << 62, COLL_INT8, PEER_OTHER, TAG, "too large", NULL},
    {"peer -1", 0, 1, COLL_INT32, -1, TAG, "out of range", "0..1"},
    {"peer nranks", 0, 1, COLL_INT32, PEER_NRANKS, TAG, "out of range", "0..1"},
    {"peer INT_MAX", 0, 1, COLL_INT32, INT_MAX, TAG, "out of range", "0..1"},
    {"peer INT_MIN", 0, 1, COLL_INT32, INT_MIN, TAG, "out of range", "0..1"},
    {"tag -1", 0, 1, COLL_INT32, PEER_OTHER, -1, "tag", "negative"},
    {"tag INT_MIN", 0, 1, COLL_INT32, PEER_OTHER, INT_MIN, "tag", "negative"},
    {"datatype COLL_NUM_DATATYPES", 0, 1, (coll_datatype_t)COLL_NUM_DATATYPES, PEER_OTHER,
     TAG, "datatype", NULL},
    {"datatype -1", 0, 1, (coll_datatype_t)-1, PEER_OTHER, TAG, "datatype", NULL},
};

#define P2P_OPS 4 /* send, recv, isend, irecv: the first four of enum comm_op */

static coll_status_t p2p_call(int op, void *buf, size_t count, coll_datatype_t dt, int peer,
                              int tag, coll_comm_t comm, coll_request_t *req)
{
    switch (op) {
    case OP_SEND: return coll_send(buf, count, dt, peer, tag, comm);
    case OP_RECV: return coll_recv(buf, count, dt, peer, tag, comm);
    case OP_ISEND: return coll_isend(buf, count, dt, peer, tag, comm, req);
    default: return coll_irecv(buf, count, dt, peer, tag, comm, req);
    }
}

/* One bad call per rank, then a correct exchange on the same tag: the bad
 * call posted nothing that a later receive could match. */
static int rank_bad_p2p(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int row = *(const int *)arg / P2P_OPS, op = *(const int *)arg % P2P_OPS;
    int32_t buf[4] = {-5, -5, -5, -5};
    coll_request_t req = NULL;
    char pfx[32];
    coll_comm_t comm = harness_init(rank, nranks, id);
    int peer = bad_p2p[row].peer == PEER_OTHER    ? 1 - rank
               : bad_p2p[row].peer == PEER_NRANKS ? nranks
                                                  : bad_p2p[row].peer;

    comm_prefix(rank, pfx, sizeof(pfx));
    RANK_EXPECT(p2p_call(op, bad_p2p[row].null_buf ? NULL : buf, bad_p2p[row].count,
                         bad_p2p[row].dt, peer, bad_p2p[row].tag, comm, &req),
                COLL_ERR_INVALID_ARG, comm, pfx, op_names[op], bad_p2p[row].word,
                bad_p2p[row].word2);
    RANK_CHECK(req == NULL, "%s (%s) set the request although it failed", op_names[op],
               bad_p2p[row].name);
    RANK_CHECK(buf[0] == -5, "%s (%s) wrote the buffer", op_names[op], bad_p2p[row].name);
    RANK_CHECK(coll_comm_get_error(comm) == COLL_OK, "a bad argument failed the communicator");
    exchange_check(comm, rank, nranks, TAG);
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_bad_p2p)
{
    int row = _i;
    ck_assert_int_eq(harness_run(2, rank_bad_p2p, &row, JOB_TIMEOUT_S), 0);
}
END_TEST

/* NULL request pointer: the error belongs to the communicator, so its last
 * error must say so (and not still hold the previous error's text). */
static int rank_null_request(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int op = *(const int *)arg ? OP_IRECV : OP_ISEND;
    int32_t buf = 0;
    coll_request_t req = NULL;
    char pfx[32];
    coll_comm_t comm = harness_init(rank, nranks, id);

    comm_prefix(rank, pfx, sizeof(pfx));
    /* An earlier, different error on the same communicator. */
    RANK_EXPECT(p2p_call(op, &buf, 1, COLL_INT32, 0, -1, comm, &req), COLL_ERR_INVALID_ARG,
                comm, pfx, "negative");
    RANK_EXPECT(p2p_call(op, &buf, 1, COLL_INT32, 0, TAG, comm, NULL), COLL_ERR_INVALID_ARG,
                comm, NULL, op_names[op], "request");
    exchange_check(comm, rank, nranks, TAG);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_null_request)
{
    int which = _i;
    ck_assert_int_eq(harness_run(1, rank_null_request, &which, JOB_TIMEOUT_S), 0);
}
END_TEST

/* coll_comm_rank / coll_comm_size with a NULL output. */
static int rank_null_output(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int size_query = *(const int *)arg, value = -1;
    char pfx[32];
    coll_comm_t comm = harness_init(rank, nranks, id);
    const char *fn = size_query ? "coll_comm_size" : "coll_comm_rank";

    comm_prefix(rank, pfx, sizeof(pfx));
    RANK_EXPECT(coll_comm_set_timeout(comm, -1), COLL_ERR_INVALID_ARG, comm, pfx, "positive");
    RANK_EXPECT(size_query ? coll_comm_size(comm, NULL) : coll_comm_rank(comm, NULL),
                COLL_ERR_INVALID_ARG, comm, NULL, fn, "NULL");
    RANK_OK(size_query ? coll_comm_size(comm, &value) : coll_comm_rank(comm, &value));
    RANK_CHECK(value == (size_query ? nranks : rank), "%s gave %d", fn, value);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_null_output)
{
    int which = _i;
    ck_assert_int_eq(harness_run(1, rank_null_output, &which, JOB_TIMEOUT_S), 0);
}
END_TEST

/* A zero-byte message with a NULL buffer is a real message: it is matched
 * by exactly one receive, in order with the messages around it. */
static int rank_zero_bytes(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    int other = 1 - rank;
    int32_t value = 100 + rank, got = -1;
    coll_request_t reqs[4];
    (void)arg;

    /* Blocking, rank 0 to rank 1: an empty message, then a value. */
    if (rank == 0) {
        RANK_OK(coll_send(NULL, 0, COLL_INT32, other, TAG, comm));
        RANK_OK(coll_send(&value, 1, COLL_INT32, other, TAG, comm));
    } else {
        RANK_OK(coll_recv(NULL, 0, COLL_INT32, other, TAG, comm));
        RANK_OK(coll_recv(&got, 1, COLL_INT32, other, TAG, comm));
        RANK_CHECK(got == 100, "after the empty message got %d, expected 100", got);
    }
    /* Non-blocking, both ways and to oneself, with another datatype. */
    RANK_OK(coll_irecv(NULL, 0, COLL_FLOAT64, other, TAG, comm, &reqs[0]));
    RANK_OK(coll_isend(NULL, 0, COLL_FLOAT64, other, TAG, comm, &reqs[1]));
    RANK_OK(coll_irecv(NULL, 0, COLL_UINT8, rank, TAG, comm, &reqs[2]));
    RANK_OK(coll_isend(NULL, 0, COLL_UINT8, rank, TAG, comm, &reqs[3]));
    RANK_OK(coll_waitall(4, reqs));
    for (int i = 0; i < 4; i++)
        RANK_CHECK(reqs[i] == NULL, "request %d not cleared by coll_waitall", i);
    got = -1;
    RANK_OK(coll_sendrecv(&value, 1, COLL_INT32, other, TAG, &got, 1, COLL_INT32, other, TAG,
                          comm));
    RANK_CHECK(got == 100 + other, "after the empty messages got %d, expected %d", got,
               100 + other);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_zero_bytes)
{
    ck_assert_int_eq(harness_run(2, rank_zero_bytes, NULL, JOB_TIMEOUT_S), 0);
}
END_TEST

/* coll_wait / coll_test / coll_waitall with bad request arguments: these
 * take no communicator, so the message is the thread's. */
START_TEST(test_request_args)
{
    coll_request_t none = NULL, reqs[2] = {NULL, NULL};
    int done = -1;

    ck_assert_int_eq(coll_wait(&none), COLL_OK);
    CK_EXPECT(coll_test(NULL, &done), COLL_ERR_INVALID_ARG, NULL, NULL, "coll_test", "NULL");
    ck_assert_int_eq(done, -1);
    CK_EXPECT(coll_test(&none, NULL), COLL_ERR_INVALID_ARG, NULL, NULL, "coll_test", "done");
    ck_assert_int_eq(coll_test(&none, &done), COLL_OK);
    ck_assert_int_eq(done, 1);
    CK_EXPECT(coll_waitall(-1, reqs), COLL_ERR_INVALID_ARG, NULL, NULL, "coll_waitall");
    CK_EXPECT(coll_waitall(2, NULL), COLL_ERR_INVALID_ARG, NULL, NULL, "coll_waitall");
    ck_assert_int_eq(coll_waitall(2, reqs), COLL_OK);
}
END_TEST

/* Kept apart so that its message check does not hide the cases above. */
START_TEST(test_wait_null)
{
    CK_EXPECT(coll_wait(NULL), COLL_ERR_INVALID_ARG, NULL, NULL, "coll_wait", "NULL");
}
END_TEST

/* A pending request survives a coll_test without `done`. */
static int rank_pending_request(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    coll_request_t req = NULL;
    int32_t in = -1, out = 77;
    int done = -1;
    (void)arg;

    RANK_OK(coll_irecv(&in, 1, COLL_INT32, rank, TAG, comm, &req));
    RANK_EXPECT(coll_test(&req, NULL), COLL_ERR_INVALID_ARG, NULL, NULL, "coll_test", "done");
    RANK_CHECK(req != NULL, "a failed coll_test freed the request");
    RANK_OK(coll_test(&req, &done));
    RANK_CHECK(done == 0 && req != NULL, "nothing was sent, yet coll_test said done = %d",
               done);
    RANK_OK(coll_send(&out, 1, COLL_INT32, rank, TAG, comm));
    RANK_OK(coll_wait(&req));
    RANK_CHECK(req == NULL && in == 77, "got %d from myself (request %p)", in, (void *)req);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_pending_request)
{
    ck_assert_int_eq(harness_run(1, rank_pending_request, NULL, JOB_TIMEOUT_S), 0);
}
END_TEST

static const int64_t bad_timeouts[] = {0, -1, -1000, INT64_MIN};

static int rank_set_timeout(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int64_t ms = *(const int64_t *)arg;
    char pfx[32];
    coll_comm_t comm = harness_init(rank, nranks, id);

    comm_prefix(rank, pfx, sizeof(pfx));
    RANK_EXPECT(coll_comm_set_timeout(comm, ms), COLL_ERR_INVALID_ARG, comm, pfx,
                "coll_comm_set_timeout", "positive");
    RANK_CHECK(coll_comm_get_error(comm) == COLL_OK, "a bad timeout failed the communicator");
    RANK_OK(coll_comm_set_timeout(comm, 60000));
    exchange_check(comm, rank, nranks, TAG);
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_set_timeout)
{
    int64_t ms = bad_timeouts[_i];
    ck_assert_int_eq(harness_run(2, rank_set_timeout, &ms, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== receive size mismatch ==================================================== */

/* The receiver (rank 0) names a count other than the sender's: it gets
 * COLL_ERR_SIZE_MISMATCH naming both sizes in bytes and the peer; the
 * sender succeeds; the next message on the same tag arrives intact. Small
 * messages go eagerly, 1 MiB and more by rendezvous (the eager limits
 * between ranks of one host are set to 64K below). "unexpected":
 * the message (or its announcement) has arrived before the receive is
 * posted; "posted": the receive was first. */
#define MIB_INT32 (262144) /* int32 elements in 1 MiB */

static const struct {
    int nranks; /* 2: rank 1 sends over TCP; 1: rank 0 sends to itself */
    size_t send_count, recv_count;
    int unexpected;
} mismatches[] = {
    {2, 10, 20, 1},
    {2, 10, 20, 0},
    {2, 20, 10, 1},
    {2, 20, 10, 0},
    {2, MIB_INT32, 2 * MIB_INT32, 1},
    {2, MIB_INT32, 2 * MIB_INT32, 0},
    {2, 2 * MIB_INT32, MIB_INT32, 1},
    {2, 2 * MIB_INT32, MIB_INT32, 0},
    {2, 10, MIB_INT32, 1},
    {2, MIB_INT32, 10, 0},
    {2, 0, 1, 1},
    {1, 10, 20, 1},
    {1, 10, 20, 0},
    {1, MIB_INT32, 2 * MIB_INT32, 1},
    {1, 2 * MIB_INT32, MIB_INT32, 0},
};

static int32_t pattern(size_t i, int round)
{
    return (int32_t)((uint32_t)(i * 2654435761u) ^ ((uint32_t)round * 0x5bd1e995u));
}

static int rank_mismatch(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int row = *(const int *)arg;
    size_t scount = mismatches[row].send_count, rcount = mismatches[row].recv_count;
    size_t n = scount > rcount ? scount : rcount;
    int sender = nranks == 1 || rank == 1, receiver = rank == 0;
    int from = nranks - 1, to = 0; /* the sender's and the receiver's rank */
    int32_t *sbuf = malloc(n * sizeof(int32_t)), *rbuf = malloc(n * sizeof(int32_t));
    coll_request_t sreq = NULL, rreq = NULL;
    coll_status_t rst = COLL_OK;
    char pfx[32], peer[32];
    coll_comm_t comm;

    setenv("COLL_TCP_EAGER_LIMIT_LOCAL", "64K", 1);
    setenv("COLL_TCP_EAGER_LIMIT_CROWDED", "64K", 1);
    comm = harness_init(rank, nranks, id);
    RANK_CHECK(sbuf && rbuf, "out of memory");
    for (size_t i = 0; i < n; i++)
        sbuf[i] = pattern(i, 1);
    if (mismatches[row].unexpected) {
        if (sender)
            RANK_OK(coll_isend(sbuf, scount, COLL_INT32, to, TAG, comm, &sreq));
        /* The sender's later traffic arrives after its message. */
        RANK_OK(coll_barrier(comm));
        if (receiver)
            rst = coll_recv(rbuf, rcount, COLL_INT32, from, TAG, comm);
    } else {
        if (receiver)
            RANK_OK(coll_irecv(rbuf, rcount, COLL_INT32, from, TAG, comm, &rreq));
        RANK_OK(coll_barrier(comm));
        if (sender)
            RANK_OK(coll_isend(sbuf, scount, COLL_INT32, to, TAG, comm, &sreq));
        if (receiver)
            rst = coll_wait(&rreq);
    }
    if (sender)
        RANK_OK(coll_wait(&sreq)); /* the message was taken, if not used */
    if (receiver) {
        comm_prefix(rank, pfx, sizeof(pfx));
        snprintf(peer, sizeof(peer), "rank %d", from);
        RANK_EXPECT(rst, COLL_ERR_SIZE_MISMATCH, comm, pfx, peer);
        RANK_CHECK(has_number(coll_get_last_error(comm), scount * 4) &&
                   has_number(coll_get_last_error(comm), rcount * 4),
                   "message '%s' does not name both sizes, %zu and %zu bytes",
                   coll_get_last_error(comm), scount * 4, rcount * 4);
        RANK_CHECK(coll_comm_get_error(comm) == COLL_OK, "the mismatch failed the communicator");
    }

    /* The same tag again, with the right size, and a fresh pattern. */
    for (size_t i = 0; i < n; i++) {
        sbuf[i] = pattern(i, 2);
        rbuf[i] = -1;
    }
    if (receiver)
        RANK_OK(coll_irecv(rbuf, scount, COLL_INT32, from, TAG, comm, &rreq));
    if (sender)
        RANK_OK(coll_isend(sbuf, scount, COLL_INT32, to, TAG, comm, &sreq));
    RANK_OK(coll_wait(&rreq));
    RANK_OK(coll_wait(&sreq));
    for (size_t i = 0; receiver && i < scount; i++)
        RANK_CHECK(rbuf[i] == pattern(i, 2), "after the mismatch element %zu is %d, expected %d",
                   i, rbuf[i], pattern(i, 2));
    exchange_check(comm, rank, nranks, TAG + 1);
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    free(sbuf);
    free(rbuf);
    return 0;
}

START_TEST(test_size_mismatch)
{
    int row = _i;
    ck_assert_int_eq(harness_run(mismatches[row].nranks, rank_mismatch, &row, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== init ======================================================================== */

static const struct {
    int nranks, rank;
    const char *word;
} bad_init_args[] = {
    {0, 0, "nranks 0"},
    {-1, 0, "nranks -1"},
    {INT_MIN, 0, "nranks"},
    {INT_MAX, 0, "nranks"},
    {2, -1, "rank -1"},
    {2, 2, "rank 2"},
    {2, INT_MAX, "rank"},
    {2, INT_MIN, "rank"},
    {1, 1, "rank 1"},
};

/* Bad arguments fail before any network activity: the same id still
 * forms the real job afterwards. */
static int rank_bad_init(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int row = *(const int *)arg;
    coll_comm_t comm = SENTINEL_COMM;

    RANK_EXPECT(coll_comm_init_rank(&comm, bad_init_args[row].nranks, *id,
                                    bad_init_args[row].rank),
                COLL_ERR_INVALID_ARG, NULL, NULL, bad_init_args[row].word, "out of range");
    RANK_CHECK(comm == SENTINEL_COMM, "a failed init wrote the communicator");
    comm = harness_init(rank, nranks, id);
    exchange_check(comm, rank, nranks, TAG);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_bad_init_args)
{
    int row = _i;
    ck_assert_int_eq(harness_run(2, rank_bad_init, &row, JOB_TIMEOUT_S), 0);
}
END_TEST

static const size_t bad_config_sizes[] = {0, sizeof(coll_config_t) - 1,
                                          sizeof(coll_config_t) + 8, SIZE_MAX};

static int rank_bad_config(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_config_t config = COLL_CONFIG_INITIALIZER;
    coll_comm_t comm = SENTINEL_COMM;

    config.size = *(const size_t *)arg;
    config.timeout_ms = 60000;
    RANK_EXPECT(coll_comm_init_rank_config(&comm, nranks, id, rank, &config),
                COLL_ERR_INVALID_ARG, NULL, NULL, "config.size");
    RANK_CHECK(comm == SENTINEL_COMM, "a failed init wrote the communicator");
    /* NULL handle or id. */
    RANK_EXPECT(coll_comm_init_rank_config(NULL, nranks, id, rank, NULL), COLL_ERR_INVALID_ARG,
                NULL, NULL, "NULL");
    RANK_EXPECT(coll_comm_init_rank_config(&comm, nranks, NULL, rank, NULL),
                COLL_ERR_INVALID_ARG, NULL, NULL, "NULL");
    RANK_CHECK(comm == SENTINEL_COMM, "a failed init wrote the communicator");
    config.size = sizeof(config);
    RANK_OK(coll_comm_init_rank_config(&comm, nranks, id, rank, &config));
    exchange_check(comm, rank, nranks, TAG);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_bad_config)
{
    size_t size = bad_config_sizes[_i];
    ck_assert_int_eq(harness_run(2, rank_bad_config, &size, JOB_TIMEOUT_S), 0);
}
END_TEST

/* A malformed COLL_* variable fails init with a message naming it. Each
 * rank is its own process, so setenv there touches nobody else. */
static const struct {
    const char *var, *value;
} bad_env[] = {
    {"COLL_TIMEOUT", "abc"},
    {"COLL_TIMEOUT", "10 parsecs"},
    {"COLL_TIMEOUT", "-5s"},
    {"COLL_TCP_EAGER_LIMIT", "12Q"},
    {"COLL_TCP_EAGER_LIMIT", "lots"},
    {"COLL_HANDSHAKE_TIMEOUT", "1x"},
    {"COLL_POLL_SPIN", "fast"},
    {"COLL_NSOCKS_LOCAL", "17"},
    {"COLL_TCP_CHUNK_LOCAL", "100"},
    {"COLL_INLINE_POLLS", "-1"},
    {"COLL_INLINE_POLLS", "1000001"},
    {"COLL_TCP_POLL_DIRECT", "17"},
    {"COLL_TCP_POLL_DIRECT", "-1"},
    {"COLL_TCP_CONGESTION_LOCAL", "nosuchcc"},
    {"COLL_TCP_CONGESTION_LOCAL", "averyveryverylongname"},
};

static int rank_bad_env(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int row = *(const int *)arg;
    coll_comm_t comm = SENTINEL_COMM;

    RANK_CHECK(setenv(bad_env[row].var, bad_env[row].value, 1) == 0, "setenv failed");
    RANK_EXPECT(coll_comm_init_rank(&comm, nranks, *id, rank), COLL_ERR_INVALID_ARG, NULL, NULL,
                bad_env[row].var, bad_env[row].value);
    RANK_CHECK(comm == SENTINEL_COMM, "a failed init wrote the communicator");
    /* Values are read at init: with the variable gone, the job forms. */
    RANK_CHECK(unsetenv(bad_env[row].var) == 0, "unsetenv failed");
    comm = harness_init(rank, nranks, id);
    exchange_check(comm, rank, nranks, TAG);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_bad_env)
{
    int row = _i;
    ck_assert_int_eq(harness_run(2, rank_bad_env, &row, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== unique ids ================================================================== */

/* Deterministic "random" bytes: a failure can be reproduced. */
static void fill_garbage(coll_unique_id_t *id, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < COLL_UNIQUE_ID_BYTES; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        id->internal[i] = (char)(x >> 24);
    }
}

START_TEST(test_garbage_id)
{
    coll_unique_id_t id;
    coll_comm_t comm = SENTINEL_COMM;

    if (_i == 0)
        memset(&id, 0, sizeof(id));
    else if (_i == 1)
        memset(&id, 0xff, sizeof(id));
    else
        fill_garbage(&id, 0x9e3779b97f4a7c15ull * (uint64_t)_i);
    CK_EXPECT(coll_comm_init_rank(&comm, 2, id, 0), COLL_ERR_INVALID_ARG, NULL, NULL,
              "unique id");
    ck_assert_ptr_eq(comm, SENTINEL_COMM);
}
END_TEST

enum { STR_NULL, STR_EMPTY, STR_SHORT, STR_LONG, STR_NONHEX_MID, STR_NONHEX_LAST,
       STR_SPACE, STR_ZEROS, STR_GARBAGE, STR_CASES };

static const char *const str_words[STR_CASES] = {
    [STR_NULL] = "NULL",          [STR_EMPTY] = "characters",
    [STR_SHORT] = "characters",   [STR_LONG] = "characters",
    [STR_NONHEX_MID] = "non-hex", [STR_NONHEX_LAST] = "non-hex",
    [STR_SPACE] = "non-hex",      [STR_ZEROS] = "unique id",
    [STR_GARBAGE] = "unique id",
};

START_TEST(test_id_from_bad_str)
{
    char text[COLL_UNIQUE_ID_STR_LEN + 8];
    coll_unique_id_t id, before;
    const char *str = text;

    /* Start from the text of a real id, then spoil it. */
    ck_assert_int_eq(coll_get_unique_id(&id), COLL_OK);
    ck_assert_int_eq(coll_unique_id_to_str(&id, text), COLL_OK);
    switch (_i) {
    case STR_NULL: str = NULL; break;
    case STR_EMPTY: text[0] = '\0'; break;
    case STR_SHORT: text[2 * COLL_UNIQUE_ID_BYTES - 1] = '\0'; break;
    case STR_LONG: strcat(text, "0"); break;
    case STR_NONHEX_MID: text[10] = 'g'; break;
    case STR_NONHEX_LAST: text[2 * COLL_UNIQUE_ID_BYTES - 1] = '-'; break;
    case STR_SPACE: text[0] = ' '; break;
    case STR_ZEROS: memset(text, '0', 2 * COLL_UNIQUE_ID_BYTES); break;
    case STR_GARBAGE: {
        coll_unique_id_t g;
        fill_garbage(&g, 12345);
        ck_assert_int_eq(coll_unique_id_to_str(&g, text), COLL_OK);
        break;
    }
    }
    before = id;
    CK_EXPECT(coll_unique_id_from_str(str, &id), COLL_ERR_INVALID_ARG, NULL, NULL,
              str_words[_i]);
    ck_assert_mem_eq(&id, &before, sizeof(id));
}
END_TEST

START_TEST(test_id_str_round_trip)
{
    coll_unique_id_t id, back;
    char text[COLL_UNIQUE_ID_STR_LEN], upper[COLL_UNIQUE_ID_STR_LEN];

    CK_EXPECT(coll_get_unique_id(NULL), COLL_ERR_INVALID_ARG, NULL, NULL, "NULL");
    ck_assert_int_eq(coll_get_unique_id(&id), COLL_OK);
    CK_EXPECT(coll_unique_id_to_str(NULL, text), COLL_ERR_INVALID_ARG, NULL, NULL, "NULL");
    CK_EXPECT(coll_unique_id_to_str(&id, NULL), COLL_ERR_INVALID_ARG, NULL, NULL, "NULL");
    memset(text, 'x', sizeof(text));
    ck_assert_int_eq(coll_unique_id_to_str(&id, text), COLL_OK);
    ck_assert_int_eq((int)strlen(text), 2 * COLL_UNIQUE_ID_BYTES);
    ck_assert_int_eq((int)strspn(text, "0123456789abcdef"), 2 * COLL_UNIQUE_ID_BYTES);
    CK_EXPECT(coll_unique_id_from_str(text, NULL), COLL_ERR_INVALID_ARG, NULL, NULL, "NULL");
    ck_assert_int_eq(coll_unique_id_from_str(text, &back), COLL_OK);
    ck_assert_mem_eq(&back, &id, sizeof(id));
    /* Hex digits in either case. */
    for (int i = 0; i <= 2 * COLL_UNIQUE_ID_BYTES; i++)
        upper[i] = (char)(text[i] >= 'a' && text[i] <= 'f' ? text[i] - 'a' + 'A' : text[i]);
    memset(&back, 0, sizeof(back));
    ck_assert_int_eq(coll_unique_id_from_str(upper, &back), COLL_OK);
    ck_assert_mem_eq(&back, &id, sizeof(id));
}
END_TEST

/* The text form carries a working id: ranks that got it as text form the job. */
static int rank_from_text(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    char text[COLL_UNIQUE_ID_STR_LEN];
    coll_unique_id_t parsed;
    coll_comm_t comm = NULL;
    (void)arg;

    RANK_OK(coll_unique_id_to_str(id, text));
    RANK_OK(coll_unique_id_from_str(text, &parsed));
    RANK_OK(coll_comm_init_rank(&comm, nranks, parsed, rank));
    exchange_check(comm, rank, nranks, TAG);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_id_from_text_job)
{
    ck_assert_int_eq(harness_run(3, rank_from_text, NULL, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== suite ========================================================================== */

static TCase *tcase(Suite *s, const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, CASE_TIMEOUT_S);
    suite_add_tcase(s, tc);
    return tc;
}

static Suite *badinput_suite(void)
{
    Suite *s = suite_create("badinput");
    TCase *tc;

    tc = tcase(s, "library");
    tcase_add_loop_test(tc, test_status_str_names, 0, ARRAY_LEN(status_names));
    tcase_add_test(tc, test_status_str_distinct);
    tcase_add_test(tc, test_version);
    tcase_add_loop_test(tc, test_datatype_size, 0, ARRAY_LEN(datatype_sizes));

    tc = tcase(s, "communicator handle");
    tcase_add_loop_test(tc, test_null_comm, 0, OP_COUNT);
    tcase_add_loop_test(tc, test_ended_comm, 0, ARRAY_LEN(enders));
    tcase_add_loop_test(tc, test_null_output, 0, 2);
    tcase_add_loop_test(tc, test_set_timeout, 0, ARRAY_LEN(bad_timeouts));

    tc = tcase(s, "point-to-point arguments");
    tcase_add_loop_test(tc, test_bad_p2p, 0, ARRAY_LEN(bad_p2p) * P2P_OPS);
    tcase_add_loop_test(tc, test_null_request, 0, 2);
    tcase_add_test(tc, test_zero_bytes);
    tcase_add_test(tc, test_request_args);
    tcase_add_test(tc, test_wait_null);
    tcase_add_test(tc, test_pending_request);

    tc = tcase(s, "size mismatch");
    tcase_add_loop_test(tc, test_size_mismatch, 0, ARRAY_LEN(mismatches));

    tc = tcase(s, "init");
    tcase_add_loop_test(tc, test_bad_init_args, 0, ARRAY_LEN(bad_init_args));
    tcase_add_loop_test(tc, test_bad_config, 0, ARRAY_LEN(bad_config_sizes));
    tcase_add_loop_test(tc, test_bad_env, 0, ARRAY_LEN(bad_env));

    tc = tcase(s, "unique id");
    tcase_add_loop_test(tc, test_garbage_id, 0, 6);
    tcase_add_loop_test(tc, test_id_from_bad_str, 0, STR_CASES);
    tcase_add_test(tc, test_id_str_round_trip);
    tcase_add_test(tc, test_id_from_text_job);
    return s;
}

int main(void)
{
    return harness_main(badinput_suite());
}
