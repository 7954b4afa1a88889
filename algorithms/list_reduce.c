/*
 * list_reduce.c: the reduce and reduce-scatter algorithms, in the order the registry lists
 * them (ties in cost go to the earlier one).
 */
#include "algorithms.h"

const coll_algo_t *const coll_algos_reduce[] = {
    NULL,
};
