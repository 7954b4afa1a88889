/*
 * scatter_oneshot.c: the root writes block k of sendbuf into its mailbox
 * toward rank k, for every k != root; each rank copies its block out from
 * where it lies. One step, with no message to match or queue: the choice
 * for small blocks on one host (allreduce_oneshot.c).
 *
 * Cost: alpha / 2 + n copy, n = p * count * esize: the root writes p - 1
 * blocks, then each rank copies one out. On a host with more ranks than
 * CPUs add 2 (p-1) alpha (coll_mbox_rooted_wait). Needs mailboxes toward
 * every rank that hold a block. Any root; in place on the root (recvbuf ==
 * sendbuf + root * count) its block is already where it belongs.
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);
    size_t bytes = a->count * a->esize;

    (void)arg;
    if (coll_sched_rank(s) == a->root)
        return coll_mbox_put_all(s, a->sendbuf, bytes, bytes, step);
    return coll_mbox_take(s, a->root, a->recvbuf);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int r = coll_sched_rank(s);

    coll_mbox_copy_step(s, poll, r == a->root && !a->in_place, a->recvbuf, 0, a->sendbuf,
                        (size_t)r);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2 + c->n * c->copy + coll_mbox_rooted_wait(c);
}

const coll_algo_t coll_algo_scatter_oneshot = {
    .coll = COLL_SCATTER,
    .name = "oneshot",
    .build = build,
    .usable = coll_mbox_usable_count,
    .cost = cost,
};
