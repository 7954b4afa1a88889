/*
 * list_reduce.c: the reduce and reduce-scatter algorithms, in the order
 * the registry lists them (ties in cost go to the earlier one).
 */
#include "algorithms.h"

const coll_algo_t *const coll_algos_reduce[] = {
    &coll_algo_reduce_binomial,
    &coll_algo_reduce_rabenseifner,
    &coll_algo_reduce_oneshot,
    &coll_algo_reduce_scatter_ring,
    &coll_algo_reduce_scatter_recursive_halving,
    &coll_algo_reduce_scatter_pairwise,
    &coll_algo_reduce_scatter_oneshot,
    NULL,
};
