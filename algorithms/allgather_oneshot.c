/*
 * allgather_oneshot.c: every rank writes its block into a mailbox toward
 * every other rank, then copies the p - 1 blocks it was sent from where
 * they lie into their places in recvbuf. One step, with no message to
 * match or queue: the choice for small blocks on one host, where a
 * message costs mostly the software around it (allreduce_oneshot.c).
 *
 * Cost: alpha / 2 + 2 n (p-1)/p copy, n = p * count * esize: one exchange;
 * the block is copied into p - 1 mailboxes and p - 1 blocks out of them.
 * Needs mailboxes toward every rank that hold a block. In place (sendbuf
 * == recvbuf + r * count) our block is written from where it already is;
 * otherwise it is also copied into its place.
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);

    (void)arg;
    COLL_POLL_CHECK(coll_mbox_put_all(s, a->sendbuf, 0, a->count * a->esize, step));
    return coll_mbox_take_blocks(s, a->recvbuf);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);

    coll_mbox_copy_step(s, poll, !a->in_place, a->recvbuf, (size_t)coll_sched_rank(s),
                        a->sendbuf, 0);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2 + 2 * c->n * (c->p - 1) / c->p * c->copy;
}

const coll_algo_t coll_algo_allgather_oneshot = {
    .coll = COLL_ALLGATHER,
    .name = "oneshot",
    .build = build,
    .usable = coll_mbox_usable_count,
    .cost = cost,
};
