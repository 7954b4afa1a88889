/*
 * test_exchange.c: the all-gather, all-to-all and all-to-allv algorithms
 * (algorithms/allgather_*.c, alltoall_*.c, alltoallv_pairwise.c) in real
 * multi-process jobs:
 *   - each algorithm forced through COLL_ALGO, and the cost model's own
 *     choice, at 1, 2, 3, 4, 5, 7 and 8 ranks (COLL_TEST_SHORT: 2, 3, 4
 *     and 8; 2, 3 and 4 at level 2, the sanitizers');
 *   - counts 0, 1, 2, 7, 13 and 1000, elements of 1, 2, 4 and 8 bytes, in
 *     place and out of place, and a few calls of 2 MiB in all; under the
 *     cost model, totals from 1 KiB to 4 MiB, across its changes of choice;
 *   - every byte checked against a pattern of (source rank, destination
 *     rank, offset, call); guard bytes around the buffers, and the gaps
 *     that all-to-allv displacements leave, unchanged; send buffers
 *     unchanged;
 *   - non-blocking calls, six in flight on one communicator mixed with
 *     user point-to-point messages, completed by coll_waitall or by
 *     coll_test in reverse order;
 *   - argument errors (NULL all-to-allv arrays, partially overlapping
 *     buffers) and the registry entries and cost formulas.
 * Forking ranks is the expensive part on a small machine, so one job runs
 * a whole sweep on one communicator; a rank stops at the first wrong byte
 * and names the call.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms.h"
#include "harness.h"

#define JOB_TIMEOUT_S 60
#define CASE_TIMEOUT_S 90
#define GUARD 64            /* bytes before and after every buffer */
#define BIG_BYTES (2u << 20) /* the large calls: 2 MiB in all */

#define ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const size_t counts[] = {0, 1, 2, 7, 13, 1000};
static const size_t esizes[] = {1, 2, 4, 8};

/* What a job forces, one row per job; every algorithm appears, and the
 * last row lets the cost model choose. */
static const char *const algo_rows[] = {
    "allgather:ring,alltoall:pairwise,alltoallv:pairwise",
    "allgather:recursive_doubling,alltoall:bruck",
    "allgather:bruck,alltoall:linear",
    "allgather:linear",
    /* mailboxes: blocks over 16 KiB go to the cost model's choice */
    "allgather:oneshot,alltoall:oneshot",
    "",
};

/* ---- one call: buffers, expected bytes ----------------------------------------- */

typedef enum { X_ALLGATHER, X_ALLTOALL, X_ALLTOALLV } xcoll_t;

static const char *const xcoll_names[] = {"allgather", "alltoall", "alltoallv"};

typedef struct xcall {
    xcoll_t coll;
    size_t count;      /* per block; alltoallv: the scale of the counts (0: all empty) */
    size_t es;
    int in_place;
    int null_bufs;     /* count 0: pass NULL buffers */
    unsigned salt;     /* differs per call */
    int rank, nranks;
    uint8_t *salloc, *ralloc; /* with GUARD bytes each side */
    size_t sbytes, rbytes;    /* without */
    uint8_t *send, *recv;
    size_t scounts[HARNESS_MAX_RANKS], sdispls[HARNESS_MAX_RANKS];
    size_t rcounts[HARNESS_MAX_RANKS], rdispls[HARNESS_MAX_RANKS];
} xcall_t;

/* Byte `off` of the block rank src sends to rank dst (dst 0 for
 * all-gather). Blocks of different sources differ in every byte: 37 a is
 * not 0 mod 256 for 0 < |a| < 256. */
static inline uint8_t pat(int src, int dst, size_t off, unsigned salt)
{
    uint32_t h = (uint32_t)off * 0x9e3779b1u;
    return (uint8_t)((h >> 24) + (uint32_t)src * 37u + (uint32_t)dst * 11u + salt);
}

/* Guard bytes, by position in the allocation. */
static inline uint8_t guard(size_t i)
{
    return (uint8_t)(i * 7 + 0xa5);
}

static coll_datatype_t dt_of(size_t es)
{
    switch (es) {
    case 1:
        return COLL_UINT8;
    case 2:
        return COLL_FLOAT16; /* opaque bytes: nothing is computed */
    case 4:
        return COLL_INT32;
    default:
        return COLL_FLOAT64;
    }
}

static void describe(const xcall_t *x, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s, %d ranks, rank %d, count %zu, %zu-byte elements, call %u",
             xcoll_names[x->coll], x->in_place ? "in place" : "out of place", x->nranks,
             x->rank, x->count, x->es, x->salt);
}

/* Elements rank i sends rank j in an all-to-allv of scale c: irregular,
 * a quarter of them empty, all empty for c = 0. */
static size_t vcount(int i, int j, size_t c)
{
    size_t k = (size_t)((i * 5 + j * 3 + 1) % 4);
    return c == 0 || k == 0 ? 0 : k * c + (size_t)((i + j) % 3);
}

/* Layouts with gaps: send blocks in reverse rank order, receive blocks in
 * rank order, gaps of 0, 1 or 2 elements in between and one in front. */
static void v_layout(xcall_t *x)
{
    int p = x->nranks, r = x->rank;
    size_t pos = 1;
    for (int j = p - 1; j >= 0; j--) {
        x->scounts[j] = vcount(r, j, x->count);
        x->sdispls[j] = pos;
        pos += x->scounts[j] + (size_t)(j % 3);
    }
    x->sbytes = (pos + 1) * x->es;
    pos = 1;
    for (int j = 0; j < p; j++) {
        x->rcounts[j] = vcount(j, r, x->count);
        x->rdispls[j] = pos;
        pos += x->rcounts[j] + (size_t)((j + 1) % 3);
    }
    x->rbytes = (pos + 1) * x->es;
}

/* Allocate, fill guards and the send data (in place: in recvbuf). */
static void xcall_prepare(xcall_t *x, int rank, int nranks)
{
    int p = nranks;
    size_t blk;

    x->rank = rank;
    x->nranks = nranks;
    blk = x->count * x->es;
    if (x->coll == X_ALLGATHER) {
        x->sbytes = blk;
        x->rbytes = blk * (size_t)p;
    } else if (x->coll == X_ALLTOALL) {
        x->sbytes = x->rbytes = blk * (size_t)p;
    } else {
        v_layout(x);
    }
    x->salloc = malloc(x->sbytes + 2 * GUARD);
    x->ralloc = malloc(x->rbytes + 2 * GUARD);
    RANK_CHECK(x->salloc && x->ralloc, "out of memory");
    for (size_t i = 0; i < x->sbytes + 2 * GUARD; i++)
        x->salloc[i] = guard(i);
    for (size_t i = 0; i < x->rbytes + 2 * GUARD; i++)
        x->ralloc[i] = guard(i);
    x->recv = x->ralloc + GUARD;
    x->send = x->salloc + GUARD;
    if (x->in_place)
        x->send = x->coll == X_ALLGATHER ? x->recv + (size_t)rank * blk : x->recv;
    if (x->coll == X_ALLGATHER) {
        for (size_t o = 0; o < blk; o++)
            x->send[o] = pat(rank, 0, o, x->salt);
    } else if (x->coll == X_ALLTOALL) {
        for (int j = 0; j < p; j++)
            for (size_t o = 0; o < blk; o++)
                x->send[(size_t)j * blk + o] = pat(rank, j, o, x->salt);
    } else {
        for (int j = 0; j < p; j++)
            for (size_t o = 0; o < x->scounts[j] * x->es; o++)
                x->send[x->sdispls[j] * x->es + o] = pat(rank, j, o, x->salt);
    }
}

static void xcall_free(xcall_t *x)
{
    free(x->salloc);
    free(x->ralloc);
}

/* Start the call: blocking when req is NULL. */
static coll_status_t xcall_run(xcall_t *x, coll_comm_t comm, coll_request_t *req)
{
    coll_datatype_t dt = dt_of(x->es);
    const void *sb = x->null_bufs ? NULL : x->send;
    void *rb = x->null_bufs ? NULL : x->recv;

    switch (x->coll) {
    case X_ALLGATHER:
        return req ? coll_iallgather(sb, rb, x->count, dt, comm, req)
                   : coll_allgather(sb, rb, x->count, dt, comm);
    case X_ALLTOALL:
        return req ? coll_ialltoall(sb, rb, x->count, dt, comm, req)
                   : coll_alltoall(sb, rb, x->count, dt, comm);
    default:
        return req ? coll_ialltoallv(sb, x->scounts, x->sdispls, rb, x->rcounts, x->rdispls, dt,
                                     comm, req)
                   : coll_alltoallv(sb, x->scounts, x->sdispls, rb, x->rcounts, x->rdispls, dt,
                                    comm);
    }
}

/* Rank src's block for us (dst), or -1 if byte i of recvbuf is no block's:
 * then it must still be a guard byte. */
static int owner(const xcall_t *x, size_t i, size_t *off)
{
    size_t blk = x->count * x->es;
    if (x->coll != X_ALLTOALLV) {
        *off = i % blk;
        return (int)(i / blk);
    }
    for (int j = 0; j < x->nranks; j++) {
        size_t lo = x->rdispls[j] * x->es, n = x->rcounts[j] * x->es;
        if (i >= lo && i < lo + n) {
            *off = i - lo;
            return j;
        }
    }
    return -1;
}

static void xcall_verify(const xcall_t *x)
{
    char what[200];
    size_t rend = GUARD + x->rbytes, send_end = GUARD + x->sbytes;
    int dst = x->coll == X_ALLGATHER ? 0 : x->rank;

    describe(x, what, sizeof(what));
    for (size_t i = 0; i < GUARD; i++) {
        RANK_CHECK(x->ralloc[i] == guard(i), "%s: byte %zu before recvbuf overwritten", what,
                   GUARD - i);
        RANK_CHECK(x->ralloc[rend + i] == guard(rend + i), "%s: byte %zu after recvbuf "
                   "overwritten", what, i);
    }
    for (size_t i = 0; i < x->rbytes; i++) {
        size_t off = 0;
        int src = owner(x, i, &off);
        if (src < 0) {
            RANK_CHECK(x->recv[i] == guard(GUARD + i), "%s: gap byte %zu of recvbuf "
                       "overwritten", what, i);
            continue;
        }
        uint8_t want = pat(src, dst, off, x->salt);
        RANK_CHECK(x->recv[i] == want, "%s: recvbuf byte %zu (byte %zu from rank %d) is %u, "
                   "expected %u", what, i, off, src, x->recv[i], want);
    }
    if (x->in_place)
        return;
    /* the send buffer is the caller's: untouched, guards and gaps too */
    for (size_t i = 0; i < send_end + GUARD; i++) {
        size_t o = i - GUARD;
        uint8_t want = guard(i);
        if (i >= GUARD && i < send_end) {
            if (x->coll == X_ALLGATHER)
                want = pat(x->rank, 0, o, x->salt);
            else if (x->coll == X_ALLTOALL)
                want = pat(x->rank, (int)(o / (x->count * x->es)), o % (x->count * x->es),
                           x->salt);
            else
                for (int j = 0; j < x->nranks; j++)
                    if (o >= x->sdispls[j] * x->es && o < (x->sdispls[j] + x->scounts[j]) * x->es)
                        want = pat(x->rank, j, o - x->sdispls[j] * x->es, x->salt);
        }
        RANK_CHECK(x->salloc[i] == want, "%s: send allocation byte %zu changed", what, i);
    }
}

/* ---- the sweep a job runs --------------------------------------------------------- */

static unsigned next_salt;

static void one_blocking(coll_comm_t comm, xcall_t *x, int rank, int nranks)
{
    char what[200];
    x->salt = next_salt++;
    xcall_prepare(x, rank, nranks);
    coll_status_t st = xcall_run(x, comm, NULL);
    describe(x, what, sizeof(what));
    RANK_CHECK(st == COLL_OK, "%s: %s: %s", what, coll_status_str(st),
               coll_get_last_error(comm));
    xcall_verify(x);
    xcall_free(x);
}

/* Every count x element size x in place or not, for each collective. */
static void sweep_small(coll_comm_t comm, int rank, int nranks)
{
    for (int c = 0; c < ARRAY_LEN(counts); c++)
        for (int e = 0; e < ARRAY_LEN(esizes); e++)
            for (int coll = X_ALLGATHER; coll <= X_ALLTOALLV; coll++)
                for (int ip = 0; ip < (coll == X_ALLTOALLV ? 1 : 2); ip++) {
                    xcall_t x = {.coll = (xcoll_t)coll, .count = counts[c], .es = esizes[e],
                                 .in_place = ip};
                    x.null_bufs = counts[c] == 0 && esizes[e] == 1 && !ip;
                    one_blocking(comm, &x, rank, nranks);
                }
}

/* About BIG_BYTES in all per call. */
static void sweep_large(coll_comm_t comm, int rank, int nranks)
{
    static const struct {
        xcoll_t coll;
        size_t es;
        int in_place;
    } big[] = {
        {X_ALLGATHER, 8, 0}, {X_ALLGATHER, 4, 1}, {X_ALLTOALL, 4, 0},
        {X_ALLTOALL, 8, 1},  {X_ALLTOALLV, 2, 0},
    };
    for (int i = 0; i < ARRAY_LEN(big); i++) {
        xcall_t x = {.coll = big[i].coll, .es = big[i].es, .in_place = big[i].in_place};
        /* all-to-allv blocks average 1.5 times the scale */
        size_t per = big[i].coll == X_ALLTOALLV ? 3 * (size_t)nranks / 2 : (size_t)nranks;
        x.count = BIG_BYTES / big[i].es / per;
        one_blocking(comm, &x, rank, nranks);
    }
}

/* Under the cost model: totals from 1 KiB to 4 MiB, across the sizes at
 * which the choice changes; every rank must make the same choice. */
static void sweep_sizes(coll_comm_t comm, int rank, int nranks)
{
    for (size_t total = 1024; total <= (4u << 20); total *= 2)
        for (int coll = X_ALLGATHER; coll <= X_ALLTOALL; coll++) {
            xcall_t x = {.coll = (xcoll_t)coll, .es = 4, .count = total / 4 / (size_t)nranks};
            one_blocking(comm, &x, rank, nranks);
        }
}

/* Six collectives in flight with user messages between them; completed
 * all at once by coll_waitall, or one by one by coll_test, last first. */
static void nonblocking_round(coll_comm_t comm, int rank, int nranks, size_t count, size_t es,
                              int by_test)
{
    static const struct {
        xcoll_t coll;
        int in_place;
    } mix[] = {
        {X_ALLGATHER, 0}, {X_ALLTOALL, 1}, {X_ALLTOALLV, 0},
        {X_ALLGATHER, 1}, {X_ALLTOALL, 0}, {X_ALLTOALLV, 0},
    };
    enum { NCALLS = ARRAY_LEN(mix), USER_BIG = 100000 }; /* above the TCP eager limit */
    xcall_t x[NCALLS];
    coll_request_t reqs[NCALLS + 4];
    int nreq = 0, right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    int32_t small_out = rank * 1000 + 1, small_in = -1;
    uint8_t *big_out = malloc(USER_BIG), *big_in = calloc(1, USER_BIG);
    char what[200];

    RANK_CHECK(big_out && big_in, "out of memory");
    for (size_t i = 0; i < USER_BIG; i++)
        big_out[i] = pat(rank, left, i, 99);
    for (int i = 0; i < NCALLS; i++) {
        x[i] = (xcall_t){.coll = mix[i].coll, .count = count, .es = es,
                         .in_place = mix[i].in_place, .salt = next_salt++};
        xcall_prepare(&x[i], rank, nranks);
    }
    for (int i = 0; i < NCALLS; i++) {
        describe(&x[i], what, sizeof(what));
        coll_status_t st = xcall_run(&x[i], comm, &reqs[nreq++]);
        RANK_CHECK(st == COLL_OK, "starting %s: %s: %s", what, coll_status_str(st),
                   coll_get_last_error(comm));
        if (i == 1) { /* a small user message to the right */
            RANK_OK(coll_irecv(&small_in, 1, COLL_INT32, left, 11, comm, &reqs[nreq++]));
            RANK_OK(coll_isend(&small_out, 1, COLL_INT32, right, 11, comm, &reqs[nreq++]));
        } else if (i == 3) { /* a rendezvous-sized one to the left */
            RANK_OK(coll_irecv(big_in, USER_BIG, COLL_UINT8, right, 12, comm, &reqs[nreq++]));
            RANK_OK(coll_isend(big_out, USER_BIG, COLL_UINT8, left, 12, comm, &reqs[nreq++]));
        }
    }
    if (!by_test) {
        RANK_OK(coll_waitall(nreq, reqs));
    } else {
        for (int left_reqs = nreq; left_reqs > 0;) {
            for (int i = nreq - 1; i >= 0; i--) {
                int done = 0;
                if (!reqs[i])
                    continue;
                coll_status_t st = coll_test(&reqs[i], &done);
                RANK_CHECK(st == COLL_OK, "request %d: %s: %s", i, coll_status_str(st),
                           coll_get_last_error(comm));
                left_reqs -= done;
            }
        }
    }
    RANK_CHECK(small_in == left * 1000 + 1, "user message from rank %d: got %d", left,
               (int)small_in);
    for (size_t i = 0; i < USER_BIG; i++)
        RANK_CHECK(big_in[i] == pat(right, rank, i, 99), "user message from rank %d: byte %zu",
                   right, i);
    for (int i = 0; i < NCALLS; i++) {
        xcall_verify(&x[i]);
        xcall_free(&x[i]);
    }
    free(big_out);
    free(big_in);
}

static void set_algos(int row)
{
    setenv("COLL_TIMEOUT", "40s", 1); /* a hang fails with a description */
    if (algo_rows[row][0])
        setenv("COLL_ALGO", algo_rows[row], 1);
    else
        unsetenv("COLL_ALGO");
    if (strstr(algo_rows[row], "oneshot"))
        setenv("COLL_ALGO_FALLBACK", "silent", 1);
    else
        unsetenv("COLL_ALGO_FALLBACK");
}

static int rank_sweep(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int row = *(const int *)arg;
    set_algos(row);
    coll_comm_t comm = harness_init(rank, nranks, id);
    next_salt = 1;
    sweep_small(comm, rank, nranks);
    sweep_large(comm, rank, nranks);
    if (!algo_rows[row][0])
        sweep_sizes(comm, rank, nranks);
    nonblocking_round(comm, rank, nranks, 7, 4, 0);
    nonblocking_round(comm, rank, nranks, 1000, 2, 1);
    nonblocking_round(comm, rank, nranks, 10000, 8, 0); /* rendezvous-sized blocks */
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

/* _i: rank count x algorithm row. */
START_TEST(test_sweep)
{
    const int *rank_counts;
    harness_rank_counts(&rank_counts);
    int nranks = rank_counts[_i / ARRAY_LEN(algo_rows)], row = _i % ARRAY_LEN(algo_rows);
    double t0 = harness_now();
    ck_assert_msg(harness_run(nranks, rank_sweep, &row, JOB_TIMEOUT_S) == 0,
                  "%d ranks, COLL_ALGO='%s': a rank failed (see its message above)", nranks,
                  algo_rows[row]);
    fprintf(stderr, "exchange: %d ranks, COLL_ALGO='%s': %.2f s\n", nranks, algo_rows[row],
            harness_now() - t0);
}
END_TEST

/* ---- argument errors ------------------------------------------------------------------ */

static void expect_invalid(coll_comm_t comm, coll_status_t st, const char *call)
{
    RANK_CHECK(st == COLL_ERR_INVALID_ARG, "%s returned %s, expected COLL_ERR_INVALID_ARG",
               call, coll_status_str(st));
    RANK_CHECK(coll_get_last_error(comm)[0] != '\0', "%s left no message", call);
}

static int rank_errors(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    enum { COUNT = 4 };
    size_t cnt[HARNESS_MAX_RANKS], dsp[HARNESS_MAX_RANKS];
    int32_t buf[2 * COUNT * HARNESS_MAX_RANKS] = {0};
    coll_request_t req = NULL;
    coll_comm_t comm = harness_init(rank, nranks, id);
    (void)arg;

    for (int j = 0; j < nranks; j++) {
        cnt[j] = 1;
        dsp[j] = (size_t)j;
    }
    /* NULL count or displacement arrays */
    expect_invalid(comm, coll_alltoallv(buf, NULL, dsp, buf + 64, cnt, dsp, COLL_INT32, comm),
                   "alltoallv(sendcounts NULL)");
    expect_invalid(comm, coll_alltoallv(buf, cnt, NULL, buf + 64, cnt, dsp, COLL_INT32, comm),
                   "alltoallv(sdispls NULL)");
    expect_invalid(comm, coll_alltoallv(buf, cnt, dsp, buf + 64, NULL, dsp, COLL_INT32, comm),
                   "alltoallv(recvcounts NULL)");
    expect_invalid(comm, coll_ialltoallv(buf, cnt, dsp, buf + 64, cnt, NULL, COLL_INT32, comm,
                                         &req), "ialltoallv(rdispls NULL)");
    RANK_CHECK(req == NULL, "a failed ialltoallv set its request");
    /* partial overlaps: one element off the in-place form */
    expect_invalid(comm, coll_allgather(buf + (size_t)rank * COUNT + 1, buf, COUNT, COLL_INT32,
                                        comm), "allgather(sendbuf inside recvbuf)");
    expect_invalid(comm, coll_iallgather(buf, buf + 1, COUNT, COLL_INT32, comm, &req),
                   "iallgather(recvbuf overlapping sendbuf)");
    expect_invalid(comm, coll_alltoall(buf + 1, buf, COUNT, COLL_INT32, comm),
                   "alltoall(sendbuf = recvbuf + 1)");
    expect_invalid(comm, coll_ialltoall(buf, buf + COUNT, COUNT, COLL_INT32, comm, &req),
                   "ialltoall(recvbuf = sendbuf + count)");
    /* alltoallv is never in place: even identical buffers are an overlap */
    expect_invalid(comm, coll_alltoallv(buf, cnt, dsp, buf, cnt, dsp, COLL_INT32, comm),
                   "alltoallv(sendbuf == recvbuf)");
    expect_invalid(comm, coll_alltoallv(buf, cnt, dsp, buf + 1, cnt, dsp, COLL_INT32, comm),
                   "alltoallv(overlapping)");
    /* the communicator still works */
    RANK_CHECK(coll_comm_get_error(comm) == COLL_OK, "argument errors broke the communicator");
    xcall_t x = {.coll = X_ALLTOALL, .count = 3, .es = 4, .salt = 7};
    one_blocking(comm, &x, rank, nranks);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_errors)
{
    ck_assert_int_eq(harness_run(3, rank_errors, NULL, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ---- the registry ------------------------------------------------------------------------ */

static const struct {
    coll_coll_t coll;
    const char *name;
} entries[] = {
    {COLL_ALLGATHER, "ring"},     {COLL_ALLGATHER, "recursive_doubling"},
    {COLL_ALLGATHER, "bruck"},    {COLL_ALLTOALL, "pairwise"},
    {COLL_ALLTOALL, "bruck"},     {COLL_ALLTOALLV, "pairwise"},
    {COLL_ALLGATHER, "oneshot"},  {COLL_ALLTOALL, "oneshot"},
    {COLL_ALLTOALL, "linear"},    {COLL_ALLGATHER, "linear"},
};

/* crowd: ranks per CPU; pull: receivers read senders' memory; one_host:
 * every rank on one host */
static double cost_placed(coll_coll_t coll, const char *name, double p, double n, double crowd,
                          int pull, int one_host)
{
    coll_cost_in_t c = {.p = p, .n = n, .alpha = 20e-6, .beta = 1e-9, .gamma = 0.1e-9,
                        .copy = 1e-10, .chunk = 256 << 10, .crowd = crowd, .pull = pull,
                        .one_host = one_host};
    return coll_algo_find(coll, name)->cost(&c);
}

static double cost_crowded(coll_coll_t coll, const char *name, double p, double n, double crowd,
                           int pull)
{
    return cost_placed(coll, name, p, n, crowd, pull, 0);
}

static double cost_of(coll_coll_t coll, const char *name, double p, double n)
{
    return cost_crowded(coll, name, p, n, 1, 1);
}

START_TEST(test_registry)
{
    const coll_algo_t *forced[COLL_NUM_COLLS];
    for (int i = 0; i < ARRAY_LEN(entries); i++) {
        const coll_algo_t *al = coll_algo_find(entries[i].coll, entries[i].name);
        ck_assert_msg(al && al->coll == entries[i].coll && al->build && al->cost,
                      "%s:%s is not registered", coll_coll_name(entries[i].coll),
                      entries[i].name);
        for (int p = 1; p <= 64; p++) {
            double t = cost_of(al->coll, al->name, p, 1e6);
            ck_assert_msg(isfinite(t) && t >= 0 && (p == 1 || t > 0), "%s:%s costs %g at %d ranks",
                          coll_coll_name(al->coll), al->name, t, p);
        }
    }
    ck_assert_int_eq(coll_algo_parse_forced("allgather:bruck,alltoall:bruck,alltoallv:pairwise",
                                            forced), COLL_OK);
    ck_assert_ptr_eq(forced[COLL_ALLGATHER], coll_algo_find(COLL_ALLGATHER, "bruck"));
    ck_assert_ptr_eq(forced[COLL_ALLTOALLV], coll_algo_find(COLL_ALLTOALLV, "pairwise"));
    /* the log-step algorithms win for small data, the bandwidth ones for large */
    ck_assert(cost_of(COLL_ALLGATHER, "bruck", 7, 7 * 8) < cost_of(COLL_ALLGATHER, "ring", 7, 7 * 8));
    ck_assert(cost_of(COLL_ALLGATHER, "ring", 7, 7e8) < cost_of(COLL_ALLGATHER, "bruck", 7, 7e8));
    ck_assert(cost_of(COLL_ALLGATHER, "ring", 7, 7e8) <
              cost_of(COLL_ALLGATHER, "recursive_doubling", 7, 7e8));
    ck_assert(cost_of(COLL_ALLTOALL, "bruck", 8, 8 * 8) < cost_of(COLL_ALLTOALL, "pairwise", 8, 8 * 8));
    ck_assert(cost_of(COLL_ALLTOALL, "pairwise", 8, 8e8) < cost_of(COLL_ALLTOALL, "bruck", 8, 8e8));
    /* one wait instead of p-1 where ranks share CPUs and receivers read
     * senders' memory; elsewhere the stepwise form, listed first, wins the
     * tie and floods no link */
    static const struct { coll_coll_t coll; const char *step; } stepwise[] = {
        {COLL_ALLTOALL, "pairwise"}, {COLL_ALLGATHER, "ring"}};
    for (int i = 0; i < ARRAY_LEN(stepwise); i++) {
        coll_coll_t k = stepwise[i].coll;
        const char *step = stepwise[i].step;
        ck_assert(cost_crowded(k, "linear", 4, 4e6, 2, 1) < cost_crowded(k, step, 4, 4e6, 2, 1));
        ck_assert(cost_crowded(k, step, 4, 4e6, 2, 0) <= cost_crowded(k, "linear", 4, 4e6, 2, 0));
        ck_assert(cost_crowded(k, step, 4, 4e6, 1, 1) <= cost_crowded(k, "linear", 4, 4e6, 1, 1));
    }
    /* all-reduce where every pair shares memory: nothing idles between the
     * butterfly's steps, and the ring's chunks pay their latency, so the
     * butterfly wins once a block is several chunks; over links the ring,
     * whose chunks keep the link busy */
    for (int p = 2; p <= 4; p += 2) {
        ck_assert(cost_crowded(COLL_ALLREDUCE, "butterfly", p, 4e6, 1, 1) <
                  cost_crowded(COLL_ALLREDUCE, "ring", p, 4e6, 1, 1));
        ck_assert(cost_crowded(COLL_ALLREDUCE, "ring", p, 4e6, 1, 0) <
                  cost_crowded(COLL_ALLREDUCE, "butterfly", p, 4e6, 1, 0));
    }
    /* sockets between ranks that share the CPUs of one host: the butterfly
     * at mid sizes only, and not across hosts or with a CPU per rank */
    for (int p = 4; p <= 8; p *= 2) {
        double crowd = p / 2.0, mid = (8 << 20) / (crowd * crowd * crowd); /* 4: 1 MiB, 8: 128 KiB */
        ck_assert(cost_placed(COLL_ALLREDUCE, "butterfly", p, mid, crowd, 0, 1) <
                  cost_placed(COLL_ALLREDUCE, "ring", p, mid, crowd, 0, 1));
        ck_assert(cost_placed(COLL_ALLREDUCE, "ring", p, mid, crowd, 0, 0) <
                  cost_placed(COLL_ALLREDUCE, "butterfly", p, mid, crowd, 0, 0));
        ck_assert(cost_placed(COLL_ALLREDUCE, "ring", p, mid, 1, 0, 1) <
                  cost_placed(COLL_ALLREDUCE, "butterfly", p, mid, 1, 0, 1));
        ck_assert(cost_placed(COLL_ALLREDUCE, "ring", p, 2 * mid, crowd, 0, 1) <
                  cost_placed(COLL_ALLREDUCE, "butterfly", p, 2 * mid, crowd, 0, 1));
        ck_assert(cost_placed(COLL_ALLREDUCE, "butterfly", p, 32 << 10, crowd, 0, 1) ==
                  cost_placed(COLL_ALLREDUCE, "butterfly", p, 32 << 10, crowd, 0, 0));
    }
}
END_TEST

static Suite *exchange_suite(void)
{
    Suite *s = suite_create("exchange");
    TCase *tc = tcase_create("registry");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_registry);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_set_timeout(tc, CASE_TIMEOUT_S);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);

    tc = tcase_create("sweep");
    tcase_set_timeout(tc, CASE_TIMEOUT_S);
    const int *rank_counts;
    tcase_add_loop_test(tc, test_sweep, 0,
                        harness_rank_counts(&rank_counts) * (int)ARRAY_LEN(algo_rows));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(exchange_suite());
}
