/*
 * comm.c: the communicator: creation (bootstrap, one transport per peer,
 * connect), the progress engine and its wait loop with deadlines, errors
 * that fail the communicator and tell every peer why, and the two ways a
 * communicator ends (destroy, abort).
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithms.h"
#include "census.h"
#include "comm.h"
#include "log.h"
#include "param.h"
#include "placement.h"
#include "reduce.h"
#include "flight.h"
#include "schedule.h"

/* Every handle ever returned, so tombstones stay reachable (and are not
 * reported as leaks) for the life of the process. */
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct coll_comm *handles;

#define COLL_SLEEP_CAP_MS 100
#define COLL_DESTROY_FLUSH_CAP_NS (10 * 1000000000ull)
#define COLL_ABORT_WAIT_NS (5 * 1000000000ull)

/* ---- errors ---------------------------------------------------------------- */

static void comm_vrecord(struct coll_comm *comm, unsigned subsys, coll_status_t status,
                         const char *fmt, va_list ap) COLL_PRINTF(4, 0);

static void comm_vrecord(struct coll_comm *comm, unsigned subsys, coll_status_t status,
                         const char *fmt, va_list ap)
{
    char msg[COLL_ERRMSG_LEN];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    snprintf(comm->lasterr, sizeof(comm->lasterr), "rank %d: %s", comm->rank, msg);
    coll_error_set_thread(comm->lasterr);
    COLL_WARN(subsys, "%s (%s)", comm->lasterr, coll_status_str(status));
}

coll_status_t coll_comm_error(struct coll_comm *comm, unsigned subsys, coll_status_t status,
                              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    comm_vrecord(comm, subsys, status, fmt, ap);
    va_end(ap);
    return status;
}

static void comm_close_endpoints(struct coll_comm *comm, coll_status_t why, const char *reason)
{
    for (int r = 0; comm->peers && r < comm->nranks; r++)
        if (comm->peers[r].ep)
            comm->peers[r].ops->ep_close(comm->peers[r].ep, why, reason);
}

/* The communicator fails with its last recorded error; peers learn why. */
static coll_status_t comm_fail_commit(struct coll_comm *comm, coll_status_t status)
{
    char reason[COLL_ERRMSG_LEN];

    comm->error = status;
    snprintf(comm->errmsg, sizeof(comm->errmsg), "%s", comm->lasterr);
    if (comm->state == COLL_COMM_LIVE)
        comm->state = COLL_COMM_FAILED;
    /* Peers learn why at once, with the original culprit in the text. */
    snprintf(reason, sizeof(reason), "%s", comm->errmsg);
    comm_close_endpoints(comm, status, reason);
    if (comm->ev)
        coll_comm_wake_waiters(comm);
    return status;
}

coll_status_t coll_comm_fail(struct coll_comm *comm, unsigned subsys, coll_status_t status,
                             const char *fmt, ...)
{
    va_list ap;

    if (comm->error != COLL_OK) /* the first failure is the one that matters */
        return comm->error;
    va_start(ap, fmt);
    comm_vrecord(comm, subsys, status, fmt, ap);
    va_end(ap);
    return comm_fail_commit(comm, status);
}

coll_status_t coll_comm_fail_recorded(struct coll_comm *comm, coll_status_t status)
{
    if (comm->error != COLL_OK)
        return comm->error;
    return comm_fail_commit(comm, status);
}

/* A split's init ends when its parent is aborted (comm.h). */
static int parent_aborted(const struct coll_comm *comm)
{
    return comm->parent_abort && __atomic_load_n(comm->parent_abort, __ATOMIC_ACQUIRE);
}

/* Upcall from a transport: the link to `peer` broke. */
static void comm_on_ep_failed(void *core, int peer, coll_status_t status, const char *msg)
{
    (void)peer;
    coll_comm_fail(core, COLL_SUBSYS_NET, status, "%s", msg);
}

/* ---- entering and leaving ----------------------------------------------------- */

/* The handle's magic, read and written atomically: abort may look at it
 * from another thread while destroy or abort marks the handle dead. */
static uint64_t comm_magic(const struct coll_comm *comm)
{
    return __atomic_load_n(&comm->magic, __ATOMIC_ACQUIRE);
}

static void comm_mark_dead(struct coll_comm *comm)
{
    __atomic_store_n(&comm->magic, COLL_COMM_MAGIC_DEAD, __ATOMIC_RELEASE);
}

coll_status_t coll_comm_enter(struct coll_comm *comm, const char *fn, int allow_failed)
{
    if (!comm)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_COMM, "%s: communicator is NULL",
                          fn);
    if (comm_magic(comm) == COLL_COMM_MAGIC_DEAD) {
        coll_status_t st = coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_COMM,
                                      "%s: the communicator was destroyed or aborted", fn);
        coll_comm_lock(comm);
        snprintf(comm->lasterr, sizeof(comm->lasterr), "%s", coll_error_thread());
        coll_comm_unlock(comm);
        return st;
    }
    if (comm_magic(comm) != COLL_COMM_MAGIC_LIVE)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_COMM,
                          "%s: %p is not a libcoll communicator", fn, (void *)comm);
    coll_comm_lock(comm);
    if (comm->state == COLL_COMM_DEAD) {
        coll_comm_unlock(comm);
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_COMM,
                          "%s: the communicator was destroyed or aborted", fn);
    }
    if (comm->state == COLL_COMM_FAILED && !allow_failed) {
        coll_status_t st = comm->error;
        snprintf(comm->lasterr, sizeof(comm->lasterr), "%s", comm->errmsg);
        coll_error_set_thread(comm->errmsg);
        coll_comm_unlock(comm);
        return st;
    }
    comm->active_calls++;
    if (!allow_failed) /* a call that works on it, not a query, destroy or abort */
        coll_comm_claim_bias(&comm->bias);
    return COLL_OK;
}

void coll_comm_exit(struct coll_comm *comm)
{
    if (--comm->active_calls <= 1)
        pthread_cond_broadcast(&comm->idle);
    coll_comm_unlock(comm);
}

/* ---- progress and waiting ------------------------------------------------------ */

void coll_comm_progress(struct coll_comm *comm)
{
    coll_comm_progress_at(comm, coll_time_ns());
}

/* One pass of every transport (busy: coll_tp_iface.busy); nonzero when
 * one moved something. */
static int poll_ifaces(struct coll_comm *comm, int busy)
{
    int progressed, any = 0;

    for (int i = 0; i < comm->niface; i++) {
        coll_tp_iface_t *iface = comm->ifaces[i];
        iface->busy = busy;
        iface->ops->iface_progress(iface, &progressed);
        iface->busy = 0;
        any |= progressed;
    }
    return any;
}

int coll_comm_progress_at(struct coll_comm *comm, uint64_t now)
{
    int any = coll_evloop_dispatch_at(comm->ev, now) > 0;

    any |= poll_ifaces(comm, 0);
    coll_sched_progress(comm);
    return any;
}

void coll_comm_poll_busy(struct coll_comm *comm)
{
    poll_ifaces(comm, 1);
}

static const char *peer_desc(struct coll_comm *comm, int peer)
{
    coll_tp_ep_t *ep = comm->peers ? comm->peers[peer].ep : NULL;
    return ep ? ep->desc : "?";
}

static coll_status_t fail_stalled(struct coll_comm *comm, struct coll_request *r,
                                  const char *what)
{
    char tag[32] = "", why[128];
    const char *report;

    /* before failing: the running collectives still say what they wait for */
    snprintf(why, sizeof(why), "%s: no progress for %.1f s (COLL_TIMEOUT)", what ? what : coll_request_op(r),
             (double)comm->timeout_ns * 1e-9);
    report = coll_flight_report(comm, why);
    if (report)
        COLL_WARN(COLL_SUBSYS_COLL, "rank %d: hang report written to %s", comm->rank, report);
    if (r->kind == COLL_REQ_COLL) {
        char waiting[COLL_ERRMSG_LEN / 2];
        coll_census_t census;
        coll_status_t st;
        coll_sched_describe_wait(r->sched, waiting, sizeof(waiting));
        /* who is missing goes first: the peers' copy of this message is cut
         * at COLL_WIRE_ERRTEXT_MAX */
        coll_census_run(comm, coll_sched_seq(r->sched), &census);
        st = coll_comm_fail(comm, COLL_SUBSYS_COLL, COLL_ERR_TIMEOUT,
                            "%s: no progress for %.1f s (COLL_TIMEOUT); ranks that have not "
                            "arrived: %s; waiting for: %s", what ? what : coll_request_op(r),
                            (double)comm->timeout_ns * 1e-9,
                            census.missing[0] ? census.missing : "none (all are in it)",
                            waiting[0] ? waiting : "nothing in flight");
        coll_census_end(&census);
        return st;
    }
    if (r->tag >= 0)
        snprintf(tag, sizeof(tag), ", tag %d", r->tag);
    return coll_comm_fail(comm, COLL_SUBSYS_P2P, COLL_ERR_TIMEOUT,
                          "%s: no progress for %.1f s (COLL_TIMEOUT) %s %zu bytes %s %s%s; "
                          "%zu of %zu bytes moved", what ? what : coll_request_op(r),
                          (double)comm->timeout_ns * 1e-9,
                          r->kind == COLL_REQ_SEND ? "sending" : "receiving", r->tp.len,
                          r->kind == COLL_REQ_SEND ? "to" : "from",
                          peer_desc(comm, r->peer), tag, r->tp.bytes_done, r->tp.len);
}

/* Look at every request once: count the pending ones, restart the stall
 * clock of those that moved, and return one that stalled too long. */
static int scan_requests(struct coll_comm *comm, int n, struct coll_request **reqs,
                         uint64_t now, struct coll_request **stalled_p)
{
    int pending = 0;

    *stalled_p = NULL;
    for (int i = 0; i < n; i++) {
        struct coll_request *r = reqs[i];
        if (!r || r->done)
            continue;
        pending++;
        if (r->tp.bytes_done != r->seen_bytes) {
            r->seen_bytes = r->tp.bytes_done;
            r->stall_since_ns = now;
        } else if (r->kind == COLL_REQ_COLL && r->sched &&
                   now - r->sampled_ns > comm->timeout_ns / 10) {
            /* A collective counts finished steps; the bytes of the steps in
             * flight are looked at every tenth of the deadline (a walk over
             * the schedule), so that bytes that moved long ago restart the
             * clock from about when they moved, not from when the deadline
             * came: a partition is then reported within 1.1 deadlines. */
            size_t moved = coll_sched_bytes_moved(r->sched);
            r->sampled_ns = now;
            if (moved != r->seen_bytes) {
                r->tp.bytes_done = r->seen_bytes = moved;
                r->stall_since_ns = now;
            } else if (now - r->stall_since_ns > comm->timeout_ns) {
                *stalled_p = r;
            }
        } else if (now - r->stall_since_ns > comm->timeout_ns &&
                   !(r->kind == COLL_REQ_COLL && r->sched)) {
            *stalled_p = r;
        }
    }
    return pending;
}

static coll_status_t first_error(int n, struct coll_request **reqs)
{
    for (int i = 0; i < n; i++)
        if (reqs[i] && reqs[i]->status < 0)
            return reqs[i]->status;
    return COLL_OK;
}

void coll_comm_wake_waiters(struct coll_comm *comm)
{
    if (comm->nfollowers > 0)
        pthread_cond_broadcast(&comm->progress_cond);
    if (comm->leader_asleep && comm->ev)
        coll_evloop_wake(comm->ev);
}

static int all_done(int n, struct coll_request **reqs)
{
    for (int i = 0; i < n; i++)
        if (reqs[i] && !reqs[i]->done)
            return 0;
    return 1;
}

/* Progress passes made before the wait loop reads the clock: a small
 * message over shared memory is often done within them, and a clock read
 * is 20 ns of a 0.3 us all-reduce. With no clock there is no deadline to
 * check, so these are few. */
#define QUICK_TURNS 8

static int quick_turns(struct coll_comm *comm, int n, struct coll_request **reqs)
{
    if (comm->has_leader || comm->state != COLL_COMM_LIVE)
        return 0;
    comm->has_leader = 1; /* no follower can come: we hold the lock throughout */
    for (int k = 0; k < QUICK_TURNS && !all_done(n, reqs); k++)
        coll_comm_progress_at(comm, 0); /* 0: no clock, so cold event sources wait */
    comm->has_leader = 0;
    return all_done(n, reqs);
}

/* Between two polls of a spinning wait. Where ranks share CPUs, yield: a
 * peer waiting for this core gets it now rather than at the end of our
 * time slice. Back-to-back runs on the busy 2-core development machine,
 * 8-byte all-reduce over TCP: 2 ranks 26 -> 6 us, 4 ranks 31-37 -> 19-22
 * us (31-37 us without spinning at all); when the machine is quieter both
 * forms reach about 6 us. (Bursts of shared-memory polls between yields
 * measured no better: 8 B, 7 alternating runs, 2 and 4 ranks on 2 cores.)
 * Where each rank has a CPU and every pair shares memory, pause instead
 * and yield only every SPIN_YIELD_EVERY turns, for other processes on a
 * busy host: a yield is a system call (1.3 us in the VM of 2026-12), and a
 * neighbour that spins on the clock or on sched_yield slowed a
 * process_vm_readv of 512 KiB on the other vCPU from 19-20 us to
 * 22.5-23, one that pauses to 19.7-20.7 (the two vCPUs share a core's
 * resources). Over sockets the two measured level (2 ranks, TCP, 1-16
 * MiB, 6 alternating rounds), and ranks of other hosts may share our
 * CPUs unseen (the emulated cluster's namespaces), so they yield. */
#define SPIN_PAUSES 8
#define SPIN_YIELD_EVERY 16

static void spin_pause(const struct coll_comm *comm, unsigned turn)
{
    if (comm->crowd > 1 || !comm->pull || turn % SPIN_YIELD_EVERY == 0) {
        sched_yield();
        return;
    }
    for (int i = 0; i < SPIN_PAUSES; i++)
        coll_cpu_relax();
}

coll_status_t coll_comm_wait(struct coll_comm *comm, int n, struct coll_request **reqs,
                             const char *what, int test_only)
{
    uint64_t start, spin_until, now;
    struct coll_request *stalled;
    coll_status_t st;
    unsigned turns = 0;
    int lead = 0;

    /* finished while it was started (one rank, or everything local): no
     * progress pass, no clock */
    if (all_done(n, reqs) || (!test_only && quick_turns(comm, n, reqs)))
        return comm->error != COLL_OK ? comm->error : first_error(n, reqs);
    start = coll_time_ns();
    spin_until = start + comm->spin_ns;

    for (int i = 0; i < n; i++) {
        struct coll_request *r = reqs[i];
        if (r && !r->done && (!test_only || r->stall_since_ns == 0)) {
            r->seen_bytes = r->tp.bytes_done;
            r->stall_since_ns = r->sampled_ns = start;
        }
    }
    for (now = start;; now = coll_time_ns()) { /* one clock read per turn */
        if (!comm->has_leader)
            comm->has_leader = lead = 1;
        /* While data moves the wait is a transfer under way, not idleness:
         * the spin restarts, because sleeping would cost a wake-up per
         * chunk (16 MiB collectives, 2 and 4 ranks on 2 cores, 3
         * alternating runs: 20-50% faster; design.md, "Waiting without
         * burning cores"). */
        if (lead && (comm->state == COLL_COMM_LIVE || comm->state == COLL_COMM_INIT)) {
            if (coll_comm_progress_at(comm, now))
                spin_until = now + comm->spin_ns;
        } else if (lead) { /* failed: no more I/O, but schedules must still finish */
            coll_sched_progress(comm);
        }
        if (scan_requests(comm, n, reqs, now, &stalled) == 0) {
            st = comm->error != COLL_OK ? comm->error : first_error(n, reqs);
            break;
        }
        if (comm->state != COLL_COMM_LIVE && comm->state != COLL_COMM_INIT) {
            st = comm->error != COLL_OK ? comm->error : COLL_ERR_ABORTED; /* not reached */
            break;
        }
        if (parent_aborted(comm)) {
            coll_comm_fail(comm, COLL_SUBSYS_INIT, COLL_ERR_ABORTED, "coll_comm_split: the "
                           "parent communicator was aborted while this one was created");
            continue;
        }
        if (stalled) {
            fail_stalled(comm, stalled, what);
            continue; /* failing closed every endpoint: all requests are done */
        }
        if (test_only) {
            st = COLL_INPROGRESS;
            break;
        }
        if (!lead) {
            comm->nfollowers++;
            coll_comm_cond_wait(&comm->lock, &comm->bias, &comm->progress_cond,
                                COLL_SLEEP_CAP_MS);
            comm->nfollowers--;
        } else if (now >= spin_until) {
            comm->leader_asleep = 1;
            coll_comm_unlock(comm);
            coll_evloop_sleep(comm->ev, COLL_SLEEP_CAP_MS);
            coll_comm_lock(comm);
            comm->leader_asleep = 0;
        } else {
            spin_pause(comm, ++turns);
        }
    }
    if (lead) {
        comm->has_leader = 0;
        if (comm->nfollowers > 0) /* one of them takes over */
            pthread_cond_broadcast(&comm->progress_cond);
    }
    return st;
}

/* ---- creation --------------------------------------------------------------------- */

static coll_status_t check_init_args(const coll_init_args_t *a)
{
    if (a->nranks < 1 || a->nranks > COLL_WIRE_NRANKS_MAX)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "init: nranks %d is out of range (1..%d)", a->nranks,
                          COLL_WIRE_NRANKS_MAX);
    if (a->rank < 0 || a->rank >= a->nranks)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "init: rank %d is out of range (0..%d)", a->rank, a->nranks - 1);
    if (a->config && a->config->size != sizeof(coll_config_t))
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "init: config.size is %zu, expected %zu (initialize the config "
                          "with COLL_CONFIG_INITIALIZER)", a->config->size,
                          sizeof(coll_config_t));
    return COLL_OK;
}

static coll_status_t read_bind(struct coll_comm *comm)
{
    coll_bind_t mode;
    COLL_CHECK(coll_bind_parse(coll_param_raw(COLL_PARAM_BIND), &mode));
    comm->bind = mode;
    return COLL_OK;
}

/* COLL_PIPELINE_WINDOW: "auto" is resolved once the ranks per CPU are
 * known (agree_costs). */
static coll_status_t read_window(struct coll_comm *comm)
{
    comm->window_bytes = 0;
    return coll_param_size_or_auto(COLL_PARAM_PIPELINE_WINDOW, &comm->window_auto,
                                   &comm->window_bytes);
}

/* COLL_STREAM_MIN: "auto" is half the L3, where streaming results out of
 * place measured faster (docs/performance-sets.md, "Results stored past the
 * cache"). Where the L3 is our guess, the host's CPUs may each sit in a
 * complex of their own, with an L3 each: on such a VM (2 vCPUs) a 2-rank
 * all-reduce of 16 MiB in place was 9-16% slower streamed and one of 64
 * MiB faster, so there auto is twice the guess. */
static coll_status_t read_stream(struct coll_comm *comm)
{
    int is_auto, guessed;

    COLL_CHECK(coll_param_size_or_auto(COLL_PARAM_STREAM_MIN, &is_auto, &comm->stream_min));
    if (is_auto) {
        size_t llc = coll_llc_bytes(&guessed);
        comm->stream_min = guessed ? 2 * llc : llc / 2;
    }
    return COLL_OK;
}

/* How collectives run on this communicator (COLL_ALGO and friends), and
 * where init places the rank (COLL_BIND). */
static coll_status_t read_coll_settings(struct coll_comm *comm)
{
    COLL_CHECK(coll_algo_parse_forced(coll_param_raw(COLL_PARAM_ALGO), comm->forced));
    COLL_CHECK(coll_algo_parse_fallback(coll_param_raw(COLL_PARAM_ALGO_FALLBACK),
                                        &comm->algo_fallback));
    COLL_CHECK(coll_param_bool(COLL_PARAM_DETERMINISTIC, &comm->deterministic));
    COLL_CHECK(coll_param_bool(COLL_PARAM_CHECK_ARGS, &comm->check_args));
    COLL_CHECK(read_bind(comm));
    COLL_CHECK(coll_param_bool(COLL_PARAM_RECV_REDUCE, &comm->fold));
    COLL_CHECK(coll_param_bool(COLL_PARAM_CHECKSUM, &comm->checksum));
    COLL_CHECK(coll_param_size(COLL_PARAM_PIPELINE_CHUNK, &comm->chunk_bytes));
    COLL_CHECK(coll_param_size(COLL_PARAM_DET_SCRATCH_MAX, &comm->det_scratch_max));
    if (comm->chunk_bytes < 64)
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                          "COLL_PIPELINE_CHUNK=%zu is below 64 bytes", comm->chunk_bytes);
    COLL_CHECK(read_stream(comm));
    return read_window(comm);
}

/* Cost-model inputs: the slowest link in use sets alpha and beta; the
 * link asking for the largest pipeline chunk sets chunk_links (toward this
 * host) and chunk_bulk (toward others). */
static void read_link_costs(struct coll_comm *comm)
{
    uint64_t my_host = comm->peers[comm->rank].info.host_hash;

    comm->alpha = 0;
    comm->beta = 0;
    comm->pull = 1;
    comm->chunk_links = 0;
    comm->chunk_bulk = 0;
    for (int r = 0; r < comm->nranks; r++) {
        coll_tp_perf_t perf = {0};
        coll_tp_iface_t *iface = comm->peers[r].ep->iface;
        if ((r == comm->rank && comm->nranks > 1) ||
            iface->ops->iface_query(iface, &perf) != COLL_OK)
            continue;
        comm->alpha = COLL_MAX(comm->alpha, perf.latency_s + perf.overhead_s);
        comm->beta = COLL_MAX(comm->beta, 1.0 / perf.bandwidth_Bps);
        comm->pull &= perf.pull;
        if (comm->peers[r].info.host_hash == my_host)
            comm->chunk_links = COLL_MAX(comm->chunk_links, perf.chunk_local);
        else
            comm->chunk_bulk = COLL_MAX(comm->chunk_bulk, perf.chunk_remote);
    }
}

size_t coll_call_chunk(size_t chunk, size_t bulk, size_t block_bytes)
{
    return bulk > chunk && block_bytes / bulk >= COLL_BULK_MIN_CHUNKS ? bulk : chunk;
}

/* COLL_PIPELINE_CHUNK when set; else its default, or the larger chunk a
 * link in use asks for (agreed across ranks: every rank must cut a vector
 * into the same pieces). */
static void choose_chunk(struct coll_comm *comm)
{
    if (coll_param_is_set(COLL_PARAM_PIPELINE_CHUNK)) {
        comm->chunk_bulk = 0;
        return;
    }
    if (comm->chunk_bulk > comm->chunk_bytes)
        COLL_INFO(COLL_SUBSYS_INIT, "rank %d: all-reduce pipeline chunk %zu bytes where a "
                  "rank's share of the vector holds %d of them, as links toward other hosts "
                  "ask", comm->rank, comm->chunk_bulk, COLL_BULK_MIN_CHUNKS);
    if (comm->chunk_links <= comm->chunk_bytes)
        return;
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: pipeline chunk %zu bytes, as a link asks (%zu by "
              "default; COLL_PIPELINE_CHUNK sets it)", comm->rank, comm->chunk_links,
              comm->chunk_bytes);
    comm->chunk_bytes = comm->chunk_links;
}

static coll_status_t comm_alloc(const coll_init_args_t *a, struct coll_comm **comm_p)
{
    coll_status_t st;
    struct coll_comm *comm = calloc(1, sizeof(*comm));

    if (!comm)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "cannot allocate a communicator");
    comm->magic = COLL_COMM_MAGIC_LIVE;
    pthread_mutex_init(&comm->lock, NULL);
    coll_comm_bias_init(&comm->bias, a->rank);
    pthread_condattr_t attr; /* timed waits use the monotonic clock */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&comm->idle, &attr);
    pthread_cond_init(&comm->progress_cond, &attr);
    pthread_condattr_destroy(&attr);
    comm->state = COLL_COMM_INIT;
    coll_list_init(&comm->scheds);
    coll_blocks_init(&comm->scratch_blocks, COLL_SCRATCH_CACHE);
    comm->rank = a->rank;
    comm->nranks = a->nranks;
    memcpy(comm->secret, a->uid.secret, COLL_SECRET_BYTES);
    COLL_CHECK_GOTO(coll_param_duration_ns(COLL_PARAM_TIMEOUT, &comm->timeout_ns), st, err);
    if (a->config && a->config->timeout_ms > 0)
        comm->timeout_ns = (uint64_t)a->config->timeout_ms * 1000000ull;
    COLL_CHECK_GOTO(coll_param_duration_ns(COLL_PARAM_POLL_SPIN, &comm->spin_ns), st, err);
    COLL_CHECK_GOTO(coll_param_int_range(COLL_PARAM_INLINE_POLLS, 0, 1000000, comm->rank,
                                         &comm->inline_polls), st, err);
    COLL_CHECK_GOTO(read_coll_settings(comm), st, err);
    COLL_CHECK_GOTO(coll_iface_select(&a->uid.root, &comm->local_addr, comm->ifname), st, err);
    COLL_CHECK_GOTO(coll_evloop_create(&comm->ev), st, err);
    comm->peers = calloc((size_t)a->nranks, sizeof(*comm->peers));
    if (!comm->peers) {
        st = coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "cannot allocate %d peers",
                        a->nranks);
        goto err;
    }
    *comm_p = comm;
    return COLL_OK;
err:
    coll_evloop_destroy(comm->ev);
    free(comm);
    return st;
}

/* Is transport `name` allowed by COLL_TRANSPORTS? */
static int transport_allowed(const char *name)
{
    const char *list = coll_param_raw(COLL_PARAM_TRANSPORTS);
    return list[0] == '\0' || coll_ifname_match(list, name);
}

static coll_status_t open_iface(struct coll_comm *comm, const coll_tp_ops_t *ops,
                                const coll_tp_params_t *params)
{
    coll_tp_iface_t *iface;
    COLL_CHECK(ops->iface_open(params, &iface));
    iface->ops = ops;
    comm->ifaces[comm->niface++] = iface;
    return COLL_OK;
}

/* How many ranks share our host, as far as anything says before the
 * bootstrap: the launcher or the parent (args), else COLL_LOCAL_SIZE, which
 * may describe a larger job than this communicator; 0 when unknown. */
static coll_status_t local_size_hint(const coll_init_args_t *a, int *n_p)
{
    int64_t n = a->local_size;

    if (n == 0 && coll_param_is_set(COLL_PARAM_LOCAL_SIZE))
        COLL_CHECK(coll_param_int(COLL_PARAM_LOCAL_SIZE, &n));
    *n_p = n < 1 ? 0 : n > a->nranks ? a->nranks : (int)n;
    return COLL_OK;
}

static coll_status_t open_ifaces(struct coll_comm *comm, const coll_init_args_t *a,
                                 uint64_t deadline_ns)
{
    int count;
    const coll_tp_ops_t *const *reg = coll_tp_registry(&count);
    coll_tp_params_t params = {
        .rank = comm->rank,
        .nranks = comm->nranks,
        .secret = comm->secret,
        .local_addr = &comm->local_addr,
        .evloop = comm->ev,
        .connect_deadline_ns = deadline_ns,
        .checksum = comm->checksum,
        .core = comm,
        .ep_failed = comm_on_ep_failed,
    };

    COLL_CHECK(coll_param_duration_ns(COLL_PARAM_HANDSHAKE_TIMEOUT, &params.handshake_timeout_ns));
    COLL_CHECK(coll_param_int(COLL_PARAM_TEST_CORRUPT_FRAME, &params.test_corrupt_frame));
    COLL_CHECK(local_size_hint(a, &params.local_size));
    COLL_CHECK(open_iface(comm, coll_tp_self_ops(), &params));
    /* A transport named in COLL_TRANSPORTS must work: one whose hardware
     * is missing fails init instead of being skipped silently. */
    params.required = coll_param_raw(COLL_PARAM_TRANSPORTS)[0] != '\0';
    for (int i = 0; i < count && comm->niface < COLL_TP_MAX; i++)
        if (transport_allowed(reg[i]->name))
            COLL_CHECK(open_iface(comm, reg[i], &params));
    if (comm->niface == 1 && comm->nranks > 1) {
        char names[128] = "";
        size_t used = 0;
        for (int i = 0; i < count && used + 1 < sizeof(names); i++)
            used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s", i ? ", " : "",
                                     reg[i]->name);
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "COLL_TRANSPORTS='%s' allows no transport (available: %s)",
                          coll_param_raw(COLL_PARAM_TRANSPORTS), names);
    }
    return COLL_OK;
}

static void describe_self(struct coll_comm *comm, coll_peer_info_t *me)
{
    memset(me, 0, sizeof(*me));
    me->rank = (uint32_t)comm->rank;
    me->pid = (uint32_t)getpid();
    me->host_hash = coll_host_hash();
    gethostname(me->hostname, sizeof(me->hostname) - 1);
    for (int i = 1; i < comm->niface; i++)
        comm->ifaces[i]->ops->iface_addr(comm->ifaces[i], &me->addrs[me->naddrs++]);
    /* settings that must match, checked by same_settings() on every rank */
    me->addrs[me->naddrs].tp_id = COLL_TP_CORE;
    me->addrs[me->naddrs].len = 1;
    me->addrs[me->naddrs++].data[0] = (uint8_t)comm->checksum;
}

/* Every rank has the whole table, so every rank finds a difference at
 * once and fails its init, naming both values (no rank waits). */
static coll_status_t same_settings(struct coll_comm *comm)
{
    for (int p = 0; p < comm->nranks; p++) {
        const coll_tp_addr_t *core = coll_peer_info_addr(&comm->peers[p].info, COLL_TP_CORE);
        int theirs = core && core->len >= 1 ? core->data[0] : 0;
        if (theirs != comm->checksum)
            return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG, "rank %d: COLL_CHECKSUM "
                              "differs between ranks: rank %d (%s) has %d, this rank has %d; "
                              "set it alike on every rank", comm->rank, p,
                              comm->peers[p].info.hostname, theirs, comm->checksum);
    }
    return COLL_OK;
}

/* The first transport, in priority order, that can reach the peer. */
static coll_status_t choose_transport(struct coll_comm *comm, int peer, coll_tp_iface_t **iface_p)
{
    const coll_peer_info_t *me = &comm->peers[comm->rank].info;
    const coll_peer_info_t *pi = &comm->peers[peer].info;

    if (peer == comm->rank) {
        *iface_p = comm->ifaces[0];
        return COLL_OK;
    }
    for (int i = 1; i < comm->niface; i++) {
        int yes = 0;
        COLL_CHECK(comm->ifaces[i]->ops->can_connect(comm->ifaces[i], me, pi, &yes));
        if (yes) {
            *iface_p = comm->ifaces[i];
            return COLL_OK;
        }
    }
    return coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_UNREACHABLE,
                           "no allowed transport can reach rank %d on host %s (COLL_TRANSPORTS"
                           "='%s')", peer, pi->hostname, coll_param_raw(COLL_PARAM_TRANSPORTS));
}

/* One INFO line per rank: how many peers each transport serves (TRACE
 * lists every peer), so that a job's log shows what carries its data. */
static void log_transport_counts(struct coll_comm *comm)
{
    char line[256] = "";
    size_t used = 0;

    if (!coll_log_enabled(COLL_LOG_INFO, COLL_SUBSYS_INIT))
        return;
    for (int i = 1; i < comm->niface; i++) {
        int n = 0;
        for (int p = 0; p < comm->nranks; p++)
            n += p != comm->rank && comm->peers[p].ops == comm->ifaces[i]->ops;
        if (n && used + 1 < sizeof(line))
            used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s %d",
                                     used ? ", " : "", comm->ifaces[i]->ops->name, n);
    }
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: peers by transport: %s", comm->rank,
              used ? line : "none");
}

static coll_status_t create_endpoints(struct coll_comm *comm)
{
    for (int p = 0; p < comm->nranks; p++) {
        coll_tp_iface_t *iface = NULL;
        coll_peer_t *peer = &comm->peers[p];
        COLL_CHECK(choose_transport(comm, p, &iface));
        peer->ops = iface->ops;
        /* The higher rank connects: each pair opens exactly one link. */
        if (p <= comm->rank)
            COLL_CHECK(iface->ops->ep_connect(iface, &peer->info, &peer->ep));
        else
            COLL_CHECK(iface->ops->ep_accept(iface, &peer->info, &peer->ep));
        COLL_INFO(COLL_SUBSYS_INIT, "rank %d: rank %d via %s", comm->rank, p, iface->ops->name);
    }
    log_transport_counts(comm);
    return COLL_OK;
}

/* Ranks not yet connected, as "1,4,7", for the timeout message. */
static void list_unready(struct coll_comm *comm, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int p = 0; p < comm->nranks && used + 16 < len; p++)
        if (comm->peers[p].ops->ep_ready(comm->peers[p].ep) == COLL_INPROGRESS)
            used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "", p);
}

static coll_status_t connect_all(struct coll_comm *comm, uint64_t deadline_ns)
{
    for (;;) {
        int pending = 0;
        coll_comm_progress(comm);
        if (comm->error != COLL_OK)
            return comm->error;
        for (int p = 0; p < comm->nranks; p++) {
            coll_status_t st = comm->peers[p].ops->ep_ready(comm->peers[p].ep);
            if (st == COLL_INPROGRESS)
                pending++;
            else if (st != COLL_OK)
                return coll_comm_fail(comm, COLL_SUBSYS_INIT, st, "connecting to %s failed", peer_desc(comm, p));
        }
        if (!pending)
            return COLL_OK;
        if (__atomic_load_n(&comm->abort_requested, __ATOMIC_ACQUIRE) || parent_aborted(comm))
            return coll_comm_fail(comm, COLL_SUBSYS_INIT, COLL_ERR_ABORTED, "init aborted while connecting");
        if (coll_time_ns() > deadline_ns) {
            char missing[256];
            list_unready(comm, missing, sizeof(missing));
            return coll_comm_fail(comm, COLL_SUBSYS_INIT, COLL_ERR_TIMEOUT, "init timed out connecting to "
                                  "ranks %s (are they alive and reachable?)", missing);
        }
        coll_evloop_sleep(comm->ev, coll_ms_until(deadline_ns, COLL_SLEEP_CAP_MS));
    }
}

/* Free everything but the handle itself. */
static void comm_teardown(struct coll_comm *comm)
{
    for (int r = 0; comm->peers && r < comm->nranks; r++)
        if (comm->peers[r].ep)
            comm->peers[r].ops->ep_destroy(comm->peers[r].ep);
    coll_sched_drain(comm); /* their messages were just failed by ep_destroy */
    coll_sched_cache_release(comm);
    coll_request_release_spares(comm);
    free(comm->flight);
    comm->flight = NULL;
    for (int i = comm->niface - 1; i >= 0; i--)
        comm->ifaces[i]->ops->iface_close(comm->ifaces[i]);
    comm->niface = 0;
    free(comm->peers);
    comm->peers = NULL;
    coll_evloop_destroy(comm->ev);
    comm->ev = NULL;
    comm->state = COLL_COMM_DEAD;
}

static void register_handle(struct coll_comm *comm)
{
    pthread_mutex_lock(&handles_lock);
    comm->next_handle = handles;
    handles = comm;
    pthread_mutex_unlock(&handles_lock);
}

/* While init waits for the bootstrap, the transports' listening sockets
 * are open and published: strangers there are answered and dropped on
 * time, not when the job has formed. No endpoint exists yet. */
static void serve_listeners(void *arg)
{
    coll_comm_progress(arg);
}

static coll_status_t exchange_and_connect(struct coll_comm *comm, const coll_init_args_t *a,
                                          uint64_t deadline_ns, struct coll_root **root)
{
    coll_waiter_t waiter = {a->parent_abort ? a->parent_abort : &comm->abort_requested,
                            serve_listeners, comm};
    coll_peer_info_t me, *table = calloc((size_t)a->nranks, sizeof(*table));
    coll_status_t st;
    int index, nlocal;

    if (!table)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "cannot allocate peer table");
    describe_self(comm, &me);
    st = coll_bootstrap_join(&a->uid, a->nranks, a->rank, a->round, &me, deadline_ns, &waiter,
                             table);
    if (*root) { /* the job formed (or not): our root's work is over */
        coll_root_release(*root, st == COLL_OK ? COLL_ROOT_JOIN : COLL_ROOT_CANCEL);
        *root = NULL;
    }
    for (int p = 0; st == COLL_OK && p < a->nranks; p++)
        comm->peers[p].info = table[p];
    free(table);
    COLL_CHECK(st);
    /* before the endpoints allocate: their memory is then near our CPU */
    coll_place_self(comm);
    /* the ranks of our host share its cache; rounded up, so that a
     * threshold of a few bytes stays one (0 stays never) */
    coll_local_rank(comm, &index, &nlocal);
    comm->stream_rank_min = (comm->stream_min + (size_t)nlocal - 1) / (size_t)nlocal;
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: results stored past the cache from %zu KiB of its "
              "buffers (COLL_STREAM_MIN %zu KiB over %d local ranks; 0: never)", comm->rank,
              comm->stream_rank_min / 1024, comm->stream_min / 1024, nlocal);
    COLL_CHECK(same_settings(comm));
    COLL_CHECK(create_endpoints(comm));
    COLL_CHECK(connect_all(comm, deadline_ns));
    read_link_costs(comm);
    return COLL_OK;
}

/* ---- the links' cost: probed, forced, or the transports' figures --------- */

#define COLL_PROBE_SEQ 0x0ffffffeu
#define COLL_PROBE_ROUNDS 9

/* Send `bytes` to the right neighbour while receiving as many from the
 * left: every link of the ring busy at once, as in a ring algorithm. */
static coll_status_t ring_shift(struct coll_comm *comm, const void *sbuf, void *rbuf,
                                size_t bytes, uint32_t mtag)
{
    int p = comm->nranks, right = (comm->rank + 1) % p, left = (comm->rank + p - 1) % p;
    uint64_t tag = coll_tag_make(COLL_TAG_INTERNAL, COLL_PROBE_SEQ, mtag);
    struct coll_request *reqs[2] = {NULL, NULL};
    coll_status_t st, wst;

    st = coll_p2p_irecv(comm, rbuf, bytes, left, tag, &reqs[0]);
    if (st == COLL_OK)
        st = coll_p2p_isend(comm, sbuf, bytes, right, tag, &reqs[1]);
    wst = coll_p2p_waitall(comm, 2, reqs, "init (probing the links)");
    return st != COLL_OK ? st : wst;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* alpha: the median of COLL_PROBE_ROUNDS ring shifts of 8 bytes (after one
 * to warm up); beta: one ring shift of `bytes` (after a quarter of it, which
 * opens the congestion windows), less alpha. Each rank times its own
 * links; agree_costs then keeps the slowest. That is a fresh connection's
 * rate, 2-10x the per-byte time of a warm one on loopback; the algorithms'
 * crossovers were measured against it, so a warm probe would move them
 * (docs/performance-history.md, "A link probe at the steady rate"). */
static coll_status_t probe_links(struct coll_comm *comm, size_t bytes, double *alpha_p,
                                 double *beta_p)
{
    uint8_t *buf = calloc(2, bytes);
    double t[COLL_PROBE_ROUNDS], alpha;
    coll_status_t st = COLL_OK;
    uint64_t t0;
    uint32_t k = 0;

    if (!buf)
        return coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "cannot allocate "
                               "%zu bytes for the link probe (COLL_COST_PROBE)", 2 * bytes);
    st = ring_shift(comm, buf, buf + bytes, 8, k++);
    for (int i = 0; i < COLL_PROBE_ROUNDS && st == COLL_OK; i++) {
        t0 = coll_time_ns();
        st = ring_shift(comm, buf, buf + bytes, 8, k++);
        t[i] = (double)(coll_time_ns() - t0) * 1e-9;
    }
    if (st == COLL_OK)
        st = ring_shift(comm, buf, buf + bytes, bytes / 4, k++);
    t0 = coll_time_ns();
    if (st == COLL_OK)
        st = ring_shift(comm, buf, buf + bytes, bytes, k++);
    if (st == COLL_OK) {
        double bulk = (double)(coll_time_ns() - t0) * 1e-9;
        qsort(t, COLL_PROBE_ROUNDS, sizeof(t[0]), cmp_double);
        alpha = t[COLL_PROBE_ROUNDS / 2];
        *alpha_p = alpha;
        *beta_p = COLL_MAX(bulk - alpha, bulk / 2) / (double)bytes;
        COLL_INFO(COLL_SUBSYS_INIT, "rank %d: link probe toward rank %d: alpha %.1f us, "
                  "%zu bytes in %.3f ms (beta %.3f ns/B, %.0f MB/s)", comm->rank,
                  (comm->rank + 1) % comm->nranks, alpha * 1e6, bytes, bulk * 1e3,
                  *beta_p * 1e9, 1e-6 / *beta_p);
    }
    free(buf);
    return st;
}

/* Ranks that disagree on COLL_COST_PROBE would wait for each other's probe
 * until the deadline: each rank first tells its right neighbour its value
 * and fails the communicator at once, naming both, if its left
 * neighbour's differs: a difference anywhere in the ring is seen by at
 * least one rank, and failing (not just returning) sends that rank's
 * message to the others, whose init then fails with it. */
static coll_status_t same_probe(struct coll_comm *comm, size_t probe)
{
    uint8_t mine[8], left[8];
    int l = (comm->rank + comm->nranks - 1) % comm->nranks;
    uint64_t theirs;

    coll_store_u64(mine, probe);
    COLL_CHECK(ring_shift(comm, mine, left, sizeof(left), 0xffffu));
    theirs = coll_load_u64(left);
    if (theirs != probe)
        return coll_comm_fail(comm, COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                              "COLL_COST_PROBE differs between ranks: rank %d has %" PRIu64
                              " bytes, rank %d has %zu; set it alike on every rank", l, theirs,
                              comm->rank, probe);
    return COLL_OK;
}

/* alpha and beta before the agreement: the probe's (COLL_COST_PROBE), else
 * the transports' figures (read_link_costs); then COLL_LINK_LATENCY and
 * COLL_LINK_BANDWIDTH where set. The probe runs whatever is forced, so
 * that every rank takes part in it. */
static coll_status_t link_costs(struct coll_comm *comm)
{
    size_t probe = 0, bw = 0;
    uint64_t lat = 0;
    double alpha = 0, beta = 0;

    COLL_CHECK(coll_param_size(COLL_PARAM_COST_PROBE, &probe));
    COLL_CHECK(coll_param_size(COLL_PARAM_LINK_BANDWIDTH, &bw));
    COLL_CHECK(coll_param_duration_ns(COLL_PARAM_LINK_LATENCY, &lat));
    if (comm->nranks > 1)
        COLL_CHECK(same_probe(comm, probe));
    if (comm->nranks > 1 && probe > 0) {
        COLL_CHECK(probe_links(comm, COLL_MAX(probe, (size_t)4096), &alpha, &beta));
        comm->alpha = alpha;
        comm->beta = beta;
    }
    if (lat > 0)
        comm->alpha = (double)lat * 1e-9;
    if (bw > 0)
        comm->beta = 1.0 / (double)bw;
    return COLL_OK;
}

/* Bytes of the smallest mailbox among our peers (transport.h), 0 when one
 * has none. */
static size_t local_mbox_bytes(struct coll_comm *comm)
{
    size_t least = SIZE_MAX;
    for (int r = 0; r < comm->nranks; r++) {
        coll_peer_t *p = &comm->peers[r];
        size_t bytes = 0;
        if (r == comm->rank)
            continue;
        if (p->ops->ep_mbox_query(p->ep, &bytes) != COLL_OK)
            bytes = 0;
        least = COLL_MIN(least, bytes);
    }
    return least == SIZE_MAX ? 0 : least;
}

#define MASK_WORDS (CPU_SETSIZE / 64)

/* The CPUs this process may run on, as 64-bit words. */
static void affinity_words(uint64_t words[MASK_WORDS])
{
    cpu_set_t set;

    memset(words, 0, MASK_WORDS * sizeof(uint64_t));
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        words[0] = ~0ull; /* unknown: assume plenty */
        return;
    }
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            words[c / 64] |= 1ull << (c % 64);
}

/* How crowded is the most crowded host: the most ranks of ours per CPU
 * they may use together (the union of their affinity masks: ranks bound
 * one per CPU each allow one). Above 1, ranks share CPUs. Rows hold each
 * rank's mask at word `at`. Every rank sees every row, so every rank gets
 * the same answer. */
static double crowding(const struct coll_comm *comm, const uint8_t *rows, size_t row, size_t at)
{
    int p = comm->nranks;
    double most = 1;
    uint8_t *seen = calloc((size_t)p, 1);

    for (int k = 0; k < p && seen; k++) {
        uint64_t cpus[MASK_WORDS] = {0};
        int nlocal = 0, ncpus = 0;
        if (seen[k])
            continue;
        for (int j = k; j < p; j++) {
            if (comm->peers[j].info.host_hash != comm->peers[k].info.host_hash)
                continue;
            seen[j] = 1;
            nlocal++;
            for (int w = 0; w < MASK_WORDS; w++)
                cpus[w] |= coll_load_u64(rows + row * (size_t)j + 8 * (at + (size_t)w));
        }
        for (int w = 0; w < MASK_WORDS; w++)
            ncpus += __builtin_popcountll(cpus[w]);
        if (ncpus > 0 && (double)nlocal / ncpus > most)
            most = (double)nlocal / ncpus;
    }
    free(seen);
    return most;
}

/* Every rank sends its cost-model inputs, its mailbox size, the pipeline
 * chunk its links ask for and the CPUs it may use to every rank, and all
 * keep the maximum of each input and the minimum size (and pull only
 * where every pair has it): a choice made from them is then the same
 * everywhere (measured gammas differ a little from process to process,
 * one rank may lack mailboxes toward a peer, and ranks that chose
 * different algorithms or chunks for one call would fail or hang). */
static coll_status_t agree_costs(struct coll_comm *comm)
{
    enum { NV = 8, NOPULL = 4, MBOX = 5, CHUNK = 6, BULK = 7, ROW = 8 * (NV + MASK_WORDS) };
    int p = comm->nranks;
    double mine[NV] = {comm->alpha, comm->beta,  comm->gamma,
                       comm->copy,  !comm->pull, (double)local_mbox_bytes(comm),
                       (double)comm->chunk_links, (double)comm->chunk_bulk};
    uint64_t mask[MASK_WORDS];
    uint8_t out[ROW], *in = calloc((size_t)p, ROW);
    struct coll_request **reqs = calloc((size_t)(2 * p), sizeof(*reqs));
    uint64_t tag = coll_tag_make(COLL_TAG_INTERNAL, 0x0fffffff, 0);
    coll_status_t st = COLL_OK;
    char crowded[96] = "";

    if (!in || !reqs) {
        st = coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    for (int i = 0; i < NV; i++) {
        uint64_t bits;
        memcpy(&bits, &mine[i], 8);
        coll_store_u64(out + 8 * i, bits);
    }
    affinity_words(mask);
    for (int w = 0; w < MASK_WORDS; w++) {
        coll_store_u64(out + 8 * (NV + w), mask[w]);
        coll_store_u64(in + ROW * (size_t)comm->rank + 8 * (NV + w), mask[w]);
    }
    for (int k = 0; k < p && st == COLL_OK; k++) {
        if (k == comm->rank)
            continue;
        st = coll_p2p_irecv(comm, in + ROW * (size_t)k, ROW, k, tag, &reqs[2 * k]);
        if (st == COLL_OK)
            st = coll_p2p_isend(comm, out, ROW, k, tag, &reqs[2 * k + 1]);
    }
    coll_status_t wst = coll_p2p_waitall(comm, 2 * p, reqs, "init (agreeing on the cost model)");
    st = st != COLL_OK ? st : wst;
    for (int k = 0; k < p && st == COLL_OK; k++)
        for (int i = 0; i < NV && k != comm->rank; i++) {
            uint64_t bits = coll_load_u64(in + ROW * (size_t)k + 8 * i);
            double v;
            memcpy(&v, &bits, 8);
            mine[i] = i == MBOX ? COLL_MIN(mine[i], v) : COLL_MAX(mine[i], v);
        }
    comm->alpha = mine[0];
    comm->beta = mine[1];
    comm->gamma = mine[2];
    comm->copy = mine[3];
    comm->pull = mine[NOPULL] == 0;
    comm->mbox_bytes = p > 1 ? (size_t)mine[MBOX] : 0;
    comm->chunk_links = (size_t)mine[CHUNK];
    comm->chunk_bulk = (size_t)mine[BULK];
    choose_chunk(comm);
    if (st == COLL_OK) {
        int local_index, nlocal;
        coll_local_rank(comm, &local_index, &nlocal);
        comm->one_host = nlocal == comm->nranks; /* every rank shares our host */
        comm->crowd = crowding(comm, in, ROW, NV);
        if (comm->crowd > 1)
            snprintf(crowded, sizeof(crowded), "; a host has %.2g ranks per CPU", comm->crowd);
        for (int i = 0; i < comm->niface; i++)
            comm->ifaces[i]->crowded = comm->crowd > 1;
        /* Where ranks share CPUs a chunk's transfer and reduction do not
         * overlap anyway; what a window buys there is that the chunks in
         * flight on the host (about ranks x 2 windows) stay in the L3.
         * 4 ranks on 2 CPUs, 16 MiB, 5 alternating pairs: 12.1 -> 10.5 ms
         * out of place, 10.7 -> 7.7 in place; with a CPU per rank it cost
         * 2 ranks 9% out of place at 16 MiB (docs/performance-sets.md). */
        if (comm->window_auto)
            comm->window_bytes = comm->crowd > 1 ? coll_llc_bytes(NULL) / 16 : 0;
        if (comm->window_bytes)
            snprintf(crowded + strlen(crowded), sizeof(crowded) - strlen(crowded),
                     "; ring window %zu KiB", comm->window_bytes / 1024);
    }
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: cost model (max over ranks): alpha %.2f us, beta "
              "%.4f ns/B, gamma %.4f ns/B, copy %.4f ns/B; mailboxes of %zu bytes; "
              "receivers %s%s", comm->rank, comm->alpha * 1e6, comm->beta * 1e9,
              comm->gamma * 1e9, comm->copy * 1e9, comm->mbox_bytes,
              comm->pull ? "read senders' memory" : "get data pushed", crowded);
out:
    free(in);
    free(reqs);
    return st;
}

coll_status_t coll_comm_init_internal(const coll_init_args_t *a, struct coll_comm **comm_p)
{
    struct coll_comm *comm = NULL;
    struct coll_root *root = a->root;
    uint64_t t0 = coll_time_ns(), deadline_ns;
    char addr[COLL_ADDRSTR_LEN];
    coll_status_t st;

    COLL_CHECK_GOTO(check_init_args(a), st, out);
    COLL_CHECK_GOTO(comm_alloc(a, &comm), st, out);
    comm->parent_abort = a->parent_abort;
    deadline_ns = t0 + comm->timeout_ns;
    COLL_CHECK_GOTO(open_ifaces(comm, a, deadline_ns), st, out);
    COLL_CHECK_GOTO(exchange_and_connect(comm, a, deadline_ns, &root), st, out);
    coll_measure_local_costs(&comm->gamma, &comm->copy);
    comm->state = COLL_COMM_LIVE;
    /* waits release and retake the lock: hold it like any call does */
    coll_comm_lock(comm);
    st = link_costs(comm);
    if (st == COLL_OK)
        st = agree_costs(comm);
    coll_comm_unlock(comm);
    if (st != COLL_OK)
        goto out;
    comm->parent_abort = NULL; /* created: its life is its own now */
    register_handle(comm);
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d/%d: communicator %p ready in %.1f ms (%s; interface %s "
              "%s)", a->rank, a->nranks, (void *)comm, (double)(coll_time_ns() - t0) * 1e-6,
              a->how, comm->ifname, coll_addr_host(&comm->local_addr, addr));
    *comm_p = comm;
out:
    if (root)
        coll_root_release(root, COLL_ROOT_CANCEL);
    if (st != COLL_OK && comm) {
        comm_close_endpoints(comm, COLL_ERR_ABORTED, comm->error ? comm->errmsg : NULL);
        comm_teardown(comm);
        pthread_mutex_destroy(&comm->lock);
        pthread_cond_destroy(&comm->idle);
        pthread_cond_destroy(&comm->progress_cond);
        free(comm);
    }
    return st;
}

coll_status_t coll_comm_init_rank_config(coll_comm_t *comm_p, int nranks,
                                         const coll_unique_id_t *id, int rank,
                                         const coll_config_t *config)
{
    coll_init_args_t a = {.nranks = nranks, .rank = rank, .config = config, .how = "unique id"};

    if (!comm_p || !id)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "coll_comm_init_rank: %s is NULL", comm_p ? "id" : "comm");
    COLL_CHECK(coll_uid_decode(id, &a.uid));
    return coll_comm_init_internal(&a, comm_p);
}

coll_status_t coll_comm_init_rank(coll_comm_t *comm_p, int nranks, coll_unique_id_t id, int rank)
{
    return coll_comm_init_rank_config(comm_p, nranks, &id, rank, NULL);
}

/* ---- the end ------------------------------------------------------------------------ */

/* Graceful leave: goodbyes out, sends delivered (bounded wait). The lock
 * is released while sleeping so that coll_comm_abort can interrupt. */
static void comm_leave(struct coll_comm *comm)
{
    uint64_t cap = COLL_MIN(comm->timeout_ns, COLL_DESTROY_FLUSH_CAP_NS);
    uint64_t deadline = coll_time_ns() + cap;

    comm_close_endpoints(comm, COLL_OK, NULL);
    while (coll_time_ns() < deadline && comm->state == COLL_COMM_LIVE &&
           !__atomic_load_n(&comm->abort_requested, __ATOMIC_ACQUIRE)) {
        int busy = 0;
        coll_comm_progress(comm);
        for (int r = 0; r < comm->nranks; r++)
            busy |= comm->peers[r].ops->ep_flush(comm->peers[r].ep) == COLL_INPROGRESS;
        if (!busy)
            return;
        comm->leader_asleep = 1;
        coll_comm_unlock(comm);
        coll_evloop_sleep(comm->ev, 1);
        coll_comm_lock(comm);
        comm->leader_asleep = 0;
    }
    if (comm->state == COLL_COMM_LIVE && !comm->abort_requested)
        COLL_WARN(COLL_SUBSYS_INIT, "rank %d: destroy: some peers did not take our last "
                  "messages within %.1f s", comm->rank, (double)cap * 1e-9);
}

coll_status_t coll_comm_destroy(coll_comm_t comm)
{
    coll_status_t st = coll_comm_enter(comm, "coll_comm_destroy", 1);

    if (st != COLL_OK)
        return st;
    if (comm->active_calls > 1) {
        st = coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_INVALID_USAGE, "coll_comm_destroy: another thread "
                             "is inside a call on this communicator (use coll_comm_abort to "
                             "interrupt it)");
        coll_comm_exit(comm);
        return st;
    }
    if (comm->state == COLL_COMM_LIVE)
        comm_leave(comm);
    /* an abort that came in while we were leaving has its answer */
    st = comm->abort_requested ? COLL_ERR_ABORTED : COLL_OK;
    comm_teardown(comm);
    comm_mark_dead(comm);
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: communicator %p destroyed", comm->rank, (void *)comm);
    coll_comm_exit(comm);
    return st;
}

coll_status_t coll_comm_abort(coll_comm_t comm)
{
    coll_status_t st;
    uint64_t deadline;

    if (comm && comm_magic(comm) == COLL_COMM_MAGIC_LIVE)
        __atomic_store_n(&comm->abort_requested, 1, __ATOMIC_RELEASE);
    st = coll_comm_enter(comm, "coll_comm_abort", 1);
    if (st != COLL_OK)
        return st;
    coll_comm_fail(comm, COLL_SUBSYS_INIT, COLL_ERR_ABORTED, "the communicator was aborted (coll_comm_abort)");
    /* Threads blocked in calls were woken by the failure; let them leave
     * before the event loop they sleep in goes away. */
    deadline = coll_time_ns() + COLL_ABORT_WAIT_NS;
    while (comm->active_calls > 1 && coll_time_ns() < deadline) {
        coll_comm_wake_waiters(comm);
        coll_comm_cond_wait(&comm->lock, &comm->bias, &comm->idle, 10);
    }
    if (comm->active_calls > 1) {
        COLL_WARN(COLL_SUBSYS_INIT, "rank %d: abort: %d calls did not return within 5 s; "
                  "leaving their resources allocated", comm->rank, comm->active_calls - 1);
        comm->state = COLL_COMM_DEAD;
    } else {
        comm_teardown(comm);
    }
    comm_mark_dead(comm);
    coll_comm_exit(comm);
    return COLL_OK;
}

/* ---- queries ------------------------------------------------------------------------- */

/* Read one int field of a communicator into a caller's variable. */
static coll_status_t comm_query(coll_comm_t comm, const char *fn, const int *field, int *out)
{
    coll_status_t st = COLL_OK;
    COLL_CHECK(coll_comm_enter(comm, fn, 1));
    if (out)
        *out = *field;
    else
        st = coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                             "%s: the output pointer is NULL", fn);
    coll_comm_exit(comm);
    return st;
}

coll_status_t coll_comm_rank(coll_comm_t comm, int *rank)
{
    return comm_query(comm, "coll_comm_rank", comm ? &comm->rank : NULL, rank);
}

coll_status_t coll_comm_size(coll_comm_t comm, int *size)
{
    return comm_query(comm, "coll_comm_size", comm ? &comm->nranks : NULL, size);
}

coll_status_t coll_comm_get_error(coll_comm_t comm)
{
    coll_status_t st;
    COLL_CHECK(coll_comm_enter(comm, "coll_comm_get_error", 1));
    st = comm->error;
    coll_comm_exit(comm);
    return st;
}

coll_status_t coll_comm_set_timeout(coll_comm_t comm, int64_t timeout_ms)
{
    coll_status_t st;
    COLL_CHECK(coll_comm_enter(comm, "coll_comm_set_timeout", 0));
    if (timeout_ms <= 0) {
        st = coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                             "coll_comm_set_timeout: %lld ms is not a positive duration",
                             (long long)timeout_ms);
    } else {
        comm->timeout_ns = (uint64_t)timeout_ms * 1000000ull;
        st = COLL_OK;
    }
    coll_comm_exit(comm);
    return st;
}

/* The communicator's own buffer: it stays valid (and unchanged) until the
 * next call that fails on this communicator. */
const char *coll_get_last_error(coll_comm_t comm)
{
    uint64_t magic = comm ? comm_magic(comm) : 0;

    if (magic != COLL_COMM_MAGIC_LIVE && magic != COLL_COMM_MAGIC_DEAD)
        return coll_error_thread();
    return comm->lasterr;
}
