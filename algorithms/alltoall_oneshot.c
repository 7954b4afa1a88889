/*
 * alltoall_oneshot.c: rank r writes block k of sendbuf into its mailbox
 * toward rank k, for every k != r, then copies the block each rank wrote
 * to it from where it lies into its place in recvbuf. One step, with no
 * message to match or queue: the choice for small blocks on one host
 * (allreduce_oneshot.c).
 *
 * Cost: alpha / 2 + 2 n (p-1)/p copy, n = p * count * esize: one exchange;
 * p - 1 blocks are copied into mailboxes and p - 1 out of them. Needs
 * mailboxes toward every rank that hold a block. In place (sendbuf ==
 * recvbuf) every block is in its mailbox before any is overwritten, and
 * ours stays where it is; otherwise ours is copied across.
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);
    size_t bytes = a->count * a->esize;

    (void)arg;
    /* every write is done before the first copy out: in place, the copies
     * overwrite the blocks the writes read */
    COLL_POLL_CHECK(coll_mbox_put_all(s, a->sendbuf, bytes, bytes, step));
    return coll_mbox_take_blocks(s, a->recvbuf);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    size_t own = (size_t)coll_sched_rank(s);

    coll_mbox_copy_step(s, poll, !a->in_place, a->recvbuf, own, a->sendbuf, own);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2 + 2 * c->n * (c->p - 1) / c->p * c->copy;
}

const coll_algo_t coll_algo_alltoall_oneshot = {
    .coll = COLL_ALLTOALL,
    .name = "oneshot",
    .build = build,
    .usable = coll_mbox_usable_count,
    .cost = cost,
};
