/*
 * ring_reduce_scatter.c: a building block: the reduce-scatter phase of the
 * ring, for one pipeline chunk. The vector is cut into p blocks
 * (coll_block_*); in step t rank r sends block r-t to its right neighbour
 * and adds its contribution to block r-t-1 from its left, so that after
 * p-1 steps block (r+1) mod p of `work` holds the sum over all ranks.
 * Used by the ring all-reduce and by reduce's reduce-scatter + gather.
 *
 * Out of place (src != work) each partial sum is received straight into
 * its block of work, which this phase writes once per block; in place the
 * block still holds our own contribution, so it goes through tmp0/tmp1.
 * Where the transport reduces as data arrives (coll_sched_recv_reduce),
 * neither needs the extra pass over the block.
 *
 * Cost: (p-1) alpha + (n/p)(p-1) (beta + gamma) for n bytes.
 */
#include "algorithms.h"

size_t coll_ring_chunk(const coll_args_t *a, int p, size_t ch, int b, size_t j, size_t *off)
{
    size_t bcnt = coll_block_count(a->count, p, b), lo = j * ch;
    *off = coll_block_offset(a->count, p, b) + (lo < bcnt ? lo : bcnt);
    return lo < bcnt ? (bcnt - lo < ch ? bcnt - lo : ch) : 0;
}

coll_vid_t coll_ring_rs_chunk(coll_sched_t *s, const void *src, void *work, size_t j, size_t nch,
                              size_t ch, void *tmp0, void *tmp1, coll_vid_t *rs_send,
                              coll_vid_t after)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize, off, cnt;
    void *tmp[2] = {tmp0, tmp1};
    coll_vid_t red = after, tmp_reader[2] = {-1, -1};

    for (int t = 0; t < p - 1; t++) {
        int right = (r + 1) % p, left = (r + p - 1) % p;
        cnt = coll_ring_chunk(a, p, ch, ((r - t) % p + p) % p, j, &off);
        const void *from = t == 0 ? COLL_PTR(src, off, es) : COLL_PTR(work, off, es);
        rs_send[t] = coll_sched_send(s, from, cnt * es, right, (uint32_t)(t * nch + j),
                                     COLL_DEPS(red));
        cnt = coll_ring_chunk(a, p, ch, ((r - t - 1) % p + p) % p, j, &off);
        void *dst = COLL_PTR(work, off, es);
        if (src != work) {
            /* out of place: each block of work is received once in this
             * phase, so the partial sum lands in place, no scratch */
            red = coll_sched_recv_reduce(s, dst, COLL_PTR(src, off, es), dst, cnt, left,
                                         (uint32_t)(t * nch + j), COLL_INCOMING_FIRST, COLL_NODEPS);
            continue;
        }
        red = coll_sched_recv_reduce(s, dst, COLL_PTR(src, off, es), tmp[t % 2], cnt, left,
                                     (uint32_t)(t * nch + j), COLL_INCOMING_FIRST,
                                     COLL_DEPS(tmp_reader[t % 2]));
        tmp_reader[t % 2] = red;
    }
    return red;
}
