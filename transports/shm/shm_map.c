/*
 * shm_map.c: mapped reads. A large message whose buffer lies in memory
 * from coll_mem_alloc (libcoll/mem.h) names its region in the RTS; the
 * receiver opens the sender's memfd (through /proc/<pid>/fd, which needs
 * only the ptrace read check, else pidfd_getfd), maps it read-only, and
 * copies or folds the message straight out of it: one copy at memcpy's
 * speed, where process_vm_readv pins the sender's pages for every message
 * and the ring costs a second copy.
 *
 * A mapping outlives the sender's coll_mem_free (the kernel keeps the
 * pages while we map them): it is dropped when a newer region of the
 * sender overlaps it, when SHM_MAPS others are used after it, and with
 * the endpoint. Only RTS flagged SHM_RTS_MAPPED are read through a
 * mapping, so a freed region's old pages are never taken for a buffer
 * that reuses its address.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "shm.h"

typedef struct shm_map {
    uint64_t id;        /* the sender's region; 0: slot free */
    uint64_t base, len; /* in the sender's address space */
    uint8_t *local;     /* our read-only mapping; NULL: it could not be mapped */
    uint64_t used;      /* ep->map_clock at the last use */
} shm_map_t;

int shm_map_offer(const shm_ep_t *ep, const coll_tp_req_t *req, shm_rts_map_t *m)
{
    coll_mem_region_t r;

    if (!ep->iface->map || !coll_mem_find(req->buf, req->len, &r))
        return 0;
    *m = (shm_rts_map_t){.id = r.id, .base = r.base, .len = r.len, .ino = r.ino, .fd = r.fd};
    return 1;
}

static void unmap_slot(shm_map_t *s)
{
    if (s->local)
        munmap(s->local, s->len);
    *s = (shm_map_t){0};
}

/* The sender's memfd as a descriptor of ours, or -1 with errno. */
static int peer_fd(const shm_ep_t *ep, int fd)
{
    char path[64];
    int f;

    snprintf(path, sizeof(path), "/proc/%u/fd/%d", (unsigned)ep->peer_addr.pid, fd);
    f = open(path, O_RDONLY | O_CLOEXEC);
#ifdef SYS_pidfd_getfd
    if (f < 0 && ep->pidfd >= 0) {
        int e = errno;
        f = (int)syscall(SYS_pidfd_getfd, ep->pidfd, fd, 0);
        if (f < 0)
            errno = e; /* the first refusal says more */
    }
#endif
    return f;
}

/* Map the region m names: our address, or NULL (logged). */
static uint8_t *map_region(shm_ep_t *ep, const shm_rts_map_t *m)
{
    int rank = ep->iface->super.params.rank;
    uint8_t *p = NULL;
    struct stat sb;
    int f = peer_fd(ep, m->fd);

    if (f < 0) {
        if (errno == EACCES || errno == EPERM) {
            ep->map_refused = 1;
            COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: may not open %s's memory from "
                      "coll_mem_alloc (%s; ptrace rules?); its large messages are read or "
                      "copied through the ring as others are", rank, ep->super.desc,
                      strerror(errno));
        } else {
            COLL_TRACE(COLL_SUBSYS_NET, "rank %d: shm: cannot open %s's region %llu (fd %d): "
                       "%s", rank, ep->super.desc, (unsigned long long)m->id, m->fd,
                       strerror(errno));
        }
        return NULL;
    }
    /* The fd may have been closed and reused since the RTS was written
     * (a send that was abandoned): only the file the RTS named will do. */
    if (fstat(f, &sb) != 0 || (uint64_t)sb.st_ino != m->ino || (uint64_t)sb.st_size < m->len) {
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: shm: %s's fd %d is no longer its region %llu",
                   rank, ep->super.desc, m->fd, (unsigned long long)m->id);
    } else if ((p = mmap(NULL, m->len, PROT_READ, MAP_SHARED, f, 0)) == MAP_FAILED) {
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: shm: cannot map %llu bytes of %s's region %llu: "
                   "%s", rank, (unsigned long long)m->len, ep->super.desc,
                   (unsigned long long)m->id, strerror(errno));
        p = NULL;
    }
    close(f);
    return p;
}

/* The slot for a new region: a free one, else the least recently used. */
static shm_map_t *slot_for_new(shm_ep_t *ep)
{
    shm_map_t *lru = &ep->maps[0];

    for (int i = 0; i < SHM_MAPS; i++) {
        if (ep->maps[i].id == 0)
            return &ep->maps[i];
        if (ep->maps[i].used < lru->used)
            lru = &ep->maps[i];
    }
    unmap_slot(lru);
    return lru;
}

void shm_map_learn(shm_ep_t *ep, const shm_rts_map_t *m)
{
    shm_map_t *s;

    if (ep->map_refused || m->id == 0 || m->len == 0 || m->base + m->len < m->base)
        return;
    if (!ep->maps && !(ep->maps = calloc(SHM_MAPS, sizeof(*ep->maps))))
        return; /* reads go the other ways */
    for (int i = 0; i < SHM_MAPS; i++) {
        s = &ep->maps[i];
        if (s->id == m->id) {
            s->used = ++ep->map_clock;
            return;
        }
        /* the sender freed that one: its address range is another's now */
        if (s->id && s->base < m->base + m->len && m->base < s->base + s->len)
            unmap_slot(s);
    }
    s = slot_for_new(ep);
    s->local = map_region(ep, m);
    s->id = m->id;
    s->base = m->base;
    s->len = m->len;
    s->used = ++ep->map_clock;
    if (s->local)
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: shm: mapped %s's region %llu (%llu bytes)",
                   ep->iface->super.params.rank, ep->super.desc, (unsigned long long)m->id,
                   (unsigned long long)m->len);
}

const uint8_t *shm_map_find(shm_ep_t *ep, uint64_t addr, size_t len)
{
    if (!ep->maps)
        return NULL;
    for (int i = 0; i < SHM_MAPS; i++) {
        shm_map_t *s = &ep->maps[i];
        if (s->local && coll_span_within(addr, len, s->base, s->len)) {
            s->used = ++ep->map_clock;
            return s->local + (addr - s->base);
        }
    }
    return NULL;
}

void shm_map_release(shm_ep_t *ep)
{
    if (!ep->maps)
        return;
    if (ep->map_reads)
        COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: %llu messages from %s were copied straight "
                  "out of its memory from coll_mem_alloc", ep->iface->super.params.rank,
                  (unsigned long long)ep->map_reads, ep->super.desc);
    for (int i = 0; i < SHM_MAPS; i++)
        unmap_slot(&ep->maps[i]);
    free(ep->maps);
    ep->maps = NULL;
}
