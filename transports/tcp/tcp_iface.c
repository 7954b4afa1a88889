/*
 * tcp_iface.c: the TCP transport's per-communicator object: the listening
 * socket, the handshakes of accepted connections, and the ops table.
 * A connection that fails its handshake (a port scanner, an HTTP client,
 * random bytes, another job) is dropped and logged once; it never reaches
 * an endpoint.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "param.h"
#include "tcp.h"

static void pending_free(tcp_pending_t *p)
{
    coll_evloop_del(p->iface->super.params.evloop, &p->src);
    if (p->fd >= 0)
        close(p->fd);
    coll_list_del(&p->link);
    free(p);
}

static uint32_t tcp_validate_hello(void *arg, const coll_hello_t *h)
{
    tcp_iface_t *iface = arg;
    const coll_tp_params_t *pr = &iface->super.params;

    if (h->nranks != (uint32_t)pr->nranks)
        return COLL_VERDICT_NRANKS;
    if (h->dst_rank != (uint32_t)pr->rank || h->src_rank >= (uint32_t)pr->nranks)
        return COLL_VERDICT_RANK;
    /* round is the socket index: each of the peer's sockets comes once */
    tcp_ep_t *ep = iface->eps[h->src_rank];
    if (!ep) /* we listen (and drop strangers) from before we have endpoints */
        return COLL_VERDICT_NOT_READY;
    if (ep->state == TCP_EP_CLOSED || h->round >= (uint32_t)ep->nconn ||
        ep->conn[h->round].state != TCP_CONN_WAIT_ACCEPT)
        return COLL_VERDICT_RANK;
    return COLL_VERDICT_OK;
}

static void pending_step(tcp_pending_t *p)
{
    coll_status_t st = coll_hs_progress(&p->hs);

    if (st == COLL_INPROGRESS) {
        coll_evloop_mod(p->iface->super.params.evloop, &p->src, coll_hs_events(&p->hs));
        return;
    }
    if (st == COLL_OK && tcp_validate_hello(p->iface, &p->hs.hello_fields) != COLL_VERDICT_OK) {
        /* two connections claimed the same socket; the first one won */
        COLL_WARN(COLL_SUBSYS_NET, "rank %d: tcp: dropped a duplicate connection from %s",
                  p->iface->super.params.rank, p->hs.peer);
    } else if (st == COLL_OK) {
        tcp_ep_t *ep = p->iface->eps[p->hs.hello_fields.src_rank];
        int fd = p->fd;
        coll_evloop_del(p->iface->super.params.evloop, &p->src); /* the endpoint takes it */
        p->fd = -1;
        tcp_conn_attach(&ep->conn[p->hs.hello_fields.round], fd, p->hs.peer);
    } else if (p->hs.verdict == COLL_VERDICT_NOT_READY) {
        /* a peer faster than our init: it tries again (tcp_ep.c) */
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: tcp: %s came before our endpoint for rank %u "
                  "existed; it retries", p->iface->super.params.rank, p->hs.peer,
                  p->hs.hello_fields.src_rank);
    } else {
        COLL_WARN(COLL_SUBSYS_NET, "rank %d: tcp: dropped connection from %s: %s",
                  p->iface->super.params.rank, p->hs.peer, p->hs.errmsg);
    }
    pending_free(p);
}

static void pending_handler(void *arg, uint32_t events)
{
    (void)events;
    pending_step(arg);
}

static void listen_handler(void *arg, uint32_t events)
{
    tcp_iface_t *iface = arg;
    const coll_tp_params_t *pr = &iface->super.params;
    (void)events;

    for (;;) {
        coll_addr_t peer;
        int fd = coll_sock_accept(iface->listen_fd, &peer);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                COLL_WARN(COLL_SUBSYS_NET, "rank %d: tcp: accept failed: %s", pr->rank,
                          strerror(errno));
            return;
        }
        tcp_pending_t *p = calloc(1, sizeof(*p));
        if (!p) {
            close(fd);
            return;
        }
        p->iface = iface;
        p->fd = fd;
        coll_list_push_back(&iface->pending, &p->link);
        coll_hs_server_start(&p->hs, fd, &peer, COLL_CONN_TCP, pr->secret,
                             coll_time_ns() + pr->handshake_timeout_ns, tcp_validate_hello,
                             iface);
        if (coll_evloop_add(pr->evloop, &p->src, fd, EPOLLOUT, pending_handler, p) != COLL_OK) {
            pending_free(p);
            continue;
        }
        pending_step(p);
    }
}

/* COLL_TCP_RECV_REDUCE_LOCAL: a boolean, or in_place (the endpoint's
 * recv_fold, COLL_TP_FOLD_IN_PLACE). */
static coll_status_t read_recv_fold_local(tcp_iface_t *iface)
{
    const char *text = coll_param_raw(COLL_PARAM_TCP_RECV_REDUCE_LOCAL);

    if (strcasecmp(text, "in_place") == 0) {
        iface->recv_fold_local = COLL_TP_FOLD_IN_PLACE;
        return COLL_OK;
    }
    if (coll_parse_bool(text, &iface->recv_fold_local) == 0)
        return COLL_OK;
    return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG, "rank %d: "
                      "COLL_TCP_RECV_REDUCE_LOCAL='%s' is neither a boolean (1/0, yes/no, "
                      "on/off, true/false) nor in_place (default in_place)",
                      iface->super.params.rank, text);
}

/* COLL_TCP_CONGESTION_LOCAL, tried on a socket of our own so that a name
 * the kernel refuses fails here rather than leaving sockets on the default
 * unnoticed; the default name, refused (a kernel without it, a sandbox),
 * is dropped with a note instead. */
static coll_status_t read_congestion(tcp_iface_t *iface)
{
    const char *name = coll_param_raw(COLL_PARAM_TCP_CONGESTION_LOCAL);
    const coll_addr_t *addr = iface->super.params.local_addr;
    int rank = iface->super.params.rank;
    coll_status_t st = COLL_OK;
    int fd, err = 0;

    if (!name[0])
        return COLL_OK;
    if (strlen(name) >= sizeof(iface->congestion_local))
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_INVALID_ARG, "rank %d: "
                          "COLL_TCP_CONGESTION_LOCAL='%s' is longer than a congestion "
                          "control's name can be (15)", rank, name);
    fd = socket(addr ? addr->ss.ss_family : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)))
        err = errno;
    if (fd >= 0)
        close(fd);
    if (!err)
        snprintf(iface->congestion_local, sizeof(iface->congestion_local), "%s", name);
    else if (coll_param_is_set(COLL_PARAM_TCP_CONGESTION_LOCAL))
        st = coll_error(COLL_SUBSYS_NET, COLL_ERR_INVALID_ARG, "rank %d: "
                        "COLL_TCP_CONGESTION_LOCAL='%s': the kernel refuses it (%s); "
                        "net.ipv4.tcp_allowed_congestion_control lists those a process may "
                        "choose, an empty value keeps the system's default", rank, name,
                        strerror(err));
    else
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: TCP congestion control %s refused (%s); "
                  "same-host sockets keep the system's default", rank, name, strerror(err));
    return st;
}

/* COLL_TCP_EAGER_LIMIT, COLL_NSOCKS, COLL_TCP_CHUNK, COLL_TCP_EAGER_WINDOW
 * (and their _LOCAL twins), COLL_TCP_RECV_REDUCE_LOCAL, COLL_TCP_EAGER_LIMIT_CROWDED,
 * COLL_SOCKET_BUFSIZE, COLL_TCP_POLL_DIRECT. Eager sizes above what a
 * receiver accepts are lowered to it. */
static coll_status_t read_settings(tcp_iface_t *iface)
{
    int rank = iface->super.params.rank;
    size_t bufsize;
    const size_t chunk_min = 4096, chunk_max = 64u << 20;

    COLL_CHECK(coll_param_size(COLL_PARAM_TCP_EAGER_LIMIT, &iface->eager_limit));
    COLL_CHECK(coll_param_size(COLL_PARAM_TCP_EAGER_LIMIT_LOCAL, &iface->eager_limit_local));
    COLL_CHECK(coll_param_size(COLL_PARAM_TCP_EAGER_LIMIT_CROWDED, &iface->eager_limit_crowded));
    iface->eager_limit = COLL_MIN(iface->eager_limit, (size_t)TCP_EAGER_MAX);
    iface->eager_limit_local = COLL_MIN(iface->eager_limit_local, (size_t)TCP_EAGER_MAX);
    iface->eager_limit_crowded = COLL_MIN(iface->eager_limit_crowded, (size_t)TCP_EAGER_MAX);
    COLL_CHECK(coll_param_int_range(COLL_PARAM_NSOCKS, 1, TCP_NSOCKS_MAX, rank, &iface->nsocks));
    COLL_CHECK(coll_param_int_range(COLL_PARAM_NSOCKS_LOCAL, 1, TCP_NSOCKS_MAX, rank,
                                    &iface->nsocks_local));
    COLL_CHECK(coll_param_size_range(COLL_PARAM_TCP_CHUNK, chunk_min, chunk_max, rank,
                                     &iface->chunk));
    COLL_CHECK(coll_param_size_range(COLL_PARAM_TCP_CHUNK_LOCAL, chunk_min, chunk_max, rank,
                                     &iface->chunk_local));
    COLL_CHECK(coll_param_size_range(COLL_PARAM_TCP_EAGER_WINDOW, 0, TCP_EAGER_WINDOW_MAX, rank,
                                     &iface->eager_window));
    COLL_CHECK(coll_param_size_range(COLL_PARAM_TCP_EAGER_WINDOW_LOCAL, 0, TCP_EAGER_WINDOW_MAX,
                                     rank, &iface->eager_window_local));
    COLL_CHECK(read_recv_fold_local(iface));
    iface->host_hash = coll_host_hash();
    /* SO_SNDBUF and SO_RCVBUF take an int */
    COLL_CHECK(coll_param_size_range(COLL_PARAM_SOCKET_BUFSIZE, 0, 1u << 30, rank, &bufsize));
    iface->bufsize = (int)bufsize;
    COLL_CHECK(read_congestion(iface));
    iface->hdr_len = iface->super.params.checksum ? TCP_HDR_MAX : TCP_HDR_BYTES;
    return coll_param_int_range(COLL_PARAM_TCP_POLL_DIRECT, 0, TCP_DIRECT_MAX, rank,
                                &iface->poll_direct);
}

static coll_status_t tcp_iface_open(const coll_tp_params_t *params, coll_tp_iface_t **iface_p)
{
    coll_status_t st;
    tcp_iface_t *iface = calloc(1, sizeof(*iface));

    if (!iface)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate tcp iface");
    iface->super.params = *params;
    iface->listen_fd = -1;
    coll_list_init(&iface->pending);
    coll_blocks_init(&iface->blocks, COLL_MATCH_BLOCKS);
    COLL_CHECK_GOTO(read_settings(iface), st, err);
    iface->eps = calloc((size_t)params->nranks, sizeof(*iface->eps));
    if (!iface->eps) {
        st = coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate tcp endpoints");
        goto err;
    }
    /* SO_REUSEADDR here and on connecting sockets: our connections' TIME_WAIT
     * remnants must not keep a later job's bootstrap root off its port. */
    COLL_CHECK_GOTO(coll_sock_listen(params->local_addr, 1, &iface->listen_fd, &iface->addr),
                    st, err);
    /* accepted sockets inherit the buffer sizes, in time for the window
     * scale their SYN-ACK announces */
    tcp_sock_setup(iface->listen_fd, iface, iface->chunk, 0);
    COLL_CHECK_GOTO(coll_evloop_add_cold(params->evloop, &iface->listen_src, iface->listen_fd,
                                         EPOLLIN, listen_handler, iface),
                    st, err);
    *iface_p = &iface->super;
    return COLL_OK;
err:
    if (iface->listen_fd >= 0)
        close(iface->listen_fd);
    free(iface->eps);
    free(iface);
    return st;
}

static coll_status_t tcp_iface_close(coll_tp_iface_t *tiface)
{
    tcp_iface_t *iface = (tcp_iface_t *)tiface;

    while (!coll_list_empty(&iface->pending))
        pending_free(coll_list_first(&iface->pending, tcp_pending_t, link));
    coll_evloop_del(tiface->params.evloop, &iface->listen_src);
    if (iface->listen_fd >= 0)
        close(iface->listen_fd);
    coll_blocks_release(&iface->blocks);
    free(iface->eps);
    free(iface);
    return COLL_OK;
}

static coll_status_t tcp_iface_addr(coll_tp_iface_t *tiface, coll_tp_addr_t *addr_p)
{
    tcp_iface_t *iface = (tcp_iface_t *)tiface;
    memset(addr_p, 0, sizeof(*addr_p));
    addr_p->tp_id = COLL_TP_TCP;
    addr_p->len = TCP_ADDR_BYTES;
    coll_addr_to_wire(&iface->addr, addr_p->data);
    addr_p->data[COLL_WIRE_ADDR_BYTES] = (uint8_t)iface->nsocks;
    addr_p->data[COLL_WIRE_ADDR_BYTES + 1] = (uint8_t)iface->nsocks_local;
    coll_store_u32(addr_p->data + TCP_ADDR_WINDOW, (uint32_t)iface->eager_window);
    coll_store_u32(addr_p->data + TCP_ADDR_WINDOW + 4, (uint32_t)iface->eager_window_local);
    return COLL_OK;
}

static coll_status_t tcp_iface_query(coll_tp_iface_t *tiface, coll_tp_perf_t *perf_p)
{
    tcp_iface_t *iface = (tcp_iface_t *)tiface;
    /* Loopback figures of the development machine (docs/performance-sets.md);
     * the algorithm layer refines them by measurement. */
    perf_p->latency_s = 12e-6;
    perf_p->bandwidth_Bps = 3e9;
    perf_p->overhead_s = 2e-6;
    perf_p->pull = 0;
    /* Toward a peer of this kernel both sides' system calls, not a wire,
     * set the pace: a 2-rank all-reduce of 16 MiB took 10.2-12.9 ms in
     * 256 KiB pipeline chunks and 7.4-9.5 ms in COLL_TCP_CHUNK_LOCAL
     * (2 MiB) ones (docs/performance-sets.md). Over a wire smaller chunks fill
     * the pipeline sooner, but an eager chunk travels on socket 0 alone,
     * whose unsent backlog (COLL_TCP_CHUNK) is a millisecond at 1 Gbit/s:
     * a sender that is off its CPU longer leaves the link idle. Above the
     * eager limit a chunk is striped over every socket. Emulated cluster,
     * 4 hosts at 1 Gbit/s, 4 alternating rounds, % of the link: 64 MiB
     * 79-89 eager, 85-91 striped; 4 MiB 72-94 eager, 67-80 striped (the
     * clear-to-send waits behind the other direction's data); Gloo 85-89
     * and 80-93 (docs/performance-sets.md). */
    perf_p->chunk_local = iface->chunk_local;
    perf_p->chunk_remote = iface->nsocks > 1 ? 2 * iface->eager_limit : 0;
    return COLL_OK;
}

/* Sockets read directly, then timers: strangers that stay silent, and
 * connections to retry. */
static coll_status_t tcp_iface_progress(coll_tp_iface_t *tiface, int *progressed_p)
{
    tcp_iface_t *iface = (tcp_iface_t *)tiface;
    coll_list_t *pos, *tmp;

    /* Where ranks share CPUs a read per turn costs more than it saves:
     * 3 ranks on 2 CPUs, 16-byte all-reduce, 33 -> 42 us. The crowding
     * is known once every endpoint is made (comm.c, agree_costs). */
    if (iface->ndirect > 0 && tiface->crowded)
        tcp_iface_stop_direct(iface);
    *progressed_p = tcp_iface_poll_direct(iface);
    coll_list_for_each_safe(pos, tmp, &iface->pending) {
        tcp_pending_t *p = coll_container_of(pos, tcp_pending_t, link);
        if (coll_time_ns() > p->hs.deadline_ns)
            pending_step(p);
    }
    for (int r = 0; iface->nretry > 0 && r < tiface->params.nranks; r++) {
        tcp_ep_t *ep = iface->eps[r];
        for (int i = 0; ep && ep->state == TCP_EP_CONNECTING && i < ep->nconn; i++)
            if (ep->conn[i].state == TCP_CONN_RETRY)
                tcp_conn_retry_due(&ep->conn[i]);
    }
    return COLL_OK;
}

static coll_status_t tcp_can_connect(coll_tp_iface_t *tiface, const coll_peer_info_t *self,
                                     const coll_peer_info_t *peer, int *yes_p)
{
    (void)tiface;
    (void)self;
    *yes_p = coll_peer_info_addr(peer, COLL_TP_TCP) != NULL;
    return COLL_OK;
}

const coll_tp_ops_t coll_tp_tcp_ops = {
    .size = sizeof(coll_tp_ops_t),
    .name = "tcp",
    .id = COLL_TP_TCP,
    .mem_kinds = COLL_MEM_BIT(COLL_MEM_HOST),
    .iface_open = tcp_iface_open,
    .iface_close = tcp_iface_close,
    .iface_addr = tcp_iface_addr,
    .iface_query = tcp_iface_query,
    .iface_progress = tcp_iface_progress,
    .can_connect = tcp_can_connect,
    .ep_connect = tcp_ep_connect,
    .ep_accept = tcp_ep_accept,
    .ep_ready = tcp_ep_ready,
    .ep_isend = tcp_ep_isend,
    .ep_irecv = tcp_ep_irecv,
    .ep_flush = tcp_ep_flush,
    .ep_close = tcp_ep_close,
    .ep_destroy = tcp_ep_destroy,
    COLL_TP_NO_MBOX,
};
