/*
 * allreduce_recursive_doubling.c: in step k each rank exchanges its whole
 * vector with the rank whose (virtual) number differs in bit k and combines
 * the two; after log2 p steps every rank holds the result. Few steps, so it
 * is the choice for small vectors. Non-power-of-two p is folded first
 * (algorithms.h): the extra ranks hand their data in and get the result
 * back at the end.
 *
 * Cost: log2(p') (alpha + n beta + n gamma), p' the largest power of two
 * <= p (+ 2 alpha + 2 n beta + n gamma when p is not a power of two: the
 * vector handed in and the result handed back).
 * Any p, any op (all ops are commutative, so both partners compute the
 * same bits).
 *
 * Deterministic mode: the ranks exchange contributions instead of partial
 * results (a recursive-doubling all-gather of every rank's vector), then
 * each adds the p vectors in rank order. Cost: ceil(log2 p) alpha +
 * (p-1) n beta + (p-1) n gamma, and p n bytes of scratch, so it is usable
 * only while p n stays under COLL_DET_SCRATCH_MAX.
 */
#include "algorithms.h"

/* Deterministic: gather every contribution, then reduce in rank order. */
static void gather_then_reduce(coll_sched_t *s, int v, int p2, int rem)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t row = a->count * a->esize;
    char *all = coll_sched_scratch(s, (size_t)p * row); /* [rank][count] */
    coll_vid_t ready;

    if (!all)
        return;
    ready = coll_sched_copy(s, all + (size_t)r * row, a->sendbuf, row, COLL_NODEPS);
    if (r < 2 * rem) { /* the odd rank also holds its even partner's row */
        coll_vid_t rv = coll_sched_recv(s, all + (size_t)(r - 1) * row, row, r - 1, 0, COLL_NODEPS);
        ready = coll_sched_join(s, COLL_DEPS(ready, rv));
    }
    for (int m = 1; m < p2; m <<= 1) {
        int mine = v & ~(m - 1), theirs = mine ^ m;
        int lo = coll_fold_first(mine, rem), hi = coll_fold_first(mine + m, rem);
        int plo = coll_fold_first(theirs, rem), phi = coll_fold_first(theirs + m, rem);
        int peer = coll_fold_rank(v ^ m, rem);
        coll_sched_send(s, all + (size_t)lo * row, (size_t)(hi - lo) * row, peer,
                        (uint32_t)(1 + m), COLL_DEPS(ready));
        coll_vid_t rv = coll_sched_recv(s, all + (size_t)plo * row, (size_t)(phi - plo) * row,
                                        peer, (uint32_t)(1 + m), COLL_NODEPS);
        ready = coll_sched_join(s, COLL_DEPS(ready, rv));
    }
    /* ((x0 op x1) op x2) ... */
    if (p == 1)
        ready = coll_sched_copy(s, a->recvbuf, all, row, COLL_DEPS(ready));
    else
        ready = coll_sched_reduce(s, a->recvbuf, all, all + row, a->count, COLL_DEPS(ready));
    for (int k = 2; k < p; k++)
        ready = coll_sched_reduce(s, a->recvbuf, a->recvbuf, all + (size_t)k * row, a->count,
                                  COLL_DEPS(ready));
    ready = coll_sched_finish_avg(s, a->recvbuf, a->count, COLL_DEPS(ready));
    if (r < 2 * rem)
        coll_sched_send(s, a->recvbuf, row, r - 1, 1, COLL_DEPS(ready));
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    int p2 = coll_pow2_floor(p), rem = p - p2, v = coll_fold_vrank(r, rem);
    size_t bytes = a->count * a->esize;
    coll_vid_t prev = -1;

    if (a->count == 0)
        return;
    if (v < 0) { /* folded out: hand our vector in, get the result back */
        coll_vid_t up = coll_sched_send(s, a->sendbuf, bytes, r + 1, 0, COLL_NODEPS);
        coll_sched_recv(s, a->recvbuf, bytes, r + 1, 1, COLL_DEPS(up));
        return;
    }
    if (a->deterministic) {
        gather_then_reduce(s, v, p2, rem);
        return;
    }
    /* Out of place, the first exchange sends sendbuf and combines into
     * recvbuf: no copy of our vector first (with 2 ranks, no copy at all,
     * and no scratch where the transport reduces as data arrives) */
    int direct = p2 > 1 && r >= 2 * rem && a->sendbuf != a->recvbuf;
    void *tmp = direct && p2 == 2 ? NULL : coll_sched_scratch(s, bytes);
    if (r < 2 * rem) {
        coll_vid_t rv = coll_sched_recv(s, tmp, bytes, r - 1, 0, COLL_NODEPS);
        prev = coll_sched_reduce(s, a->recvbuf, tmp, a->sendbuf, a->count, COLL_DEPS(rv));
    } else if (!direct) {
        prev = coll_sched_copy(s, a->recvbuf, a->sendbuf, bytes, COLL_NODEPS);
    }
    for (int m = 1; m < p2; m <<= 1) {
        int peer = coll_fold_rank(v ^ m, rem);
        if (m == 1 && direct) {
            coll_sched_send(s, a->sendbuf, bytes, peer, (uint32_t)(1 + m), COLL_NODEPS);
            prev = coll_sched_recv_reduce(s, a->recvbuf, a->sendbuf, tmp, a->count, peer,
                                          (uint32_t)(1 + m), COLL_LOCAL_FIRST, COLL_NODEPS);
            continue;
        }
        coll_vid_t sv = coll_sched_send(s, a->recvbuf, bytes, peer, (uint32_t)(1 + m),
                                        COLL_DEPS(prev));
        coll_vid_t rv = coll_sched_recv(s, tmp, bytes, peer, (uint32_t)(1 + m), COLL_DEPS(prev));
        /* combining overwrites what we are sending: wait for the send */
        prev = coll_sched_reduce(s, a->recvbuf, a->recvbuf, tmp, a->count, COLL_DEPS(sv, rv));
    }
    prev = coll_sched_finish_avg(s, a->recvbuf, a->count, COLL_DEPS(prev));
    if (r < 2 * rem)
        coll_sched_send(s, a->recvbuf, bytes, r - 1, 1, COLL_DEPS(prev));
}

static double cost(const coll_cost_in_t *c)
{
    double steps = coll_log2(coll_pow2_floor((int)c->p)), q = c->p - 1;
    if (c->det)
        return coll_log2(c->p) * c->alpha + q * c->n * (c->beta + c->gamma);
    return steps * (c->alpha + c->n * c->beta + c->n * c->gamma) + coll_cost_fold(c, 1);
}

/* Deterministic mode keeps p vectors. */
static int usable(const coll_args_t *a, int nranks, const char **why)
{
    if (!a->deterministic || a->count * a->esize <= a->det_scratch_max / (size_t)nranks)
        return 1;
    *why = "in deterministic mode it keeps every rank's vector, which exceeds "
           "COLL_DET_SCRATCH_MAX";
    return 0;
}

const coll_algo_t coll_algo_allreduce_recursive_doubling = {
    COLL_ALLREDUCE, "recursive_doubling", build, usable, cost,
};
