/*
 * bcast_oneshot.c: the root writes its vector into its mailbox toward every
 * other rank, each of which copies it out from where it lies. One step,
 * with no message to match or queue: the choice for small vectors on one
 * host (allreduce_oneshot.c).
 *
 * Cost: alpha / 2 + p n copy: the root writes p - 1 copies, then each rank
 * copies one out. On a host with more ranks than CPUs add 2 (p-1) alpha
 * (coll_mbox_rooted_wait). Needs mailboxes toward every rank that hold the
 * vector. Any root; off the root the mailbox is read as soon as it is
 * written, so a root that runs ahead waits only when every slot of a
 * mailbox is full.
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);

    (void)arg;
    if (coll_sched_rank(s) == a->root)
        return coll_mbox_put_all(s, a->sendbuf, 0, a->count * a->esize, step);
    return coll_mbox_take(s, a->root, a->recvbuf);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);

    coll_mbox_copy_step(s, poll, coll_sched_rank(s) == a->root && !a->in_place, a->recvbuf, 0,
                        a->sendbuf, 0);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2 + c->p * c->n * c->copy + coll_mbox_rooted_wait(c);
}

const coll_algo_t coll_algo_bcast_oneshot = {
    .coll = COLL_BCAST,
    .name = "oneshot",
    .build = build,
    .usable = coll_mbox_usable_count,
    .cost = cost,
};
