/*
 * collectives.c: the public entry points of collective operations. Each
 * enters the communicator, takes the next collective sequence number (the
 * same on every rank, since collectives are called in the same order) and
 * runs an algorithm from algorithms/.
 */
#include "algorithms.h"
#include "log.h"

coll_status_t coll_barrier(coll_comm_t comm)
{
    coll_status_t st;

    COLL_CHECK(coll_comm_enter(comm, "coll_barrier", 0));
    st = coll_algo_barrier_dissemination(comm, comm->coll_seq++);
    coll_comm_exit(comm);
    return st;
}
