/*
 * reduce_scatter_ring.c: the first half of the ring all-reduce. In p-1
 * steps each rank passes a partially reduced block to its right
 * neighbour, which adds its own contribution; the blocks are numbered so
 * that rank r ends with block r. Blocks are cut into pipeline chunks
 * (COLL_PIPELINE_CHUNK) that move independently.
 *
 * Cost: (p-1) alpha + n (p-1)/p beta + n (p-1)/p gamma
 *       (+ (chunks - 1) alpha, hidden when the link is busy); n = p * count
 *       elements. Where receivers may read senders' memory the chunks are
 *       small messages through the pair's buffers, which the sender copies
 *       in while the receiver folds the chunk before, so only the last
 *       chunk's fold shows: the gamma term divides by the chunks. There the
 *       recursive halving folds each half in one read on the receiver's
 *       CPU alone, and the ring was faster wherever a block has two chunks
 *       or more (the Intel VM of 2026-12-07, shared memory, 3-5
 *       alternating rounds, us out / in place, ring against halving: 2
 *       ranks 1 MiB 115 / 87 against 151 / 119, 16 MiB 1958 / 1525 against
 *       2242 / 2295; 3 ranks 16 MiB 4054 / 3793 against 5739 / 6582; 4
 *       ranks 4 MiB 1166 / 1095 against 1233 / 1234, 16 MiB 5339 / 5233
 *       against 7812 / 7469; 8 ranks 16 MiB 14.0 / 13.3 against 16.8 /
 *       16.2 ms), and slower with one (4 ranks 1 MiB 419 / 411 against 357
 *       / 325). Over TCP the two were level or the halving faster (4 ranks
 *       16 MiB 17.5 / 15.4 against 12.6 / 12.0 ms), as the model had them.
 *       Any p, any op. Scratch: 4 count elements (per chunk, two receive
 *       buffers and two partial sums).
 *
 * Deterministic mode: the whole vector is reduced along the chain 0 -> 1
 * -> ... -> p-1 (chain_reduce.c) and rank p-1 sends each rank its block.
 * Cost: (2p - 2 + chunks) alpha + (n + n (p-1)/p) beta + n gamma.
 */
#include "algorithms.h"

/* Chunk j of block b: elements [*off, *off + return) of the p * count vector. */
static size_t chunk_of(const coll_args_t *a, size_t ch, int b, size_t j, size_t *off)
{
    size_t lo = j * ch < a->count ? j * ch : a->count;
    *off = (size_t)b * a->count + lo;
    return a->count - lo < ch ? a->count - lo : ch;
}

static void ring_chunk(coll_sched_t *s, size_t j, size_t nch, size_t ch, char *buf[4])
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize, off, cnt;
    coll_vid_t red = -1, recv_reader[2] = {-1, -1}, acc_reader[2] = {-1, -1};

    /* step t sends block r-t-1 (ours at t = 0, then the partial we just
     * made) and receives block r-t-2 to add our part to */
    for (int t = 0; t < p - 1; t++) {
        cnt = chunk_of(a, ch, coll_mod(r - t - 1, p), j, &off);
        const void *from = t == 0 ? COLL_PTR(a->sendbuf, off, es) : buf[2 + (t - 1) % 2];
        coll_vid_t sv = coll_sched_send(s, from, cnt * es, coll_mod(r + 1, p),
                                        (uint32_t)(t * nch + j), COLL_DEPS(red));
        if (t > 0)
            acc_reader[(t - 1) % 2] = sv;
        cnt = chunk_of(a, ch, coll_mod(r - t - 2, p), j, &off);
        /* the last step's sum is ours: it goes straight to recvbuf; a
         * partial buffer is written once the send of two steps ago is done */
        void *dst = t == p - 2 ? COLL_PTR(a->recvbuf, j * ch, es) : buf[2 + t % 2];
        red = coll_sched_recv_reduce(s, dst, COLL_PTR(a->sendbuf, off, es), buf[t % 2], cnt,
                                     coll_mod(r - 1, p), (uint32_t)(t * nch + j),
                                     COLL_INCOMING_FIRST,
                                     COLL_DEPS(recv_reader[t % 2], acc_reader[t % 2]));
        recv_reader[t % 2] = red;
    }
    cnt = chunk_of(a, ch, r, j, &off);
    coll_sched_finish_avg(s, COLL_PTR(a->recvbuf, j * ch, es), cnt, COLL_DEPS(red));
}

/* Deterministic: chain-reduce everything to rank p-1, which scatters. */
static void chain_then_scatter(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize, bytes = a->count * es, total = a->count * (size_t)p;
    uint32_t scatter_tag = (uint32_t)((total + coll_chunk_elems(a) - 1) / coll_chunk_elems(a));
    char *all = r == p - 1 ? coll_sched_scratch(s, total * es) : NULL;
    coll_vid_t done = coll_chain_reduce(s, a->sendbuf, all, total, 0);

    if (r == p - 1) {
        coll_vid_t avg = coll_sched_finish_avg(s, all, total, COLL_DEPS(done));
        for (int k = 0; k < p - 1; k++)
            coll_sched_send(s, all + (size_t)k * bytes, bytes, k, scatter_tag, COLL_DEPS(avg));
        coll_sched_copy(s, a->recvbuf, all + (size_t)r * bytes, bytes, COLL_DEPS(avg));
    } else {
        /* in place, recvbuf is our block of sendbuf, read by the chain */
        coll_sched_recv(s, a->recvbuf, bytes, p - 1, scatter_tag, COLL_DEPS(done));
    }
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
        chain_then_scatter(s);
        return;
    }
    size_t nch = (a->count + ch - 1) / ch;
    for (size_t j = 0; j < nch; j++) {
        /* two receive buffers and two partial sums alternate between steps */
        char *buf[4];
        for (int k = 0; k < 4; k++)
            buf[k] = coll_sched_scratch(s, ch * es);
        if (!buf[3])
            return;
        ring_chunk(s, j, nch, ch, buf);
    }
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1, chunks = c->n / c->p / c->chunk;
    chunks = chunks < 1 ? 1 : chunks;
    if (c->det) {
        double vchunks = c->n / c->chunk < 1 ? 1 : c->n / c->chunk;
        return (2 * q + vchunks) * c->alpha + (c->n + c->n * q / c->p) * c->beta +
               c->n * c->gamma;
    }
    /* pull: each chunk's fold hides behind the next chunk's copy */
    double gamma = c->pull ? c->gamma / chunks : c->gamma;
    return (q + chunks - 1) * c->alpha + c->n * q / c->p * (c->beta + gamma);
}

const coll_algo_t coll_algo_reduce_scatter_ring = {
    COLL_REDUCE_SCATTER, "ring", build, NULL, cost,
};
