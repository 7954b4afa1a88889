/*
 * ofi_iface.c: the libfabric transport's per-communicator object: the
 * provider choice, the fabric, domain, endpoint, completion queue and
 * address vector, completion progress, and the ops table.
 *
 * Which provider: COLL_OFI_PROVIDER (tcp, shm, verbs, efa, ...), else the
 * first fi_getinfo offers for reliable datagrams with tagged messages
 * (libfabric lists the best first), preferring the entry on the interface
 * the bootstrap chose. When is it used: always when COLL_TRANSPORTS names
 * it; otherwise only where it beats our own transports, i.e. for RDMA-class
 * providers (verbs, efa, psm2/3, opx, cxi), which exist only where
 * /sys/class/infiniband or a Slingshot/Omni-Path device does. Elsewhere the
 * iface stays inert (libfabric is not even loaded, see ofi_dl.c; loading
 * its providers costs about 50 ms per process) and publishes itself as
 * unusable.
 */
#include <errno.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "net.h"
#include "param.h"
#include "ofi.h"

#define OFI_MR_CACHE_MAX 4096

const char *ofi_prov_name(const ofi_iface_t *iface)
{
    return iface->info ? iface->info->fabric_attr->prov_name : "none";
}

/* "verbs;ofi_rxm" -> is "verbs" a provider faster than shm/tcp here? */
static int prov_is_rdma(const char *prov)
{
    static const char *const fast[] = {"verbs", "efa", "psm2", "psm3", "opx", "cxi", "usnic"};
    size_t n = strcspn(prov, ";");

    for (size_t i = 0; i < COLL_ARRAY_LEN(fast); i++)
        if (strlen(fast[i]) == n && strncmp(prov, fast[i], n) == 0)
            return 1;
    return 0;
}

static int dir_has_entries(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int found = 0;

    while (d && !found && (e = readdir(d)))
        found = e->d_name[0] != '.';
    if (d)
        closedir(d);
    return found;
}

/* Cheap evidence of RDMA-class hardware, before paying for fi_getinfo. */
static int rdma_hardware_present(void)
{
    return dir_has_entries("/sys/class/infiniband") || access("/dev/cxi0", F_OK) == 0 ||
           access("/dev/hfi1_0", F_OK) == 0;
}

static uint32_t fnv1a(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static uint64_t pid_ns_inode(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static struct fi_info *make_hints(const char *prov)
{
    struct fi_info *h = fi_allocinfo();

    if (!h)
        return NULL;
    h->caps = FI_TAGGED | FI_DIRECTED_RECV;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->ep_attr->type = FI_EP_RDM;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ENDPOINT | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
                              FI_MR_PROV_KEY;
    /* the idle hook calls fi_trywait without the communicator's lock */
    h->domain_attr->threading = FI_THREAD_SAFE;
    h->tx_attr->msg_order = FI_ORDER_SAS;
    h->rx_attr->msg_order = FI_ORDER_SAS;
    if (prov && prov[0])
        h->fabric_attr->prov_name = strdup(prov);
    return h;
}

/* The providers that would qualify, for the error message. */
static void list_providers(char *buf, size_t len)
{
    struct fi_info *h = make_hints(NULL), *all = NULL;
    size_t used = 0;

    buf[0] = '\0';
    if (h && fi_getinfo(OFI_FI_VERSION, NULL, NULL, 0, h, &all) == 0) {
        for (struct fi_info *i = all; i && used + 1 < len; i = i->next) {
            const char *p = i->fabric_attr->prov_name;
            if (!strstr(buf, p))
                used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "", p);
        }
    }
    if (!buf[0])
        snprintf(buf, len, "none");
    fi_freeinfo(all);
    fi_freeinfo(h);
}

static int info_on_addr(const struct fi_info *i, const coll_addr_t *local)
{
    const struct sockaddr *sa = i->src_addr;

    if (!sa || !local || sa->sa_family != local->ss.ss_family)
        return 0;
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)&local->ss)->sin_addr.s_addr;
    if (sa->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr,
                      &((const struct sockaddr_in6 *)&local->ss)->sin6_addr, 16) == 0;
    return 0;
}

/* fi_getinfo with our needs; *info_p is NULL (and not an error) when no
 * provider qualifies and none was asked for. */
static coll_status_t get_info(ofi_iface_t *iface, const char *prov, int forced,
                              struct fi_info **info_p)
{
    struct fi_info *h = make_hints(prov), *all = NULL, *pick;
    int rank = iface->super.params.rank, rc;
    char avail[256];

    if (!h)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
    rc = fi_getinfo(OFI_FI_VERSION, NULL, NULL, 0, h, &all);
    fi_freeinfo(h);
    if (rc != 0 && !prov[0] && !forced) {
        *info_p = NULL;
        return COLL_OK;
    }
    if (rc != 0) {
        list_providers(avail, sizeof(avail));
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_UNSUPPORTED, "rank %d: ofi: no libfabric "
                          "provider%s%s offers reliable datagram endpoints with tagged "
                          "messages (%s); available: %s", rank, prov[0] ? " named " : "",
                          prov[0] ? prov : "", fi_strerror(-rc), avail);
    }
    pick = all;
    for (struct fi_info *i = all; i; i = i->next)
        if (info_on_addr(i, iface->super.params.local_addr)) {
            pick = i;
            break;
        }
    *info_p = fi_dupinfo(pick);
    fi_freeinfo(all);
    if (!*info_p)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
    return COLL_OK;
}

static void wait_handler(void *arg, uint32_t events)
{
    (void)events;
    ofi_poll_cq(arg);
}

/* Before the core sleeps: fi_trywait says whether the wait fd will fire
 * for what is pending; if not, there is work now and the sleep is skipped. */
static int idle_hook(void *arg, int sleeping)
{
    ofi_iface_t *iface = arg;
    struct fid *fids[1] = {&iface->cq->fid};

    if (!sleeping)
        return 0;
    if (iface->wait_fd < 0 || iface->busy_poll) {
        /* polling instead of sleeping: let a rank on this core run */
        sched_yield();
        return 1;
    }
    return fi_trywait(iface->fabric, fids, 1) != FI_SUCCESS;
}

/* Open the CQ with a wait fd when the provider has one, else without. */
static int open_cq(ofi_iface_t *iface)
{
    struct fi_cq_attr attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
    int rc = fi_cq_open(iface->domain, &attr, &iface->cq, NULL);

    if (rc == 0 && fi_control(&iface->cq->fid, FI_GETWAIT, &iface->wait_fd) == 0)
        return 0;
    if (rc == 0)
        fi_close(&iface->cq->fid);
    iface->wait_fd = -1;
    attr.wait_obj = FI_WAIT_NONE;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: ofi: %s has no completion wait fd; waiting ranks poll",
              iface->super.params.rank, ofi_prov_name(iface));
    return fi_cq_open(iface->domain, &attr, &iface->cq, NULL);
}

#define OFI_TRY(call, what)                                                             \
    do {                                                                                \
        int rc_ = (call);                                                               \
        if (rc_ != 0)                                                                   \
            return coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: ofi: %s with %s " \
                              "failed: %s", iface->super.params.rank, what,             \
                              ofi_prov_name(iface), fi_strerror(rc_ < 0 ? -rc_ : rc_)); \
    } while (0)

/* The shm provider names its region in /dev/shm after the pid unless told
 * otherwise; a killed process leaves its region behind, and a later
 * process with that pid then fails fi_enable with EBUSY. A random name
 * avoids the clash. */
static coll_status_t name_shm_region(ofi_iface_t *iface)
{
    struct fi_info *info = iface->info;
    uint64_t nonce;
    char name[64];

    if (strcmp(ofi_prov_name(iface), "shm") != 0 || info->addr_format != FI_ADDR_STR)
        return COLL_OK;
    if (getentropy(&nonce, sizeof(nonce)) != 0)
        nonce = coll_time_ns();
    snprintf(name, sizeof(name), "fi_shm://coll-ofi.%d.%016llx", (int)getpid(),
             (unsigned long long)nonce);
    free(info->src_addr);
    info->src_addr = strdup(name);
    if (!info->src_addr)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
    info->src_addrlen = strlen(name) + 1;
    return COLL_OK;
}

static coll_status_t open_fabric(ofi_iface_t *iface)
{
    struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
    struct fi_info *info = iface->info;

    COLL_CHECK(name_shm_region(iface));

    OFI_TRY(fi_fabric(info->fabric_attr, &iface->fabric, NULL), "fi_fabric");
    OFI_TRY(fi_domain(iface->fabric, info, &iface->domain, NULL), "fi_domain");
    OFI_TRY(open_cq(iface), "fi_cq_open");
    OFI_TRY(fi_av_open(iface->domain, &av_attr, &iface->av, NULL), "fi_av_open");
    OFI_TRY(fi_endpoint(iface->domain, info, &iface->ep, NULL), "fi_endpoint");
    OFI_TRY(fi_ep_bind(iface->ep, &iface->cq->fid, FI_TRANSMIT | FI_RECV), "binding the CQ");
    OFI_TRY(fi_ep_bind(iface->ep, &iface->av->fid, 0), "binding the AV");
    OFI_TRY(fi_enable(iface->ep), "fi_enable");
    iface->namelen = sizeof(iface->name);
    int rc = fi_getname(&iface->ep->fid, iface->name, &iface->namelen);
    if (rc == -FI_ETOOSMALL)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_UNSUPPORTED, "rank %d: ofi: %s's endpoint "
                          "address has %zu bytes, more than the %d the bootstrap carries",
                          iface->super.params.rank, ofi_prov_name(iface), iface->namelen,
                          OFI_NAME_MAX);
    OFI_TRY(rc, "fi_getname");
    return COLL_OK;
}

static coll_status_t join_evloop(ofi_iface_t *iface)
{
    coll_evloop_t *ev = iface->super.params.evloop;

    if (iface->wait_fd >= 0)
        COLL_CHECK(coll_evloop_add(ev, &iface->wait_src, iface->wait_fd, EPOLLIN, wait_handler,
                                   iface));
    COLL_CHECK(coll_evloop_add_idle(ev, idle_hook, iface));
    iface->idle_hook = 1;
    return COLL_OK;
}

static coll_status_t read_settings(ofi_iface_t *iface)
{
    const char *mr = coll_param_raw(COLL_PARAM_OFI_MR);
    const char *match = coll_param_raw(COLL_PARAM_OFI_MATCH);
    int rank = iface->super.params.rank;

    COLL_CHECK(coll_param_int_range(COLL_PARAM_OFI_MR_CACHE, 0, OFI_MR_CACHE_MAX, rank,
                                    &iface->mr_cap));
    if (strcmp(mr, "auto") != 0 && strcmp(mr, "always") != 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_INVALID_ARG, "rank %d: COLL_OFI_MR='%s': "
                          "expected auto or always", rank, mr);
    iface->need_mr = strcmp(mr, "always") == 0;
    if (strcmp(match, "auto") != 0 && strcmp(match, "ours") != 0 &&
        strcmp(match, "provider") != 0)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_INVALID_ARG, "rank %d: COLL_OFI_MATCH='%s': "
                          "expected auto, ours or provider", rank, match);
    return COLL_OK;
}

/* Whether we match messages ourselves (ofi_match.c) rather than the
 * provider, by COLL_OFI_MATCH; auto picks ours where the provider's
 * matching fails us:
 *   - libfabric 1.17's shm deadlocks under load (ofi_match.c);
 *   - libfabric's tcp before 1.18 stalls a pair after an eager message is
 *     truncated into a shorter receive: that receive fails as it should,
 *     then later messages between the two stop arriving
 *     (ofiwg/libfabric#8974). Measured here with 1.17: four mismatched
 *     sizes per round (1000 bytes into 500 among them), then a barrier,
 *     hung at round 5, 25 and 101 in 3 runs. Our frames never overflow
 *     their receive, and a payload's receive is posted only once its
 *     size is known to match. */
static int want_own_match(const ofi_iface_t *iface)
{
    const char *match = coll_param_raw(COLL_PARAM_OFI_MATCH);
    const char *prov = ofi_prov_name(iface);

    if (strcmp(match, "auto") != 0)
        return strcmp(match, "ours") == 0;
    return strncmp(prov, "shm", 3) == 0 ||
           (strncmp(prov, "tcp", 3) == 0 && fi_version() < FI_VERSION(1, 18));
}

/* tcp;ofi_rxm's default queues cost each rank 6 buffer pools of 17 MB,
 * written through as it opens its endpoint and connections (libfabric
 * 1.17; 2 with the queues below): 650 ms to create a 2-rank
 * communicator, 2.1 s and 114 MB per rank at 8 ranks. Queues of 128
 * per connection: 430-440 ms, 1.2 s and 45 MB, and p2p
 * bandwidth within the runs' spread (4 KiB-4 MiB); a full queue is
 * -FI_EAGAIN, which waits in our backlog. rxm reads these when libfabric
 * initializes, so only the process's first communicator sets them; a
 * user's own values stand. setenv races another thread's getenv; it
 * runs during communicator creation, before libfabric is loaded. */
static void shrink_rxm_queues(void)
{
    setenv("FI_OFI_RXM_MSG_TX_SIZE", "128", 0);
    setenv("FI_OFI_RXM_MSG_RX_SIZE", "128", 0);
}

/* Decide whether this iface is used and, if so, open the fabric. */
static coll_status_t setup(ofi_iface_t *iface)
{
    const char *prov = coll_param_raw(COLL_PARAM_OFI_PROVIDER);
    int forced = coll_param_raw(COLL_PARAM_TRANSPORTS)[0] != '\0';
    int rank = iface->super.params.rank;
    uint64_t fmt;

    COLL_CHECK(read_settings(iface));
    if (!forced && !prov[0] && !rdma_hardware_present()) {
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: ofi: no RDMA device here; not used", rank);
        return COLL_OK;
    }
    if (strncmp(prov, "tcp", 3) == 0)
        shrink_rxm_queues();
    int loaded;
    COLL_CHECK(ofi_dl_load(rank, forced || prov[0], &loaded));
    if (!loaded) {
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: ofi: libfabric cannot be loaded; not used", rank);
        return COLL_OK;
    }
    COLL_CHECK(get_info(iface, prov, forced, &iface->info));
    if (!iface->info)
        return COLL_OK;
    if (!forced && !prov_is_rdma(ofi_prov_name(iface))) {
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: ofi: provider %s is no faster than shm and tcp; "
                  "COLL_TRANSPORTS=ofi forces it", rank, ofi_prov_name(iface));
        return COLL_OK;
    }
    fmt = iface->info->ep_attr->mem_tag_format;
    iface->tag_bits = fmt ? 64 - __builtin_clzll(fmt) : 64;
    if (iface->tag_bits < 48)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_UNSUPPORTED, "rank %d: ofi: %s offers %d tag "
                          "bits, libcoll needs 48", rank, ofi_prov_name(iface), iface->tag_bits);
    /* libfabric 1.17's shm provider moves messages of 4 KiB and more in
     * steps that need the peer's progress and signal no wait fd (measured:
     * 30-40 ms per 8 KiB all-reduce on 2 ranks when we slept; p99 of
     * 7-90 ms on 4 ranks when we slept only without messages in flight),
     * so its waiting ranks poll, yielding the core */
    iface->busy_poll = strncmp(ofi_prov_name(iface), "shm", 3) == 0;
    iface->sw_match = want_own_match(iface);
    if (iface->info->domain_attr->mr_mode & FI_MR_LOCAL)
        iface->need_mr = 1;
    iface->cq_data = iface->info->domain_attr->cq_data_size >= 8;
    if (iface->mr_cap && !(iface->mrs = calloc((size_t)iface->mr_cap, sizeof(*iface->mrs))))
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "ofi: out of memory");
    COLL_CHECK(open_fabric(iface));
    if (iface->sw_match)
        COLL_CHECK(ofi_match_open(iface));
    COLL_CHECK(join_evloop(iface));
    iface->prov_hash = fnv1a(fnv1a(2166136261u, ofi_prov_name(iface)),
                             iface->info->fabric_attr->name ? iface->info->fabric_attr->name : "");
    iface->active = 1;
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: ofi: provider %s, fabric %s, domain %s, %s matching%s",
              rank, ofi_prov_name(iface), iface->info->fabric_attr->name,
              iface->info->domain_attr->name, iface->sw_match ? "our" : "the provider's",
              iface->need_mr ? ", registering buffers" : "");
    return COLL_OK;
}

static void free_op_list(coll_list_t *l)
{
    while (!coll_list_empty(l)) {
        ofi_op_t *op = coll_list_first(l, ofi_op_t, link);
        coll_list_del(&op->link);
        free(op);
    }
}

static coll_status_t ofi_iface_close(coll_tp_iface_t *tiface)
{
    ofi_iface_t *iface = (ofi_iface_t *)tiface;

    if (iface->idle_hook)
        coll_evloop_del_idle(tiface->params.evloop, idle_hook, iface);
    if (iface->wait_fd >= 0 && iface->wait_src.handler)
        coll_evloop_del(tiface->params.evloop, &iface->wait_src);
    /* closing the endpoint ends every operation libfabric still holds */
    if (iface->ep)
        fi_close(&iface->ep->fid);
    ofi_mr_cache_free(iface);
    if (iface->av)
        fi_close(&iface->av->fid);
    if (iface->cq)
        fi_close(&iface->cq->fid);
    if (iface->domain)
        fi_close(&iface->domain->fid);
    if (iface->fabric)
        fi_close(&iface->fabric->fid);
    fi_freeinfo(iface->info);
    free_op_list(&iface->orphans);
    free_op_list(&iface->frame_recvs);
    free_op_list(&iface->frame_idle);
    free(iface->slots);
    free_op_list(&iface->backlog_tx);
    free_op_list(&iface->backlog_rx);
    free_op_list(&iface->free_ops);
    free(iface->eps);
    free(iface->by_addr);
    free(iface);
    return COLL_OK;
}

static coll_status_t ofi_iface_open(const coll_tp_params_t *params, coll_tp_iface_t **iface_p)
{
    coll_status_t st;
    ofi_iface_t *iface = calloc(1, sizeof(*iface));

    if (!iface)
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate ofi iface");
    iface->super.params = *params;
    iface->wait_fd = -1;
    iface->pidns = pid_ns_inode();
    iface->host_hash = coll_host_hash();
    if (getentropy(&iface->nonce, sizeof(iface->nonce)) != 0)
        iface->nonce = coll_time_ns() ^ ((uint64_t)getpid() << 32);
    coll_list_init(&iface->free_ops);
    coll_list_init(&iface->orphans);
    coll_list_init(&iface->backlog_tx);
    coll_list_init(&iface->backlog_rx);
    coll_list_init(&iface->frame_recvs);
    coll_list_init(&iface->frame_idle);
    iface->eps = calloc((size_t)params->nranks, sizeof(*iface->eps));
    if (!iface->eps) {
        free(iface);
        return coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "cannot allocate ofi endpoints");
    }
    COLL_CHECK_GOTO(setup(iface), st, err);
    *iface_p = &iface->super;
    return COLL_OK;
err:
    ofi_iface_close(&iface->super);
    return st;
}

static coll_status_t ofi_iface_addr(coll_tp_iface_t *tiface, coll_tp_addr_t *addr_p)
{
    ofi_iface_t *iface = (ofi_iface_t *)tiface;

    memset(addr_p, 0, sizeof(*addr_p));
    addr_p->tp_id = COLL_TP_OFI;
    addr_p->len = (uint16_t)(OFI_ADDR_HDR + (iface->active ? iface->namelen : 0));
    addr_p->data[0] = OFI_ADDR_VERSION;
    addr_p->data[1] = (uint8_t)((iface->active ? OFI_ADDR_ACTIVE : 0) |
                                (iface->sw_match ? OFI_ADDR_OWN_MATCH : 0));
    addr_p->data[2] = (uint8_t)(iface->namelen & 0xff);
    addr_p->data[3] = (uint8_t)(iface->namelen >> 8);
    coll_store_u32(addr_p->data + 4, iface->prov_hash);
    coll_store_u64(addr_p->data + 8, iface->pidns);
    coll_store_u64(addr_p->data + 16, iface->nonce);
    if (iface->active)
        memcpy(addr_p->data + OFI_ADDR_HDR, iface->name, iface->namelen);
    return COLL_OK;
}

static coll_status_t ofi_iface_query(coll_tp_iface_t *tiface, coll_tp_perf_t *perf_p)
{
    ofi_iface_t *iface = (ofi_iface_t *)tiface;
    const char *prov = ofi_prov_name(iface);

    /* Round figures per class of provider; the link probe at init measures
     * the real ones unless COLL_COST_PROBE=0. */
    if (prov_is_rdma(prov)) {
        perf_p->latency_s = 3e-6;
        perf_p->bandwidth_Bps = 10e9;
        perf_p->overhead_s = 0.5e-6;
    } else if (strncmp(prov, "shm", 3) == 0) {
        perf_p->latency_s = 2e-6;
        perf_p->bandwidth_Bps = 4e9;
        perf_p->overhead_s = 0.5e-6;
    } else {
        perf_p->latency_s = 20e-6;
        perf_p->bandwidth_Bps = 2e9;
        perf_p->overhead_s = 3e-6;
    }
    perf_p->pull = 0; /* what the provider does inside is not ours to count on */
    return COLL_OK;
}

int ofi_poll_cq(ofi_iface_t *iface)
{
    struct fi_cq_tagged_entry e[16];
    int n = 0;

    if (!iface->cq)
        return 0;
    for (;;) {
        ssize_t got = fi_cq_read(iface->cq, e, COLL_ARRAY_LEN(e));
        if (got > 0) {
            for (ssize_t i = 0; i < got; i++)
                ofi_on_completion(iface, &e[i]);
            n += (int)got;
        } else if (got == -FI_EAVAIL) {
            struct fi_cq_err_entry err;
            memset(&err, 0, sizeof(err));
            if (fi_cq_readerr(iface->cq, &err, 0) <= 0)
                break;
            ofi_on_cq_error(iface, &err);
            n++;
        } else {
            break; /* -FI_EAGAIN, or an error the next call reports again */
        }
    }
    return n;
}

/* Completions (libfabric progresses only when asked, for most providers)
 * and the keepalives. */
static coll_status_t ofi_iface_progress(coll_tp_iface_t *tiface, int *progressed_p)
{
    ofi_iface_t *iface = (ofi_iface_t *)tiface;
    uint64_t now;

    *progressed_p = 0;
    if (!iface->active)
        return COLL_OK;
    *progressed_p = ofi_poll_cq(iface) > 0;
    ofi_post_backlog(iface);
    now = coll_time_ns();
    for (int r = 0; r < tiface->params.nranks; r++)
        if (iface->eps[r])
            ofi_ep_keepalive(iface->eps[r], now);
    return COLL_OK;
}

static coll_status_t ofi_can_connect(coll_tp_iface_t *tiface, const coll_peer_info_t *self,
                                     const coll_peer_info_t *peer, int *yes_p)
{
    ofi_iface_t *iface = (ofi_iface_t *)tiface;
    const coll_tp_addr_t *a = coll_peer_info_addr(peer, COLL_TP_OFI);

    *yes_p = 0;
    if (!iface->active || !a || a->len < OFI_ADDR_HDR || a->data[0] != OFI_ADDR_VERSION ||
        !(a->data[1] & OFI_ADDR_ACTIVE) || coll_load_u32(a->data + 4) != iface->prov_hash)
        return COLL_OK;
    /* frames of ours and the provider's tagged messages do not meet */
    int theirs = (a->data[1] & OFI_ADDR_OWN_MATCH) != 0;
    if (theirs != iface->sw_match)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG, "rank %d: ofi: COLL_OFI_MATCH "
                          "differs between ranks: rank %d (%s) matches messages with %s, this "
                          "rank with %s; set it alike on every rank", self->rank, peer->rank,
                          peer->hostname, theirs ? "ours" : "the provider's",
                          iface->sw_match ? "ours" : "the provider's");
    /* shared-memory providers reach only processes of this host */
    if (strncmp(ofi_prov_name(iface), "shm", 3) == 0 &&
        (self->host_hash != peer->host_hash || coll_load_u64(a->data + 8) != iface->pidns))
        return COLL_OK;
    *yes_p = 1;
    return COLL_OK;
}

const coll_tp_ops_t coll_tp_ofi_ops = {
    .size = sizeof(coll_tp_ops_t),
    .name = "ofi",
    .id = COLL_TP_OFI,
    .mem_kinds = COLL_MEM_BIT(COLL_MEM_HOST),
    .iface_open = ofi_iface_open,
    .iface_close = ofi_iface_close,
    .iface_addr = ofi_iface_addr,
    .iface_query = ofi_iface_query,
    .iface_progress = ofi_iface_progress,
    .can_connect = ofi_can_connect,
    .ep_connect = ofi_ep_connect,
    .ep_accept = ofi_ep_accept,
    .ep_ready = ofi_ep_ready,
    .ep_isend = ofi_ep_isend,
    .ep_irecv = ofi_ep_irecv,
    .ep_flush = ofi_ep_flush,
    .ep_close = ofi_ep_close,
    .ep_destroy = ofi_ep_destroy,
    COLL_TP_NO_MBOX,
};
