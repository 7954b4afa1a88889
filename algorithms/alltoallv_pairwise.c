/*
 * alltoallv_pairwise.c: the pairwise-exchange all-to-allv. As the
 * pairwise all-to-all (alltoall_pairwise.c): in step k (1 <= k < p) rank
 * r sends its block for rank r+k and receives the block of rank r-k, one
 * step after the other, with the counts and displacements of the call.
 * Empty blocks are not sent: sendcounts[j] on rank i equals recvcounts[i]
 * on rank j, so both sides skip the same messages, and a call whose counts
 * are all 0 has no steps. Our own block is a local copy. Its sends do
 * not ask for one copy, as the all-to-all's do not: both cores copy
 * through the ring at once.
 *
 * Cost: (p-1) alpha + (bytes this rank receives) beta; the registry does
 * not know the volume (its n is count * esize = 0 here), so the formula
 * is (p-1) alpha. It is the only all-to-allv algorithm. Any p; never in
 * place (coll.h).
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize;
    coll_vid_t prev = -1;

    /* the counts of our own block agree unless the call is wrong: never
     * write or read past either of them */
    size_t own = COLL_MIN(a->sendcounts[r], a->recvcounts[r]);
    if (own)
        coll_sched_copy(s, COLL_PTR(a->recvbuf, a->rdispls[r], es),
                        COLL_PTR(a->sendbuf, a->sdispls[r], es), own * es, COLL_NODEPS);
    for (int k = 1; k < p; k++) {
        int to = (r + k) % p, from = (r - k + p) % p;
        coll_vid_t sv = -1, rv = -1;
        if (a->sendcounts[to])
            sv = coll_sched_send(s, COLL_PTR(a->sendbuf, a->sdispls[to], es),
                                 a->sendcounts[to] * es, to, 0, COLL_DEPS(prev));
        if (a->recvcounts[from])
            rv = coll_sched_recv(s, COLL_PTR(a->recvbuf, a->rdispls[from], es),
                                 a->recvcounts[from] * es, from, 0, COLL_DEPS(prev));
        if (sv >= 0 || rv >= 0)
            prev = coll_sched_join(s, COLL_DEPS(sv, rv));
    }
}

static double cost(const coll_cost_in_t *c)
{
    return (c->p - 1) * c->alpha;
}

const coll_algo_t coll_algo_alltoallv_pairwise = {
    COLL_ALLTOALLV, "pairwise", build, NULL, cost,
};
