/*
 * allreduce_oneshot.c: every rank writes its whole vector into a mailbox
 * toward every other rank, then reads the p - 1 vectors it was sent where
 * they lie and combines all p in rank order. One step and no queueing, so
 * it is the choice for small vectors on one host (mailboxes are a
 * shared-memory transport's; see transport.h), where the cost of a
 * message is mostly the software around it. Rank order on every rank
 * gives every rank the same bits, so it also serves COLL_DETERMINISTIC.
 *
 * Cost: alpha / 2 + (p - 1) n copy + (p - 1) n gamma: one exchange, which
 * moves a cache line or a few rather than passing through the matching
 * and request machinery of a message (hence half an alpha); the writer
 * copies its vector p - 1 times and the reader combines p vectors.
 * Needs mailboxes toward every rank that hold n bytes.
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);
    /* in place, our vector is overwritten by the first combination: keep
     * a copy (arg) unless we are rank 0 or 1, whose vector goes in first */
    const void *own = arg ? arg : a->sendbuf;
    COLL_POLL_CHECK(coll_mbox_put_all(s, a->sendbuf, 0, a->count * a->esize, step));
    return coll_mbox_combine(s, a->recvbuf, own, a->count);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);

    if (a->count > 0)
        coll_mbox_combine_step(s, poll, a->sendbuf, a->sendbuf == a->recvbuf);
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return c->alpha / 2 + q * c->n * (c->copy + c->gamma);
}

const coll_algo_t coll_algo_allreduce_oneshot = {
    .coll = COLL_ALLREDUCE,
    .name = "oneshot",
    .build = build,
    .usable = coll_mbox_usable_count,
    .cost = cost,
};
