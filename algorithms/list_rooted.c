/*
 * list_rooted.c: the broadcast, scatter and gather algorithms, in the order the registry lists
 * them (ties in cost go to the earlier one).
 */
#include "algorithms.h"

const coll_algo_t *const coll_algos_rooted[] = {
    NULL,
};
