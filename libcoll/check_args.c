/*
 * check_args.c: COLL_CHECK_ARGS. Before a collective moves any data, each
 * rank sends every other rank a 56-byte description of its call
 * (collective, datatype, op, root, count, for alltoallv the counts it
 * sends to and expects from that rank, and the algorithm it chose: ranks
 * started with different COLL_ALGO settings would otherwise run different
 * message patterns). A step after the exchange
 * compares them and, on a difference, fails the call on every rank with
 * COLL_ERR_INVALID_USAGE naming the first differing rank and field. The
 * data steps wait for that check (the schedule's gate), so a mismatch
 * moves no data and the communicator stays usable.
 *
 * Cost: 2 (p-1) messages of 40 bytes per collective, one latency.
 */
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "reduce.h"
#include "schedule.h"

#define DESC_BYTES 56
#define ALGO_NAME_BYTES 16
#define CHECK_MTAG 0xfffffff0u

typedef struct desc {
    uint32_t coll, dt, op;
    int32_t root;
    uint64_t count, to_you, from_you;
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
    coll_store_u64(out + 32, a->recvcounts ? a->recvcounts[peer] : 0);
    memset(out + 40, 0, ALGO_NAME_BYTES);
    memcpy(out + 40, a->algo, strnlen(a->algo, ALGO_NAME_BYTES));
}

static desc_t decode(const uint8_t in[DESC_BYTES])
{
    desc_t d = {coll_load_u32(in), coll_load_u32(in + 4), coll_load_u32(in + 8),
                (int32_t)coll_load_u32(in + 12), coll_load_u64(in + 16), coll_load_u64(in + 24),
                coll_load_u64(in + 32), ""};
    memcpy(d.algo, in + 40, ALGO_NAME_BYTES);
    d.algo[ALGO_NAME_BYTES] = '\0';
    return d;
}

static int has_op(coll_coll_t c)
{
    return c == COLL_ALLREDUCE || c == COLL_REDUCE || c == COLL_REDUCE_SCATTER;
}

static int has_root(coll_coll_t c)
{
    return c == COLL_BCAST || c == COLL_REDUCE || c == COLL_SCATTER || c == COLL_GATHER;
}

/* The first difference between rank k's call and ours, or 0. */
static int differ(coll_sched_t *s, int k, const desc_t *d, char *why, size_t len)
{
    const coll_args_t *a = coll_sched_args(s);
    int r = coll_sched_rank(s);

    if (d->coll != (uint32_t)a->coll)
        return snprintf(why, len, "rank %d called %s, this rank %s", k,
                        coll_coll_name((coll_coll_t)d->coll), coll_coll_name(a->coll));
    if (a->coll == COLL_BARRIER)
        return strncmp(d->algo, a->algo, ALGO_NAME_BYTES) ? snprintf(why, len, "rank %d chose "
               "algorithm %s, this rank %s", k, d->algo, a->algo) : 0;
    if (d->dt != (uint32_t)a->dt)
        return snprintf(why, len, "rank %d passed datatype %s, this rank %s", k,
                        coll_reduce_datatype_name((coll_datatype_t)d->dt),
                        coll_reduce_datatype_name(a->dt));
    if (a->coll == COLL_ALLTOALLV) {
        if (d->to_you != a->recvcounts[k])
            return snprintf(why, len, "rank %d sends %llu elements to this rank, which expects "
                            "%zu (recvcounts[%d])", k, (unsigned long long)d->to_you,
                            a->recvcounts[k], k);
        if (d->from_you != a->sendcounts[k])
            return snprintf(why, len, "rank %d expects %llu elements from this rank, which "
                            "sends %zu (sendcounts[%d]); rank %d", k,
                            (unsigned long long)d->from_you, a->sendcounts[k], k, r);
        return 0;
    }
    if (d->count != a->count)
        return snprintf(why, len, "rank %d passed count %llu, this rank %zu", k,
                        (unsigned long long)d->count, a->count);
    if (has_op(a->coll) && d->op != (uint32_t)a->op)
        return snprintf(why, len, "rank %d passed op %s, this rank %s", k,
                        coll_reduce_op_name((coll_op_t)d->op), coll_reduce_op_name(a->op));
    if (has_root(a->coll) && d->root != a->root)
        return snprintf(why, len, "rank %d passed root %d, this rank %d", k, d->root, a->root);
    if (strncmp(d->algo, a->algo, ALGO_NAME_BYTES) != 0)
        return snprintf(why, len, "rank %d chose algorithm %s, this rank %s (is COLL_ALGO set "
                        "differently on the ranks?)", k, d->algo, a->algo);
    return 0;
}

static coll_status_t compare(coll_sched_t *s, void *arg)
{
    const uint8_t *in = arg;
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    char why[256];

    for (int k = 0; k < p; k++) {
        desc_t d;
        if (k == r)
            continue;
        d = decode(in + (size_t)k * DESC_BYTES);
        if (differ(s, k, &d, why, sizeof(why)))
            return coll_comm_error(coll_sched_comm(s), COLL_SUBSYS_COLL, COLL_ERR_INVALID_USAGE,
                                   "%s: COLL_CHECK_ARGS: the call differs across ranks: %s",
                                   coll_sched_name(s), why);
    }
    return COLL_OK;
}

void coll_check_args_add(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    uint8_t *in = coll_sched_scratch(s, (size_t)p * DESC_BYTES);
    uint8_t *out = coll_sched_scratch(s, (size_t)p * DESC_BYTES);
    coll_vid_t check = -1;

    if (!in || !out)
        return;
    for (int k = 0; k < p; k++) {
        if (k == r)
            continue;
        describe(a, k, out + (size_t)k * DESC_BYTES);
        coll_vid_t sv = coll_sched_send(s, out + (size_t)k * DESC_BYTES, DESC_BYTES, k,
                                        CHECK_MTAG, COLL_NODEPS);
        coll_vid_t rv = coll_sched_recv(s, in + (size_t)k * DESC_BYTES, DESC_BYTES, k,
                                        CHECK_MTAG, COLL_NODEPS);
        /* our descriptors must all be out before a failed check stops the
         * schedule: every peer waits for its copy */
        check = coll_sched_join(s, COLL_DEPS(check, sv, rv));
    }
    check = coll_sched_check(s, compare, in, COLL_DEPS(check));
    coll_sched_set_gate(s, check);
}
