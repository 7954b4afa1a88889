/*
 * placement.h: binding a rank's thread to one CPU at init (COLL_BIND),
 * for ranks that a launcher left unbound (torchrun, Slurm without
 * --cpu-bind, a plain fork). placement.c has the why.
 */
#ifndef COLL_PLACEMENT_H
#define COLL_PLACEMENT_H

#include "error.h"

struct coll_comm;

typedef enum coll_bind {
    COLL_BIND_NONE, /* leave placement to the launcher and the kernel */
    COLL_BIND_AUTO, /* bind when there are 2 to (CPUs in our mask) local ranks */
    COLL_BIND_CORE, /* bind always, round robin over the mask's CPUs */
} coll_bind_t;

/* COLL_BIND's value; a word that is none of the three is an error naming it. */
coll_status_t coll_bind_parse(const char *spec, coll_bind_t *mode_p);

/* Our index among the communicator's ranks on our host, and how many
 * there are (from the peer table). */
void coll_local_rank(const struct coll_comm *comm, int *index_p, int *count_p);

/* Bind the calling thread as comm->bind says, once the peer table is
 * known (the ranks that share our host and their order). Placement is
 * for speed: a failure is logged, never returned. */
void coll_place_self(const struct coll_comm *comm);

#endif /* COLL_PLACEMENT_H */
