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
#include <string.h>

#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;
    const void *in;

    (void)arg;
    if (r == a->root) {
        for (; *step < (uint32_t)(p - 1); (*step)++) {
            int to = (r + 1 + (int)*step) % p;
            COLL_POLL_CHECK(coll_sched_mbox_put(s, to, COLL_PTR(a->sendbuf, (size_t)to * a->count,
                                                           a->esize), bytes));
        }
        return COLL_OK;
    }
    COLL_POLL_CHECK(coll_sched_mbox_get(s, a->root, bytes, &in));
    memcpy(a->recvbuf, in, bytes);
    return coll_sched_mbox_release(s, a->root);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    size_t bytes = a->count * a->esize;
    int r = coll_sched_rank(s);

    if (a->count == 0)
        return;
    if (r == a->root && !a->in_place)
        coll_sched_copy(s, a->recvbuf, COLL_PTR(a->sendbuf, (size_t)r * a->count, a->esize),
                        bytes, COLL_NODEPS);
    coll_sched_poll(s, poll, NULL, COLL_NODEPS);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2 + c->n * c->copy + coll_mbox_rooted_wait(c);
}

static int usable(const coll_args_t *a, int nranks, const char **why)
{
    return coll_mbox_usable(a, nranks, a->count * a->esize, why);
}

const coll_algo_t coll_algo_scatter_oneshot = {
    .coll = COLL_SCATTER,
    .name = "oneshot",
    .build = build,
    .usable = usable,
    .cost = cost,
};
