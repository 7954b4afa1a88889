/*
 * reduce_oneshot.c: every rank but the root writes its vector into its
 * mailbox toward the root; the root combines the p vectors, in rank order,
 * where they lie. One step, with no message to match or queue: the choice
 * for small vectors on one host (allreduce_oneshot.c).
 *
 * Cost: alpha / 2 + n copy + (p-1) n gamma: the writes run side by side,
 * then the root combines p vectors. On a host with more ranks than CPUs add
 * 2 (p-1) alpha (coll_mbox_rooted_wait). Needs mailboxes toward every rank
 * that hold the vector. Deterministic by construction (rank order). In
 * place on the root (sendbuf == recvbuf), the first combination overwrites
 * the root's vector: a root above 1, whose vector goes in later, keeps a
 * copy.
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);

    (void)step;
    if (coll_sched_rank(s) != a->root)
        return coll_sched_mbox_put(s, a->root, a->sendbuf, a->count * a->esize);
    return coll_mbox_combine(s, a->recvbuf, arg ? arg : a->sendbuf, a->count);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);

    if (a->count > 0) /* in_place is only ever set on the root */
        coll_mbox_combine_step(s, poll, a->sendbuf, a->in_place);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2 + c->n * c->copy + (c->p - 1) * c->n * c->gamma +
           coll_mbox_rooted_wait(c);
}

const coll_algo_t coll_algo_reduce_oneshot = {
    .coll = COLL_REDUCE,
    .name = "oneshot",
    .build = build,
    .usable = coll_mbox_usable_count,
    .cost = cost,
};
