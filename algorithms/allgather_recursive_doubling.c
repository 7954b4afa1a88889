/*
 * allgather_recursive_doubling.c: the recursive-doubling all-gather. In
 * step k each (virtual) rank exchanges every block it holds with the rank
 * whose number differs in bit k, so what it holds doubles each step and
 * after log2 p steps it holds everything. The blocks a rank holds before
 * step k are those of the 2^k ranks that share its number above bit k: a
 * contiguous range of recvbuf, so each step is one message each way,
 * received straight into place.
 *
 * Non-power-of-two p is folded (algorithms.h): rank 2i (i < rem) hands its
 * block to rank 2i+1 and sits out; the folded ranks keep contiguous ranges
 * (virtual rank v holds the blocks of real ranks coll_fold_first(v) ..
 * coll_fold_first(v+1)-1), and at the end each odd rank sends the whole
 * result to its even partner.
 *
 * Cost: log2(p) alpha + n (p-1)/p beta for p a power of two, n = p * count
 * * esize; otherwise floor(log2 p) alpha + about n (p-1)/p beta, + 2 alpha
 * + n (1 + 1/p) beta for folding in and out; a wait for a partner per
 * step (coll_pull_waits). Any p. In place (sendbuf == recvbuf + r *
 * count) nothing is copied; out of place our block is copied into recvbuf
 * first (n/p bytes).
 */
#include "algorithms.h"

enum { TAG_FOLD_IN, TAG_FOLD_OUT, TAG_STEP };

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    int p2 = coll_pow2_floor(p), rem = p - p2, v = coll_fold_vrank(r, rem);
    size_t bytes = a->count * a->esize;
    coll_vid_t ready = -1; /* every block we hold so far is in recvbuf */

    if (a->count == 0)
        return;
    if (v < 0) { /* folded out: hand our block in, get the whole result back */
        coll_vid_t up = coll_sched_send(s, a->sendbuf, bytes, r + 1, TAG_FOLD_IN, COLL_NODEPS);
        /* in place, the result overwrites the block being sent */
        coll_sched_recv(s, a->recvbuf, (size_t)p * bytes, r + 1, TAG_FOLD_OUT, COLL_DEPS(up));
        return;
    }
    if (!a->in_place)
        ready = coll_sched_copy(s, coll_recv_block(a, r), a->sendbuf, bytes, COLL_NODEPS);
    if (r < 2 * rem) {
        coll_vid_t in = coll_sched_recv(s, coll_recv_block(a, r - 1), bytes, r - 1, TAG_FOLD_IN,
                                        COLL_NODEPS);
        ready = coll_sched_join(s, COLL_DEPS(ready, in));
    }
    for (int k = 0, m = 1; m < p2; k++, m <<= 1) {
        int mine = v & ~(m - 1), theirs = mine ^ m, peer = coll_fold_rank(v ^ m, rem);
        int lo = coll_fold_first(mine, rem), hi = coll_fold_first(mine + m, rem);
        int plo = coll_fold_first(theirs, rem), phi = coll_fold_first(theirs + m, rem);
        coll_sched_send(s, coll_recv_block(a, lo), (size_t)(hi - lo) * bytes, peer,
                        (uint32_t)(TAG_STEP + k), COLL_DEPS(ready));
        /* the partner's range is disjoint from everything we read so far */
        coll_vid_t rv = coll_sched_recv(s, coll_recv_block(a, plo), (size_t)(phi - plo) * bytes,
                                        peer, (uint32_t)(TAG_STEP + k), COLL_NODEPS);
        ready = coll_sched_join(s, COLL_DEPS(ready, rv));
    }
    if (r < 2 * rem)
        coll_sched_send(s, a->recvbuf, (size_t)p * bytes, r - 1, TAG_FOLD_OUT, COLL_DEPS(ready));
}

static double cost(const coll_cost_in_t *c)
{
    double p2 = coll_pow2_floor((int)c->p), fold = 0, waits = coll_log2(p2);
    if (p2 != c->p) {
        fold = 2 * c->alpha + c->n * (1 + 1 / c->p) * c->beta;
        waits += 2;
    }
    return coll_log2(p2) * c->alpha + c->n * (c->p - 1) / c->p * c->beta + fold +
           coll_pull_waits(c, waits);
}

const coll_algo_t coll_algo_allgather_recursive_doubling = {
    COLL_ALLGATHER, "recursive_doubling", build, NULL, cost,
};
