/*
 * bcast_chain.c: pipelined chain broadcast. The ranks form a chain in
 * order from the root (root -> root+1 -> ... -> root-1, mod p) and the
 * vector is cut into pipeline chunks (COLL_PIPELINE_CHUNK). The root
 * posts every chunk at once; every other rank forwards chunk j as soon as
 * it has arrived, independently of the other chunks, so once the pipeline
 * is full every link carries a chunk at the same time.
 *
 * Cost, with k = ceil(n / chunk) chunks (at least 1):
 *       (p - 2 + k) (alpha + n/k beta)   (0 for p = 1).
 * Close to n beta for large n whatever p, but p - 1 steps of latency:
 * the choice for large vectors where every rank has a CPU. Where ranks
 * share CPUs its p - 1 links copy at once and each n beta term scales by
 * coll_cpu_share(min(p - 1, k)): 4 ranks on 2 CPUs, 16 MiB, it was the
 * slowest tree (1.2-1.4x binomial over TCP and shared memory). Any p,
 * any root. No scratch.
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    int v = (r - a->root + p) % p, next = (r + 1) % p, prev = (r - 1 + p) % p;
    size_t es = a->esize, ch = coll_chunk_elems(a);
    size_t nch = (a->count + ch - 1) / ch;

    if (a->count == 0)
        return;
    if (v == 0 && !a->in_place)
        coll_sched_copy(s, a->recvbuf, a->sendbuf, a->count * es, COLL_NODEPS);
    for (size_t j = 0; j < nch; j++) {
        size_t off = j * ch, cnt = a->count - off < ch ? a->count - off : ch;
        coll_vid_t got = -1;
        const void *src = COLL_PTR(a->recvbuf, off, es);
        if (v == 0)
            src = COLL_PTR(a->sendbuf, off, es); /* not waiting for our own copy */
        else
            got = coll_sched_recv(s, COLL_PTR(a->recvbuf, off, es), cnt * es, prev,
                                  (uint32_t)j, COLL_NODEPS);
        if (v + 1 < p)
            coll_sched_send(s, src, cnt * es, next, (uint32_t)j, COLL_DEPS(got));
    }
}

static double cost(const coll_cost_in_t *c)
{
    double k = (double)(size_t)(c->n / c->chunk);
    if (k * c->chunk < c->n)
        k += 1; /* ceil */
    if (k < 1)
        k = 1;
    if (c->p <= 1)
        return 0;
    /* once full, the pipeline keeps min(p - 1, k) links busy at once */
    return (c->p - 2 + k) * (c->alpha + c->n / k * c->beta *
                                            coll_cpu_share(c, COLL_MIN(c->p - 1, k)));
}

const coll_algo_t coll_algo_bcast_chain = {
    COLL_BCAST, "chain", build, NULL, cost,
};
