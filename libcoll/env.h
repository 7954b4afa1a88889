/*
 * env.h: helpers of coll_comm_init_env exposed for tests and fuzzing.
 */
#ifndef COLL_ENV_H
#define COLL_ENV_H

#include <stddef.h>

/* First host of a Slurm host list ("node[01-04],gpu3" -> "node01");
 * 0 on success, -1 when the list cannot be read or the host does not fit
 * in outlen bytes (never a cut name). */
int coll_slurm_first_host(const char *list, char *out, size_t outlen);

/* Tasks per node of a Slurm step ("2(x3),1": counts in node order, a run
 * of equal counts as "count(xrepeat)"): the count when every node runs
 * the same, 0 when they differ, -1 when the text cannot be read. */
int coll_slurm_uniform_tasks(const char *spec);

#endif /* COLL_ENV_H */
