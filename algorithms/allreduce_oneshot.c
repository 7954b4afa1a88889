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
#include "reduce.h"

/* Every message is there: combine in rank order into recvbuf. */
static coll_status_t combine(coll_sched_t *s, const void *own)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    const void *lhs, *rhs;
    size_t len;

    for (int k = 1; k < p; k++) {
        lhs = a->recvbuf;
        if (k == 1 && r == 0)
            lhs = own;
        else if (k == 1)
            COLL_CHECK(coll_sched_mbox_get(s, 0, &lhs, &len));
        if (k == r)
            rhs = own;
        else
            COLL_CHECK(coll_sched_mbox_get(s, k, &rhs, &len));
        COLL_CHECK(coll_reduce_local(a->recvbuf, lhs, rhs, a->count, a->dt, a->op));
    }
    if (a->op == COLL_AVG)
        COLL_CHECK(coll_reduce_finish_avg(a->recvbuf, a->count, a->dt, p));
    return coll_mbox_release_all(s);
}

static coll_status_t poll(coll_sched_t *s, void *arg, uint32_t *step)
{
    const coll_args_t *a = coll_sched_args(s);
    /* in place, our vector is overwritten by the first combination: keep
     * a copy (arg) unless we are rank 0 or 1, whose vector goes in first */
    const void *own = arg ? arg : a->sendbuf;
    /* all there before any is used: the result must not depend on timing */
    coll_status_t st = coll_mbox_exchange(s, a->sendbuf, a->count * a->esize, step);
    return st == COLL_OK ? combine(s, own) : st;
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    size_t bytes = a->count * a->esize;
    void *copy = NULL;
    coll_vid_t c = -1;

    if (a->count == 0)
        return;
    if (a->sendbuf == a->recvbuf && coll_sched_rank(s) > 1) {
        copy = coll_sched_scratch(s, bytes);
        if (!copy)
            return;
        c = coll_sched_copy(s, copy, a->sendbuf, bytes, COLL_NODEPS);
    }
    coll_sched_poll(s, poll, copy, COLL_DEPS(c));
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return c->alpha / 2 + q * c->n * (c->copy + c->gamma);
}

static int usable(const coll_args_t *a, int nranks, const char **why)
{
    return coll_mbox_usable(a, nranks, a->count * a->esize, why);
}

const coll_algo_t coll_algo_allreduce_oneshot = {
    .coll = COLL_ALLREDUCE,
    .name = "oneshot",
    .build = build,
    .usable = usable,
    .cost = cost,
};
