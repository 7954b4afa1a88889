/*
 * barrier_dissemination.c: the dissemination barrier (Hensgen, Finkel and
 * Manber, 1988). In round k every rank signals rank (r + 2^k) mod p and
 * waits for rank (r - 2^k) mod p; a rank signals in round k+1 only after
 * it heard in round k, so after ceil(log2 p) rounds every rank has heard,
 * directly or through others, from every rank. Any p.
 *
 * Cost: ceil(log2 p) * alpha (zero-byte messages: no beta or gamma term).
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    coll_vid_t heard = -1;

    for (int k = 0, dist = 1; dist < p; k++, dist <<= 1) {
        coll_sched_send(s, NULL, 0, (r + dist) % p, (uint32_t)k, COLL_DEPS(heard));
        heard = coll_sched_recv(s, NULL, 0, (r - dist + p) % p, (uint32_t)k, COLL_NODEPS);
    }
}

static double cost(const coll_cost_in_t *c)
{
    return coll_log2(c->p) * c->alpha;
}

const coll_algo_t coll_algo_barrier_dissemination = {
    COLL_BARRIER, "dissemination", build, NULL, cost,
};
