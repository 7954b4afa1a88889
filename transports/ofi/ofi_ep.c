/*
 * ofi_ep.c: one peer over libfabric: its address inserted into the
 * address vector, the HELLO both ways that proves the link at init, and
 * the ways it ends: a BYE, an ABORT notice, a failed completion (the
 * provider noticed), the peer's death seen through a pidfd when it lives
 * on this host, or a keepalive that fails (a remote peer that died while
 * we only wait to receive from it).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "ofi.h"

/* Keepalive: a PING to a peer we wait for that has sent nothing this long. */
#define OFI_PING_NS (1000 * 1000000ull)
/* How long ep_destroy waits for libfabric to give back its operations. */
#define OFI_DRAIN_NS (500 * 1000000ull)
/* How often an unacknowledged HELLO is repeated. */
#define OFI_HELLO_REPEAT_NS (50 * 1000000ull)
/* How long a leaving rank waits for the peer's BYE after its own went. */
#define OFI_BYE_LINGER_NS (250 * 1000000ull)
/* How long a dead peer's last messages (BYE, ABORT) get to be read. */
#define OFI_LAST_WORDS_NS (20 * 1000000ull)

static void unwatch_pid(ofi_ep_t *ep)
{
    if (ep->pidfd < 0)
        return;
    coll_evloop_del(ep->iface->super.params.evloop, &ep->pid_src);
    close(ep->pidfd);
    ep->pidfd = -1;
}

void ofi_ep_fail(ofi_ep_t *ep, coll_status_t status, const char *fmt, ...)
{
    char msg[COLL_WIRE_ERRTEXT_MAX];
    va_list ap;

    if (ep->state == OFI_EP_CLOSED && ep->error != COLL_OK)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    ep->state = OFI_EP_CLOSED;
    ep->error = status;
    unwatch_pid(ep);
    /* the core records the cause before the requests fail with it */
    ep->iface->super.params.ep_failed(ep->iface->super.params.core, ep->super.peer, status, msg);
    ofi_ep_cancel_ops(ep, status, 1);
}

/* The peer's process ended: what it sent last (BYE, ABORT) is read first. */
static void on_peer_exit(ofi_ep_t *ep)
{
    uint64_t until = coll_time_ns() + OFI_LAST_WORDS_NS;

    unwatch_pid(ep);
    while (!ep->peer_left && ep->error == COLL_OK && coll_time_ns() < until)
        if (ofi_poll_cq(ep->iface) == 0)
            usleep(1000);
    if (ep->peer_left || ep->error != COLL_OK)
        return;
    ofi_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s died %s (killed or crashed?)", ep->super.desc,
                ep->state == OFI_EP_CONNECTING ? "before it connected"
                                               : "without leaving the communicator");
}

static void pid_handler(void *arg, uint32_t events)
{
    (void)events;
    on_peer_exit(arg);
}

static void watch_pid(ofi_ep_t *ep)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;
#ifdef SYS_pidfd_open
    ep->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)ep->pid, 0);
#endif
    if (ep->pidfd < 0) {
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: ofi: no pidfd for %s (%s); keepalives only",
                   pr->rank, ep->super.desc, strerror(errno));
        return;
    }
    if (coll_evloop_add(pr->evloop, &ep->pid_src, ep->pidfd, EPOLLIN, pid_handler, ep) !=
        COLL_OK) {
        close(ep->pidfd);
        ep->pidfd = -1;
    }
}

/* Remember which endpoint an AV index belongs to, for completion errors
 * that carry only the source address. */
static coll_status_t map_addr(ofi_iface_t *iface, ofi_ep_t *ep)
{
    if (ep->addr >= (fi_addr_t)iface->naddr) {
        int n = (int)ep->addr + 1 > 2 * iface->naddr ? (int)ep->addr + 1 : 2 * iface->naddr;
        ofi_ep_t **grown = realloc(iface->by_addr, (size_t)n * sizeof(*grown));
        if (!grown)
            return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
        memset(grown + iface->naddr, 0, (size_t)(n - iface->naddr) * sizeof(*grown));
        iface->by_addr = grown;
        iface->naddr = n;
    }
    iface->by_addr[ep->addr] = ep;
    return COLL_OK;
}

static coll_status_t insert_addr(ofi_ep_t *ep, const coll_peer_info_t *peer)
{
    ofi_iface_t *iface = ep->iface;
    const coll_tp_addr_t *a = coll_peer_info_addr(peer, COLL_TP_OFI);
    size_t namelen = a ? (size_t)a->data[2] | (size_t)a->data[3] << 8 : 0;
    char str[80];
    size_t slen = sizeof(str);

    /* can_connect checked the header; the length is checked here */
    if (!a || namelen == 0 || namelen > (size_t)a->len - OFI_ADDR_HDR)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_PROTOCOL, "rank %d: ofi: rank %u published "
                          "a malformed address", iface->super.params.rank, peer->rank);
    int rc = fi_av_insert(iface->av, a->data + OFI_ADDR_HDR, 1, &ep->addr, 0, NULL);
    if (rc != 1)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_UNREACHABLE, "rank %d: ofi: %s rejected the "
                          "address of rank %u: %s", iface->super.params.rank, ofi_prov_name(iface),
                          peer->rank, fi_strerror(rc < 0 ? -rc : FI_EINVAL));
    fi_av_straddr(iface->av, a->data + OFI_ADDR_HDR, str, &slen);
    snprintf(ep->super.desc, sizeof(ep->super.desc), "rank %u (pid %u on %s, %s)", peer->rank,
             peer->pid, peer->hostname, str);
    return map_addr(iface, ep);
}

static coll_status_t send_hello(ofi_ep_t *ep)
{
    ep->hello_due_ns = coll_time_ns() + OFI_HELLO_REPEAT_NS;
    return ofi_send_ctl(ep, OFI_CTL_HELLO, NULL);
}

/* Connectionless: both sides do the same; the HELLOs prove the link. */
static coll_status_t ep_create(coll_tp_iface_t *tiface, const coll_peer_info_t *peer,
                               coll_tp_ep_t **ep_p)
{
    ofi_iface_t *iface = (ofi_iface_t *)tiface;
    ofi_ep_t *ep = calloc(1, sizeof(*ep));
    const coll_tp_addr_t *a = coll_peer_info_addr(peer, COLL_TP_OFI);
    coll_status_t st;

    if (!ep)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate ofi endpoint");
    ep->super.iface = tiface;
    ep->super.peer = (int)peer->rank;
    ep->iface = iface;
    ep->pidfd = -1;
    ep->pid = peer->pid;
    ep->peer_nonce = coll_load_u64(a->data + 16);
    ep->last_rx_ns = coll_time_ns();
    coll_list_init(&ep->ops);
    ofi_match_ep_init(ep);
    COLL_CHECK_GOTO(insert_addr(ep, peer), st, err);
    iface->eps[peer->rank] = ep;
    if (peer->host_hash == iface->host_hash &&
        coll_load_u64(a->data + 8) == iface->pidns)
        watch_pid(ep);
    COLL_CHECK_GOTO(ofi_post_ctl_recv(ep), st, err_ep);
    COLL_CHECK_GOTO(send_hello(ep), st, err_ep);
    *ep_p = &ep->super;
    return COLL_OK;
err_ep:
    ofi_ep_destroy(&ep->super);
    return st;
err:
    free(ep);
    return st;
}

coll_status_t ofi_ep_connect(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                             coll_tp_ep_t **ep_p)
{
    return ep_create(iface, peer, ep_p);
}

coll_status_t ofi_ep_accept(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                            coll_tp_ep_t **ep_p)
{
    return ep_create(iface, peer, ep_p);
}

coll_status_t ofi_ep_ready(coll_tp_ep_t *tep)
{
    ofi_ep_t *ep = (ofi_ep_t *)tep;

    if (ep->state == OFI_EP_CONNECTING && ep->got_hello && ep->peer_has_ours)
        ep->state = OFI_EP_READY;
    if (ep->state == OFI_EP_CLOSED)
        return ep->error != COLL_OK ? ep->error : COLL_OK;
    return ep->state == OFI_EP_READY ? COLL_OK : COLL_INPROGRESS;
}

coll_status_t ofi_ep_flush(coll_tp_ep_t *tep)
{
    ofi_ep_t *ep = (ofi_ep_t *)tep;

    if (ep->error != COLL_OK)
        return COLL_OK;
    ofi_poll_cq(ep->iface);
    if (ep->nsends > 0 || (ep->leaving && !ep->bye_done))
        return COLL_INPROGRESS;
    /* A send completes once the provider has it, not once the peer does;
     * closing our endpoint at once could cut our BYE off (a reset), so we
     * wait for the peer's BYE, or a moment when it stays. */
    if (ep->leaving && !ep->peer_left && coll_time_ns() - ep->bye_done < OFI_BYE_LINGER_NS)
        return COLL_INPROGRESS;
    return COLL_OK;
}

coll_status_t ofi_ep_close(coll_tp_ep_t *tep, coll_status_t why, const char *reason)
{
    ofi_ep_t *ep = (ofi_ep_t *)tep;

    if (ep->state == OFI_EP_CLOSED)
        return COLL_OK;
    if (why == COLL_OK && ep->state == OFI_EP_READY) {
        /* sends already posted still go; receives never complete now */
        ep->state = OFI_EP_CLOSED;
        ep->leaving = 1;
        ofi_ep_cancel_ops(ep, COLL_ERR_INVALID_USAGE, 0);
        if (ofi_send_ctl(ep, OFI_CTL_BYE, NULL) != COLL_OK)
            ep->bye_done = coll_time_ns();
        return COLL_OK;
    }
    if (ep->state == OFI_EP_READY && reason)
        ofi_send_ctl(ep, OFI_CTL_ABORT, reason); /* best effort */
    ep->state = OFI_EP_CLOSED;
    ep->error = why == COLL_OK ? COLL_ERR_ABORTED : why;
    unwatch_pid(ep);
    ofi_ep_cancel_ops(ep, ep->error, 1);
    return COLL_OK;
}

void ofi_ep_on_ctl(ofi_ep_t *ep, const ofi_ctl_t *ctl, size_t len)
{
    int rank = ep->iface->super.params.rank;

    if (len < offsetof(ofi_ctl_t, text) || ctl->magic != OFI_CTL_MAGIC) {
        ofi_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent a malformed control message", ep->super.desc);
        return;
    }
    if (ctl->src_nonce != ep->peer_nonce || ctl->dst_nonce != ep->iface->nonce) {
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: ofi: dropped a control message (type %u) of an "
                   "earlier communicator", rank, ctl->type);
        return;
    }
    switch (ctl->type) {
    case OFI_CTL_HELLO:
    case OFI_CTL_HELLO_ACK:
        if (ctl->rank != (uint32_t)ep->super.peer ||
            ctl->nranks != (uint32_t)ep->iface->super.params.nranks) {
            ofi_ep_fail(ep, COLL_ERR_PROTOCOL, "%s answered as rank %u of %u ranks",
                        ep->super.desc, ctl->rank, ctl->nranks);
            return;
        }
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: ofi: %s from %s", rank,
                   ctl->type == OFI_CTL_HELLO ? "HELLO" : "HELLO_ACK", ep->super.desc);
        ep->got_hello = 1;
        if (ctl->type == OFI_CTL_HELLO_ACK)
            ep->peer_has_ours = 1;
        else if (ep->state != OFI_EP_CLOSED) /* every HELLO, in case an answer was lost */
            ofi_send_ctl(ep, OFI_CTL_HELLO_ACK, NULL);
        break;
    case OFI_CTL_BYE:
        /* our matching: its last frames may still wait for a frame
         * receive; the BYE counts once they are all here */
        ep->bye_frames = ctl->frames;
        ep->bye_due = 1;
        ofi_ep_bye_check(ep);
        break;
    case OFI_CTL_ABORT: {
        char text[OFI_CTL_TEXT];
        size_t n = len - offsetof(ofi_ctl_t, text);
        memcpy(text, ctl->text, n < sizeof(text) ? n : sizeof(text));
        text[n < sizeof(text) ? n : sizeof(text) - 1] = '\0';
        ofi_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s aborted: %s", ep->super.desc, text);
        break;
    }
    case OFI_CTL_PING:
        break;
    default:
        ofi_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent control message type %u", ep->super.desc,
                    ctl->type);
    }
}

/* The peer's BYE, once every frame it sent before it has come. */
void ofi_ep_bye_check(ofi_ep_t *ep)
{
    if (!ep->bye_due || ep->frames_in < ep->bye_frames)
        return;
    ep->bye_due = 0;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: ofi: %s left the communicator",
              ep->iface->super.params.rank, ep->super.desc);
    ep->peer_left = 1;
    unwatch_pid(ep);
    /* receives that no message matched will never complete */
    ofi_ep_cancel_ops(ep, COLL_ERR_PEER_FAILED, 0);
}

/* Our HELLO again while the peer has not acknowledged it; and a remote
 * peer that died is seen by a send failing, but a rank that only receives
 * from it sends nothing, so it sends a PING now and then. */
void ofi_ep_keepalive(ofi_ep_t *ep, uint64_t now)
{
    if (ep->state == OFI_EP_CONNECTING && !ep->peer_has_ours && now >= ep->hello_due_ns) {
        send_hello(ep);
        return;
    }
    if (ep->state != OFI_EP_READY || ep->peer_left || ep->pidfd >= 0 ||
        now - ep->last_rx_ns < OFI_PING_NS || now < ep->ping_ns)
        return;
    /* only while something waits for the peer */
    coll_list_t *pos, *tmp;
    int waiting = ofi_match_waiting(ep);
    coll_list_for_each_safe(pos, tmp, &ep->ops) {
        ofi_op_t *op = coll_container_of(pos, ofi_op_t, link);
        waiting |= op->kind == OFI_OP_RECV || op->kind == OFI_OP_SEND;
    }
    if (!waiting)
        return;
    ep->ping_ns = now + OFI_PING_NS;
    ofi_send_ctl(ep, OFI_CTL_PING, NULL);
}

coll_status_t ofi_ep_destroy(coll_tp_ep_t *tep)
{
    ofi_ep_t *ep = (ofi_ep_t *)tep;
    ofi_iface_t *iface = ep->iface;
    uint64_t until = coll_time_ns() + OFI_DRAIN_NS;

    if (ep->state != OFI_EP_CLOSED)
        ofi_ep_close(tep, COLL_ERR_ABORTED, NULL);
    unwatch_pid(ep);
    ofi_ep_cancel_ops(ep, ep->error != COLL_OK ? ep->error : COLL_ERR_ABORTED, 1);
    /* libfabric may still write into receive buffers until it gives the
     * operation back: wait for that, within reason */
    while (!coll_list_empty(&ep->ops) && coll_time_ns() < until)
        if (ofi_poll_cq(iface) == 0)
            usleep(100);
    while (!coll_list_empty(&ep->ops)) { /* left for fi_close(ep) at iface_close */
        ofi_op_t *op = coll_list_first(&ep->ops, ofi_op_t, link);
        coll_list_del(&op->link);
        op->ep = NULL;
        coll_list_push_back(&iface->orphans, &op->link);
    }
    if (ep->addr < (fi_addr_t)iface->naddr && iface->by_addr[ep->addr] == ep)
        iface->by_addr[ep->addr] = NULL;
    if (iface->eps[ep->super.peer] == ep)
        iface->eps[ep->super.peer] = NULL;
    coll_match_free_unexpected(&ep->match);
    free(ep);
    return COLL_OK;
}
