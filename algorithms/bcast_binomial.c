/*
 * bcast_binomial.c: binomial-tree broadcast. Ranks are numbered relative
 * to the root (v = (r - root + p) mod p); rank v receives the whole
 * vector from v minus its lowest set bit, then forwards it to v + 2^k for
 * each 2^k below that bit, the largest subtree first. After step k, 2^k
 * ranks hold the vector, so ceil(log2 p) steps reach every rank.
 *
 * Cost: ceil(log2 p) (alpha + n beta); where ranks share CPUs, step k's
 * min(2^k, p - 2^k) transfers share them (coll_cpu_share), which on
 * such a host makes it the cheapest tree from 64 KiB up (mailboxes take
 * the smaller calls): the fewest copies at once. Measured it is, but for
 * 512 KiB to 2 MiB with shared memory, where the chain was faster in
 * most sets (docs/performance-sets.md).
 * Latency-optimal, so the choice for small vectors; every step moves the
 * whole vector, so large ones do better with chain or scatter_allgather
 * where every rank has a CPU.
 * Any p, any root. No scratch.
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    int v = (r - a->root + p) % p, mask = 1;
    size_t bytes = a->count * a->esize;
    const void *src = a->recvbuf;
    coll_vid_t got = -1;

    if (bytes == 0)
        return;
    /* the lowest set bit of v; for the root, the power of two >= p */
    while (mask < p && !(v & mask))
        mask <<= 1;
    if (v == 0) {
        src = a->sendbuf; /* the children read the root's data where it is */
        if (!a->in_place)
            coll_sched_copy(s, a->recvbuf, a->sendbuf, bytes, COLL_NODEPS);
    } else {
        int leaf = mask == 1 || v + 1 >= p; /* sends nothing on */
        got = (leaf ? coll_sched_recv_result : coll_sched_recv)(s, a->recvbuf, bytes,
                                                                 (r - mask + p) % p, 0,
                                                                 COLL_NODEPS);
    }
    /* a rank that sends has nothing else to do (COLL_TP_HINT_WAITS) */
    for (int m = mask >> 1; m > 0; m >>= 1)
        if (v + m < p)
            coll_sched_send_hinted(s, src, bytes, (r + m) % p, 0, COLL_TP_HINT_WAITS,
                                   COLL_DEPS(got));
}

static double cost(const coll_cost_in_t *c)
{
    double t = 0;
    /* step k: the 2^k holders send to as many ranks as are left */
    for (double have = 1; have < c->p; have *= 2)
        t += c->alpha + c->n * c->beta * coll_cpu_share(c, COLL_MIN(have, c->p - have));
    return t;
}

const coll_algo_t coll_algo_bcast_binomial = {
    COLL_BCAST, "binomial", build, NULL, cost,
};
