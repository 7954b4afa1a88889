/*
 * bcast_scatter_allgather.c: van de Geijn's broadcast (Barnett et al.,
 * 1994; MPICH's scatter_ring_allgather). The vector is cut into p blocks,
 * block b for the rank b places after the root (relative rank b). A
 * binomial scatter gives each relative rank v the blocks of its subtree,
 * [v, v + lowest set bit of v), in place in recvbuf (the ranges are
 * contiguous because blocks are numbered like ranks). A ring all-gather,
 * v -> v+1, then passes blocks around for p-1 steps: in step t rank v sends
 * block v-t. A block the receiver already holds from the scatter is not
 * sent, so the ring moves only the missing blocks.
 *
 * Cost: (ceil(log2 p) + p - 1) alpha + 2 n (p-1)/p beta. Where ranks
 * share CPUs each step's n beta term scales by coll_cpu_share of its
 * transfers at once: the scatter step's senders, p in each ring step.
 * Half the bandwidth of the chain at large n, but no pipeline chunks:
 * the middle ground for large vectors on many ranks. Any p, any root; a
 * count below p leaves some blocks empty (their messages are skipped).
 * No scratch.
 */
#include "algorithms.h"

typedef struct vdg {
    const coll_args_t *a;
    int p;
} vdg_t;

/* The lowest set bit of relative rank v; for the root, the power of two
 * >= p. v's scatter subtree is [v, v + mask) clipped at p. */
static int subtree_mask(int v, int p)
{
    int mask = 1;
    while (mask < p && !(v & mask))
        mask <<= 1;
    return mask;
}

static int subtree_end(int v, int p)
{
    int end = v + subtree_mask(v, p);
    return end < p ? end : p;
}

/* Element offset of block b (b may be p: the end of the vector). */
static size_t boff(const vdg_t *g, int b)
{
    return coll_block_offset(g->a->count, g->p, b);
}

/* Bytes of blocks [lo, hi). */
static size_t range_bytes(const vdg_t *g, int lo, int hi)
{
    return (boff(g, hi) - boff(g, lo)) * g->a->esize;
}

/* Does relative rank w hold block b once the scatter is done? */
static int holds(const vdg_t *g, int w, int b)
{
    return b >= w && b < subtree_end(w, g->p);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    int v = (r - a->root + p) % p, mask = subtree_mask(v, p);
    vdg_t g = {a, p};
    size_t es = a->esize;
    /* the blocks we hold are read from the root's sendbuf, or our recvbuf */
    const void *src = v == 0 ? a->sendbuf : a->recvbuf;
    coll_vid_t scattered = -1, ring_got = -1;

    if (a->count == 0)
        return;
    if (v == 0 && !a->in_place)
        coll_sched_copy(s, a->recvbuf, a->sendbuf, a->count * es, COLL_NODEPS);
    if (p == 1)
        return;
    /* scatter: our subtree's blocks from the parent, our children's onward */
    if (v != 0 && range_bytes(&g, v, subtree_end(v, p)) > 0)
        scattered = coll_sched_recv(s, COLL_PTR(a->recvbuf, boff(&g, v), es),
                                    range_bytes(&g, v, subtree_end(v, p)), (r - mask + p) % p,
                                    0, COLL_NODEPS);
    for (int m = mask >> 1; m > 0; m >>= 1) {
        int lo = v + m, hi = lo + m < p ? lo + m : p;
        if (lo < p && range_bytes(&g, lo, hi) > 0)
            coll_sched_send(s, COLL_PTR(src, boff(&g, lo), es), range_bytes(&g, lo, hi),
                            (r + m) % p, 0, COLL_DEPS(scattered));
    }
    /* ring all-gather: step t sends block v-t to v+1, receives block v-t-1 */
    for (int t = 0; t < p - 1; t++) {
        int out = (v - t + p) % p, in = (v - t - 1 + p) % p;
        size_t out_bytes = range_bytes(&g, out, out + 1), in_bytes = range_bytes(&g, in, in + 1);
        if (out_bytes > 0 && !holds(&g, (v + 1) % p, out)) {
            /* a block we did not hold arrived in the previous step */
            coll_vid_t ready = holds(&g, v, out) ? scattered : ring_got;
            const void *from = holds(&g, v, out) ? src : a->recvbuf;
            coll_sched_send(s, COLL_PTR(from, boff(&g, out), es), out_bytes, (r + 1) % p,
                            (uint32_t)(1 + t), COLL_DEPS(ready));
        }
        ring_got = -1;
        if (in_bytes > 0 && !holds(&g, v, in))
            ring_got = coll_sched_recv(s, COLL_PTR(a->recvbuf, boff(&g, in), es), in_bytes,
                                       (r - 1 + p) % p, (uint32_t)(1 + t), COLL_NODEPS);
    }
}

static double cost(const coll_cost_in_t *c)
{
    int p = (int)c->p;
    double t = (c->p - 1) * (c->alpha + c->n / c->p * c->beta * coll_cpu_share(c, c->p));

    if (p <= 1)
        return 0;
    /* the scatter, masks from the largest: the root sends blocks [m, 2m)
     * (clipped at p), and each of the ceil((p - m) / 2m) multiples of 2m
     * with a rank m above does the same at once */
    for (int m = coll_pow2_floor(p - 1); m >= 1; m /= 2)
        t += c->alpha + c->n * (COLL_MIN(2 * m, p) - m) / c->p * c->beta *
                            coll_cpu_share(c, (p + m - 1) / (2 * m));
    return t;
}

const coll_algo_t coll_algo_bcast_scatter_allgather = {
    COLL_BCAST, "scatter_allgather", build, NULL, cost,
};
