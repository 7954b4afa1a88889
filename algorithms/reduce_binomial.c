/*
 * reduce_binomial.c: reduce along a binomial tree rooted at `root`. With
 * relative rank q = (r - root) mod p, in step k a rank whose bit k is set
 * sends its partial result to q - 2^k and is done; the others receive
 * from q + 2^k (if it exists) and add it in. Few steps: for small vectors.
 *
 * Cost: ceil(log2 p) (alpha + n beta + n gamma). Any p, any root, any op.
 *
 * Deterministic mode: the tree gathers contributions instead of sums (a
 * subtree of q holds relative ranks q .. q + 2^k - 1, one row each) and
 * the root adds the p rows in rank order. Cost: ceil(log2 p) alpha +
 * n (p-1) beta + n (p-1) gamma at the root, which keeps p vectors: usable
 * while p n stays under COLL_DET_SCRATCH_MAX.
 */
#include "algorithms.h"

static int real(int q, int root, int p)
{
    return (q + root) % p;
}

static void tree_reduce(coll_sched_t *s, int q)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), root = a->root;
    size_t bytes = a->count * a->esize;
    const void *cur = a->sendbuf;
    void *acc = q == 0 ? a->recvbuf : NULL, *tmp = NULL;
    coll_vid_t prev = -1;
    int received = 0; /* in place, acc is sendbuf: track it, do not compare pointers */

    for (int mask = 1; mask < p; mask <<= 1) {
        if (q & mask) {
            coll_sched_send(s, cur, bytes, real(q - mask, root, p), (uint32_t)mask, COLL_DEPS(prev));
            return;
        }
        if (q + mask >= p)
            continue;
        if (!tmp) {
            tmp = coll_sched_scratch(s, bytes);
            acc = acc ? acc : coll_sched_scratch(s, bytes);
        }
        prev = coll_sched_recv_reduce(s, acc, cur, tmp, a->count, real(q + mask, root, p),
                                      (uint32_t)mask, COLL_LOCAL_FIRST, COLL_DEPS(prev));
        cur = acc;
        received = 1;
    }
    if (!received) /* one rank: nothing came in */
        prev = coll_sched_copy(s, a->recvbuf, a->sendbuf, bytes, COLL_NODEPS);
    coll_sched_finish_avg(s, a->recvbuf, a->count, COLL_DEPS(prev));
}

/* Deterministic: gather rows (by relative rank), the root adds in rank order. */
static void tree_gather(coll_sched_t *s, int q)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), root = a->root;
    size_t bytes = a->count * a->esize;
    int span = 1; /* rows gathered so far: relative ranks q .. q + span - 1 */
    while (span < p && !(q & span) && q + span < p)
        span <<= 1;
    span = q + span > p ? p - q : span;
    char *rows = coll_sched_scratch(s, (size_t)span * bytes);
    coll_vid_t ready;

    if (!rows)
        return;
    ready = coll_sched_copy(s, rows, a->sendbuf, bytes, COLL_NODEPS);
    for (int mask = 1; mask < p; mask <<= 1) {
        if (q & mask) {
            int n = q + mask > p ? p - q : mask;
            coll_sched_send(s, rows, (size_t)n * bytes, real(q - mask, root, p), (uint32_t)mask,
                            COLL_DEPS(ready));
            return;
        }
        if (q + mask >= p)
            continue;
        int n = q + 2 * mask > p ? p - q - mask : mask; /* the child's subtree */
        coll_vid_t rv = coll_sched_recv(s, rows + (size_t)mask * bytes, (size_t)n * bytes,
                                        real(q + mask, root, p), (uint32_t)mask, COLL_NODEPS);
        ready = coll_sched_join(s, COLL_DEPS(ready, rv));
    }
    /* the root: row i is relative rank i, i.e. real rank (i + root) mod p */
#define ROW(k) (rows + (size_t)(((k) - root + p) % p) * bytes)
    if (p == 1)
        ready = coll_sched_copy(s, a->recvbuf, rows, bytes, COLL_DEPS(ready));
    else
        ready = coll_sched_reduce(s, a->recvbuf, ROW(0), ROW(1), a->count, COLL_DEPS(ready));
    for (int k = 2; k < p; k++)
        ready = coll_sched_reduce(s, a->recvbuf, a->recvbuf, ROW(k), a->count, COLL_DEPS(ready));
#undef ROW
    coll_sched_finish_avg(s, a->recvbuf, a->count, COLL_DEPS(ready));
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), q = (coll_sched_rank(s) - a->root + p) % p;

    if (a->count == 0)
        return;
    if (a->deterministic)
        tree_gather(s, q);
    else
        tree_reduce(s, q);
}

static double cost(const coll_cost_in_t *c)
{
    if (c->det)
        return coll_log2(c->p) * c->alpha + (c->p - 1) * c->n * (c->beta + c->gamma);
    return coll_log2(c->p) * (c->alpha + c->n * c->beta + c->n * c->gamma);
}

static int usable(const coll_args_t *a, int nranks, const char **why)
{
    if (!a->deterministic || a->count * a->esize <= a->det_scratch_max / (size_t)nranks)
        return 1;
    *why = "in deterministic mode the root keeps every rank's vector, which exceeds "
           "COLL_DET_SCRATCH_MAX";
    return 0;
}

const coll_algo_t coll_algo_reduce_binomial = {
    COLL_REDUCE, "binomial", build, usable, cost,
};
