/*
 * census.h: on a collective's timeout, which ranks have not arrived
 * (census.c). Called by the waiting rank that leads progress, lock held.
 */
#ifndef COLL_CENSUS_H
#define COLL_CENSUS_H

#include <stdint.h>

struct coll_comm;
struct coll_request;

typedef struct coll_census {
    char missing[256];            /* "2,5 (in #3)", empty if every rank arrived */
    uint8_t out[8];               /* our answer, sent to every peer */
    uint8_t *in;                  /* theirs */
    struct coll_request **reqs;   /* receive from k at 2k, send to k at 2k+1 */
    int n;
} coll_census_t;

/* Ask every peer where it is, listen for a grace of COLL_TIMEOUT / 10
 * (50 ms .. 1 s), and list in c->missing the peers not at collective
 * `seq` or later. Then fail the communicator and call coll_census_end. */
void coll_census_run(struct coll_comm *comm, uint32_t seq, coll_census_t *c);
/* Free what the census holds (after the communicator failed: its
 * requests are complete then). */
void coll_census_end(coll_census_t *c);

#endif /* COLL_CENSUS_H */
