/*
 * algorithms.h: collective algorithms, one file each, written only against
 * the point-to-point layer of comm.h (coll_p2p_isend/irecv/waitall). They
 * run with the communicator entered (its lock held) and use wire tags in
 * the COLL context with the collective's sequence number, so concurrent
 * or back-to-back collectives never match each other's messages.
 */
#ifndef COLL_ALGORITHMS_H
#define COLL_ALGORITHMS_H

#include "comm.h"

coll_status_t coll_algo_barrier_dissemination(struct coll_comm *comm, uint32_t seq);

#endif /* COLL_ALGORITHMS_H */
