/*
 * reduce_scatter_oneshot.c: rank r writes block k of sendbuf into its
 * mailbox toward rank k, for every k != r, then combines the p
 * contributions to its own block, in rank order, where they lie. One step,
 * with no message to match or queue: the choice for small blocks on one
 * host (allreduce_oneshot.c).
 *
 * Cost: alpha / 2 + n (p-1)/p (copy + gamma), n = p * count * esize: one
 * exchange; p - 1 blocks are copied into mailboxes and p blocks combined.
 * Needs mailboxes toward every rank that hold a block. Deterministic by
 * construction (rank order). In place (recvbuf == sendbuf + r * count),
 * the first combination overwrites our contribution: ranks above 1, whose
 * contribution goes in later, keep a copy.
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);
    size_t bytes = a->count * a->esize;
    const void *own = arg ? arg : COLL_PTR(a->sendbuf, (size_t)coll_sched_rank(s) * a->count,
                                           a->esize);

    COLL_POLL_CHECK(coll_mbox_put_all(s, a->sendbuf, bytes, bytes, step));
    return coll_mbox_combine(s, a->recvbuf, own, a->count);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);

    if (a->count > 0)
        coll_mbox_combine_step(s, poll, a->recvbuf, a->in_place);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2 + c->n * (c->p - 1) / c->p * (c->copy + c->gamma);
}

const coll_algo_t coll_algo_reduce_scatter_oneshot = {
    .coll = COLL_REDUCE_SCATTER,
    .name = "oneshot",
    .build = build,
    .usable = coll_mbox_usable_count,
    .cost = cost,
};
