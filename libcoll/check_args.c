/*
 * check_args.c: COLL_CHECK_ARGS. Before a collective moves any data, each
 * rank sends every other rank a 64-byte description of its call
 * (collective, datatype, op, root, count, for alltoallv the count it
 * sends to that rank, and the algorithm it chose: ranks
 * started with different COLL_ALGO settings would otherwise run different
 * message patterns). A step after the exchange compares them and, on a
 * difference, fails the call on every rank with COLL_ERR_INVALID_USAGE
 * naming the first differing rank and field. The data steps wait for that
 * check (the schedule's gate), so a mismatch moves no data and the
 * communicator stays usable.
 *
 * alltoallv counts pair up rank by rank, so only the two ranks of a
 * mismatched pair can see it: there a second round sends every rank each
 * rank's verdict (a message, empty when its pairs matched), so that all
 * fail alike.
 *
 * Cost: 2 (p-1) messages of 64 bytes per collective, one latency; alltoallv
 * adds 2 (p-1) messages of 160 bytes and a second latency.
 */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "reduce.h"
#include "schedule.h"

#define ALGO_NAME_BYTES 32
#define DESC_BYTES (32 + ALGO_NAME_BYTES)
#define VERDICT_BYTES 160
#define CHECK_MTAG 0xfffffff0u
#define VERDICT_MTAG 0xfffffff1u

typedef struct desc {
    uint32_t coll, dt, op;
    int32_t root;
    uint64_t count, to_you;
    char algo[ALGO_NAME_BYTES + 1];
} desc_t;

static void describe(const coll_args_t *a, int peer, uint8_t out[DESC_BYTES])
{
    coll_store_u32(out, (uint32_t)a->coll);
    coll_store_u32(out + 4, (uint32_t)a->dt);
    coll_store_u32(out + 8, (uint32_t)a->op);
    coll_store_u32(out + 12, (uint32_t)a->root);
    coll_store_u64(out + 16, a->count);
    coll_store_u64(out + 24, a->sendcounts ? a->sendcounts[peer] : 0);
    memset(out + 32, 0, ALGO_NAME_BYTES);
    memcpy(out + 32, a->algo, strnlen(a->algo, ALGO_NAME_BYTES));
}

static desc_t decode(const uint8_t in[DESC_BYTES])
{
    desc_t d = {coll_load_u32(in), coll_load_u32(in + 4), coll_load_u32(in + 8),
                (int32_t)coll_load_u32(in + 12), coll_load_u64(in + 16), coll_load_u64(in + 24),
                ""};
    memcpy(d.algo, in + 32, ALGO_NAME_BYTES);
    d.algo[ALGO_NAME_BYTES] = '\0';
    return d;
}

static int has_root(coll_coll_t c)
{
    return c == COLL_BCAST || c == COLL_REDUCE || c == COLL_SCATTER || c == COLL_GATHER;
}

/* Our own call as a descriptor, to compare like with like. */
static desc_t own_desc(const coll_args_t *a)
{
    desc_t d = {(uint32_t)a->coll, (uint32_t)a->dt, (uint32_t)a->op, a->root, a->count, 0, ""};
    memcpy(d.algo, a->algo, strnlen(a->algo, ALGO_NAME_BYTES));
    return d;
}

/* The first difference between rank x's call and rank y's, described as
 * "rank x passed count 9, rank y 8" into why (may be NULL); 0 if none.
 * Not for alltoallv, whose counts pair up rank by rank. */
static int differ(int x, const desc_t *dx, int y, const desc_t *dy, char *why, size_t len)
{
    coll_coll_t c = (coll_coll_t)dy->coll;

    if (dx->coll != dy->coll)
        return snprintf(why, len, "rank %d called %s, rank %d %s", x,
                        coll_coll_name((coll_coll_t)dx->coll), y, coll_coll_name(c));
    if (c != COLL_BARRIER && dx->dt != dy->dt)
        return snprintf(why, len, "rank %d passed datatype %s, rank %d %s", x,
                        coll_reduce_datatype_name((coll_datatype_t)dx->dt), y,
                        coll_reduce_datatype_name((coll_datatype_t)dy->dt));
    if (c != COLL_BARRIER && dx->count != dy->count)
        return snprintf(why, len, "rank %d passed count %llu, rank %d %llu", x,
                        (unsigned long long)dx->count, y, (unsigned long long)dy->count);
    if (coll_coll_reduces(c) && dx->op != dy->op)
        return snprintf(why, len, "rank %d passed op %s, rank %d %s", x,
                        coll_reduce_op_name((coll_op_t)dx->op), y,
                        coll_reduce_op_name((coll_op_t)dy->op));
    if (has_root(c) && dx->root != dy->root)
        return snprintf(why, len, "rank %d passed root %d, rank %d %d", x, dx->root, y,
                        dy->root);
    if (strncmp(dx->algo, dy->algo, ALGO_NAME_BYTES) != 0)
        return snprintf(why, len, "rank %d chose algorithm %s, rank %d %s (is COLL_ALGO set "
                        "differently on the ranks?)", x, dx->algo, y, dy->algo);
    return 0;
}

/* Rank k's descriptor: ours, or decoded from what it sent. */
static desc_t desc_of(coll_sched_t *s, const uint8_t *in, int k)
{
    return k == coll_sched_rank(s) ? own_desc(coll_sched_args(s))
                                   : decode(in + (size_t)k * DESC_BYTES);
}

/* Above this many ranks the culprit is not searched for (p^2 comparisons):
 * the message names the first rank whose call differs from ours. */
#define CULPRIT_SEARCH_MAX 64

/* The rank whose call the fewest ranks share (the lowest such rank on a
 * tie): with one rank out of step, that rank, on every rank alike. */
static int culprit(coll_sched_t *s, const uint8_t *in, int *agree_with_p)
{
    int p = coll_sched_size(s), odd = -1, odd_n = p + 1, best = -1, best_n = -1;

    for (int x = 0; x < p; x++) {
        desc_t dx = desc_of(s, in, x);
        int n = 0;
        for (int y = 0; y < p; y++) {
            desc_t dy = desc_of(s, in, y);
            n += differ(x, &dx, y, &dy, NULL, 0) == 0;
        }
        if (n < odd_n) {
            odd = x;
            odd_n = n;
        }
        if (n > best_n) {
            best = x;
            best_n = n;
        }
    }
    if (best == odd) /* every call alike: the caller saw none differ */
        best = odd == 0 ? 1 : 0;
    *agree_with_p = best;
    return odd;
}

/* The first difference between the calls, described in why (naming the
 * rank out of step and a rank it differs from); -1 if all calls match. */
static int first_difference(coll_sched_t *s, const uint8_t *in, char *why, size_t len)
{
    int p = coll_sched_size(s), r = coll_sched_rank(s), other = -1;
    desc_t mine = desc_of(s, in, r);

    for (int k = 0; k < p && other < 0; k++) {
        desc_t d = desc_of(s, in, k);
        if (k != r && differ(k, &d, r, &mine, NULL, 0))
            other = k;
    }
    if (other < 0)
        return -1;
    if (p <= CULPRIT_SEARCH_MAX) {
        int odd = culprit(s, in, &other);
        desc_t dodd = desc_of(s, in, odd), dother = desc_of(s, in, other);
        differ(odd, &dodd, other, &dother, why, len);
        return odd;
    }
    desc_t d = desc_of(s, in, other);
    differ(other, &d, r, &mine, why, len);
    return other;
}

/* alltoallv: the first rank whose count for us differs from what we
 * expect from it, described in why; -1 if none. */
static int first_count_difference(coll_sched_t *s, const uint8_t *in, char *why, size_t len)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);

    for (int k = 0; k < p; k++) {
        if (k == r)
            continue;
        desc_t d = decode(in + (size_t)k * DESC_BYTES);
        if (d.coll != (uint32_t)a->coll) {
            snprintf(why, len, "rank %d called %s, rank %d %s", k,
                     coll_coll_name((coll_coll_t)d.coll), r, coll_coll_name(a->coll));
            return k;
        }
        if (d.dt != (uint32_t)a->dt) {
            snprintf(why, len, "rank %d passed datatype %s, rank %d %s", k,
                     coll_reduce_datatype_name((coll_datatype_t)d.dt), r,
                     coll_reduce_datatype_name(a->dt));
            return k;
        }
        if (d.to_you != a->recvcounts[k]) {
            snprintf(why, len, "rank %d sends %llu elements to rank %d, whose recvcounts[%d] "
                     "is %zu", k, (unsigned long long)d.to_you, r, k, a->recvcounts[k]);
            return k;
        }
    }
    return -1; /* the reverse direction is rank k's to report */
}

static coll_status_t mismatch(coll_sched_t *s, const char *why)
{
    return coll_comm_error(coll_sched_comm(s), COLL_SUBSYS_COLL, COLL_ERR_INVALID_USAGE,
                           "%s: COLL_CHECK_ARGS: the call differs across ranks: %s",
                           coll_sched_name(s), why);
}

static coll_status_t compare(coll_sched_t *s, void *arg)
{
    char why[256];

    if (first_difference(s, arg, why, sizeof(why)) >= 0)
        return mismatch(s, why);
    return COLL_OK;
}

/* alltoallv, round 1: our verdict on the pairs we can see, to be sent to
 * every rank. It never fails the schedule itself: round 2 does, on all
 * ranks at once. */
typedef struct verdicts {
    const uint8_t *desc_in;     /* p descriptors received */
    char *mine;                 /* VERDICT_BYTES, sent to every peer */
    char *theirs;               /* p x VERDICT_BYTES received */
} verdicts_t;

static coll_status_t judge(coll_sched_t *s, void *arg)
{
    verdicts_t *v = arg;

    if (first_count_difference(s, v->desc_in, v->mine, VERDICT_BYTES) < 0)
        v->mine[0] = '\0';
    return COLL_OK;
}

static coll_status_t collect_verdicts(coll_sched_t *s, void *arg)
{
    verdicts_t *v = arg;
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    char why[VERDICT_BYTES + 32];

    if (v->mine[0])
        return mismatch(s, v->mine);
    for (int k = 0; k < p; k++) {
        char *their = v->theirs + (size_t)k * VERDICT_BYTES;
        if (k == r || !their[0])
            continue;
        their[VERDICT_BYTES - 1] = '\0'; /* whatever a peer sent, it ends */
        snprintf(why, sizeof(why), "%s (found by rank %d)", their, k);
        return mismatch(s, why);
    }
    return COLL_OK;
}

/* Send buf (bytes) to every peer and receive one from each into in;
 * returns the join of all those steps after `after`. */
static coll_vid_t exchange(coll_sched_t *s, const uint8_t *out, size_t stride, uint8_t *in,
                           size_t bytes, uint32_t mtag, coll_vid_t after)
{
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    coll_vid_t all = after;

    for (int k = 0; k < p; k++) {
        if (k == r)
            continue;
        coll_vid_t sv = coll_sched_send(s, out + (size_t)k * stride, bytes, k, mtag,
                                        COLL_DEPS(after));
        coll_vid_t rv = coll_sched_recv(s, in + (size_t)k * bytes, bytes, k, mtag,
                                        COLL_DEPS(after));
        /* our messages must all be out before a failed check stops the
         * schedule: every peer waits for its copy */
        all = coll_sched_join(s, COLL_DEPS(all, sv, rv));
    }
    return all;
}

/* Round 2 of alltoallv: every rank's verdict to every rank. */
static coll_vid_t add_verdicts(coll_sched_t *s, const uint8_t *desc_in, coll_vid_t after)
{
    int p = coll_sched_size(s);
    verdicts_t *v = coll_sched_scratch(s, sizeof(*v));
    char *mine = coll_sched_scratch(s, VERDICT_BYTES);
    char *theirs = coll_sched_scratch(s, (size_t)p * VERDICT_BYTES);

    if (!v || !mine || !theirs)
        return -1;
    *v = (verdicts_t){desc_in, mine, theirs};
    coll_vid_t judged = coll_sched_check(s, judge, v, COLL_DEPS(after));
    coll_vid_t heard = exchange(s, (const uint8_t *)mine, 0, (uint8_t *)theirs, VERDICT_BYTES,
                                VERDICT_MTAG, judged);
    return coll_sched_check(s, collect_verdicts, v, COLL_DEPS(heard));
}

void coll_check_args_add(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    uint8_t *in = coll_sched_scratch(s, (size_t)p * DESC_BYTES);
    uint8_t *out = coll_sched_scratch(s, (size_t)p * DESC_BYTES);
    coll_vid_t heard, gate;

    if (!in || !out)
        return;
    for (int k = 0; k < p; k++)
        if (k != r)
            describe(a, k, out + (size_t)k * DESC_BYTES);
    heard = exchange(s, out, DESC_BYTES, in, DESC_BYTES, CHECK_MTAG, -1);
    if (a->coll == COLL_ALLTOALLV)
        gate = add_verdicts(s, in, heard);
    else
        gate = coll_sched_check(s, compare, in, COLL_DEPS(heard));
    coll_sched_set_gate(s, gate);
}
