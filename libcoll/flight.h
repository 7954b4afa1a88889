/*
 * flight.h: the flight recorder. Every communicator remembers its last
 * COLL_FLIGHT_ENTRIES collectives (sequence number, collective, count,
 * datatype, op, root, algorithm, state, times); when a wait times out and
 * COLL_HANG_REPORT names a file, each rank writes them there with what its
 * collectives in flight are waiting for, so that a hang can be read after
 * the fact, rank by rank, as with PyTorch's flight recorder.
 */
#ifndef COLL_FLIGHT_H
#define COLL_FLIGHT_H

#include "coll.h"
#include "schedule.h"

#define COLL_FLIGHT_ENTRIES 32

typedef struct coll_flight_entry {
    uint32_t seq;
    coll_coll_t coll;
    size_t count;
    coll_datatype_t dt;
    coll_op_t op;
    int root;
    const char *algo;      /* static: the registry's name */
    coll_status_t status;  /* COLL_INPROGRESS while in flight */
    uint64_t start_ns, end_ns;
} coll_flight_entry_t;

struct coll_comm;

void coll_flight_start(struct coll_comm *comm, uint32_t seq, const coll_args_t *a);
void coll_flight_end(struct coll_comm *comm, uint32_t seq, coll_status_t status);
/* Write the report to COLL_HANG_REPORT (if set); `why` says what timed
 * out. Returns the path written, or NULL. Never fails the caller. */
const char *coll_flight_report(struct coll_comm *comm, const char *why);

#endif /* COLL_FLIGHT_H */
