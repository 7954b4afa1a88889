/*
 * shm_ep.c: a shared-memory endpoint's life: the higher rank creates the
 * pair segment and the lower one maps it (then the name is unlinked), the
 * peer's process is watched through a pidfd, and the ways it ends: a
 * goodbye record, an abort notice in the control block, or the peer's
 * death, which names its rank, pid and host.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "shm.h"

#define SHM_PID_CHECK_NS (200 * 1000000ull)

static void unwatch_pid(shm_ep_t *ep)
{
    if (ep->pidfd < 0)
        return;
    coll_evloop_del(ep->iface->super.params.evloop, &ep->pid_src);
    close(ep->pidfd);
    ep->pidfd = -1;
}

static void post_abort_notice(shm_ep_t *ep, coll_status_t why, const char *reason);

void shm_ep_fail(shm_ep_t *ep, coll_status_t status, const char *fmt, ...)
{
    char msg[COLL_WIRE_ERRTEXT_MAX];
    va_list ap;

    if (ep->state == SHM_EP_CLOSED)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* A corrupted record: the peer is alive and must learn why the link
     * broke (its other failures mean the peer is gone or not one of us). */
    if (status == COLL_ERR_DATA_CORRUPTION && ep->state == SHM_EP_READY)
        post_abort_notice(ep, status, msg);
    ep->state = SHM_EP_CLOSED;
    __atomic_store_n(&ep->armed, 0, __ATOMIC_RELEASE);
    ep->error = status;
    unwatch_pid(ep);
    if (ep->side == 1 && ep->name[0]) { /* never mapped by the peer */
        shm_unlink(ep->name);
        ep->name[0] = '\0';
    }
    /* The core records the cause first, so that the requests failing next
     * are reported as part of it rather than on their own. */
    ep->iface->super.params.ep_failed(ep->iface->super.params.core, ep->super.peer, status, msg);
    shm_ep_fail_requests(ep, status);
}

/* The peer's process is gone. What it wrote before it went is read first:
 * a goodbye or an abort notice there says it left rather than died. */
static void on_peer_exit(shm_ep_t *ep)
{
    unwatch_pid(ep);
    if (ep->state == SHM_EP_WAIT_SEG || ep->state == SHM_EP_WAIT_MAP)
        shm_ep_connect_step(ep); /* it may have refused the segment, saying why */
    ep->rx_drain = 1; /* what it sent before it went is all there is */
    if (ep->state == SHM_EP_READY)
        shm_ep_poll(ep);
    if (ep->state == SHM_EP_CLOSED || ep->peer_left)
        return;
    if (ep->state != SHM_EP_READY) {
        if (ep->name[0]) { /* whoever created it is gone or never maps it */
            shm_unlink(ep->name);
            ep->name[0] = '\0';
        }
        shm_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s died before it connected", ep->super.desc);
        return;
    }
    shm_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s died without leaving the communicator (killed "
                "or crashed?)", ep->super.desc);
}

static void pid_handler(void *arg, uint32_t events)
{
    (void)events;
    on_peer_exit(arg);
}

/* Without pidfds (kernels before 5.3): ask the kernel now and then. */
void shm_ep_check_alive(shm_ep_t *ep)
{
    uint64_t now = coll_time_ns();

    if (now < ep->pid_check_ns)
        return;
    ep->pid_check_ns = now + SHM_PID_CHECK_NS;
    if (kill((pid_t)ep->peer_addr.pid, 0) != 0 && errno == ESRCH)
        on_peer_exit(ep);
}

static void watch_pid(shm_ep_t *ep)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;
#ifdef SYS_pidfd_open
    ep->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)ep->peer_addr.pid, 0);
#endif
    if (ep->pidfd < 0) {
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: shm: no pidfd for %s (%s); polling it",
                   pr->rank, ep->super.desc, strerror(errno));
        return;
    }
    if (coll_evloop_add_cold(pr->evloop, &ep->pid_src, ep->pidfd, EPOLLIN, pid_handler, ep) !=
        COLL_OK) {
        close(ep->pidfd);
        ep->pidfd = -1;
    }
}

static shm_ep_t *ep_alloc(shm_iface_t *iface, const coll_peer_info_t *peer, int side)
{
    shm_ep_t *ep = calloc(1, sizeof(*ep));

    if (!ep)
        return NULL;
    ep->super.iface = &iface->super;
    ep->super.peer = (int)peer->rank;
    ep->super.recv_fold = 1;
    ep->iface = iface;
    ep->side = side;
    ep->pidfd = -1;
    ep->pid_src.fd = -1;
    ep->retry_every = SHM_WAY_RETRY;
    coll_list_init(&ep->txq);
    coll_match_init(&ep->match, &ep->iface->blocks);
    coll_list_init(&ep->rndv_sends);
    coll_list_init(&ep->rndv_recvs);
    coll_list_init(&ep->rndv_reads);
    if (shm_peer_addr(ep, peer) != 0) {
        free(ep);
        return NULL;
    }
    snprintf(ep->super.desc, sizeof(ep->super.desc), "rank %u (pid %u on %s)", peer->rank,
             ep->peer_addr.pid, peer->hostname);
    return ep;
}

/* Which large messages the receiver reads from the sender's memory, for
 * the connection's INFO line. */
static void describe_cma(const shm_iface_t *iface, char *buf, size_t len)
{
    char upto[160] = "", spread[64] = "", crowd[96] = "";

    if (!iface->cma) {
        snprintf(buf, len, "every message through the ring");
        return;
    }
    if (iface->cma_max_spread != iface->cma_max)
        snprintf(spread, sizeof(spread), " (%zu where each rank has a CPU)",
                 iface->cma_max_spread);
    if (iface->cma_max != SIZE_MAX)
        snprintf(upto, sizeof(upto), " up to %zu bytes%s%s", iface->cma_max, spread,
                 iface->pagemap_fd >= 0 ? ", beyond that from huge pages into huge pages" : "");
    if (iface->cma_crowded) /* the crowding is known only later (comm.c) */
        snprintf(crowd, sizeof(crowd),
                 "; where ranks share CPUs, collectives that reduce nothing from %zu bytes",
                 iface->cma_crowded);
    if (iface->cma_threshold <= iface->cma_max)
        snprintf(buf, len, "cross-memory attach from %zu bytes and for sends that ask for "
                 "one copy%s%s", iface->cma_threshold, upto, crowd);
    else
        snprintf(buf, len, "cross-memory attach for sends that ask for one copy%s%s", upto, crowd);
}

static void become_ready(shm_ep_t *ep)
{
    const shm_iface_t *iface = ep->iface;
    char cma[320];

    ep->state = SHM_EP_READY;
    __atomic_store_n(&ep->armed, 1, __ATOMIC_RELEASE);
    if (coll_log_enabled(COLL_LOG_INFO, COLL_SUBSYS_NET)) {
        describe_cma(iface, cma, sizeof(cma));
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: connected to %s (ring %u bytes, %s)",
                  iface->super.params.rank, ep->super.desc, ep->seg->ring_bytes, cma);
    }
    shm_wake_peer(ep); /* it may sleep while it connects */
    shm_tx_flush(ep);  /* sends posted while connecting */
}

void shm_ep_connect_step(shm_ep_t *ep)
{
    if (ep->state == SHM_EP_WAIT_SEG) {
        if (shm_seg_try_map(ep) == 1)
            become_ready(ep);
    } else if (ep->state == SHM_EP_WAIT_MAP) {
        shm_ring_ctl_t *in = &ep->seg->ctl[0];
        if (__atomic_load_n(&in->closed, __ATOMIC_ACQUIRE)) { /* it refused the segment */
            in->abort_text[sizeof(in->abort_text) - 1] = '\0';
            shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s refused our segment: %s", ep->super.desc,
                        in->abort_text);
        } else if (__atomic_load_n(&ep->seg->acceptor_mapped, __ATOMIC_ACQUIRE)) {
            ep->name[0] = '\0'; /* the peer unlinked it */
            become_ready(ep);
        }
    }
}

coll_status_t shm_ep_connect(coll_tp_iface_t *tiface, const coll_peer_info_t *peer,
                             coll_tp_ep_t **ep_p)
{
    shm_iface_t *iface = (shm_iface_t *)tiface;
    shm_ep_t *ep = ep_alloc(iface, peer, 1);
    coll_status_t st;

    if (!ep)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate shm endpoint");
    st = shm_seg_create(ep);
    if (st != COLL_OK) {
        free(ep);
        return st;
    }
    ep->state = SHM_EP_WAIT_MAP;
    iface->eps[peer->rank] = ep;
    watch_pid(ep);
    shm_wake_peer(ep); /* the segment is there */
    *ep_p = &ep->super;
    return COLL_OK;
}

coll_status_t shm_ep_accept(coll_tp_iface_t *tiface, const coll_peer_info_t *peer,
                            coll_tp_ep_t **ep_p)
{
    shm_iface_t *iface = (shm_iface_t *)tiface;
    shm_ep_t *ep = ep_alloc(iface, peer, 0);

    if (!ep)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate shm endpoint");
    shm_seg_name(ep->name, sizeof(ep->name), ep->peer_addr.pid, ep->peer_addr.nonce,
                 tiface->params.rank);
    ep->state = SHM_EP_WAIT_SEG;
    iface->eps[peer->rank] = ep;
    watch_pid(ep);
    shm_ep_connect_step(ep);
    *ep_p = &ep->super;
    return COLL_OK;
}

coll_status_t shm_ep_ready(coll_tp_ep_t *tep)
{
    shm_ep_t *ep = (shm_ep_t *)tep;
    if (ep->state == SHM_EP_READY || ep->peer_left)
        return COLL_OK;
    if (ep->state == SHM_EP_CLOSED)
        return ep->error != COLL_OK ? ep->error : COLL_ERR_PEER_FAILED;
    return COLL_INPROGRESS;
}

/* A record in the ring is delivered: the peer reads it even after we
 * unmapped (the segment lives while one side maps it). */
coll_status_t shm_ep_flush(coll_tp_ep_t *tep)
{
    shm_ep_t *ep = (shm_ep_t *)tep;

    if (ep->state != SHM_EP_READY)
        return COLL_OK;
    shm_tx_flush(ep);
    return coll_list_empty(&ep->txq) ? COLL_OK : COLL_INPROGRESS;
}

/* Tell the peer why we fail; the ring may be full, so the text goes into
 * the control block, which the peer reads once it has read the ring. */
static void post_abort_notice(shm_ep_t *ep, coll_status_t why, const char *reason)
{
    shm_ring_ctl_t *ctl = ep->tx.ctl;
    size_t len = strnlen(reason, SHM_ABORT_TEXT - 1);

    ctl->abort_status = why;
    memcpy(ctl->abort_text, reason, len);
    ctl->abort_text[len] = '\0';
    ctl->abort_len = (uint32_t)len;
    __atomic_store_n(&ctl->closed, 1, __ATOMIC_SEQ_CST);
    shm_maybe_wake(ep);
}

coll_status_t shm_ep_close(coll_tp_ep_t *tep, coll_status_t why, const char *reason)
{
    shm_ep_t *ep = (shm_ep_t *)tep;

    if (ep->state == SHM_EP_CLOSED)
        return COLL_OK;
    if (why == COLL_OK && ep->state == SHM_EP_READY) {
        if (!ep->bye_queued) {
            shm_rec_t bye = {.type = SHM_BYE};
            ep->bye_queued = 1;
            /* As TCP: what the peer would still have to act on never
             * completes; records already queued still go out. */
            coll_match_fail_posted(&ep->match, COLL_ERR_INVALID_USAGE);
            shm_ep_fail_pending_rndv(ep, COLL_ERR_INVALID_USAGE);
            shm_tx_control(ep, &bye);
        }
        return COLL_OK;
    }
    if (ep->state == SHM_EP_READY && reason)
        post_abort_notice(ep, why, reason);
    if (ep->side == 1 && ep->name[0]) {
        shm_unlink(ep->name);
        ep->name[0] = '\0';
    }
    ep->state = SHM_EP_CLOSED;
    __atomic_store_n(&ep->armed, 0, __ATOMIC_RELEASE);
    ep->error = why == COLL_OK ? COLL_ERR_ABORTED : why;
    unwatch_pid(ep);
    shm_ep_fail_requests(ep, ep->error);
    return COLL_OK;
}

/* How the messages we could have read from the peer's memory came
 * (choose_way in shm_msg.c), with the copy costs that chose. */
static void log_ways(const shm_ep_t *ep)
{
    const uint64_t *n = ep->way_taken;
    const double *c = ep->copy_ns_per_byte, *w = ep->way_ns_per_byte;

    if (n[SHM_WAY_READ] + n[SHM_WAY_RING] == 0)
        return;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: of the messages from %s that we could read from "
              "its memory, %llu were read and %llu came through the ring, %llu of them the way "
              "it took last (lately ns/KiB from the choice to the last byte: read %.0f, ring "
              "%.0f; of the copies: read %.0f, copy into the ring %.0f, out of it %.0f; priced "
              "by %s; the other way retried %u times, %u of them cheaper, now after %u "
              "messages; left on a drift %u times)", ep->iface->super.params.rank,
              ep->super.desc,
              (unsigned long long)n[SHM_WAY_READ], (unsigned long long)n[SHM_WAY_RING],
              (unsigned long long)ep->way_followed, w[SHM_WAY_READ] * 1024,
              w[SHM_WAY_RING] * 1024, c[SHM_COPY_READ] * 1024, c[SHM_COPY_IN] * 1024,
              c[SHM_COPY_OUT] * 1024, shm_ways_by_delivery(ep) ? "delivery" : "the copies",
              ep->retries, ep->retries_won, ep->retry_every, ep->drifts);
}

/* What shm_share.c did with this peer, each side's share. */
static void log_shares(const shm_ep_t *ep)
{
    if (ep->share_reads == 0 && ep->share_written == 0)
        return;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: %llu messages from %s were copied by both of us: "
              "it wrote %llu of their %llu pieces; we wrote %llu pieces of our messages into "
              "its memory", ep->iface->super.params.rank, (unsigned long long)ep->share_reads,
              ep->super.desc, (unsigned long long)ep->share_pieces_peer,
              (unsigned long long)ep->share_pieces, (unsigned long long)ep->share_written);
}

coll_status_t shm_ep_destroy(coll_tp_ep_t *tep)
{
    shm_ep_t *ep = (shm_ep_t *)tep;

    log_ways(ep);
    log_shares(ep);
    if (ep->crowd_reads)
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: %llu messages from %s were read where ranks "
                  "share CPUs (COLL_SHM_CMA_CROWDED)", ep->iface->super.params.rank,
                  (unsigned long long)ep->crowd_reads, ep->super.desc);
    if (ep->replies)
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: %llu reduced messages from %s were written "
                  "back as they were reduced (COLL_SHM_REPLY)", ep->iface->super.params.rank,
                  (unsigned long long)ep->replies, ep->super.desc);
    shm_map_release(ep);
    if (ep->state != SHM_EP_CLOSED)
        shm_ep_close(tep, COLL_ERR_ABORTED, NULL);
    while (!coll_list_empty(&ep->txq)) {
        shm_tx_t *tx = coll_list_first(&ep->txq, shm_tx_t, link);
        coll_list_del(&tx->link);
        if (tx->heap)
            free(tx);
    }
    shm_set_tx_blocked(ep, 0, 0);
    coll_match_free_unexpected(&ep->match);
    if (ep->iface->eps[ep->super.peer] == ep)
        ep->iface->eps[ep->super.peer] = NULL;
    shm_seg_release(ep);
    free(ep);
    return COLL_OK;
}
