/*
 * scatter_binomial.c: binomial-tree scatter. Ranks are numbered relative
 * to the root (v = (r - root + p) mod p). Relative rank v receives the
 * blocks of its subtree, relative ranks [v, v + lowest set bit of v),
 * from v minus that bit, keeps block v and passes each child v + 2^k the
 * blocks of the child's subtree, the largest first. Intermediate ranks
 * keep their subtree's blocks, in relative order, in scratch.
 *
 * The root's sendbuf is in real rank order, so a child's range of
 * relative ranks wraps from real rank p-1 to 0 when it contains relative
 * rank p - root; such a range travels as two messages (mtags 0 and 1)
 * instead of being rotated into a copy of the whole vector.
 *
 * Cost: ceil(log2 p) alpha + n (p-1)/p beta (n = p count elements), plus
 * store-and-forward copies of at most n/2 on intermediate ranks.
 * Any p, any root. Scratch on intermediate ranks: their subtree's blocks.
 */
#include "algorithms.h"

static int subtree_mask(int v, int p)
{
    int mask = 1;
    while (mask < p && !(v & mask))
        mask <<= 1; /* the lowest set bit of v; for the root, >= p */
    return mask;
}

/* Where the range [lo, hi) of relative ranks crosses real rank 0 (hi if
 * it does not). Only the root's buffer is in real order. */
static int wrap_point(int root, int p, int lo, int hi)
{
    int w = p - root;
    return lo < w && w < hi ? w : hi;
}

/* The root: our own block, then every child's subtree from sendbuf. */
static void root_sends(coll_sched_t *s, int mask)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bsz = a->count * a->esize;
    const char *send = a->sendbuf;
    /* With several children the root's core would copy every subtree
     * into a ring; read in place, each child copies its own on its core
     * (4 ranks on 2 cores, 1 MiB: 187-238 us through the ring against
     * 132-134 read in place; forwarding ranks have p > 2 too). With one
     * child both cores copy the ring's pieces at once. */
    uint32_t hint = (p > 2 ? COLL_TP_HINT_ONE_COPY : 0) | COLL_TP_HINT_WAITS;

    if (!a->in_place)
        coll_sched_copy(s, a->recvbuf, send + (size_t)r * bsz, bsz, COLL_NODEPS);
    for (int m = mask >> 1; m > 0; m >>= 1) {
        int lo = m, hi = 2 * m < p ? 2 * m : p, w = wrap_point(r, p, lo, hi);
        if (lo >= p)
            continue;
        coll_sched_send_hinted(s, send + (size_t)((lo + r) % p) * bsz, (size_t)(w - lo) * bsz,
                               (r + m) % p, 0, hint, COLL_NODEPS);
        if (w < hi) /* the rest starts at real rank 0 */
            coll_sched_send_hinted(s, send, (size_t)(hi - w) * bsz, (r + m) % p, 1, hint,
                                   COLL_NODEPS);
    }
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    int v = (r - a->root + p) % p, mask = subtree_mask(v, p);
    int hi = v + mask < p ? v + mask : p, parent = (r - mask + p) % p;
    size_t bsz = a->count * a->esize;

    if (bsz == 0)
        return;
    if (v == 0) {
        root_sends(s, mask);
        return;
    }
    if (hi - v == 1) { /* a leaf: just our block */
        coll_sched_recv(s, a->recvbuf, bsz, parent, 0, COLL_NODEPS);
        return;
    }
    char *tmp = coll_sched_scratch(s, (size_t)(hi - v) * bsz); /* blocks [v, hi) */
    if (!tmp)
        return;
    /* a child of the root may get its range in two pieces */
    int w = v == mask ? wrap_point(a->root, p, v, hi) : hi;
    coll_vid_t got1 = coll_sched_recv(s, tmp, (size_t)(w - v) * bsz, parent, 0, COLL_NODEPS);
    coll_vid_t got2 = -1;
    if (w < hi)
        got2 = coll_sched_recv(s, tmp + (size_t)(w - v) * bsz, (size_t)(hi - w) * bsz, parent, 1,
                               COLL_NODEPS);
    coll_sched_copy(s, a->recvbuf, tmp, bsz, COLL_DEPS(got1));
    for (int m = mask >> 1; m > 0; m >>= 1) {
        int clo = v + m, chi = clo + m < p ? clo + m : p;
        if (clo < p)
            coll_sched_send_hinted(s, tmp + (size_t)m * bsz, (size_t)(chi - clo) * bsz,
                                   (r + m) % p, 0, COLL_TP_HINT_ONE_COPY | COLL_TP_HINT_WAITS,
                                   COLL_DEPS(got1, got2));
    }
}

static double cost(const coll_cost_in_t *c)
{
    return coll_log2(c->p) * c->alpha + c->n * (c->p - 1) / c->p * c->beta;
}

const coll_algo_t coll_algo_scatter_binomial = {
    COLL_SCATTER, "binomial", build, NULL, cost,
};
