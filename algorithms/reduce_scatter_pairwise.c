/*
 * reduce_scatter_pairwise.c: a direct reduce-scatter. In step k = 1..p-1
 * rank r sends block r+k to rank r+k and receives rank r-k's contribution
 * to block r (pairwise exchange: each step pairs every rank with a
 * different partner, so no rank is a hot spot); all steps are posted at
 * once. Rank r then adds the p contributions to its block in rank order.
 *
 * Cost: (p-1) alpha + n (p-1)/p beta + n (p-1)/p gamma; n = p * count
 * elements. Any p, any op. Deterministic by construction (the block owner
 * reduces in rank order). Scratch: p blocks (one per rank; our own slot
 * keeps our part aside when in place).
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize, bytes = a->count * es;
    const char *src = a->sendbuf;
    coll_vid_t prev = -1, own_ready = -1;

    if (a->count == 0)
        return;
    char *contrib = coll_sched_scratch(s, (size_t)p * bytes); /* [rank][count] */
    coll_vid_t *got = coll_sched_scratch(s, (size_t)p * sizeof(*got));
    if (!contrib || !got)
        return;
    const void *own = src + (size_t)r * bytes;
    if (a->in_place && p > 1) { /* recvbuf is our block: keep our part aside */
        own = contrib + (size_t)r * bytes;
        own_ready = coll_sched_copy(s, (void *)own, a->recvbuf, bytes, COLL_NODEPS);
    }
    got[r] = -1;
    for (int k = 1; k < p; k++) {
        int to = (r + k) % p, from = (r - k + p) % p;
        coll_sched_send(s, src + (size_t)to * bytes, bytes, to, 0, COLL_NODEPS);
        got[from] = coll_sched_recv(s, contrib + (size_t)from * bytes, bytes, from, 0,
                                    COLL_NODEPS);
    }
#define CONTRIB(k) ((k) == r ? own : (const void *)(contrib + (size_t)(k) * bytes))
    if (p == 1)
        prev = coll_sched_copy(s, a->recvbuf, own, bytes, COLL_NODEPS);
    else
        prev = coll_sched_reduce(s, a->recvbuf, CONTRIB(0), CONTRIB(1), a->count,
                                 COLL_DEPS(got[0], got[1], own_ready));
    for (int k = 2; k < p; k++)
        prev = coll_sched_reduce(s, a->recvbuf, a->recvbuf, CONTRIB(k), a->count,
                                 COLL_DEPS(prev, got[k], own_ready));
#undef CONTRIB
    coll_sched_finish_avg(s, a->recvbuf, a->count, COLL_DEPS(prev));
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return q * c->alpha + c->n * q / c->p * (c->beta + c->gamma);
}

const coll_algo_t coll_algo_reduce_scatter_pairwise = {
    COLL_REDUCE_SCATTER, "pairwise", build, NULL, cost,
};
