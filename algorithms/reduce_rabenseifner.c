/*
 * reduce_rabenseifner.c: reduce as a reduce-scatter followed by a gather
 * to the root (Rabenseifner, 2004), for large vectors: every link carries
 * about n instead of the tree's n log2 p. The reduce-scatter is the ring
 * (ring_reduce_scatter.c, pipelined by chunks; Rabenseifner's original
 * uses recursive halving), after which rank r holds block (r+1) mod p and
 * sends it to the root.
 *
 * Cost: 2 (p-1) alpha + 2 n (p-1)/p beta + n (p-1)/p gamma, the root's
 * link carrying the gather. Any p, any root, any op. Scratch: n on
 * ranks other than the root, and two receive chunks per chunk (2 n/p).
 *
 * Deterministic mode: the vector is reduced along the chain 0 -> 1 -> ...
 * -> p-1 (chain_reduce.c) and rank p-1 sends the result to the root.
 * Cost: (p + chunks) alpha + 2 n beta + n gamma.
 */
#include "algorithms.h"

static void chain_then_send(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;
    uint32_t tag = (uint32_t)((a->count + coll_chunk_elems(a) - 1) / coll_chunk_elems(a));
    void *result = r == a->root ? a->recvbuf : r == p - 1 ? coll_sched_scratch(s, bytes) : NULL;
    coll_vid_t done = coll_chain_reduce(s, a->sendbuf, result, a->count, 0);

    if (r == p - 1) {
        done = coll_sched_finish_avg(s, result, a->count, COLL_DEPS(done));
        if (r != a->root)
            coll_sched_send(s, result, bytes, a->root, tag, COLL_DEPS(done));
    } else if (r == a->root) {
        /* in place, recvbuf is the sendbuf the chain reads */
        coll_sched_recv(s, a->recvbuf, bytes, p - 1, tag, COLL_DEPS(done));
    }
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s), root = a->root;
    size_t es = a->esize, ch = coll_chunk_elems(a), off, cnt;

    if (a->count == 0)
        return;
    if (p == 1) {
        coll_sched_one_rank(s);
        return;
    }
    if (a->deterministic) {
        chain_then_send(s);
        return;
    }
    size_t nch = (coll_block_count(a->count, p, 0) + ch - 1) / ch;
    uint32_t gather_tag = (uint32_t)((size_t)(p - 1) * nch);
    void *work = r == root ? a->recvbuf : coll_sched_scratch(s, a->count * es);
    char *tmp = coll_sched_scratch(s, 2 * nch * ch * es); /* two receive chunks per chunk */
    coll_vid_t *rs_send = coll_sched_scratch(s, (size_t)p * nch * sizeof(*rs_send));
    if (!work || !tmp || !rs_send)
        return;
    for (size_t j = 0; j < nch; j++) {
        coll_vid_t *sent = rs_send + j * (size_t)p;
        char *t0 = tmp + 2 * j * ch * es;
        coll_vid_t red = coll_ring_rs_chunk(s, a->sendbuf, work, j, nch, ch, t0, t0 + ch * es,
                                            sent, -1);
        cnt = coll_ring_chunk(a, p, ch, coll_mod(r + 1, p), j, &off);
        red = coll_sched_finish_avg(s, COLL_PTR(work, off, es), cnt, COLL_DEPS(red));
        if (r != root) {
            coll_sched_send(s, COLL_PTR(work, off, es), cnt * es, root,
                            gather_tag + (uint32_t)j, COLL_DEPS(red));
            continue;
        }
        /* the root takes block b+1 from rank b; in place that region was
         * read by its own reduce-scatter send of step (root - b) mod p */
        for (int b = 0; b < p; b++) {
            if (b == root)
                continue;
            cnt = coll_ring_chunk(a, p, ch, coll_mod(b + 1, p), j, &off);
            coll_sched_recv(s, COLL_PTR(a->recvbuf, off, es), cnt * es, b,
                            gather_tag + (uint32_t)j, COLL_DEPS(sent[coll_mod(root - b - 1, p)]));
        }
    }
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    if (c->det) {
        double chunks = c->n / c->chunk < 1 ? 1 : c->n / c->chunk;
        return (c->p + chunks) * c->alpha + 2 * c->n * c->beta + c->n * c->gamma;
    }
    return 2 * q * c->alpha + 2 * c->n * q / c->p * c->beta + c->n * q / c->p * c->gamma;
}

const coll_algo_t coll_algo_reduce_rabenseifner = {
    COLL_REDUCE, "rabenseifner", build, NULL, cost,
};
