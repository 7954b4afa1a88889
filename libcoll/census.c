/*
 * census.c: which ranks have not arrived at a collective that timed out.
 *
 * A rank whose collective #s made no progress for COLL_TIMEOUT asks every
 * peer where it is before failing: it sends each the sequence number it is
 * stuck at and listens for theirs for a short grace. A peer that answers
 * with s or later has arrived (it is stuck too); one that answers with an
 * earlier number is still in an earlier collective; one that does not
 * answer is stopped, busy outside libcoll, or not calling at all. The
 * peers stuck in the same collective ask at about the same time (a stopped
 * rank blocks every other within a few steps of the algorithm), so their
 * answers arrive within the grace.
 *
 * Cost: nothing until a timeout; then 2 (p-1) messages of 8 bytes and at
 * most the grace.
 */
#include <stdio.h>
#include <stdlib.h>

#include "census.h"
#include "comm.h"
#include "wire.h"

#define CENSUS_SEQ 0x0ffffffdu /* internal tag space, beside the link probe's */
#define CENSUS_BYTES 8
#define CENSUS_GRACE_MAX_NS (1000 * 1000000ull)
#define CENSUS_GRACE_MIN_NS (50 * 1000000ull)

static int all_heard(const coll_census_t *c, int p, int self)
{
    for (int k = 0; k < p; k++)
        if (k != self && c->reqs[2 * k] && !c->reqs[2 * k]->done)
            return 0;
    return 1;
}

/* Progress until every peer answered, the grace ran out or the
 * communicator failed (a peer's own census ended first and told us). The
 * caller leads the progress loop; the lock is released while sleeping so
 * that coll_comm_abort can come in. */
static void hear_answers(struct coll_comm *comm, coll_census_t *c, uint64_t deadline_ns)
{
    while (comm->error == COLL_OK && coll_time_ns() < deadline_ns &&
           !all_heard(c, comm->nranks, comm->rank)) {
        coll_comm_progress(comm);
        if (comm->error != COLL_OK || all_heard(c, comm->nranks, comm->rank))
            break;
        comm->leader_asleep = 1;
        coll_comm_unlock(comm);
        coll_evloop_sleep(comm->ev, coll_ms_until(deadline_ns, 10));
        coll_comm_lock(comm);
        comm->leader_asleep = 0;
    }
}

/* "2,5 (in #3)": the peers that did not answer with seq or later. */
static void list_missing(struct coll_comm *comm, coll_census_t *c, uint32_t seq)
{
    size_t used = 0, len = sizeof(c->missing);
    char *buf = c->missing;

    buf[0] = '\0';
    for (int k = 0; k < comm->nranks && used + 32 < len; k++) {
        struct coll_request *r = c->reqs[2 * k];
        if (k == comm->rank)
            continue;
        if (r && r->done && r->status == COLL_OK) {
            uint32_t theirs = coll_load_u32(c->in + (size_t)k * CENSUS_BYTES);
            if ((int32_t)(theirs - seq) >= 0)
                continue; /* arrived */
            used += (size_t)snprintf(buf + used, len - used, "%s%d (in #%u)", used ? "," : "", k,
                                     theirs);
        } else {
            used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "", k);
        }
    }
}

void coll_census_run(struct coll_comm *comm, uint32_t seq, coll_census_t *c)
{
    int p = comm->nranks;
    uint64_t tag = coll_tag_make(COLL_TAG_INTERNAL, CENSUS_SEQ, 0);
    uint64_t grace = COLL_MAX(CENSUS_GRACE_MIN_NS, COLL_MIN(CENSUS_GRACE_MAX_NS,
                                                            comm->timeout_ns / 10));

    c->missing[0] = '\0';
    c->in = calloc((size_t)p, CENSUS_BYTES);
    c->reqs = calloc(2 * (size_t)p, sizeof(*c->reqs));
    c->n = 2 * p;
    if (!c->in || !c->reqs) {
        snprintf(c->missing, sizeof(c->missing), "unknown (out of memory)");
        return;
    }
    coll_store_u32(c->out, seq);
    coll_store_u32(c->out + 4, 0);
    for (int k = 0; k < p; k++) {
        if (k == comm->rank)
            continue;
        /* a post that fails leaves its slot NULL: that peer counts as silent */
        (void)coll_p2p_irecv(comm, c->in + (size_t)k * CENSUS_BYTES, CENSUS_BYTES, k, tag,
                             &c->reqs[2 * k]);
        (void)coll_p2p_isend(comm, c->out, CENSUS_BYTES, k, tag, &c->reqs[2 * k + 1]);
    }
    hear_answers(comm, c, coll_time_ns() + grace);
    list_missing(comm, c, seq);
}

void coll_census_end(coll_census_t *c)
{
    /* The communicator has failed by now, which completed every request;
     * one that did not would still be in a transport's hands: leave it. */
    for (int i = 0; c->reqs && i < c->n; i++)
        if (c->reqs[i] && c->reqs[i]->done)
            coll_request_free(c->reqs[i]);
    free(c->reqs);
    free(c->in);
    c->reqs = NULL;
    c->in = NULL;
}
