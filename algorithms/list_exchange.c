/*
 * list_exchange.c: the all-gather, all-to-all and all-to-allv algorithms, in the order the registry lists
 * them (ties in cost go to the earlier one).
 */
#include "algorithms.h"

const coll_algo_t *const coll_algos_exchange[] = {
    &coll_algo_allgather_ring,
    &coll_algo_allgather_recursive_doubling,
    &coll_algo_allgather_bruck,
    &coll_algo_allgather_oneshot,
    &coll_algo_allgather_linear,
    &coll_algo_alltoall_pairwise,
    &coll_algo_alltoall_bruck,
    &coll_algo_alltoall_oneshot,
    &coll_algo_alltoall_linear,
    &coll_algo_alltoallv_pairwise,
    NULL,
};
