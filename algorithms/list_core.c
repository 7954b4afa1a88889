/*
 * list_core.c: the barrier and all-reduce algorithms, in the order the
 * registry lists them (ties in cost go to the earlier one).
 */
#include "algorithms.h"

const coll_algo_t *const coll_algos_core[] = {
    &coll_algo_barrier_dissemination,
    &coll_algo_barrier_oneshot,
    &coll_algo_allreduce_ring,
    &coll_algo_allreduce_butterfly,
    &coll_algo_allreduce_recursive_doubling,
    &coll_algo_allreduce_parallel,
    &coll_algo_allreduce_naive,
    &coll_algo_allreduce_oneshot,
    NULL,
};
