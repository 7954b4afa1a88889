/*
 * barrier_dissemination.c: the dissemination barrier (Hensgen, Finkel and
 * Manber, 1988). In round k every rank signals rank (r + 2^k) mod p and
 * waits for rank (r - 2^k) mod p; after ceil(log2 p) rounds every rank has
 * heard, directly or through others, from every rank. Works for any p.
 *
 * Cost: ceil(log2 p) * alpha (zero-byte messages; no beta or gamma term).
 */
#include <stdio.h>

#include "algorithms.h"

coll_status_t coll_algo_barrier_dissemination(struct coll_comm *comm, uint32_t seq)
{
    int p = comm->nranks, r = comm->rank;
    char what[48];

    snprintf(what, sizeof(what), "barrier #%u", seq);
    for (int k = 0, dist = 1; dist < p; k++, dist <<= 1) {
        struct coll_request *reqs[2] = {NULL, NULL};
        uint64_t tag = coll_tag_make(COLL_TAG_COLL, seq, (uint32_t)k);
        COLL_CHECK(coll_p2p_irecv(comm, NULL, 0, (r - dist + p) % p, tag, &reqs[0]));
        coll_status_t st = coll_p2p_isend(comm, NULL, 0, (r + dist) % p, tag, &reqs[1]);
        coll_status_t wst = coll_p2p_waitall(comm, 2, reqs, what);
        COLL_CHECK(st);
        COLL_CHECK(wst);
    }
    return COLL_OK;
}
