/*
 * allgather_bruck.c: Bruck's all-gather (Bruck et al., "Efficient
 * algorithms for all-to-all communications in multiport message-passing
 * systems", 1997). Each rank gathers into scratch in its own rotated
 * order: slot i holds the block of rank (r+i) mod p. In step k (distance
 * d = 2^k) it sends its first min(d, p-d) slots to rank r-d and receives
 * the same number from rank r+d into slots d, d+1, ...: the partner's
 * first slots are exactly the blocks that follow ours. After
 * ceil(log2 p) steps all p slots are filled, and a final local rotation
 * puts slot i at block (r+i) mod p of recvbuf.
 *
 * Unlike recursive doubling it needs no folding: any p takes
 * ceil(log2 p) steps, so it is the choice for small blocks at any p.
 *
 * Cost: ceil(log2 p) alpha + n (p-1)/p beta, n = p * count * esize, plus
 * a local copy of n bytes (the rotation), priced at the memcpy rate the
 * ranks agreed on at init (the slowest rank's), so every rank prices it
 * alike and picks the same algorithm; and a wait for a partner per step
 * (coll_pull_waits). Scratch: n bytes. Any p. In place (sendbuf ==
 * recvbuf + r * count) our block is never written; out of place it is
 * copied.
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;
    coll_vid_t ready;

    if (a->count == 0)
        return;
    if (!a->in_place)
        coll_sched_copy(s, coll_recv_block(a, r), a->sendbuf, bytes, COLL_NODEPS);
    if (p == 1)
        return;
    char *slot = coll_sched_scratch(s, (size_t)p * bytes); /* [p][bytes], rotated */
    if (!slot)
        return;
    ready = coll_sched_copy(s, slot, a->sendbuf, bytes, COLL_NODEPS);
    for (int k = 0, d = 1; d < p; k++, d <<= 1) {
        size_t n = (size_t)(d < p - d ? d : p - d) * bytes;
        /* step 0 sends only our own block: read it from sendbuf */
        coll_sched_send(s, k == 0 ? a->sendbuf : (const void *)slot, n, coll_mod(r - d, p),
                        (uint32_t)k, COLL_DEPS(k == 0 ? -1 : ready));
        /* slots d.. are written once and read only by later steps */
        coll_vid_t rv = coll_sched_recv(s, slot + (size_t)d * bytes, n, coll_mod(r + d, p),
                                        (uint32_t)k, COLL_NODEPS);
        ready = coll_sched_join(s, COLL_DEPS(ready, rv));
    }
    /* rotate: slots 1 .. p-r-1 are blocks r+1 .. p-1, slots p-r .. p-1
     * are blocks 0 .. r-1 */
    if (r + 1 < p)
        coll_sched_copy(s, coll_recv_block(a, r + 1), slot + bytes, (size_t)(p - r - 1) * bytes,
                        COLL_DEPS(ready));
    if (r > 0)
        coll_sched_copy(s, a->recvbuf, slot + (size_t)(p - r) * bytes, (size_t)r * bytes,
                        COLL_DEPS(ready));
}

static double cost(const coll_cost_in_t *c)
{
    return coll_log2(c->p) * c->alpha + c->n * (c->p - 1) / c->p * c->beta +
           (c->p > 1 ? c->n * c->copy : 0) + coll_pull_waits(c, coll_log2(c->p));
}

const coll_algo_t coll_algo_allgather_bruck = {
    COLL_ALLGATHER, "bruck", build, NULL, cost,
};
