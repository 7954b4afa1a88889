/*
 * list_rooted.c: the broadcast, scatter and gather algorithms, in the order the registry lists
 * them (ties in cost go to the earlier one).
 */
#include "algorithms.h"

const coll_algo_t *const coll_algos_rooted[] = {
    &coll_algo_bcast_binomial,
    &coll_algo_bcast_chain,
    &coll_algo_bcast_scatter_allgather,
    &coll_algo_bcast_oneshot,
    &coll_algo_scatter_binomial,
    &coll_algo_scatter_linear,
    &coll_algo_scatter_oneshot,
    &coll_algo_gather_binomial,
    &coll_algo_gather_linear,
    &coll_algo_gather_oneshot,
    NULL,
};
