/*
 * allreduce_ring.c: ring all-reduce = ring reduce-scatter + ring
 * all-gather (Patarasuk and Yuan, 2009). The vector is cut into p blocks;
 * in p-1 steps each rank passes a block to its right neighbour, which adds
 * its own contribution, until rank r holds block (r+1) mod p fully reduced;
 * p-1 more steps pass the finished blocks around. Each block is cut into
 * pipeline chunks (COLL_PIPELINE_CHUNK) that move independently, so the
 * link carries chunk j+1 while chunk j is being reduced.
 *
 * Cost: 2(p-1) alpha + 2 n (p-1)/p beta + n (p-1)/p gamma
 *       + 2 (chunks - 1) max(0, alpha - chunk beta): a chunk's message
 *       latency is hidden behind the previous chunk's bytes on the link
 *       unless it is longer. Every send is posted as soon as its data is
 *       reduced, so the link never waits between steps.
 * Bandwidth-optimal for large n; any p; any op.
 *
 * Window (COLL_PIPELINE_WINDOW, args.window_bytes): chunk j + w is sent
 * first only once chunk j is reduced here, w chunks being window_bytes of
 * one chunk of each block (at least 1). Without it every chunk's first
 * send is queued at once, the later steps' sends queue behind them, and a
 * block is swept whole between one step and the next: out of cache once
 * the host's vectors exceed its L3. The window keeps the sweep to w
 * chunks; it does not change the messages, only when they start, so the
 * cost above stands.
 *
 * Deterministic mode: a ring adds contributions in a different order for
 * each block. Instead every chunk is reduced along the chain 0 -> 1 ->
 * ... -> p-1 (so each element is ((x0 op x1) op x2) ...), and rank p-1
 * sends the finished chunks back down the chain p-1 -> ... -> 0, on the
 * other direction of the links. Cost: (2(p-1) + 2(chunks-1)) alpha +
 * 2 n beta + n gamma.
 */
#include "algorithms.h"

/* Chunk j through the whole ring; its first send waits for `after`.
 * Returns the chunk's last reduce-scatter step. */
static coll_vid_t ring_chunk(coll_sched_t *s, size_t j, size_t nch, size_t ch, void *tmp0,
                             void *tmp1, coll_vid_t *rs_send, coll_vid_t after)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize, off, cnt;
    uint32_t steps = (uint32_t)(p - 1);
    coll_vid_t prev;

    coll_vid_t red = coll_ring_rs_chunk(s, a->sendbuf, a->recvbuf, j, nch, ch, tmp0, tmp1,
                                        rs_send, after);
    cnt = coll_ring_chunk(a, p, ch, coll_mod(r + 1, p), j, &off);
    prev = coll_sched_finish_avg(s, COLL_PTR(a->recvbuf, off, es), cnt, COLL_DEPS(red));
    /* all-gather: step t sends block r+1-t, receives block r-t in place */
    for (int t = 0; t < p - 1; t++) {
        cnt = coll_ring_chunk(a, p, ch, coll_mod(r + 1 - t, p), j, &off);
        coll_sched_send(s, COLL_PTR(a->recvbuf, off, es), cnt * es, coll_mod(r + 1, p),
                        (uint32_t)((steps + t) * nch + j), COLL_DEPS(prev));
        cnt = coll_ring_chunk(a, p, ch, coll_mod(r - t, p), j, &off);
        /* the region was read by our reduce-scatter send of step t; the
         * last step's block is not sent on */
        prev = (t == p - 2 ? coll_sched_recv_result : coll_sched_recv)(
            s, COLL_PTR(a->recvbuf, off, es), cnt * es, coll_mod(r - 1, p),
            (uint32_t)((steps + t) * nch + j), COLL_DEPS(rs_send[t]));
    }
    return red;
}

/* Chunks in flight (COLL_PIPELINE_WINDOW); nch: no window. */
static size_t window_chunks(const coll_args_t *a, int p, size_t ch, size_t nch)
{
    size_t per_chunk = (size_t)p * ch * a->esize; /* one chunk of each block */
    size_t w = a->window_bytes / per_chunk;

    if (a->window_bytes == 0)
        return nch;
    return w < 1 ? 1 : w < nch ? w : nch;
}

/* Deterministic: reduce along 0 -> p-1, return along p-1 -> 0. */
static void chain_chunk(coll_sched_t *s, size_t off, size_t cnt, size_t j, void *tmp,
                        coll_vid_t *tmp_reader)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize, bytes = cnt * es;
    void *dst = COLL_PTR(a->recvbuf, off, es);
    const void *src = COLL_PTR(a->sendbuf, off, es);
    coll_vid_t up = -1, down;
    uint32_t tag_up = (uint32_t)(2 * j), tag_down = (uint32_t)(2 * j + 1);

    if (r == 0) {
        up = coll_sched_send(s, src, bytes, 1, tag_up, COLL_NODEPS);
    } else {
        coll_vid_t rv = coll_sched_recv(s, tmp, bytes, r - 1, tag_up, COLL_DEPS(*tmp_reader));
        coll_vid_t red = coll_sched_reduce(s, dst, tmp, src, cnt, COLL_DEPS(rv));
        *tmp_reader = red;
        up = r < p - 1 ? coll_sched_send(s, dst, bytes, r + 1, tag_up, COLL_DEPS(red))
                       : coll_sched_finish_avg(s, dst, cnt, COLL_DEPS(red));
    }
    /* the finished chunk comes back down; dst was read by our send up */
    down = r == p - 1 ? up : coll_sched_recv(s, dst, bytes, r + 1, tag_down, COLL_DEPS(up));
    if (r > 0)
        coll_sched_send(s, dst, bytes, r - 1, tag_down, COLL_DEPS(down));
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s);
    size_t es = a->esize, ch = coll_chunk_elems(a);

    if (a->count == 0)
        return;
    if (p == 1) {
        coll_sched_one_rank(s);
        return;
    }
    if (a->deterministic) {
        /* two receive buffers alternate between consecutive chunks */
        size_t nch = (a->count + ch - 1) / ch;
        void *tmp[2] = {coll_sched_scratch(s, ch * es), coll_sched_scratch(s, ch * es)};
        coll_vid_t reader[2] = {-1, -1};
        for (size_t j = 0; j < nch; j++) {
            size_t off = j * ch, cnt = a->count - off < ch ? a->count - off : ch;
            chain_chunk(s, off, cnt, j, tmp[j % 2], &reader[j % 2]);
        }
        return;
    }
    size_t max_block = coll_block_count(a->count, p, 0);
    size_t nch = (max_block + ch - 1) / ch;
    /* receive chunks only in place: out of place they land in recvbuf */
    int in_place = a->sendbuf == a->recvbuf;
    char *tmp = in_place ? coll_sched_scratch(s, 2 * nch * ch * es) : NULL;
    coll_vid_t *rs_send = coll_sched_scratch(s, (size_t)p * sizeof(*rs_send));
    size_t win = window_chunks(a, p, ch, nch);
    coll_vid_t *reduced = coll_sched_scratch(s, win * sizeof(*reduced)); /* [j % win] */
    if ((in_place && !tmp) || !rs_send || !reduced)
        return;
    for (size_t j = 0; j < nch; j++) {
        coll_vid_t after = j >= win ? reduced[j % win] : -1;
        reduced[j % win] = ring_chunk(s, j, nch, ch, tmp ? tmp + 2 * j * ch * es : NULL,
                                      tmp ? tmp + (2 * j + 1) * ch * es : NULL, rs_send, after);
    }
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1, chunks = c->n / c->p / c->chunk;
    chunks = chunks < 1 ? 1 : chunks;
    if (c->det) { /* the chain carries whole-vector chunks */
        double vchunks = c->n / c->chunk < 1 ? 1 : c->n / c->chunk;
        return 2 * (q + vchunks - 1) * c->alpha + 2 * c->n * c->beta + c->n * c->gamma;
    }
    /* a chunk's message latency hides behind the previous chunk's bytes on
     * the link; only what exceeds them shows. Where every pair shares
     * memory nothing hides it: the CPU that runs a chunk's protocol is
     * the one that copies the chunks before and after it. */
    double hidden = c->pull ? c->alpha : c->alpha - c->chunk * c->beta;
    return 2 * q * c->alpha + 2 * (chunks - 1) * (hidden > 0 ? hidden : 0) +
           2 * c->n * q / c->p * c->beta + c->n * q / c->p * c->gamma;
}

const coll_algo_t coll_algo_allreduce_ring = {
    COLL_ALLREDUCE, "ring", build, NULL, cost,
};
