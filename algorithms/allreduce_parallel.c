/*
 * allreduce_parallel.c: every rank exchanges directly with every other.
 * Rank r owns block r: it receives block r from every rank at once, adds
 * the p contributions in rank order, and sends the finished block to every
 * rank, while receiving theirs (a direct reduce-scatter, then a direct
 * all-gather). All 4 (p-1) messages are in flight together, so it suits
 * networks with many independent paths, and few ranks.
 *
 * Cost: 3 (p-1) alpha + 2 n (p-1)/p beta + n (p-1)/p gamma: 2 (p-1)
 * messages, plus (p-1) alpha for the incast (p-1 senders at once on each
 * receiver's link, which a ring never has).
 * Any p, any op. Deterministic by construction (block owners reduce in
 * rank order). Scratch: (p-1) blocks of n/p.
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize, mine = coll_block_count(a->count, p, r);
    size_t my_off = coll_block_offset(a->count, p, r);
    void *dst = COLL_PTR(a->recvbuf, my_off, es);
    const void *own = COLL_PTR(a->sendbuf, my_off, es);
    coll_vid_t prev = -1, own_ready = -1;

    if (a->count == 0)
        return;
    coll_vid_t *rs_send = coll_sched_scratch(s, (size_t)p * sizeof(*rs_send));
    coll_vid_t *got = coll_sched_scratch(s, (size_t)p * sizeof(*got));
    char *contrib = coll_sched_scratch(s, (size_t)p * mine * es); /* [rank][mine] */
    if (!rs_send || !got || !contrib)
        return;
    if (a->in_place && p > 1) {
        /* our block of recvbuf is both our contribution and the result */
        own = contrib + (size_t)r * mine * es;
        own_ready = coll_sched_copy(s, (void *)own, dst, mine * es, COLL_NODEPS);
    }
    /* reduce-scatter: block k to rank k; block r from everyone */
    for (int k = 0; k < p; k++) {
        rs_send[k] = got[k] = -1;
        if (k == r)
            continue;
        size_t off = coll_block_offset(a->count, p, k), cnt = coll_block_count(a->count, p, k);
        rs_send[k] = coll_sched_send(s, COLL_PTR(a->sendbuf, off, es), cnt * es, k, 0,
                                     COLL_NODEPS);
        got[k] = coll_sched_recv(s, contrib + (size_t)k * mine * es, mine * es, k, 0,
                                 COLL_NODEPS);
    }
    /* ((x0 op x1) op x2) ... op x(p-1) */
#define CONTRIB(k) ((k) == r ? own : (const void *)(contrib + (size_t)(k) * mine * es))
    if (p == 1)
        prev = coll_sched_copy(s, dst, own, mine * es, COLL_NODEPS);
    else
        prev = coll_sched_reduce(s, dst, CONTRIB(0), CONTRIB(1), mine,
                                 COLL_DEPS(got[0], got[1], own_ready));
    for (int k = 2; k < p; k++)
        prev = coll_sched_reduce(s, dst, dst, CONTRIB(k), mine, COLL_DEPS(prev, got[k], own_ready));
#undef CONTRIB
    prev = coll_sched_finish_avg(s, dst, mine, COLL_DEPS(prev));
    /* all-gather: our block to everyone, theirs into place */
    for (int k = 0; k < p; k++) {
        if (k == r)
            continue;
        size_t off = coll_block_offset(a->count, p, k), cnt = coll_block_count(a->count, p, k);
        coll_sched_send(s, dst, mine * es, k, 1, COLL_DEPS(prev));
        /* in place, that region was the block we sent to rank k */
        coll_sched_recv(s, COLL_PTR(a->recvbuf, off, es), cnt * es, k, 1, COLL_DEPS(rs_send[k]));
    }
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return 3 * q * c->alpha + 2 * c->n * q / c->p * c->beta + c->n * q / c->p * c->gamma;
}

const coll_algo_t coll_algo_allreduce_parallel = {
    COLL_ALLREDUCE, "parallel", build, NULL, cost,
};
