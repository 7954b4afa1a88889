/*
 * barrier_oneshot.c: every rank writes an empty mailbox message to every
 * other rank (transport.h: a sequence number stored in a slot both map),
 * then waits until it has one from every other rank. One step for any p,
 * where the dissemination barrier takes ceil(log2 p) rounds of messages.
 *
 * Cost: alpha / 2 (the exchange of allreduce_oneshot.c with nothing in
 * it). Needs mailboxes toward every rank (ranks on one host over shared
 * memory).
 */
#include "algorithms.h"

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    coll_status_t st = coll_mbox_exchange(s, NULL, 0, 0, step);
    (void)arg;
    return st == COLL_OK ? coll_mbox_release_all(s) : st;
}

static void build(coll_sched_t *s)
{
    coll_sched_poll(s, poll, NULL, COLL_NODEPS);
}

static double cost(const coll_cost_in_t *c)
{
    return c->alpha / 2;
}

static int usable(const coll_args_t *a, int nranks, const char **why)
{
    return coll_mbox_usable(a, nranks, 0, why);
}

const coll_algo_t coll_algo_barrier_oneshot = {
    .coll = COLL_BARRIER,
    .name = "oneshot",
    .build = build,
    .usable = usable,
    .cost = cost,
};
