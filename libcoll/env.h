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

#endif /* COLL_ENV_H */
