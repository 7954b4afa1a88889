/*
 * shm_iface.c: the shared-memory transport's per-communicator object: the
 * wakeup socket, the checks made once at open (room in /dev/shm, whether
 * cross-memory attach works), the idle hook that arms wakeups before the
 * core sleeps, progress over every endpoint, and the ops table.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "param.h"
#include "shm.h"

/* "\0coll-shm.<pid>.<nonce>": an abstract socket vanishes with its process. */
static socklen_t wake_sockaddr(struct sockaddr_un *sa, uint32_t pid, uint64_t nonce)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "coll-shm.%u.%016llx", pid,
                     (unsigned long long)nonce);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

void shm_wake_peer(shm_ep_t *ep)
{
    char one = 1;
    /* EAGAIN: its socket already holds wakeups; ECONNREFUSED: it is gone
     * (its pidfd tells). Either way there is nothing more to do. */
    (void)sendto(ep->iface->wake_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
                 (struct sockaddr *)&ep->wake_addr, ep->wake_len);
}

static void wake_handler(void *arg, uint32_t events)
{
    shm_iface_t *iface = arg;
    char sink[64];
    (void)events;
    /* The rings are read by iface_progress, which the core calls next. */
    while (recv(iface->wake_fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
        ;
}

/* Does a mailbox call of ours wait for a peer (shm_ep_mbox_ready)? */
static int mbox_waits(shm_iface_t *iface)
{
    for (int r = 0; r < iface->super.params.nranks; r++) {
        shm_ep_t *ep = iface->eps[r];
        if (ep && (__atomic_load_n(&ep->mbox_want_in, __ATOMIC_RELAXED) ||
                   __atomic_load_n(&ep->mbox_want_out, __ATOMIC_RELAXED)))
            return 1;
    }
    return 0;
}

/* Before the core sleeps: raise our flag in every segment, then look once
 * more (the peer stores its head, then reads our flag; we store our flag,
 * then read its head; all seq_cst: one of us sees the other). */
static int shm_idle_hook(void *arg, int sleeping)
{
    shm_iface_t *iface = arg;
    int nranks = iface->super.params.nranks, busy = 0;

    for (int r = 0; r < nranks; r++) {
        shm_ep_t *ep = iface->eps[r];
        if (!ep || !__atomic_load_n(&ep->armed, __ATOMIC_ACQUIRE))
            continue;
        uint32_t *flag = &ep->seg->asleep[ep->side].v;
        /* no store when it is already 0: the peer reads this line often */
        if (sleeping || __atomic_load_n(flag, __ATOMIC_RELAXED))
            __atomic_store_n(flag, (uint32_t)sleeping, __ATOMIC_SEQ_CST);
    }
    if (!sleeping)
        return 0;
    /* Peers' plain stores (shm_store_wake) rely on this fence, but only
     * mailbox counters are stored so: it is needed only when a mailbox
     * call waits. It interrupts every CPU running a rank, which cost 20%
     * of a 4 MiB all-reduce on 4 ranks when every sleep paid it. */
    if (iface->membarrier && mbox_waits(iface))
        (void)syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
    for (int r = 0; r < nranks && !busy; r++) {
        shm_ep_t *ep = iface->eps[r];
        if (ep && __atomic_load_n(&ep->armed, __ATOMIC_ACQUIRE))
            busy = shm_ep_has_input(ep) || shm_ep_mbox_ready(ep);
    }
    return busy;
}

/* Can we read another process's memory? Tried on ourselves; a peer may
 * still refuse (ptrace rules), which the first read finds out. */
static int cma_probe(char *why, size_t len)
{
    uint64_t src = 0x1234, dst = 0;
    struct iovec l = {.iov_base = &dst, .iov_len = sizeof(dst)};
    struct iovec r = {.iov_base = &src, .iov_len = sizeof(src)};

    if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof(dst) && dst == src)
        return 1;
    snprintf(why, len, "process_vm_readv failed: %s", strerror(errno));
    return 0;
}

static uint64_t ns_inode(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

/* Enough room in /dev/shm for every pair of ranks on this host (all of the
 * job's, where nothing says how many)? If not, say so and let peers use
 * another transport: the answer is published, so both sides of a pair
 * agree. */
static int room_in_dev_shm(shm_iface_t *iface)
{
    const coll_tp_params_t *pr = &iface->super.params;
    struct statvfs sv;
    uint64_t n = (uint64_t)(pr->local_size > 0 ? pr->local_size : pr->nranks);
    uint64_t need = SHM_SEG_BYTES(iface->ring_bytes) * (n * (n - 1) / 2);
    if (statvfs("/dev/shm", &sv) != 0) {
        COLL_WARN(COLL_SUBSYS_NET, "rank %d: shm: /dev/shm is not usable (%s); using other "
                  "transports", pr->rank, strerror(errno));
        return 0;
    }
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    if (avail < need) {
        COLL_WARN(COLL_SUBSYS_NET, "rank %d: shm: /dev/shm has %llu bytes free, needs %llu "
                  "(%llu ranks on this host%s, %zu bytes per pair); using tcp instead; set "
                  "COLL_SHM_RING_SIZE lower or grow /dev/shm (e.g. docker run --shm-size=1g)",
                  pr->rank, (unsigned long long)avail, (unsigned long long)need,
                  (unsigned long long)n, pr->local_size > 0 ? "" : ", were all of the job's "
                  "here: set COLL_LOCAL_SIZE to the count", SHM_SEG_BYTES(iface->ring_bytes));
        return 0;
    }
    return 1;
}

/* COLL_SHM_CMA_THRESHOLD's auto. A single copy by the receiver beats the
 * ring's two (one on each side, pipelined) where the kernel's copy runs
 * at more than half memcpy's speed, as where both ranks receive at once
 * each CPU makes one copy instead of two. On the Intel VM of 2026-12-07
 * process_vm_readv ran at 0.59 of memcpy's speed at 1 MiB and 0.67-0.70
 * from 2 MiB (one rank, warm buffers), and reading from 1 MiB took a
 * 2-rank all-reduce of 4 MiB from 795 / 682 to 594 / 509 us (out / in
 * place) and a 4-rank all-gather of 4 MiB from 1499 / 1000 to 1112 / 735;
 * on the AMD EPYC of 2026-11 it ran at 0.31 of memcpy at 1 MiB and the
 * ring won from 512 KiB (docs/design.md, the shared-memory transport). */
#define SHM_CMA_THRESHOLD_INTEL ((size_t)1 << 20)
#define SHM_CMA_THRESHOLD_OTHER ((size_t)4 << 20)

static coll_status_t read_cma_threshold(shm_iface_t *iface, int intel)
{
    int is_auto;

    COLL_CHECK(coll_param_size_or_auto(COLL_PARAM_SHM_CMA_THRESHOLD, &is_auto,
                                       &iface->cma_threshold));
    if (is_auto)
        iface->cma_threshold = intel ? SHM_CMA_THRESHOLD_INTEL : SHM_CMA_THRESHOLD_OTHER;
    return COLL_OK;
}

/* COLL_SHM_CMA_MAX's auto: 2M, and on Intel CPUs 16M where each rank has
 * a CPU (shm_msg.c, read_max). There, on the VM of 2026-12-07, 2 ranks,
 * reading blocks of up to 16 MiB took the all-reduce of 16 MiB from 4210
 * / 3467 to 3219 / 2620 us out / in place and the reduce-scatter of 16
 * MiB from 4180 / 3895 to 2649 / 2750; with 4 ranks on the 2 CPUs it took
 * the all-reduce of 16 MiB from 9584 / 7475 to 12912 / 8163, and a
 * broadcast's root, which only waits, lent the ring a CPU worth more than
 * the second copy (16 MiB in place 1412 -> 1595). A copy by both
 * (shm_share.c) is not bound by it on Intel CPUs: in 4 KiB pages on that
 * VM it beat the ring at 4 to 64 MiB (shm_msg.c, offers_share). */
#define SHM_CMA_MAX_AUTO ((size_t)2 << 20)
#define SHM_CMA_MAX_SPREAD_INTEL ((size_t)16 << 20)

static coll_status_t read_cma_max(shm_iface_t *iface, int intel)
{
    int is_auto;

    COLL_CHECK(coll_param_size_or_auto(COLL_PARAM_SHM_CMA_MAX, &is_auto, &iface->cma_max));
    if (is_auto) {
        iface->cma_max = SHM_CMA_MAX_AUTO;
        iface->cma_max_spread = intel ? SHM_CMA_MAX_SPREAD_INTEL : SHM_CMA_MAX_AUTO;
        iface->share_max = intel ? SIZE_MAX : SHM_CMA_MAX_AUTO;
        return COLL_OK;
    }
    if (iface->cma_max == 0)
        iface->cma_max = SIZE_MAX;
    iface->cma_max_spread = iface->share_max = iface->cma_max;
    return COLL_OK;
}

/* COLL_SHM_CMA_CROWDED's auto: on Intel CPUs 64K, elsewhere 0 (off;
 * shm_msg.c, crowd_read). */
#define SHM_CMA_CROWDED_INTEL ((size_t)64 << 10)

static coll_status_t read_cma_crowded(shm_iface_t *iface, int intel)
{
    int is_auto;

    COLL_CHECK(coll_param_size_or_auto(COLL_PARAM_SHM_CMA_CROWDED, &is_auto, &iface->cma_crowded));
    if (is_auto)
        iface->cma_crowded = intel ? SHM_CMA_CROWDED_INTEL : 0;
    return COLL_OK;
}

/* COLL_SHM_RING_SIZE's auto. Where the host runs more ranks than it has
 * CPUs, ranks take turns on a CPU, and each turn's copies go through the
 * rings of every pair it serves: smaller rings keep more of a turn's data
 * in cache. 4 ranks on 2 CPUs, 8 alternating launches, all-reduce of 16
 * MiB: 8.5 -> 7.9 ms out of place, 6.1 -> 4.9 ms in place; 4 MiB 5 of 6
 * launches faster (1.65 -> 1.36 ms); 8 ranks level (docs/performance-
 * history.md). Both sides of a pair see the same count and host, so they
 * size their segment alike. */
static size_t ring_auto(const coll_tp_params_t *pr)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    if (pr->local_size > 0 && cpus > 0 && pr->local_size > cpus)
        return (size_t)256 << 10;
    return (size_t)512 << 10;
}

static coll_status_t read_params(shm_iface_t *iface)
{
    size_t ring;
    int cma, is_auto, intel = shm_cpu_is_intel(); /* for the three autos */

    COLL_CHECK(coll_param_size_or_auto(COLL_PARAM_SHM_RING_SIZE, &is_auto, &ring));
    if (is_auto)
        ring = ring_auto(&iface->super.params);
    COLL_CHECK(read_cma_threshold(iface, intel));
    COLL_CHECK(read_cma_max(iface, intel));
    COLL_CHECK(read_cma_crowded(iface, intel));
    COLL_CHECK(coll_param_bool(COLL_PARAM_SHM_CMA, &cma));
    COLL_CHECK(coll_param_bool(COLL_PARAM_SHM_CMA_ADAPT, &iface->cma_adapt));
    COLL_CHECK(coll_param_bool(COLL_PARAM_SHM_CMA_SHARE, &iface->share));
    COLL_CHECK(coll_param_bool(COLL_PARAM_SHM_MAP, &iface->map));
    COLL_CHECK(coll_param_bool(COLL_PARAM_SHM_REPLY, &iface->reply));
    ring = COLL_MAX(COLL_MIN(ring, (size_t)SHM_RING_MAX), (size_t)SHM_RING_MIN);
    while (ring & (ring - 1)) /* round down to a power of two */
        ring &= ring - 1;
    iface->ring_bytes = ring;
    iface->cma = cma;
    /* Eager up to a quarter ring of payload, or less where a single copy is
     * cheaper. The quarter itself is eager: algorithms send powers of two
     * (a 2-rank ring's halves of a 256 KiB chunk are 128 KiB), and each
     * one just above the limit paid a round trip (RTS, CTS) and then
     * crossed the ring in one large DATA chunk (and a short tail) anyway:
     * 2-rank 256 KiB all-reduce 73 -> 41 us, all-gather 47 -> 18 us
     * (docs/design.md). */
    iface->eager_limit = ring / 4;
    if (cma && iface->cma_threshold <= iface->eager_limit)
        iface->eager_limit = iface->cma_threshold ? iface->cma_threshold - 1 : 0;
    return COLL_OK;
}

static coll_status_t open_wake_socket(shm_iface_t *iface)
{
    struct sockaddr_un sa;
    socklen_t len = wake_sockaddr(&sa, iface->addr.pid, iface->addr.nonce);
    const coll_tp_params_t *pr = &iface->super.params;

    iface->wake_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (iface->wake_fd < 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: shm: cannot create the "
                          "wakeup socket: %s", pr->rank, strerror(errno));
    if (bind(iface->wake_fd, (struct sockaddr *)&sa, len) != 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: shm: cannot bind the "
                          "wakeup socket @%s: %s", pr->rank, sa.sun_path + 1, strerror(errno));
    return coll_evloop_add_cold(pr->evloop, &iface->wake_src, iface->wake_fd, EPOLLIN,
                                wake_handler, iface);
}

static coll_status_t shm_iface_open(const coll_tp_params_t *params, coll_tp_iface_t **iface_p)
{
    coll_status_t st;
    struct stat sb;
    char why[128];
    shm_iface_t *iface = calloc(1, sizeof(*iface));

    if (!iface)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate shm iface");
    iface->super.params = *params;
    iface->wake_fd = -1;
    iface->wake_src.fd = -1;
    iface->pagemap_fd = -1;
    coll_blocks_init(&iface->blocks, COLL_MATCH_BLOCKS);
    COLL_CHECK_GOTO(read_params(iface), st, err);
    iface->eps = calloc((size_t)params->nranks, sizeof(*iface->eps));
    if (!iface->eps) {
        st = coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate shm endpoints");
        goto err;
    }
    iface->addr.version = SHM_VERSION;
    iface->addr.pid = (uint32_t)getpid();
    if (getrandom(&iface->addr.nonce, sizeof(iface->addr.nonce), 0) != sizeof(iface->addr.nonce))
        iface->addr.nonce = coll_time_ns() ^ ((uint64_t)getpid() << 32);
    iface->addr.pidns = ns_inode("/proc/self/ns/pid");
    iface->addr.shmdev = stat("/dev/shm", &sb) == 0 ? ((uint64_t)sb.st_dev << 32) ^ sb.st_ino : 0;
    COLL_CHECK_GOTO(open_wake_socket(iface), st, err);
    COLL_CHECK_GOTO(coll_evloop_add_idle(params->evloop, shm_idle_hook, iface), st, err);
    iface->hook_set = 1;
    if (params->nranks > 1 && room_in_dev_shm(iface))
        iface->addr.flags |= SHM_ADDR_USABLE;
    if (iface->cma && !cma_probe(why, sizeof(why))) {
        iface->cma = 0;
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: cross-memory attach is not available (%s); "
                  "large messages are copied through the shared ring", params->rank, why);
    } else if (!iface->cma) {
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: cross-memory attach disabled (COLL_SHM_CMA=0); "
                  "large messages are copied through the shared ring", params->rank);
    }
    if (iface->cma)
        iface->addr.flags |= SHM_ADDR_CMA;
    if (iface->cma && iface->cma_max != SIZE_MAX)
        iface->pagemap_fd = shm_pages_open();
    /* without it (old kernel, seccomp) every publishing store is seq_cst */
    iface->membarrier = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0,
                                0) == 0;
    if (iface->membarrier)
        iface->addr.flags |= SHM_ADDR_MEMBARRIER;
    *iface_p = &iface->super;
    return COLL_OK;
err:
    if (iface->hook_set)
        coll_evloop_del_idle(params->evloop, shm_idle_hook, iface);
    if (iface->wake_fd >= 0) {
        coll_evloop_del(params->evloop, &iface->wake_src);
        close(iface->wake_fd);
    }
    free(iface->eps);
    free(iface);
    return st;
}

static coll_status_t shm_iface_close(coll_tp_iface_t *tiface)
{
    shm_iface_t *iface = (shm_iface_t *)tiface;

    if (iface->hook_set)
        coll_evloop_del_idle(tiface->params.evloop, shm_idle_hook, iface);
    coll_evloop_del(tiface->params.evloop, &iface->wake_src);
    if (iface->wake_fd >= 0)
        close(iface->wake_fd);
    if (iface->pagemap_fd >= 0)
        close(iface->pagemap_fd);
    free(iface->bounce);
    coll_blocks_release(&iface->blocks);
    free(iface->eps);
    free(iface);
    return COLL_OK;
}

static coll_status_t shm_iface_addr(coll_tp_iface_t *tiface, coll_tp_addr_t *addr_p)
{
    shm_iface_t *iface = (shm_iface_t *)tiface;
    const shm_addr_t *a = &iface->addr;

    memset(addr_p, 0, sizeof(*addr_p));
    addr_p->tp_id = COLL_TP_SHM;
    addr_p->len = SHM_ADDR_BYTES;
    addr_p->data[0] = a->version;
    addr_p->data[1] = a->flags;
    coll_store_u32(addr_p->data + 4, a->pid);
    coll_store_u64(addr_p->data + 8, a->nonce);
    coll_store_u64(addr_p->data + 16, a->pidns);
    coll_store_u64(addr_p->data + 24, a->shmdev);
    return COLL_OK;
}

static int addr_decode(const coll_peer_info_t *peer, shm_addr_t *a)
{
    const coll_tp_addr_t *blob = coll_peer_info_addr(peer, COLL_TP_SHM);

    if (!blob || blob->len != SHM_ADDR_BYTES || blob->data[0] != SHM_VERSION)
        return -1;
    a->version = blob->data[0];
    a->flags = blob->data[1];
    a->pid = coll_load_u32(blob->data + 4);
    a->nonce = coll_load_u64(blob->data + 8);
    a->pidns = coll_load_u64(blob->data + 16);
    a->shmdev = coll_load_u64(blob->data + 24);
    return 0;
}

/* The peer's published address and the name of its wakeup socket. */
int shm_peer_addr(shm_ep_t *ep, const coll_peer_info_t *peer)
{
    if (addr_decode(peer, &ep->peer_addr) != 0)
        return -1;
    ep->wake_len = wake_sockaddr(&ep->wake_addr, ep->peer_addr.pid, ep->peer_addr.nonce);
    ep->plain_stores = ep->iface->membarrier && (ep->peer_addr.flags & SHM_ADDR_MEMBARRIER);
    return 0;
}

static coll_status_t shm_iface_query(coll_tp_iface_t *tiface, coll_tp_perf_t *perf_p)
{
    shm_iface_t *iface = (shm_iface_t *)tiface;

    /* Conservative constants of this kind of machine rather than a
     * measurement at init (which would cost every communicator time and
     * differ between ranks): a record crosses in well under a microsecond
     * when the peer polls, about 2 us with the wakeup of a sleeping peer
     * on a busy host; large messages take one copy (process_vm_readv),
     * which runs at a good part of memcpy speed (about 9 GB/s here at
     * 64 MiB, docs/performance-sets.md), less with two ranks per core. */
    perf_p->latency_s = 1e-6;
    perf_p->bandwidth_Bps = 6e9;
    perf_p->overhead_s = 0.3e-6;
    perf_p->pull = iface->cma;
    return COLL_OK;
}

/* Called on every turn of the core's loop: a load per ring when idle. */
static coll_status_t shm_iface_progress(coll_tp_iface_t *tiface, int *progressed_p)
{
    shm_iface_t *iface = (shm_iface_t *)tiface;
    int nranks = tiface->params.nranks, moved = 0;

    for (int r = 0; r < nranks; r++) {
        shm_ep_t *ep = iface->eps[r];
        if (!ep)
            continue;
        if (ep->state == SHM_EP_READY)
            moved |= shm_ep_poll(ep) | shm_ep_being_read(ep);
        else if (ep->state == SHM_EP_WAIT_SEG || ep->state == SHM_EP_WAIT_MAP)
            shm_ep_connect_step(ep);
        if (ep->pidfd < 0 && ep->state != SHM_EP_CLOSED && !ep->peer_left)
            shm_ep_check_alive(ep);
    }
    *progressed_p = moved;
    return COLL_OK;
}

static coll_status_t shm_can_connect(coll_tp_iface_t *tiface, const coll_peer_info_t *self,
                                     const coll_peer_info_t *peer, int *yes_p)
{
    shm_iface_t *iface = (shm_iface_t *)tiface;
    shm_addr_t mine, theirs;

    *yes_p = 0;
    if (self->rank == peer->rank || self->host_hash != peer->host_hash ||
        addr_decode(self, &mine) != 0 || addr_decode(peer, &theirs) != 0)
        return COLL_OK;
    /* Same host, yet maybe another container: the pid and /dev/shm must be
     * the same ones. Both sides need room in /dev/shm. */
    *yes_p = mine.pidns == theirs.pidns && mine.shmdev == theirs.shmdev &&
             (mine.flags & SHM_ADDR_USABLE) && (theirs.flags & SHM_ADDR_USABLE) &&
             iface->ring_bytes >= SHM_RING_MIN;
    return COLL_OK;
}

const coll_tp_ops_t coll_tp_shm_ops = {
    .size = sizeof(coll_tp_ops_t),
    .name = "shm",
    .id = COLL_TP_SHM,
    .mem_kinds = COLL_MEM_BIT(COLL_MEM_HOST),
    .iface_open = shm_iface_open,
    .iface_close = shm_iface_close,
    .iface_addr = shm_iface_addr,
    .iface_query = shm_iface_query,
    .iface_progress = shm_iface_progress,
    .can_connect = shm_can_connect,
    .ep_connect = shm_ep_connect,
    .ep_accept = shm_ep_accept,
    .ep_ready = shm_ep_ready,
    .ep_isend = shm_ep_isend,
    .ep_irecv = shm_ep_irecv,
    .ep_flush = shm_ep_flush,
    .ep_close = shm_ep_close,
    .ep_destroy = shm_ep_destroy,
    .ep_mbox_query = shm_ep_mbox_query,
    .ep_mbox_put = shm_ep_mbox_put,
    .ep_mbox_get = shm_ep_mbox_get,
    .ep_mbox_release = shm_ep_mbox_release,
};
