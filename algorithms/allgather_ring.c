/*
 * allgather_ring.c: the ring all-gather. Rank r starts with its own block;
 * in step k (0 <= k < p-1) it passes block (r-k) mod p, the one it received
 * in the step before (its own for k = 0), to its right neighbour r+1, and
 * receives block (r-k-1) mod p from its left neighbour r-1 straight into
 * its place in recvbuf. After p-1 steps every rank holds every block. Each
 * rank receives exactly the p-1 blocks it lacks, and every link is busy in
 * every step, so the volume is optimal; the price is p-1 latencies.
 *
 * Only a step's send waits, and only for the receive of the step before:
 * receives write disjoint blocks and are all posted at once, so a block is
 * forwarded as soon as it has arrived and the steps pipeline around the
 * ring by themselves. Blocks are not cut into chunks: every link already
 * carries data from the first step to the last, so chunks would add
 * messages without adding overlap.
 *
 * Sends ask for one copy (COLL_TP_HINT_ONE_COPY): over shared memory the
 * receiver may read the block from the sender's memory instead of both
 * copying it through the ring, and does where that has cost less lately
 * (the shared-memory transport's choose_way). The block sent in a step is
 * the one just received, still in cache. 2 ranks, 1 MiB, µs out / in
 * place: where the two CPUs of a 2-core VM are far apart (8-byte messages
 * 0.85 instead of 0.22 µs) the ring's two copies took 148-154 / 178-184
 * against 75-81 / 56-60 read; in other phases 56-62 / 48-50 against
 * 72-84 / 52-56.
 *
 * Cost: (p-1) alpha + n (p-1)/p beta, n = p * count * esize, plus p-1
 * waits for a neighbour (coll_pull_waits). Any p. In place (sendbuf ==
 * recvbuf + r * count) our block is already where it belongs; otherwise
 * it is copied there (n/p bytes; the first send reads sendbuf itself, so
 * no message waits for the copy's result).
 */
#include "algorithms.h"

/* Out of place, our block is copied into recvbuf. Added after the first
 * step's send and receive, the copy starts before them: the schedule
 * starts ready steps last in, first out. Added first, it had started
 * after them, and over TCP that was slower (2 ranks, 5 alternating
 * launches: 4 MiB 514 -> 390 us, 1 MiB 112 -> 98 us; why is not
 * established). */
static void own_block(coll_sched_t *s, const coll_args_t *a, int r, size_t bytes)
{
    if (!a->in_place)
        coll_sched_copy(s, coll_recv_block(a, r), a->sendbuf, bytes, COLL_NODEPS);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;
    coll_vid_t got = -1; /* the receive of the previous step */

    if (a->count == 0)
        return;
    if (p == 1)
        own_block(s, a, r, bytes);
    for (int k = 0; k < p - 1; k++) {
        const void *from = k == 0 ? a->sendbuf : coll_recv_block(a, coll_mod(r - k, p));
        coll_sched_send_hinted(s, from, bytes, coll_mod(r + 1, p), (uint32_t)k,
                               COLL_TP_HINT_ONE_COPY, COLL_DEPS(got));
        /* the last step's block is not sent on */
        got = (k == p - 2 ? coll_sched_recv_result : coll_sched_recv)(
            s, coll_recv_block(a, coll_mod(r - k - 1, p)), bytes, coll_mod(r - 1, p),
            (uint32_t)k, COLL_NODEPS);
        if (k == 0)
            own_block(s, a, r, bytes);
    }
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return q * c->alpha + c->n * q / c->p * c->beta + coll_pull_waits(c, q);
}

const coll_algo_t coll_algo_allgather_ring = {
    COLL_ALLGATHER, "ring", build, NULL, cost,
};
