/*
 * test_tcp.c: the TCP transport's own guarantees, over real loopback
 * sockets between forked ranks:
 *   - striping (1, 2, 4 sockets, with small and default chunks; the
 *     ranks share a kernel, so COLL_NSOCKS_LOCAL and COLL_TCP_CHUNK_LOCAL
 *     are the settings that apply): point-to-point of odd sizes, many tags
 *     interleaved both ways, equal tags matched in the order they were
 *     sent, and collectives;
 *   - ranks with different socket counts still connect (a pair uses the
 *     smaller count), and COLL_NSOCKS does not apply between them;
 *   - head-of-line fix: simultaneous large exchanges both ways with small
 *     messages going through in the middle of them;
 *   - eager credit: a sender running ahead of its receiver completes only
 *     what fits the receiver's COLL_TCP_EAGER_WINDOW_LOCAL (not
 *     COLL_TCP_EAGER_WINDOW: the ranks share a kernel); the rest waits
 *     for its receive and arrives intact;
 *   - the cost model: probed alpha and beta are the same on every rank,
 *     and COLL_LINK_BANDWIDTH / COLL_LINK_LATENCY are honoured;
 *   - the pipeline chunk: ranks of one kernel over TCP cut vectors into
 *     COLL_TCP_CHUNK_LOCAL pieces (the largest over ranks), unless
 *     COLL_PIPELINE_CHUNK is set or shared memory carries the data; the
 *     larger chunk of links toward other hosts (twice COLL_TCP_EAGER_LIMIT)
 *     never applies between them, and applies to an all-reduce only
 *     where a rank's share of the vector holds COLL_BULK_MIN_CHUNKS of it
 *     (test_cluster's 64 MiB runs take it across namespaces);
 *   - the eager limit between ranks of one kernel: COLL_TCP_EAGER_LIMIT_LOCAL
 *     where they have a CPU each, COLL_TCP_EAGER_LIMIT_CROWDED where they
 *     share one;
 *   - congestion control between ranks of one kernel: reno unless
 *     COLL_TCP_CONGESTION_LOCAL names another or is empty (the system's);
 *   - receives that reduce between ranks of one kernel fold off the socket
 *     where the all-reduce is in place and land whole elsewhere, unless
 *     COLL_TCP_RECV_REDUCE_LOCAL says always or never, with exact sums
 *     each way (eager and rendezvous chunks); a value that is neither
 *     fails init;
 *   - direct polling: the sockets are read on every progress turn (cold
 *     in the event loop) exactly where all of them fit
 *     COLL_TCP_POLL_DIRECT and the ranks have a CPU each, and messages of
 *     every size arrive either way;
 *   - payload blocks: the cache of large blocks on its own (blocks.h),
 *     and eager messages that arrive before their receive land in blocks
 *     kept from earlier ones, so that after two rounds they fault in no
 *     page, and arrive intact.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "algorithms.h"
#include "blocks.h"
#include "comm.h"
#include "harness.h"
#include "tcp/tcp.h"

/* Settings of one striping case. */
typedef struct stripe_case {
    const char *nsocks;
    const char *chunk;
} stripe_case_t;

static const stripe_case_t stripe_cases[] = {
    {"1", "2M"}, {"2", "128K"}, {"4", "128K"}, {"2", "4K"}, {"4", "4K"}, {"3", "16K"},
};

static void set_case(int i)
{
    setenv("COLL_NSOCKS_LOCAL", stripe_cases[i].nsocks, 1);
    setenv("COLL_TCP_CHUNK_LOCAL", stripe_cases[i].chunk, 1);
}

/* ---- point-to-point, many tags interleaved ------------------------------- */

/* Message k: its size and its tag. Tags repeat (k % 7), so messages with
 * equal tags must match in the order they were posted: their sizes
 * differ, so a swap fails as a size mismatch or as wrong bytes. */
static const size_t msg_sizes[] = {0, 1, 4095, 65536, 65537, (1u << 20) + 3, 7, 300001,
                                   (5u << 20) + 11, 2, 131072, 262143, 1 << 20, 99999};
#define NMSG (sizeof(msg_sizes) / sizeof(msg_sizes[0]))

static int rank_stripe_p2p(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    int peer = 1 - rank;
    uint8_t *out[NMSG], *in[NMSG];
    coll_request_t req[2 * NMSG];
    (void)arg;

    for (int round = 0; round < 3; round++) {
        for (size_t k = 0; k < NMSG; k++) {
            out[k] = malloc(msg_sizes[k] + 1);
            in[k] = malloc(msg_sizes[k] + 1);
            RANK_CHECK(out[k] && in[k], "out of memory");
            harness_fill(out[k], msg_sizes[k], rank, (int)k + round);
            memset(in[k], 0xee, msg_sizes[k]);
        }
        /* receives posted in reverse order of tags first, or after the
         * sends, by round: expected and unexpected arrivals both */
        if (round != 1)
            for (size_t k = 0; k < NMSG; k++)
                RANK_OK(coll_irecv(in[k], msg_sizes[k], COLL_UINT8, peer, (int)(k % 7), comm,
                                   &req[NMSG + k]));
        for (size_t k = 0; k < NMSG; k++)
            RANK_OK(coll_isend(out[k], msg_sizes[k], COLL_UINT8, peer, (int)(k % 7), comm,
                               &req[k]));
        if (round == 1)
            for (size_t k = 0; k < NMSG; k++)
                RANK_OK(coll_irecv(in[k], msg_sizes[k], COLL_UINT8, peer, (int)(k % 7), comm,
                                   &req[NMSG + k]));
        RANK_OK(coll_waitall(2 * (int)NMSG, req));
        for (size_t k = 0; k < NMSG; k++) {
            harness_verify(in[k], msg_sizes[k], peer, (int)k + round);
            free(out[k]);
            free(in[k]);
        }
    }
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_stripe_p2p)
{
    set_case(_i);
    ck_assert_int_eq(harness_run(2, rank_stripe_p2p, NULL, 90), 0);
}
END_TEST

/* ---- collectives over striped links --------------------------------------- */

/* One job per algorithm, forced, on 3 ranks: ring, butterfly (folded at 3)
 * and recursive doubling, all-reduce twice, then an all-gather. */
typedef struct coll_job {
    const char *algo;
} coll_job_t;

static int rank_stripe_coll_one(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const coll_job_t *job = arg;
    const size_t count = (3u << 20) / 4 + 5;
    int32_t *src = malloc(count * 4), *dst = malloc(count * 4);
    int32_t *ag = malloc(count * 4 * (size_t)nranks);

    RANK_CHECK(src && dst && ag, "out of memory");
    setenv("COLL_ALGO", job->algo, 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (size_t i = 0; i < count; i++)
        src[i] = (int32_t)(i * 3 + (size_t)rank * 1000003);
    for (int rep = 0; rep < 2; rep++) {
        RANK_OK(coll_allreduce(src, dst, count, COLL_INT32, COLL_SUM, comm));
        for (size_t i = 0; i < count; i++) {
            int64_t want = 0;
            for (int r = 0; r < nranks; r++)
                want += (int64_t)(i * 3 + (size_t)r * 1000003);
            RANK_CHECK(dst[i] == (int32_t)want, "%s: element %zu: got %d, expected %d",
                       job->algo, i, dst[i], (int32_t)want);
        }
    }
    RANK_OK(coll_allgather(src, ag, count, COLL_INT32, comm));
    for (int r = 0; r < nranks; r++)
        for (size_t i = 0; i < count; i++)
            RANK_CHECK(ag[(size_t)r * count + i] == (int32_t)(i * 3 + (size_t)r * 1000003),
                       "allgather: block %d element %zu", r, i);
    RANK_OK(coll_comm_destroy(comm));
    free(src);
    free(dst);
    free(ag);
    return 0;
}

START_TEST(test_stripe_coll)
{
    static const coll_job_t jobs[] = {{"allreduce:ring"}, {"allreduce:butterfly"},
                                      {"allreduce:recursive_doubling"}};
    set_case(_i);
    for (size_t j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++)
        ck_assert_int_eq(harness_run(3, rank_stripe_coll_one, (void *)&jobs[j], 90), 0);
}
END_TEST

/* ---- different socket counts on the two sides ----------------------------- */

/* Sockets of our TCP endpoint toward `peer`. */
static int tcp_socks_to(coll_comm_t comm, int peer)
{
    const coll_peer_t *p = &comm->peers[peer];
    return p->ops == &coll_tp_tcp_ops ? ((const tcp_ep_t *)p->ep)->nconn : -1;
}

/* COLL_NSOCKS_LOCAL 1, 4, 2 around a ring of 3; COLL_NSOCKS 3 everywhere,
 * which must not apply: the ranks share a kernel. */
static int rank_mixed(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    static const char *const mine[] = {"1", "4", "2"};
    const size_t n = (3u << 20) + 1;
    uint8_t *out = malloc(n), *in = malloc(n);
    (void)arg;

    RANK_CHECK(out && in, "out of memory");
    setenv("COLL_NSOCKS", "3", 1);
    setenv("COLL_NSOCKS_LOCAL", mine[rank % 3], 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    int want_right = COLL_MIN(atoi(mine[rank]), atoi(mine[right]));
    RANK_CHECK(tcp_socks_to(comm, right) == want_right, "%d sockets to rank %d, expected %d",
               tcp_socks_to(comm, right), right, want_right);
    harness_fill(out, n, rank, 5);
    RANK_OK(coll_sendrecv(out, n, COLL_UINT8, right, 3, in, n, COLL_UINT8, left, 3, comm));
    harness_verify(in, n, left, 5);
    RANK_OK(coll_comm_destroy(comm));
    free(out);
    free(in);
    return 0;
}

START_TEST(test_mixed_nsocks)
{
    ck_assert_int_eq(harness_run(3, rank_mixed, NULL, 60), 0);
}
END_TEST

/* ---- head of line: both directions at once ------------------------------- */

#define BIDIR_BYTES (48u << 20)
#define BIDIR_SMALL 64

/* Each rank sends one large message and receives one, both posted at
 * once; then small messages go both ways while the large ones are in
 * flight, each answered before the next (a ping-pong inside the
 * exchange): with control frames stuck behind data this still completes,
 * but every byte is checked, including the small ones. */
static int rank_bidir(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    int peer = 1 - rank;
    uint8_t *out = malloc(BIDIR_BYTES), *in = malloc(BIDIR_BYTES);
    uint8_t small_out[100], small_in[100];
    coll_request_t big[2];
    (void)arg;

    RANK_CHECK(out && in, "out of memory");
    for (int rep = 0; rep < 2; rep++) {
        harness_fill(out, BIDIR_BYTES, rank, rep);
        memset(in, 0, BIDIR_BYTES);
        RANK_OK(coll_irecv(in, BIDIR_BYTES, COLL_UINT8, peer, 1000, comm, &big[0]));
        RANK_OK(coll_isend(out, BIDIR_BYTES, COLL_UINT8, peer, 1000, comm, &big[1]));
        for (int k = 0; k < BIDIR_SMALL; k++) {
            size_t n = 1 + (size_t)k % 97;
            harness_fill(small_out, n, rank, 1000 + k);
            RANK_OK(coll_sendrecv(small_out, n, COLL_UINT8, peer, k, small_in, n, COLL_UINT8,
                                  peer, k, comm));
            harness_verify(small_in, n, peer, 1000 + k);
        }
        RANK_OK(coll_waitall(2, big));
        harness_verify(in, BIDIR_BYTES, peer, rep);
    }
    RANK_OK(coll_comm_destroy(comm));
    free(out);
    free(in);
    return 0;
}

START_TEST(test_bidir)
{
    setenv("COLL_NSOCKS_LOCAL", _i ? "2" : "1", 1);
    ck_assert_int_eq(harness_run(2, rank_bidir, NULL, 120), 0);
}
END_TEST

/* ---- eager credit --------------------------------------------------------- */

/* The receiver's eager window by case (the sender keeps its own defaults:
 * the receiver's setting is the one that applies). The ranks share a
 * kernel, so COLL_TCP_EAGER_WINDOW_LOCAL applies and COLL_TCP_EAGER_WINDOW
 * does not (the last case: the local default, 4 MiB, holds). */
static const struct {
    const char *var, *env;
    size_t bytes;
} windows[] = {
    {"COLL_TCP_EAGER_WINDOW_LOCAL", "4M", 4u << 20},
    {"COLL_TCP_EAGER_WINDOW_LOCAL", "1M", 1u << 20},
    {"COLL_TCP_EAGER_WINDOW_LOCAL", "300K", 300u << 10},
    {"COLL_TCP_EAGER_WINDOW_LOCAL", "0", 0},
    {"COLL_TCP_EAGER_WINDOW", "0", 4u << 20},
};
#define FLOOD_MSGS 100
#define FLOOD_BYTES 65536

/* Progress rank 0's sends until at least `least` completed (20 s at most),
 * then 0.2 s more so that any beyond the limit show; returns how many
 * completed. */
static size_t sends_done(coll_request_t *req, int n, size_t least)
{
    size_t done = 0;
    double settle = 0, deadline = harness_now() + 20;

    while (harness_now() < (settle ? settle : deadline)) {
        for (int k = 0; k < n; k++) {
            int fin = 0;
            if (req[k] && coll_test(&req[k], &fin) == COLL_OK && fin)
                done++;
        }
        if (!settle && done >= least)
            settle = harness_now() + 0.2;
    }
    return done;
}

/* Rank 0 sends FLOOD_MSGS eager-sized messages that rank 1 takes only
 * later, while rank 1 reads its socket (a receive for tag 99 is under
 * way). Only what fits the window may complete before rank 1 receives
 * them: the rest wait for their receive instead of in rank 1's memory
 * (without the window all 100 completed). Twice: the second time shows the
 * credit came back (all but less than a quarter of the window, which
 * rank 1 still owes). */
static int rank_window(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int kase = *(const int *)arg;
    uint8_t *buf = malloc((size_t)FLOOD_MSGS * FLOOD_BYTES);
    coll_request_t req[FLOOD_MSGS];
    const size_t cost = FLOOD_BYTES + TCP_EAGER_OVERHEAD, w = windows[kase].bytes;
    int32_t go = 1;

    RANK_CHECK(buf, "out of memory");
    if (rank == 1)
        setenv(windows[kase].var, windows[kase].env, 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (int round = 0; round < 2; round++) {
        if (rank == 1) {
            RANK_OK(coll_recv(&go, 1, COLL_INT32, 0, 99, comm));
            for (int k = 0; k < FLOOD_MSGS; k++)
                RANK_OK(coll_irecv(buf + (size_t)k * FLOOD_BYTES, FLOOD_BYTES, COLL_UINT8, 0,
                                   1, comm, &req[k]));
            RANK_OK(coll_waitall(FLOOD_MSGS, req));
            for (int k = 0; k < FLOOD_MSGS; k++)
                harness_verify(buf + (size_t)k * FLOOD_BYTES, FLOOD_BYTES, 0, k + round);
            /* behind every credit frame on the socket */
            RANK_OK(coll_send(&go, 1, COLL_INT32, 0, 98, comm));
            continue;
        }
        size_t fit = w / cost, least = round == 0 ? fit : (w - w / 4) / cost;
        for (int k = 0; k < FLOOD_MSGS; k++) {
            harness_fill(buf + (size_t)k * FLOOD_BYTES, FLOOD_BYTES, 0, k + round);
            RANK_OK(coll_isend(buf + (size_t)k * FLOOD_BYTES, FLOOD_BYTES, COLL_UINT8, 1, 1,
                               comm, &req[k]));
        }
        size_t done = sends_done(req, FLOOD_MSGS, least);
        RANK_CHECK(done >= least && done <= fit, "%s=%s, round %d: %zu of %d sends of %d "
                   "bytes completed before rank 1 received any; %zu..%zu fit",
                   windows[kase].var, windows[kase].env, round, done, FLOOD_MSGS, FLOOD_BYTES,
                   least, fit);
        RANK_OK(coll_send(&go, 1, COLL_INT32, 1, 99, comm));
        RANK_OK(coll_waitall(FLOOD_MSGS, req));
        RANK_OK(coll_recv(&go, 1, COLL_INT32, 1, 98, comm));
    }
    RANK_OK(coll_comm_destroy(comm));
    free(buf);
    return 0;
}

START_TEST(test_window)
{
    ck_assert_int_eq(harness_run(2, rank_window, &_i, 60), 0);
}
END_TEST

/* ---- the cost model ------------------------------------------------------ */

typedef struct cost_expect {
    double alpha, beta; /* 0: probed, only checked for agreement */
} cost_expect_t;

/* Every rank gathers every rank's (alpha, beta, gamma, copy) and checks
 * they are bit for bit its own: the choice of algorithm depends on them. */
static int rank_costs(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const cost_expect_t *want = arg;
    coll_comm_t comm = harness_init(rank, nranks, id);
    double mine[4] = {comm->alpha, comm->beta, comm->gamma, comm->copy};
    double *all = calloc((size_t)nranks * 4, sizeof(double));

    RANK_CHECK(all, "out of memory");
    RANK_CHECK(mine[0] > 0 && mine[1] > 0, "alpha %g, beta %g", mine[0], mine[1]);
    RANK_OK(coll_allgather(mine, all, 4 * sizeof(double), COLL_UINT8, comm));
    for (int r = 0; r < nranks; r++)
        RANK_CHECK(memcmp(all + 4 * r, mine, sizeof(mine)) == 0, "rank %d has alpha %g beta %g "
                   "gamma %g copy %g, rank %d has alpha %g beta %g gamma %g copy %g", r,
                   all[4 * r], all[4 * r + 1], all[4 * r + 2], all[4 * r + 3], rank, mine[0],
                   mine[1], mine[2], mine[3]);
    if (want->alpha > 0)
        RANK_CHECK(mine[0] == want->alpha, "alpha %g, forced %g", mine[0], want->alpha);
    if (want->beta > 0)
        RANK_CHECK(mine[1] == want->beta, "beta %g, forced %g", mine[1], want->beta);
    RANK_OK(coll_comm_destroy(comm));
    free(all);
    return 0;
}

START_TEST(test_cost_agreed)
{
    cost_expect_t want = {0, 0};
    setenv("COLL_COST_PROBE", _i ? "1M" : "0", 1);
    ck_assert_int_eq(harness_run(4, rank_costs, &want, 60), 0);
}
END_TEST

START_TEST(test_cost_forced)
{
    cost_expect_t want = {1e-3, 1.0 / (1 << 20)};
    setenv("COLL_LINK_BANDWIDTH", "1M", 1);
    setenv("COLL_LINK_LATENCY", "1ms", 1);
    ck_assert_int_eq(harness_run(3, rank_costs, &want, 60), 0);
}
END_TEST

/* A forced slow link moves the choice: at 1 MiB/s, 16 KiB on 4 ranks is
 * worth a bandwidth-optimal algorithm, not recursive doubling's 2x the
 * bytes; with the default figures recursive doubling wins at that size. */
static int rank_choice(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const char *want = arg;
    coll_comm_t comm = harness_init(rank, nranks, id);
    const coll_algo_t *algo = NULL;
    coll_args_t a = {.coll = COLL_ALLREDUCE, .count = 4096, .dt = COLL_FLOAT32,
                     .op = COLL_SUM, .esize = 4, .chunk_bytes = comm->chunk_bytes,
                     .det_scratch_max = comm->det_scratch_max};

    RANK_OK(coll_algo_select(comm, &a, &algo));
    RANK_CHECK(strcmp(algo->name, want) == 0 || (want[0] == '!' && strcmp(algo->name, want + 1)),
               "chose %s, expected %s", algo->name, want);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_cost_choice)
{
    setenv("COLL_LINK_LATENCY", "14us", 1);
    if (_i) {
        setenv("COLL_LINK_BANDWIDTH", "1M", 1);
        ck_assert_int_eq(harness_run(4, rank_choice, (void *)"!recursive_doubling", 60), 0);
    } else {
        setenv("COLL_LINK_BANDWIDTH", "3000M", 1);
        ck_assert_int_eq(harness_run(4, rank_choice, (void *)"recursive_doubling", 60), 0);
    }
}
END_TEST

/* ---- the pipeline chunk the links ask for -------------------------------------- */

/* One case: the settings of each rank and the chunk every rank must end
 * with. Ranks of one kernel over TCP ask for COLL_TCP_CHUNK_LOCAL (the
 * largest over ranks wins, so that all cut vectors alike); shared memory
 * asks for nothing; COLL_PIPELINE_CHUNK, where set, wins. */
typedef struct chunk_case {
    const char *transports, *tcp_chunk_rank0, *tcp_chunk_others, *pipeline;
    size_t want;
} chunk_case_t;

static const chunk_case_t chunk_cases[] = {
    {"tcp", NULL, NULL, NULL, 2u << 20},       /* COLL_TCP_CHUNK_LOCAL's default */
    {"tcp", "1M", "512K", NULL, 1u << 20},     /* rank 0's wish is the largest */
    {"tcp", "64K", "512K", NULL, 512u << 10},  /* the others' */
    {"tcp", "64K", "64K", NULL, 256u << 10},   /* below COLL_PIPELINE_CHUNK's default */
    {"tcp", NULL, NULL, "64K", 64u << 10},     /* set: kept */
    {"shm,tcp", NULL, NULL, NULL, 256u << 10}, /* shared memory: the default */
};

static int rank_chunk(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const chunk_case_t *c = arg;
    const char *mine = rank == 0 ? c->tcp_chunk_rank0 : c->tcp_chunk_others;
    coll_comm_t comm;
    float v[1] = {1};

    setenv("COLL_TRANSPORTS", c->transports, 1);
    if (mine)
        setenv("COLL_TCP_CHUNK_LOCAL", mine, 1);
    if (c->pipeline)
        setenv("COLL_PIPELINE_CHUNK", c->pipeline, 1);
    comm = harness_init(rank, nranks, id);
    RANK_CHECK(comm->chunk_bytes == c->want, "pipeline chunk %zu bytes, expected %zu",
               comm->chunk_bytes, c->want);
    RANK_CHECK(comm->chunk_bulk == 0, "chunk toward other hosts %zu bytes between ranks of "
               "one kernel", comm->chunk_bulk);
    RANK_OK(coll_allreduce(v, v, 1, COLL_FLOAT32, COLL_SUM, comm));
    RANK_CHECK(v[0] == (float)nranks, "all-reduce gave %g, expected %d", (double)v[0], nranks);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_chunk)
{
    ck_assert_int_eq(harness_run(3, rank_chunk, (void *)&chunk_cases[_i], 60), 0);
}
END_TEST

/* A call's chunk: the bulk one only from COLL_BULK_MIN_CHUNKS of it per
 * rank's share, and only where it is the larger. */
START_TEST(test_call_chunk)
{
    size_t k = 1024, bulk = 512 * k, min = COLL_BULK_MIN_CHUNKS * bulk;

    ck_assert_uint_eq(coll_call_chunk(256 * k, bulk, min), bulk);
    ck_assert_uint_eq(coll_call_chunk(256 * k, bulk, min - 1), 256 * k);
    ck_assert_uint_eq(coll_call_chunk(256 * k, bulk, 64 * min), bulk);
    ck_assert_uint_eq(coll_call_chunk(256 * k, 0, 64 * min), 256 * k);        /* none asked */
    ck_assert_uint_eq(coll_call_chunk(2048 * k, bulk, 64 * min), 2048 * k);   /* smaller */
    ck_assert_uint_eq(coll_call_chunk(256 * k, bulk, 0), 256 * k);
}
END_TEST

/* ---- the eager limit between ranks of one host ------------------------------- */

/* Rank 0 sends `bytes` before rank 1 posts its receive. Sent eagerly, the
 * send completes while rank 1 only reads its socket; by rendezvous it
 * cannot complete until the receive is posted. Ranks with a CPU each use
 * COLL_TCP_EAGER_LIMIT_LOCAL (2M); ranks pinned to one CPU (2 ranks per
 * CPU) use COLL_TCP_EAGER_LIMIT_CROWDED (64K). */
typedef struct eager_case {
    int pinned;      /* both ranks on one CPU */
    const char *var; /* set on both ranks, or NULL */
    const char *value;
    size_t bytes;
    int eager;       /* expected: completes before its receive */
} eager_case_t;

static const eager_case_t eager_cases[] = {
    {0, NULL, NULL, 1u << 20, 1},
    {0, NULL, NULL, 2u << 20, 1},
    {0, NULL, NULL, (2u << 20) + 1, 0},
    {0, "COLL_TCP_EAGER_LIMIT_LOCAL", "64K", 1u << 20, 0},
    {1, NULL, NULL, 1u << 20, 0},
    {1, NULL, NULL, 64u << 10, 1},
    {1, "COLL_TCP_EAGER_LIMIT_CROWDED", "1M", 1u << 20, 1},
};

/* The first CPU this process may use: pinned ranks share it. */
static int first_cpu;

/* Poll req for up to `s` seconds; 1 if it completed. */
static int completes_within(coll_request_t *req, double s)
{
    double deadline = harness_now() + s;
    int fin = 0;

    while (!fin && harness_now() < deadline)
        if (coll_test(req, &fin) != COLL_OK)
            return 0;
    return fin;
}

static int rank_eager(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const eager_case_t *c = arg;
    uint8_t *buf = malloc(c->bytes);
    coll_request_t req;
    int32_t go = 1;
    coll_comm_t comm;

    RANK_CHECK(buf, "out of memory");
    setenv("COLL_TRANSPORTS", "tcp", 1);
    if (c->var)
        setenv(c->var, c->value, 1);
    if (c->pinned)
        RANK_CHECK(harness_bind_cpu(first_cpu) == 0, "bind to CPU %d", first_cpu);
    comm = harness_init(rank, nranks, id);
    if (rank == 1) {
        RANK_OK(coll_recv(&go, 1, COLL_INT32, 0, 99, comm)); /* reads its socket meanwhile */
        RANK_OK(coll_recv(buf, c->bytes, COLL_UINT8, 0, 1, comm));
        harness_verify(buf, c->bytes, 0, 1);
    } else {
        harness_fill(buf, c->bytes, 0, 1);
        RANK_OK(coll_isend(buf, c->bytes, COLL_UINT8, 1, 1, comm, &req));
        /* eager: done within 10 s; rendezvous: cannot be done, 0.3 s shows it */
        int done = completes_within(&req, c->eager ? 10 : 0.3);
        RANK_CHECK(done == c->eager, "%s%s%s, %s: a send of %zu bytes %s before its receive "
                   "was posted (expected %s)", c->var ? c->var : "defaults", c->var ? "=" : "",
                   c->var ? c->value : "", c->pinned ? "2 ranks on one CPU" : "a CPU each",
                   c->bytes, done ? "completed" : "did not complete",
                   c->eager ? "eager" : "a rendezvous");
        RANK_OK(coll_send(&go, 1, COLL_INT32, 1, 99, comm));
        if (!done)
            RANK_OK(coll_wait(&req));
    }
    RANK_OK(coll_comm_destroy(comm));
    free(buf);
    return 0;
}

START_TEST(test_eager_local)
{
    int cpus[2], n = harness_own_cpus(cpus, 2);
    if (!eager_cases[_i].pinned && n < 2) {
        printf("test_tcp: eager case %d: skipped: needs 2 CPUs for 2 ranks\n", _i);
        return;
    }
    first_cpu = cpus[0];
    ck_assert_int_eq(harness_run(2, rank_eager, (void *)&eager_cases[_i], 60), 0);
}
END_TEST

/* ---- congestion control toward a peer of the same kernel ---------------------- */

/* A value for COLL_TCP_CONGESTION_LOCAL (NULL: unset) and the algorithm
 * every data socket must then report. */
typedef struct cc_case {
    const char *value;
    char want[16];
} cc_case_t;

static int rank_congestion(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const cc_case_t *c = arg;
    int peer = 1 - rank, sent = rank, got = -1;

    if (c->value)
        setenv("COLL_TCP_CONGESTION_LOCAL", c->value, 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    const coll_peer_t *p = &comm->peers[peer];
    RANK_CHECK(p->ops == &coll_tp_tcp_ops, "rank %d is not reached over tcp", peer);
    const tcp_ep_t *ep = (const tcp_ep_t *)p->ep;
    for (int i = 0; i < ep->nconn; i++) {
        char name[16] = "";
        socklen_t len = sizeof(name);
        RANK_CHECK(getsockopt(ep->conn[i].fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) == 0,
                   "getsockopt(TCP_CONGESTION) failed");
        RANK_CHECK(strcmp(name, c->want) == 0, "COLL_TCP_CONGESTION_LOCAL %s: socket %d to "
                   "rank %d uses %s, expected %s", c->value ? c->value : "unset", i, peer,
                   name, c->want);
    }
    RANK_OK(coll_sendrecv(&sent, 1, COLL_INT32, peer, 4, &got, 1, COLL_INT32, peer, 4, comm));
    RANK_CHECK(got == peer, "received %d from rank %d", got, peer);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

/* The first word of a /proc/sys file other than `not1` and `not2`; "" if
 * none. */
static void sysctl_word(const char *path, const char *not1, const char *not2, char out[16])
{
    char line[256], *save = NULL;
    FILE *f = fopen(path, "r");

    out[0] = '\0';
    if (!f)
        return;
    if (fgets(line, sizeof(line), f))
        for (char *w = strtok_r(line, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
            if (strcmp(w, not1) && strcmp(w, not2) && strlen(w) < 16) {
                snprintf(out, 16, "%s", w);
                break;
            }
    fclose(f);
}

/* Unset: reno. Set to an algorithm that is neither reno nor the system's
 * default: that one. Empty: the system's default. */
START_TEST(test_congestion)
{
    char sys[16], other[16];
    cc_case_t c = {NULL, "reno"};

    sysctl_word("/proc/sys/net/ipv4/tcp_congestion_control", "", "", sys);
    ck_assert_msg(sys[0], "cannot read net.ipv4.tcp_congestion_control");
    if (_i == 1) {
        sysctl_word("/proc/sys/net/ipv4/tcp_available_congestion_control", "reno", sys, other);
        if (!other[0]) {
            printf("test_tcp: congestion case 1: skipped: no congestion control here but "
                   "reno and %s\n", sys);
            return;
        }
        c.value = other;
        snprintf(c.want, sizeof(c.want), "%s", other);
    } else if (_i == 2) {
        c.value = "";
        snprintf(c.want, sizeof(c.want), "%s", sys);
    }
    ck_assert_int_eq(harness_run(2, rank_congestion, &c, 60), 0);
}
END_TEST

/* ---- ranks that disagree on COLL_COST_PROBE ------------------------------------ */

/* Rank 1 probes with another size: init must fail on every rank well
 * before COLL_TIMEOUT (it would otherwise wait for the other ranks' probe
 * until then), and every rank's message must name the variable. */
static int rank_probe_differs(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = NULL;
    coll_status_t st;
    (void)arg;

    setenv("COLL_COST_PROBE", rank == 1 ? "1M" : "2M", 1);
    setenv("COLL_TIMEOUT", "60s", 1);
    st = coll_comm_init_rank(&comm, nranks, *id, rank);
    RANK_CHECK(st != COLL_OK, "init succeeded with different COLL_COST_PROBE");
    RANK_CHECK(strstr(coll_get_last_error(NULL), "COLL_COST_PROBE differs"), "message: %s",
               coll_get_last_error(NULL));
    return 0;
}

START_TEST(test_cost_probe_differs)
{
    /* 20 s: a third of COLL_TIMEOUT, so a wait for the deadline fails */
    ck_assert_int_eq(harness_run(3, rank_probe_differs, NULL, 20), 0);
}
END_TEST

/* ---- direct polling of a few sockets ------------------------------------------ */

/* COLL_TCP_POLL_DIRECT (NULL: unset, 2), COLL_NSOCKS_LOCAL, ranks, and
 * whether the sockets must be read directly: only where all of a rank's
 * sockets (ranks - 1 peers times the count) fit the setting, and the
 * ranks have a CPU each (on 2 CPUs, the 3- and 4-rank cases share). */
typedef struct direct_case {
    const char *poll_direct;
    const char *nsocks;
    int nranks;
    int direct;
} direct_case_t;

static const direct_case_t direct_cases[] = {
    {NULL, "1", 2, 1}, {NULL, "1", 3, 1}, {NULL, "1", 4, 0}, {NULL, "4", 2, 0},
    {"0", "1", 2, 0},  {"16", "4", 4, 1},
};

/* Every socket is cold in the event loop (read by the iface on each turn)
 * exactly when the case says so; idle sockets have nothing to write. */
static int check_direct(coll_comm_t comm, int rank, int nranks, const direct_case_t *dc)
{
    int direct = dc->direct && comm->crowd <= 1;

    for (int peer = 0; peer < nranks; peer++) {
        if (peer == rank)
            continue;
        RANK_CHECK(comm->peers[peer].ops == &coll_tp_tcp_ops, "rank %d is not reached over tcp",
                   peer);
        const tcp_ep_t *ep = (const tcp_ep_t *)comm->peers[peer].ep;
        RANK_CHECK(ep->iface->ndirect == (direct ? (nranks - 1) * ep->nconn : 0),
                   "%d sockets read directly, case wants %s (%.2g ranks per CPU)",
                   ep->iface->ndirect, direct ? "all" : "none", comm->crowd);
        for (int i = 0; i < ep->nconn; i++)
            RANK_CHECK(ep->conn[i].src.cold == direct, "socket %d to rank %d: cold %d, "
                       "expected %d", i, peer, ep->conn[i].src.cold, direct);
    }
    return 0;
}

/* Messages of every size, both ways, and an all-reduce: taken by the
 * direct reads where they apply, by epoll elsewhere, the same bytes. */
static int rank_direct(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const direct_case_t *dc = arg;
    static const size_t counts[] = {1, 4, 1000, 16384, 300001};
    const size_t big = (5u << 20) + 3;
    int32_t *src = malloc(300001 * 4), *dst = malloc(300001 * 4);

    RANK_CHECK(src && dst, "out of memory");
    if (dc->poll_direct)
        setenv("COLL_TCP_POLL_DIRECT", dc->poll_direct, 1);
    setenv("COLL_NSOCKS_LOCAL", dc->nsocks, 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (size_t k = 0; k < COLL_ARRAY_LEN(counts); k++) {
        for (size_t i = 0; i < counts[k]; i++)
            src[i] = (int32_t)(i * 7 + (size_t)rank * 1000003 + k);
        RANK_OK(coll_allreduce(src, dst, counts[k], COLL_INT32, COLL_SUM, comm));
        for (size_t i = 0; i < counts[k]; i++) {
            int64_t want = 0;
            for (int r = 0; r < nranks; r++)
                want += (int64_t)(i * 7 + (size_t)r * 1000003 + k);
            RANK_CHECK(dst[i] == (int32_t)want, "count %zu: element %zu: got %d, expected %d",
                       counts[k], i, dst[i], (int32_t)want);
        }
    }
    uint8_t *out = malloc(big), *in = malloc(big);
    RANK_CHECK(out && in, "out of memory");
    harness_fill(out, big, rank, 5);
    RANK_OK(coll_sendrecv(out, big, COLL_UINT8, (rank + 1) % nranks, 5, in, big, COLL_UINT8,
                          (rank + nranks - 1) % nranks, 5, comm));
    harness_verify(in, big, (rank + nranks - 1) % nranks, 5);
    free(out);
    free(in);
    RANK_OK(coll_barrier(comm));
    if (check_direct(comm, rank, nranks, dc))
        return 1;
    RANK_OK(coll_comm_destroy(comm));
    free(src);
    free(dst);
    return 0;
}

START_TEST(test_poll_direct)
{
    const direct_case_t *dc = &direct_cases[_i];
    ck_assert_int_eq(harness_run(dc->nranks, rank_direct, (void *)dc, 60), 0);
}
END_TEST

/* ---- receives that reduce, between ranks of one kernel ------------------------- */

/* COLL_TCP_RECV_REDUCE_LOCAL (NULL: unset, in_place: fold where the
 * all-reduce is in place, receive then reduce out of place) with the
 * eager limit and pipeline chunk that send the ring's chunks eagerly (some
 * arriving before their receive) or by rendezvous; and a value that is
 * neither, which fails init on every rank naming it. */
typedef struct fold_case {
    const char *fold;
    const char *eager_limit;
    const char *chunk;
} fold_case_t;

static const fold_case_t fold_cases[] = {
    {NULL, "2M", "16K"},      {"1", "2M", "16K"},       {"1", "0", "256K"},
    {"0", "0", "256K"},       {"in_place", "0", "256K"}, {"sometimes", "2M", "16K"},
};

/* The endpoints' recv_fold for a setting (-1: init must fail). */
static int fold_wanted(const char *fold)
{
    if (!fold || strcmp(fold, "in_place") == 0)
        return COLL_TP_FOLD_IN_PLACE;
    if (strcmp(fold, "1") == 0 || strcmp(fold, "0") == 0)
        return fold[0] == '1';
    return -1;
}

/* Each endpoint folds exactly where the setting asks, and the ring
 * all-reduce's sums are exact either way, in and out of place (small
 * integers; an odd count, so that blocks and chunks end off alignment). */
static int rank_fold(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const fold_case_t *fc = arg;
    const size_t count = 300007;
    int want = fold_wanted(fc->fold);
    coll_comm_t comm;
    float *in = malloc(count * sizeof(float)), *out = malloc(count * sizeof(float));

    RANK_CHECK(in && out, "out of memory");
    if (fc->fold)
        setenv("COLL_TCP_RECV_REDUCE_LOCAL", fc->fold, 1);
    setenv("COLL_TCP_EAGER_LIMIT_LOCAL", fc->eager_limit, 1);
    setenv("COLL_PIPELINE_CHUNK", fc->chunk, 1);
    setenv("COLL_ALGO", "allreduce:ring", 1);
    if (want < 0) {
        coll_status_t st = coll_comm_init_rank(&comm, nranks, *id, rank);
        RANK_CHECK(st == COLL_ERR_INVALID_ARG &&
                   strstr(coll_get_last_error(NULL), "COLL_TCP_RECV_REDUCE_LOCAL='sometimes'"),
                   "init: %s: %s", coll_status_str(st), coll_get_last_error(NULL));
        free(in);
        free(out);
        return 0;
    }
    comm = harness_init(rank, nranks, id);
    for (int peer = 0; peer < nranks; peer++)
        if (peer != rank)
            RANK_CHECK(comm->peers[peer].ep->recv_fold == want, "COLL_TCP_RECV_REDUCE_LOCAL "
                       "%s: the endpoint to rank %d has recv_fold %d", fc->fold ? fc->fold : "unset",
                       peer, comm->peers[peer].ep->recv_fold);
    for (int in_place = 0; in_place < 2; in_place++) {
        float *res = in_place ? in : out;
        for (size_t i = 0; i < count; i++)
            in[i] = (float)(rank + 1 + (int)(i % 7));
        RANK_OK(coll_allreduce(in, res, count, COLL_FLOAT32, COLL_SUM, comm));
        for (size_t i = 0; i < count; i++) {
            float expect = (float)(nranks * (nranks + 1) / 2 + nranks * (int)(i % 7));
            RANK_CHECK(res[i] == expect, "fold %s, eager limit %s, chunk %s, %s: element %zu "
                       "is %g, expected %g", fc->fold ? fc->fold : "unset", fc->eager_limit,
                       fc->chunk, in_place ? "in place" : "out of place", i, res[i], expect);
        }
    }
    RANK_OK(coll_comm_destroy(comm));
    free(in);
    free(out);
    return 0;
}

START_TEST(test_recv_reduce_local)
{
    ck_assert_int_eq(harness_run(3, rank_fold, (void *)&fold_cases[_i], 60), 0);
}
END_TEST

/* ---- blocks kept for eager payloads that arrive before their receive ----------- */

/* coll_blocks on its own: the smallest kept block that fits (of equal ones
 * the last given back), blocks below COLL_BLOCKS_MIN never kept, a full
 * cache keeping the larger blocks, and no cache at all. */
START_TEST(test_blocks_cache)
{
    coll_blocks_t c;
    size_t len;
    const size_t k = 1024;

    void *plain = coll_blocks_take(NULL, 0, &len);
    ck_assert_msg(plain && len == 1, "no cache, 0 bytes: %p of %zu bytes", plain, len);
    coll_blocks_give(NULL, plain, len);

    coll_blocks_init(&c, 2);
    void *a = coll_blocks_take(&c, 200 * k, &len), *b = coll_blocks_take(&c, 100 * k, &len);
    ck_assert_msg(a && b && len == 100 * k, "fresh blocks: %p %p, %zu bytes", a, b, len);
    coll_blocks_give(&c, a, 200 * k);
    coll_blocks_give(&c, b, 100 * k);
    ck_assert_msg(coll_blocks_take(&c, 150 * k, &len) == a && len == 200 * k,
                  "150 KiB did not get the kept 200 KiB block (got %zu bytes)", len);
    ck_assert_msg(coll_blocks_take(&c, 64 * k, &len) == b && len == 100 * k,
                  "64 KiB did not get the kept 100 KiB block (got %zu bytes)", len);
    coll_blocks_give(&c, b, 100 * k);
    coll_blocks_give(&c, a, 200 * k);
    void *big = malloc(300 * k), *small = malloc(1000);
    coll_blocks_give(&c, big, 300 * k); /* full: replaces the 100 KiB block */
    coll_blocks_give(&c, small, 1000);  /* below COLL_BLOCKS_MIN: freed */
    ck_assert_msg(coll_blocks_take(&c, 64 * k, &len) == a && len == 200 * k,
                  "the smallest kept block after eviction is not the 200 KiB one");
    ck_assert_msg(coll_blocks_take(&c, 64 * k, &len) == big && len == 300 * k,
                  "the 300 KiB block was not kept");
    coll_blocks_give(&c, a, 200 * k);
    coll_blocks_give(&c, big, 200 * k); /* same length as a, given back later */
    ck_assert_msg(coll_blocks_take(&c, 200 * k, &len) == big, "of equal blocks, not the last "
                  "given back");
    coll_blocks_give(&c, big, 200 * k);
    coll_blocks_release(&c); /* frees both; ASan's leak check covers it */
}
END_TEST

/* Sizes of the eager messages rank 1 sends each round before rank 0 posts
 * their receives: all from COLL_BLOCKS_MIN up, one more than a block of
 * the size before it asks. */
static const size_t early_sizes[] = {512 << 10, 300 << 10, (512 << 10) - 1, 100 << 10,
                                     64 << 10, 70 << 10};
#define EARLY_ROUNDS 10
#define EARLY_WARM 2 /* rounds before page faults are counted */

/* Rank 1 sends early_sizes as eager messages (all fit the window), then a
 * go; rank 0 takes them as unexpected while it waits for the go, then
 * receives and checks them, trims malloc's free memory, and counts its
 * page faults from round EARLY_WARM on: kept payload blocks fault in
 * nothing, blocks malloc'ed afresh every page (about 390 a round). */
static int rank_early(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const int n = (int)COLL_ARRAY_LEN(early_sizes);
    uint8_t *buf[COLL_ARRAY_LEN(early_sizes)];
    coll_request_t req[COLL_ARRAY_LEN(early_sizes)];
    struct rusage before = {0}, after;
    int32_t go = 1;
    (void)arg;

    for (int k = 0; k < n; k++)
        RANK_CHECK(buf[k] = calloc(1, early_sizes[k]), "out of memory");
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (int round = 0; round < EARLY_ROUNDS; round++) {
        if (round == EARLY_WARM)
            getrusage(RUSAGE_SELF, &before);
        if (rank == 1) {
            for (int k = 0; k < n; k++) {
                harness_fill(buf[k], early_sizes[k], 1, k + round);
                RANK_OK(coll_isend(buf[k], early_sizes[k], COLL_UINT8, 0, k, comm, &req[k]));
            }
            RANK_OK(coll_waitall(n, req)); /* eager: no receive is posted yet */
            RANK_OK(coll_send(&go, 1, COLL_INT32, 0, 99, comm));
            RANK_OK(coll_recv(&go, 1, COLL_INT32, 0, 98, comm));
            continue;
        }
        RANK_OK(coll_recv(&go, 1, COLL_INT32, 1, 99, comm)); /* behind every payload */
        for (int k = 0; k < n; k++)
            RANK_OK(coll_recv(buf[k], early_sizes[k], COLL_UINT8, 1, k, comm));
        for (int k = 0; k < n; k++)
            harness_verify(buf[k], early_sizes[k], 1, k + round);
        /* what free() does by itself once the heap's free top outgrows
         * M_TRIM_THRESHOLD, whenever that happens: memory malloc holds
         * free goes back to the kernel */
        malloc_trim(0);
        RANK_OK(coll_send(&go, 1, COLL_INT32, 1, 98, comm));
    }
    getrusage(RUSAGE_SELF, &after);
    long faults = after.ru_minflt - before.ru_minflt;
    RANK_CHECK(rank == 1 || faults < 64, "rank 0 took %ld page faults over %d rounds of %d "
               "messages that came before their receives: their payload blocks were not "
               "reused", faults, EARLY_ROUNDS - EARLY_WARM, n);
    RANK_OK(coll_comm_destroy(comm));
    for (int k = 0; k < n; k++)
        free(buf[k]);
    return 0;
}

START_TEST(test_blocks_early)
{
    ck_assert_int_eq(harness_run(2, rank_early, NULL, 60), 0);
}
END_TEST

/* ---- unexpected eager messages taken over by their receive --------------------- */

#define ADOPT_BYTES (1u << 20)
#define ADOPT_FLOATS (ADOPT_BYTES / sizeof(float))

/* The rank-1 side of one round: a small message, then `what` (a 1 MiB
 * send, or a reduce toward rank 0 whose first 1 MiB message follows the
 * small one on the socket). */
static int adopt_send(coll_comm_t comm, int what, float *v)
{
    int32_t small = what, go = -1;
    RANK_OK(coll_recv(&go, 1, COLL_INT32, 0, 40 + what, comm));
    RANK_OK(coll_send(&small, 1, COLL_INT32, 0, 10 + what, comm));
    if (what == 0 || what == 3)
        RANK_OK(coll_send(v, ADOPT_FLOATS, COLL_FLOAT32, 0, 20, comm));
    else
        RANK_OK(coll_reduce(v, NULL, ADOPT_FLOATS, COLL_FLOAT32, COLL_SUM, 0, comm));
    if (what >= 3)
        RANK_OK(coll_send(&small, 1, COLL_INT32, 0, 30, comm));
    return 0;
}

/* Rounds 3 and 4 on rank 0: progress turns between the header and the
 * receive (tests of another receive) let some or all of the payload into
 * the block first, as when the receive comes later in a stream; the
 * result must be whole either way: a plain receive (3), a reduce in place,
 * whose receive folds (4). Cuts inside an element come from the
 * collective matrix over TCP (3 to 8 ranks, epoll), where a fold that was
 * handed one failed at once. */
static int adopt_late(coll_comm_t comm, int what, float *v, float *out)
{
    coll_request_t other;
    int32_t tail = -1;
    int done = 0;

    RANK_OK(coll_irecv(&tail, 1, COLL_INT32, 1, 30, comm, &other));
    for (int k = 0; k < 3 && !done; k++)
        RANK_OK(coll_test(&other, &done));
    if (what == 3)
        RANK_OK(coll_recv(out, ADOPT_FLOATS, COLL_FLOAT32, 1, 20, comm));
    else
        RANK_OK(coll_reduce(v, v, ADOPT_FLOATS, COLL_FLOAT32, COLL_SUM, 0, comm));
    if (!done)
        RANK_OK(coll_wait(&other));
    RANK_CHECK(tail == what, "round %d: last message %d", what, tail);
    return 0;
}

/* Rank 0 sleeps while rank 1 sends a small message and then 1 MiB (plain,
 * reduced in place, reduced out of place); its wait for the small one
 * reads the big one's header, which stops the socket's reads there; the
 * receive posted next takes the payload over (tcp_msg.c, adopt_streaming):
 * counted, and every value checked. Rounds 3 and 4 post the receive
 * after some of the payload went into the block (adopt_late). */
static int rank_adopt(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    float *v = malloc(ADOPT_BYTES), *out = malloc(ADOPT_BYTES);
    (void)arg;

    RANK_CHECK(v && out, "out of memory");
    setenv("COLL_TRANSPORTS", "tcp", 1);
    /* one receive of the whole vector at the root, posted at the call's
     * start; Rabenseifner's halves would go both ways */
    setenv("COLL_ALGO", "reduce:binomial", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    const tcp_ep_t *ep = (const tcp_ep_t *)comm->peers[1 - rank].ep;
    for (int what = 0; what < 5; what++) {
        for (size_t i = 0; i < ADOPT_FLOATS; i++)
            v[i] = (float)(i % 1000) + (float)rank * 1000.0f + (float)what;
        if (rank == 1) {
            if (adopt_send(comm, what, v) != 0)
                return 1;
            continue;
        }
        uint64_t before = ep->rx_adopted;
        int32_t small = -1;
        /* nothing of rank 1's may be read before the sleep: it sends on
         * this go, which rank 0's send completes without reading */
        RANK_OK(coll_send(&what, 1, COLL_INT32, 1, 40 + what, comm));
        usleep(200 * 1000); /* rank 1's messages wait in the socket */
        RANK_OK(coll_recv(&small, 1, COLL_INT32, 1, 10 + what, comm));
        RANK_CHECK(small == what, "round %d: small message %d", what, small);
        if (what == 2)
            memcpy(out, v, ADOPT_BYTES);
        if (what == 0)
            RANK_OK(coll_recv(out, ADOPT_FLOATS, COLL_FLOAT32, 1, 20, comm));
        else if (what >= 3) {
            if (adopt_late(comm, what, v, out) != 0)
                return 1;
        } else /* 1: in place, the receive folds; 2: out of place, from out */
            RANK_OK(coll_reduce(what == 1 ? v : out, v, ADOPT_FLOATS, COLL_FLOAT32, COLL_SUM, 0,
                                comm));
        int plain = what == 0 || what == 3;
        for (size_t i = 0; i < ADOPT_FLOATS; i++) {
            float one = (float)(i % 1000) + (float)what;
            float want = plain ? one + 1000.0f : 2 * one + 1000.0f;
            float got = plain ? out[i] : v[i];
            RANK_CHECK(got == want, "round %d: element %zu is %g, expected %g", what, i,
                       (double)got, (double)want);
        }
        RANK_CHECK(what >= 3 || ep->rx_adopted > before, "round %d (%s): the 1 MiB message "
                   "that came before its receive was not taken over by it", what,
                   what == 0 ? "recv" : what == 1 ? "reduce in place" : "reduce");
    }
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    free(v);
    free(out);
    return 0;
}

START_TEST(test_adopt)
{
    int cpus[2];
    if (harness_own_cpus(cpus, 2) < 2) {
        printf("test_tcp: adopt: skipped: needs 2 CPUs (sockets are read each turn only "
               "where each rank has a CPU)\n");
        return;
    }
    ck_assert_int_eq(harness_run(2, rank_adopt, NULL, 60), 0);
}
END_TEST

static Suite *tcp_suite(void)
{
    Suite *s = suite_create("tcp");
    TCase *tc = tcase_create("stripe");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, test_stripe_p2p, 0, (int)(sizeof(stripe_cases) / sizeof(stripe_cases[0])));
    tcase_add_loop_test(tc, test_stripe_coll, 1, 3);
    tcase_add_test(tc, test_mixed_nsocks);
    tcase_add_loop_test(tc, test_bidir, 0, 2);
    tcase_add_loop_test(tc, test_poll_direct, 0, (int)COLL_ARRAY_LEN(direct_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("window");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_window, 0, (int)COLL_ARRAY_LEN(windows));
    suite_add_tcase(s, tc);
    tc = tcase_create("cost");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_cost_agreed, 0, 2);
    tcase_add_test(tc, test_cost_forced);
    tcase_add_loop_test(tc, test_cost_choice, 0, 2);
    tcase_add_test(tc, test_cost_probe_differs);
    tcase_add_loop_test(tc, test_chunk, 0, (int)COLL_ARRAY_LEN(chunk_cases));
    tcase_add_test(tc, test_call_chunk);
    tcase_add_loop_test(tc, test_eager_local, 0, (int)COLL_ARRAY_LEN(eager_cases));
    tcase_add_loop_test(tc, test_congestion, 0, 3);
    tcase_add_loop_test(tc, test_recv_reduce_local, 0, (int)COLL_ARRAY_LEN(fold_cases));
    suite_add_tcase(s, tc);
    tc = tcase_create("blocks");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, test_blocks_cache);
    tcase_add_test(tc, test_blocks_early);
    tcase_add_test(tc, test_adopt);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* ranks of one host would otherwise talk through shared memory */
    setenv("COLL_TRANSPORTS", "tcp", 1);
    return harness_main(tcp_suite());
}
