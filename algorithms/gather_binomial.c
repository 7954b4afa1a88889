/*
 * gather_binomial.c: binomial-tree gather, the scatter of
 * scatter_binomial.c run backwards. Ranks are numbered relative to the
 * root (v = (r - root + p) mod p). Relative rank v collects the blocks of
 * its subtree, relative ranks [v, v + lowest set bit of v), in relative
 * order in scratch: its own block, then each child v + 2^k's range as it
 * arrives; then it sends the whole range to v minus that bit. The root
 * receives each child's range straight into its place in recvbuf.
 *
 * recvbuf is in real rank order, so a range of relative ranks that
 * contains relative rank p - root wraps from real rank p-1 to 0; a child
 * of the root sends such a range as two messages (mtags 0 and 1), so the
 * root never copies the whole vector to rotate it.
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

/* The root: our own block, then every child's subtree into recvbuf. */
static void root_recvs(coll_sched_t *s, int mask)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bsz = a->count * a->esize;
    char *recv = a->recvbuf;

    if (!a->in_place)
        coll_sched_copy(s, recv + (size_t)r * bsz, a->sendbuf, bsz, COLL_NODEPS);
    for (int m = mask >> 1; m > 0; m >>= 1) {
        int lo = m, hi = 2 * m < p ? 2 * m : p, w = wrap_point(r, p, lo, hi);
        if (lo >= p)
            continue;
        coll_sched_recv(s, recv + (size_t)((lo + r) % p) * bsz, (size_t)(w - lo) * bsz,
                        (r + m) % p, 0, COLL_NODEPS);
        if (w < hi) /* the rest starts at real rank 0 */
            coll_sched_recv(s, recv, (size_t)(hi - w) * bsz, (r + m) % p, 1, COLL_NODEPS);
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
        root_recvs(s, mask);
        return;
    }
    /* a rank that sends has nothing else to do then (COLL_TP_HINT_WAITS) */
    if (hi - v == 1) { /* a leaf: just our block */
        coll_sched_send_hinted(s, a->sendbuf, bsz, parent, 0, COLL_TP_HINT_WAITS, COLL_NODEPS);
        return;
    }
    char *tmp = coll_sched_scratch(s, (size_t)(hi - v) * bsz); /* blocks [v, hi) */
    if (!tmp)
        return;
    coll_vid_t ready = coll_sched_copy(s, tmp, a->sendbuf, bsz, COLL_NODEPS);
    for (int m = mask >> 1; m > 0; m >>= 1) {
        int clo = v + m, chi = clo + m < p ? clo + m : p;
        if (clo >= p)
            continue;
        coll_vid_t got = coll_sched_recv(s, tmp + (size_t)m * bsz, (size_t)(chi - clo) * bsz,
                                         (r + m) % p, 0, COLL_NODEPS);
        ready = coll_sched_join(s, COLL_DEPS(ready, got));
    }
    /* a child of the root may send its range in two pieces */
    int w = v == mask ? wrap_point(a->root, p, v, hi) : hi;
    coll_sched_send_hinted(s, tmp, (size_t)(w - v) * bsz, parent, 0, COLL_TP_HINT_WAITS,
                           COLL_DEPS(ready));
    if (w < hi)
        coll_sched_send_hinted(s, tmp + (size_t)(w - v) * bsz, (size_t)(hi - w) * bsz, parent,
                               1, COLL_TP_HINT_WAITS, COLL_DEPS(ready));
}

static double cost(const coll_cost_in_t *c)
{
    return coll_log2(c->p) * c->alpha + c->n * (c->p - 1) / c->p * c->beta;
}

const coll_algo_t coll_algo_gather_binomial = {
    COLL_GATHER, "binomial", build, NULL, cost,
};
