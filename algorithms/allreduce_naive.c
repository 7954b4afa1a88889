/*
 * allreduce_naive.c: the parameter-server pattern. Every rank sends its
 * whole vector to rank 0, which adds them up in rank order and sends the
 * result back to every rank. Simple and always correct, and the baseline
 * the other algorithms are measured against: rank 0's link carries
 * 2 (p-1) n bytes.
 *
 * Cost: 2 (p-1) alpha + 2 (p-1) n beta + (p-1) n gamma.
 * Any p, any op. Deterministic by construction (rank 0 reduces in rank
 * order), so COLL_DETERMINISTIC changes nothing here.
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;
    coll_vid_t prev = -1;

    if (a->count == 0)
        return;
    if (r != 0) {
        coll_vid_t up = coll_sched_send(s, a->sendbuf, bytes, 0, 0, COLL_NODEPS);
        coll_sched_recv(s, a->recvbuf, bytes, 0, 1, COLL_DEPS(up)); /* may alias sendbuf */
        return;
    }
    if (p == 1)
        prev = coll_sched_copy(s, a->recvbuf, a->sendbuf, bytes, COLL_NODEPS);
    /* two receive buffers, each reused once the reduce that read it is done */
    void *tmp[2] = {coll_sched_scratch(s, bytes), coll_sched_scratch(s, bytes)};
    coll_vid_t reader[2] = {-1, -1};
    for (int k = 1; k < p; k++) {
        coll_vid_t rv = coll_sched_recv(s, tmp[k % 2], bytes, k, 0, COLL_DEPS(reader[k % 2]));
        /* ((x0 op x1) op x2) ...: the first step reads our own vector */
        const void *acc = k == 1 ? a->sendbuf : a->recvbuf;
        prev = coll_sched_reduce(s, a->recvbuf, acc, tmp[k % 2], a->count, COLL_DEPS(rv, prev));
        reader[k % 2] = prev;
    }
    prev = coll_sched_finish_avg(s, a->recvbuf, a->count, COLL_DEPS(prev));
    for (int k = 1; k < p; k++)
        coll_sched_send(s, a->recvbuf, bytes, k, 1, COLL_DEPS(prev));
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return 2 * q * c->alpha + 2 * q * c->n * c->beta + q * c->n * c->gamma;
}

const coll_algo_t coll_algo_allreduce_naive = {
    COLL_ALLREDUCE, "naive", build, NULL, cost,
};
