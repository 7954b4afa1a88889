/*
 * allreduce_butterfly.c: Rabenseifner's all-reduce (2004): a recursive
 * halving reduce-scatter followed by a recursive doubling all-gather. In
 * step k of the first phase each (virtual) rank exchanges half of its
 * current segment with the rank whose number differs in bit k, keeps and
 * reduces the other half; after log2 p steps it owns one block of n/p
 * fully reduced. The second phase retraces the steps, doubling the
 * segment each time. Non-power-of-two p is folded first (algorithms.h).
 *
 * Cost: 2 log2(p) (alpha + min(n/2, chunk) beta) + 2 n (p-1)/p beta +
 *       n (p-1)/p gamma (+ 2 alpha + 2 n beta + n gamma when p is not a
 *       power of two). Each step waits for its whole message, so the link
 *       idles while the last chunk of it drains: min(n/2, chunk) beta per
 *       step boundary (measured on a 1 Gbit/s link: the pipelined ring
 *       reaches 90-95% of the link, this 85-88%).
 * Any p, any op. Scratch: n elements. Out of place the first step sends
 * from and reduces with the send buffer, so no step copies the vector
 * whole (2 ranks, shared memory, 16 MiB: 4.7 -> 3.5 ms).
 *
 * Deterministic mode: the halving phase moves contributions instead of
 * partial sums: in step k a rank sends the half it gives up of all the
 * rows (one per rank) it holds, so the rows it keeps double while the
 * segment halves; at the end it holds every rank's contribution to its
 * block and adds them in rank order. Cost: 2 log2(p) alpha +
 * (n/2 log2 p + n (p-1)/p) beta + n (p-1)/p gamma + n log2(p) copy
 * (+ the fold); scratch 1.5 n log2(p) bytes (about twice that when p is
 * not a power of two), usable while that stays under COLL_DET_SCRATCH_MAX.
 */
#include "algorithms.h"

typedef struct seg {
    int lo, hi; /* blocks [lo, hi) of p2 blocks */
} seg_t;

typedef struct fly {
    coll_sched_t *s;
    const coll_args_t *a;
    int p, r, p2, rem, v, steps;
    seg_t *sent;          /* [steps]: the half given away in each step */
    coll_vid_t *freed;    /* [steps]: when that half of recvbuf may be overwritten */
    coll_vid_t folded;    /* the last halving step's fold (-1: deterministic mode) */
} fly_t;

static size_t eoff(const fly_t *f, int block)
{
    return coll_block_offset(f->a->count, f->p2, block);
}

static size_t elems(const fly_t *f, seg_t g)
{
    return eoff(f, g.hi) - eoff(f, g.lo);
}

static void *at(const fly_t *f, int block)
{
    return COLL_PTR(f->a->recvbuf, eoff(f, block), f->a->esize);
}

/* Split g for step mask m: which half this rank keeps, which it sends. */
static void halves(const fly_t *f, seg_t g, int m, seg_t *keep, seg_t *give)
{
    int mid = (g.lo + g.hi) / 2;
    seg_t lower = {g.lo, mid}, upper = {mid, g.hi};
    *keep = (f->v & m) ? upper : lower;
    *give = (f->v & m) ? lower : upper;
}

/* Halving with partial sums; returns the vertex after which our block is
 * reduced, and sets *final to it. */
static coll_vid_t halve_reduce(fly_t *f, seg_t *final)
{
    const coll_args_t *a = f->a;
    size_t es = a->esize, n = a->count;
    void *tmp = coll_sched_scratch(f->s, n * es);
    coll_vid_t prev;
    seg_t g = {0, f->p2};

    /* where the vector is: the send buffer until the first step reduces
     * into recvbuf (a rank that folds a partner in starts in recvbuf) */
    const void *src = a->sendbuf;
    prev = -1;
    if (f->r < 2 * f->rem) {
        prev = coll_sched_recv_reduce(f->s, a->recvbuf, a->sendbuf, tmp, n, f->r - 1, 0,
                                      COLL_INCOMING_FIRST, COLL_NODEPS);
        src = a->recvbuf;
    }
    for (int k = 0; k < f->steps; k++) {
        int m = 1 << k, peer = coll_fold_rank(f->v ^ m, f->rem);
        seg_t keep, give;
        halves(f, g, m, &keep, &give);
        f->sent[k] = give;
        /* the last step's halves are final once folded: each side may write
         * the other's straight back (the first doubling step, same peer) */
        void *reply = k == f->steps - 1 ? at(f, give.lo) : NULL;
        f->freed[k] = coll_sched_send_reply(f->s, COLL_PTR(src, eoff(f, give.lo), es),
                                            elems(f, give) * es, reply, peer,
                                            (uint32_t)(2 + k), COLL_DEPS(prev));
        /* the send reads the other half: folding into ours is safe */
        prev = (reply ? coll_sched_recv_reduce_reply : coll_sched_recv_reduce)(
            f->s, at(f, keep.lo), COLL_PTR(src, eoff(f, keep.lo), es), tmp, elems(f, keep), peer,
            (uint32_t)(2 + k), COLL_LOCAL_FIRST, COLL_DEPS(prev));
        f->folded = prev;
        src = a->recvbuf;
        g = keep;
    }
    *final = g;
    return prev;
}

/* Halving with contributions (deterministic). rows: real ranks [rlo, rhi);
 * buf: rows x segment elements, row-major. */
static coll_vid_t halve_gather(fly_t *f, seg_t *final)
{
    const coll_args_t *a = f->a;
    size_t es = a->esize, n = a->count;
    int rlo = f->r, rhi = f->r + 1;
    const char *buf = a->sendbuf;
    coll_vid_t ready = -1, src_read = -1;
    seg_t g = {0, f->p2};

    if (f->r < 2 * f->rem) { /* we hold our even partner's row too */
        char *two = coll_sched_scratch(f->s, 2 * n * es);
        if (!two)
            return -1;
        coll_vid_t rv = coll_sched_recv(f->s, two, n * es, f->r - 1, 0, COLL_NODEPS);
        src_read = coll_sched_copy(f->s, two + n * es, a->sendbuf, n * es, COLL_NODEPS);
        ready = coll_sched_join(f->s, COLL_DEPS(rv, src_read));
        buf = two;
        rlo = f->r - 1;
    }
    for (int k = 0; k < f->steps; k++) {
        int m = 1 << k, peer = coll_fold_rank(f->v ^ m, f->rem), rows = rhi - rlo;
        int pbase = (f->v & ~(m - 1)) ^ m;
        int plo = coll_fold_first(pbase, f->rem), phi = coll_fold_first(pbase + m, f->rem);
        int prows = phi - plo, first = plo < rlo; /* partner's rows come first */
        size_t segn = elems(f, g);
        seg_t keep, give;
        halves(f, g, m, &keep, &give);
        size_t kn = elems(f, keep), gn = elems(f, give);
        size_t koff = eoff(f, keep.lo) - eoff(f, g.lo), goff = eoff(f, give.lo) - eoff(f, g.lo);
        char *pack = coll_sched_scratch(f->s, (size_t)rows * gn * es);
        char *next = coll_sched_scratch(f->s, (size_t)(rows + prows) * kn * es);
        coll_vid_t done = ready;
        if (!pack || !next)
            return -1;
        for (int i = 0; i < rows; i++) {
            const char *row = buf + (size_t)i * segn * es;
            coll_vid_t c1 = coll_sched_copy(f->s, pack + (size_t)i * gn * es, row + goff * es,
                                            gn * es, COLL_DEPS(ready));
            coll_vid_t c2 = coll_sched_copy(f->s, next + (size_t)(i + (first ? prows : 0)) * kn * es,
                                            row + koff * es, kn * es, COLL_DEPS(ready));
            done = coll_sched_join(f->s, COLL_DEPS(done, c1, c2));
        }
        coll_vid_t sv = coll_sched_send(f->s, pack, (size_t)rows * gn * es, peer,
                                        (uint32_t)(2 + k), COLL_DEPS(done));
        coll_vid_t rv = coll_sched_recv(f->s, next + (size_t)(first ? 0 : rows) * kn * es,
                                        (size_t)prows * kn * es, peer, (uint32_t)(2 + k),
                                        COLL_NODEPS);
        if (k == 0 && f->r >= 2 * f->rem)
            src_read = done; /* the first step read the send buffer directly */
        ready = coll_sched_join(f->s, COLL_DEPS(done, sv, rv));
        f->sent[k] = give;
        buf = next;
        g = keep;
        rlo = first ? plo : rlo;
        rhi = first ? rhi : phi;
    }
    /* recvbuf may be the send buffer: overwrite it only after it was read */
    for (int k = 0; k < f->steps; k++)
        f->freed[k] = src_read;
    /* every rank's row of our block: ((x0 op x1) op x2) ... */
    size_t bn = elems(f, g);
    void *dst = at(f, g.lo);
    if (f->p == 1)
        ready = coll_sched_copy(f->s, dst, buf, bn * es, COLL_DEPS(ready));
    else
        ready = coll_sched_reduce(f->s, dst, buf, buf + bn * es, bn, COLL_DEPS(ready));
    for (int i = 2; i < f->p; i++)
        ready = coll_sched_reduce(f->s, dst, dst, buf + (size_t)i * bn * es, bn, COLL_DEPS(ready));
    *final = g;
    return ready;
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    fly_t f = {.s = s, .a = a, .p = coll_sched_size(s), .r = coll_sched_rank(s), .folded = -1};
    size_t es = a->esize, bytes = a->count * es;
    seg_t g = {0, 1};
    coll_vid_t prev;

    if (a->count == 0)
        return;
    if (f.p == 1) {
        coll_sched_one_rank(s);
        return;
    }
    f.p2 = coll_pow2_floor(f.p);
    f.rem = f.p - f.p2;
    f.v = coll_fold_vrank(f.r, f.rem);
    while ((1 << f.steps) < f.p2)
        f.steps++;
    if (f.v < 0) { /* folded out: hand our vector in, get the result back */
        coll_vid_t up = coll_sched_send(s, a->sendbuf, bytes, f.r + 1, 0, COLL_NODEPS);
        coll_sched_recv(s, a->recvbuf, bytes, f.r + 1, 1, COLL_DEPS(up));
        return;
    }
    f.sent = coll_sched_scratch(s, (size_t)(f.steps + 1) * sizeof(*f.sent));
    f.freed = coll_sched_scratch(s, (size_t)(f.steps + 1) * sizeof(*f.freed));
    if (!f.sent || !f.freed)
        return;
    prev = a->deterministic ? halve_gather(&f, &g) : halve_reduce(&f, &g);
    prev = coll_sched_finish_avg(s, at(&f, g.lo), elems(&f, g), COLL_DEPS(prev));
    /* doubling: retrace the steps, exchanging finished segments */
    for (int k = f.steps - 1; k >= 0; k--) {
        int peer = coll_fold_rank(f.v ^ (1 << k), f.rem);
        uint32_t tag = (uint32_t)(2 + f.steps + k);
        coll_vid_t sv = coll_sched_send(s, at(&f, g.lo), elems(&f, g) * es, peer, tag,
                                        COLL_DEPS(prev));
        coll_vid_t rv = coll_sched_recv(s, at(&f, f.sent[k].lo), elems(&f, f.sent[k]) * es, peer,
                                        tag, COLL_DEPS(f.freed[k]));
        if (k == f.steps - 1 && f.folded >= 0) { /* the last halving step's halves, back */
            coll_sched_unless_replied(s, sv, f.folded);
            coll_sched_unless_replied(s, rv, f.freed[k]);
        }
        prev = coll_sched_join(s, COLL_DEPS(prev, rv));
        g.lo = g.lo < f.sent[k].lo ? g.lo : f.sent[k].lo;
        g.hi = g.hi > f.sent[k].hi ? g.hi : f.sent[k].hi;
    }
    if (f.r < 2 * f.rem)
        coll_sched_send(s, a->recvbuf, bytes, f.r - 1, 1, COLL_DEPS(prev));
}

/* Where all ranks share the CPUs of one host, over its loopback, at
 * small-to-mid sizes, nothing drains between steps (drain below): a rank
 * waiting for a step's last bytes gives its CPU to a rank that has work,
 * and the butterfly saves the ring's extra step boundaries (a rendezvous
 * or a wake-up each). Below CROWDED_HALVES_MIN recursive doubling's log2 p
 * steps beat its 2 log2 p. How far up it wins falls steeply with the
 * crowding (because, we think, the more ranks a CPU runs, the less often
 * both ends of a pairwise step run together, where the ring's chunks move
 * between any two neighbours that do): the bound, crowd^3 n <=
 * CROWDED_HALVES_MAX (4 ranks on 2 CPUs: 1 MiB; 8 ranks: 128 KiB; 16:
 * none), is fitted to measurements over TCP on the Intel VM of
 * 2026-12-07, launches of 50-200 calls, this one's time over the ring's
 * out / in place: 4 ranks 64 KiB 0.68 / 0.70, 1 MiB 0.98-1.06 /
 * 0.89-0.95, 4 MiB 1.03 / 0.98; 8 ranks 128 KiB 0.69-0.74 / 0.71-1.03,
 * 256 KiB 1.05-1.18 / 0.82-1.29. Against recursive doubling 4 ranks 16
 * KiB 1.51 / 1.49, 64 KiB 0.71 / 0.95. With a CPU per rank the drain
 * shows (2 ranks, 1 MiB: 269 / 265 -> 328 / 268 us against the ring).
 * Every figure, and why forced sweeps mislead here (sockets warmed by the
 * warm-up): docs/performance-history.md, "The crowded butterfly to 1 MiB
 * on 4 ranks". Where p is not a power of two the fold step keeps the
 * ring cheaper at these sizes.
 */
#define CROWDED_HALVES_MIN (64u << 10)
#define CROWDED_HALVES_MAX (8u << 20)

static int crowded_halves(const coll_cost_in_t *c)
{
    return c->one_host && c->crowd > 1 && c->n >= CROWDED_HALVES_MIN &&
           c->crowd * c->crowd * c->crowd * c->n <= CROWDED_HALVES_MAX;
}

/* Each step waits for its whole message before the next one starts, so
 * the link idles while the last bytes drain: about one pipeline chunk
 * (or the half exchanged, when smaller) per step boundary. Where every
 * pair shares memory (c->pull) there is no link to idle: the CPUs that
 * move the bytes are the ones that go on to the next step (2 and 4 ranks,
 * 64 KiB to 64 MiB, this against the ring: level to 512 KiB, then 7-25%
 * faster; 3-4 alternating rounds on 2026-12-06); nor where ranks share
 * one host's CPUs at small-to-mid sizes (crowded_halves). */
static double drain(const coll_cost_in_t *c)
{
    double half = c->n / 2;
    if (c->pull || crowded_halves(c))
        return 0;
    return (half < c->chunk ? half : c->chunk) * c->beta;
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1, steps = coll_log2(coll_pow2_floor((int)c->p));
    if (c->det)
        return 2 * steps * c->alpha + (c->n / 2 * steps + c->n * q / c->p) * c->beta +
               c->n * q / c->p * c->gamma + c->n * steps * c->copy + coll_cost_fold(c, 1);
    return 2 * steps * (c->alpha + drain(c)) + 2 * c->n * q / c->p * c->beta +
           c->n * q / c->p * c->gamma + coll_cost_fold(c, 1);
}

static int usable(const coll_args_t *a, int nranks, const char **why)
{
    if (!a->deterministic ||
        coll_det_halving_scratch((double)(a->count * a->esize), nranks) <=
            (double)a->det_scratch_max)
        return 1;
    *why = "in deterministic mode its halving steps carry every rank's rows, which exceeds "
           "COLL_DET_SCRATCH_MAX";
    return 0;
}

const coll_algo_t coll_algo_allreduce_butterfly = {
    COLL_ALLREDUCE, "butterfly", build, usable, cost,
};
