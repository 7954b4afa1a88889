/*
 * reduce_scatter_recursive_halving.c: recursive halving (Thakur,
 * Rabenseifner and Gropp, 2005). In the step with distance m (p2/2, p2/4,
 * ..., 1) each virtual rank exchanges half of its current segment with the
 * rank m away, keeping and reducing the half that holds its own blocks;
 * after log2 p2 steps it holds its own block(s) fully reduced.
 * Non-power-of-two p is folded first (algorithms.h): virtual rank v
 * answers for the blocks of the real ranks it stands for, and gives the
 * folded-out rank its block at the end.
 *
 * Cost: log2(p') alpha + n (p-1)/p beta + n (p-1)/p gamma, n = p * count
 * elements, p' the largest power of two <= p (+ 2 alpha + (n + n/p) beta
 * + n gamma when p is not a power of two: the whole vector is handed in,
 * one block handed back). Any p, any op. Scratch: 2 n.
 *
 * Deterministic mode: contributions travel instead of partial sums: in
 * each step a rank sends the half it gives up of every rank's row it
 * holds; the rows double as the segment halves. At the end it holds every
 * rank's contribution to its blocks and adds them in rank order. Cost:
 * log2(p') alpha + (n/2) log2(p') beta + n (p-1)/p gamma + n log2(p') copy
 * (+ the fold); scratch 1.5 n log2(p') bytes (about twice that when p is
 * not a power of two), usable while that stays under COLL_DET_SCRATCH_MAX.
 */
#include "algorithms.h"

typedef struct halving {
    coll_sched_t *s;
    const coll_args_t *a;
    int p, r, p2, rem, v, steps;
    size_t bytes;  /* one block */
} halving_t;

/* Element offset of virtual group g's first block (groups are contiguous
 * ranges of real blocks). */
static size_t goff(const halving_t *h, int g)
{
    return (size_t)coll_fold_first(g, h->rem) * h->a->count;
}

static void split(const halving_t *h, int m, int *lo, int *hi)
{
    int mid = *lo + (*hi - *lo) / 2;
    if (h->v & m)
        *lo = mid;
    else
        *hi = mid;
}

/* The end: our group's blocks are in `work` at group offset 0; a folded
 * rank's even partner gets its block. */
static void deliver(halving_t *h, const char *work, coll_vid_t ready)
{
    const coll_args_t *a = h->a;
    size_t n = (size_t)(coll_fold_first(h->v + 1, h->rem) - coll_fold_first(h->v, h->rem)) *
               a->count;
    coll_vid_t avg = coll_sched_finish_avg(h->s, (void *)work, n, COLL_DEPS(ready));
    if (h->r < 2 * h->rem) { /* blocks r-1 (partner's) and r (ours) */
        coll_sched_send(h->s, work, h->bytes, h->r - 1, 1, COLL_DEPS(avg));
        coll_sched_copy(h->s, a->recvbuf, work + h->bytes, h->bytes, COLL_DEPS(avg));
    } else {
        coll_sched_copy(h->s, a->recvbuf, work, h->bytes, COLL_DEPS(avg));
    }
}

static void halve_reduce(halving_t *h)
{
    const coll_args_t *a = h->a;
    size_t es = a->esize, total = a->count * (size_t)h->p;
    char *work = coll_sched_scratch(h->s, total * es), *tmp = coll_sched_scratch(h->s, total * es);
    const char *cur = a->sendbuf;
    coll_vid_t prev = -1;
    int lo = 0, hi = h->p2;

    if (!work || !tmp)
        return;
    if (h->r < 2 * h->rem) { /* fold in the even partner's vector */
        prev = coll_sched_recv_reduce(h->s, work, a->sendbuf, tmp, total, h->r - 1, 0,
                                      COLL_INCOMING_FIRST, COLL_NODEPS);
        cur = work;
    }
    for (int k = 0; k < h->steps; k++) {
        int m = h->p2 >> (k + 1), peer = coll_fold_rank(h->v ^ m, h->rem), klo = lo, khi = hi;
        split(h, m, &klo, &khi);
        int glo = klo == lo ? khi : lo, ghi = klo == lo ? hi : klo; /* the other half */
        size_t gofs = goff(h, glo), gn = goff(h, ghi) - gofs;
        size_t kofs = goff(h, klo), kn = goff(h, khi) - kofs;
        coll_sched_send(h->s, cur + gofs * es, gn * es, peer, (uint32_t)(2 + k), COLL_DEPS(prev));
        prev = coll_sched_recv_reduce(h->s, work + kofs * es, cur + kofs * es, tmp, kn, peer,
                                      (uint32_t)(2 + k), COLL_LOCAL_FIRST, COLL_DEPS(prev));
        cur = work;
        lo = klo;
        hi = khi;
    }
    if (h->steps == 0 && h->r >= 2 * h->rem) /* p == 1 */
        prev = coll_sched_copy(h->s, work, a->sendbuf, total * es, COLL_NODEPS);
    deliver(h, work + goff(h, lo) * es, prev);
}

/* ---- deterministic ------------------------------------------------------- */

/* The virtual ranks whose rows u holds after the steps with masks > m,
 * in buffer order. Those steps took masks T[0] = p2/2, T[1], ..., 2m, and
 * u holds every virtual rank that differs from it only in those bits.
 * Each step put the side whose bit is 0 first, so the mask taken last is
 * the most significant key of the order: entry i sets T[j] for each bit j
 * of i. */
static int held(const halving_t *h, int u, int m, int *out)
{
    int taken[32], d = 0, masks = 0;

    for (int mm = h->p2 >> 1; mm > m; mm >>= 1) {
        taken[d++] = mm;
        masks |= mm;
    }
    for (int i = 0; i < (1 << d); i++) {
        int x = u & ~masks;
        for (int j = 0; j < d; j++)
            if (i & (1 << j))
                x |= taken[j];
        out[i] = x;
    }
    return 1 << d;
}

/* Real rows of a list of virtual ranks, in order. */
static int real_rows(const halving_t *h, const int *virt, int nv, int *rows)
{
    int n = 0;
    for (int i = 0; i < nv; i++)
        for (int r = coll_fold_first(virt[i], h->rem); r < coll_fold_first(virt[i] + 1, h->rem); r++)
            rows[n++] = r;
    return n;
}

static void halve_gather(halving_t *h)
{
    const coll_args_t *a = h->a;
    size_t es = a->esize, total = a->count * (size_t)h->p;
    int *virt = coll_sched_scratch(h->s, (size_t)h->p2 * sizeof(int));
    int *pvirt = coll_sched_scratch(h->s, (size_t)h->p2 * sizeof(int));
    int *rows = coll_sched_scratch(h->s, (size_t)h->p * sizeof(int));
    int *prows = coll_sched_scratch(h->s, (size_t)h->p * sizeof(int));
    const char *buf = a->sendbuf;
    coll_vid_t ready = -1;
    int lo = 0, hi = h->p2, nrows;

    if (!virt || !pvirt || !rows || !prows)
        return;
    if (h->r < 2 * h->rem) { /* the even partner's row, then ours */
        char *two = coll_sched_scratch(h->s, 2 * total * es);
        if (!two)
            return;
        coll_vid_t rv = coll_sched_recv(h->s, two, total * es, h->r - 1, 0, COLL_NODEPS);
        coll_vid_t cp = coll_sched_copy(h->s, two + total * es, a->sendbuf, total * es,
                                        COLL_NODEPS);
        ready = coll_sched_join(h->s, COLL_DEPS(rv, cp));
        buf = two;
    }
    for (int k = 0; k < h->steps; k++) {
        int m = h->p2 >> (k + 1), peer = coll_fold_rank(h->v ^ m, h->rem), klo = lo, khi = hi;
        int nv = held(h, h->v, m, virt), pnv = held(h, h->v ^ m, m, pvirt);
        nrows = real_rows(h, virt, nv, rows);
        int pn = real_rows(h, pvirt, pnv, prows), first = (h->v & m) != 0;
        split(h, m, &klo, &khi);
        int glo = klo == lo ? khi : lo, ghi = klo == lo ? hi : klo;
        size_t segn = goff(h, hi) - goff(h, lo), kn = goff(h, khi) - goff(h, klo);
        size_t gn = goff(h, ghi) - goff(h, glo);
        size_t koff = goff(h, klo) - goff(h, lo), gofs = goff(h, glo) - goff(h, lo);
        char *pack = coll_sched_scratch(h->s, (size_t)nrows * gn * es);
        char *next = coll_sched_scratch(h->s, (size_t)(nrows + pn) * kn * es);
        coll_vid_t done = ready;
        if (!pack || !next)
            return;
        /* rows in `next`: the side whose bit m is 0 first */
        for (int i = 0; i < nrows; i++) {
            const char *row = buf + (size_t)i * segn * es;
            coll_vid_t c1 = coll_sched_copy(h->s, pack + (size_t)i * gn * es, row + gofs * es,
                                            gn * es, COLL_DEPS(ready));
            coll_vid_t c2 = coll_sched_copy(h->s, next + (size_t)(i + (first ? pn : 0)) * kn * es,
                                            row + koff * es, kn * es, COLL_DEPS(ready));
            done = coll_sched_join(h->s, COLL_DEPS(done, c1, c2));
        }
        coll_vid_t sv = coll_sched_send(h->s, pack, (size_t)nrows * gn * es, peer,
                                        (uint32_t)(2 + k), COLL_DEPS(done));
        coll_vid_t rv = coll_sched_recv(h->s, next + (size_t)(first ? 0 : nrows) * kn * es,
                                        (size_t)pn * kn * es, peer, (uint32_t)(2 + k), COLL_NODEPS);
        ready = coll_sched_join(h->s, COLL_DEPS(done, sv, rv));
        buf = next;
        lo = klo;
        hi = khi;
    }
    /* every rank's row of our group, in held order: reduce in rank order */
    int nv = held(h, h->v, 0, virt);
    nrows = real_rows(h, virt, nv, rows);
    size_t gn = goff(h, hi) - goff(h, lo);
    int *row_of = prows; /* inverse: real rank -> row */
    for (int i = 0; i < nrows; i++)
        row_of[rows[i]] = i;
    char *work = coll_sched_scratch(h->s, gn * es);
    if (!work)
        return;
#define ROW(k) (buf + (size_t)row_of[k] * gn * es)
    if (h->p == 1)
        ready = coll_sched_copy(h->s, work, ROW(0), gn * es, COLL_DEPS(ready));
    else
        ready = coll_sched_reduce(h->s, work, ROW(0), ROW(1), gn, COLL_DEPS(ready));
    for (int k = 2; k < h->p; k++)
        ready = coll_sched_reduce(h->s, work, work, ROW(k), gn, COLL_DEPS(ready));
#undef ROW
    deliver(h, work, ready);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    halving_t h = {.s = s, .a = a, .p = coll_sched_size(s), .r = coll_sched_rank(s)};

    if (a->count == 0)
        return;
    h.p2 = coll_pow2_floor(h.p);
    h.rem = h.p - h.p2;
    h.v = coll_fold_vrank(h.r, h.rem);
    h.bytes = a->count * a->esize;
    while ((1 << h.steps) < h.p2)
        h.steps++;
    if (h.v < 0) { /* folded out: hand everything in, get our block back */
        size_t total = h.bytes * (size_t)h.p;
        coll_vid_t up = coll_sched_send(s, a->sendbuf, total, h.r + 1, 0, COLL_NODEPS);
        coll_sched_recv(s, a->recvbuf, h.bytes, h.r + 1, 1, COLL_DEPS(up));
        return;
    }
    if (a->deterministic)
        halve_gather(&h);
    else
        halve_reduce(&h);
}

/* Folding here hands in the whole vector (alpha + n beta, n gamma) but
 * hands back only one block (alpha + n/p beta). */
static double fold(const coll_cost_in_t *c)
{
    if (coll_pow2_floor((int)c->p) == (int)c->p)
        return 0;
    return 2 * c->alpha + (c->n + c->n / c->p) * c->beta + c->n * c->gamma;
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1, steps = coll_log2(coll_pow2_floor((int)c->p));
    if (c->det)
        return steps * c->alpha + c->n / 2 * steps * c->beta + c->n * q / c->p * c->gamma +
               c->n * steps * c->copy + fold(c);
    return steps * c->alpha + c->n * q / c->p * (c->beta + c->gamma) + fold(c);
}

static int usable(const coll_args_t *a, int nranks, const char **why)
{
    if (!a->deterministic ||
        coll_det_halving_scratch((double)(a->count * a->esize) * nranks, nranks) <=
            (double)a->det_scratch_max)
        return 1;
    *why = "in deterministic mode its halving steps carry every rank's rows, which exceeds "
           "COLL_DET_SCRATCH_MAX";
    return 0;
}

const coll_algo_t coll_algo_reduce_scatter_recursive_halving = {
    COLL_REDUCE_SCATTER, "recursive_halving", build, usable, cost,
};
