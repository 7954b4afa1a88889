/*
 * gather_linear.c: every rank sends its block straight to the root, which
 * posts every receive at once, each into its place in recvbuf. No
 * forwarding, no scratch: each byte crosses one link, and the root's link
 * carries every block.
 *
 * Cost: (p-1) alpha + n (p-1)/p beta (n = p count elements).
 * The same volume as the binomial tree but p-1 message latencies in a
 * row at the root; it wins where messages overlap well or p is small.
 * Any p, any root.
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bsz = a->count * a->esize;
    char *recv = a->recvbuf;

    if (bsz == 0)
        return;
    if (r != a->root) { /* nothing else to do (COLL_TP_HINT_WAITS) */
        coll_sched_send_hinted(s, a->sendbuf, bsz, a->root, 0, COLL_TP_HINT_WAITS, COLL_NODEPS);
        return;
    }
    if (!a->in_place)
        coll_sched_copy(s, recv + (size_t)r * bsz, a->sendbuf, bsz, COLL_NODEPS);
    for (int i = 1; i < p; i++) {
        int k = (r + i) % p;
        coll_sched_recv(s, recv + (size_t)k * bsz, bsz, k, 0, COLL_NODEPS);
    }
}

static double cost(const coll_cost_in_t *c)
{
    return (c->p - 1) * c->alpha + c->n * (c->p - 1) / c->p * c->beta;
}

const coll_algo_t coll_algo_gather_linear = {
    COLL_GATHER, "linear", build, NULL, cost,
};
