/*
 * gather_oneshot.c: every rank but the root writes its block into its
 * mailbox toward the root, which copies each block out from where it lies
 * into its place in recvbuf. One step, with no message to match or queue:
 * the choice for small blocks on one host (allreduce_oneshot.c).
 *
 * Cost: alpha / 2 + n copy, n = p * count * esize: the writes run side by
 * side, then the root copies p - 1 blocks out. On a host with more ranks
 * than CPUs add 2 (p-1) alpha (coll_mbox_rooted_wait). Needs mailboxes
 * toward every rank that hold a block. Any root; in place on the root
 * (sendbuf == recvbuf + root * count) its block is already where it
 * belongs.
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);

    (void)arg;
    (void)step;
    if (coll_sched_rank(s) != a->root)
        return coll_sched_mbox_put(s, a->root, a->sendbuf, a->count * a->esize);
    return coll_mbox_take_blocks(s, a->recvbuf);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int r = coll_sched_rank(s);

    coll_mbox_copy_step(s, poll, r == a->root && !a->in_place, a->recvbuf, (size_t)r,
                        a->sendbuf, 0);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2 + c->n * c->copy + coll_mbox_rooted_wait(c);
}

const coll_algo_t coll_algo_gather_oneshot = {
    .coll = COLL_GATHER,
    .name = "oneshot",
    .build = build,
    .usable = coll_mbox_usable_count,
    .cost = cost,
};
