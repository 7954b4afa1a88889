/*
 * shm_ring.c: the byte rings of a pair segment and the segment's life:
 * created and reserved by the higher rank, mapped and unlinked by the
 * lower one, so that the name exists only while the pair connects.
 *
 * A ring's head and tail count bytes ever written and consumed; the ring
 * size is a power of two, so `pos & mask` is the offset. The producer
 * publishes a record with a release store of head after writing it, the
 * consumer frees it with a release store of tail after reading it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "shm.h"

void shm_seg_name(char *buf, size_t len, uint32_t pid, uint64_t nonce, int peer)
{
    snprintf(buf, len, "/coll.%u.%016llx.%d", pid, (unsigned long long)nonce, peer);
}

/* One access to every page that [p, p + len) reaches, p 8-byte aligned:
 * at p, then at each page boundary inside the range (stepping by a page
 * from an unaligned p would miss the last page). A load, or where
 * `write`, an atomic add of 0 to 8 bytes, which stores without changing
 * them even where the peer stores there too (a mailbox's `released`). */
static void touch_pages(void *p, size_t len, int write)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), end = (uintptr_t)p + len;

    for (uintptr_t at = (uintptr_t)p; at < end; at = (at & ~(page - 1)) + page) {
        uint64_t *w = (uint64_t *)at;
        if (write)
            __atomic_fetch_add(w, 0, __ATOMIC_RELAXED);
        else
            (void)__atomic_load_n(w, __ATOMIC_RELAXED);
    }
}

void shm_rings_attach(shm_ep_t *ep)
{
    size_t ring = ep->seg->ring_bytes;
    uint8_t *base = (uint8_t *)ep->seg + SHM_SEG_HDR_BYTES;
    int out = ep->side; /* side 0 (lo) writes ring 0 */

    ep->tx.ctl = &ep->seg->ctl[out];
    ep->tx.data = base + (size_t)out * ring;
    ep->tx.head = __atomic_load_n(&ep->tx.ctl->head, __ATOMIC_ACQUIRE);
    ep->tx.tail_cache = __atomic_load_n(&ep->tx.ctl->tail, __ATOMIC_ACQUIRE);
    ep->tx.mask = ring - 1;
    ep->rx.ctl = &ep->seg->ctl[!out];
    ep->rx.data = base + (size_t)!out * ring;
    ep->rx.tail = __atomic_load_n(&ep->rx.ctl->tail, __ATOMIC_ACQUIRE);
    ep->rx.mask = ring - 1;
    shm_mbox_t *boxes = (shm_mbox_t *)(base + 2 * ring);
    ep->mbox_out = &boxes[out];
    ep->mbox_in = &boxes[!out];
    /* MAP_POPULATE maps every page, yet on the development machine since
     * 2026-12 (a VM) this process's first load from a page and its first
     * store to it still cost microseconds each, with no fault counted.
     * Paid here, not through the first round of the mailbox slots at each
     * new message size: 2 ranks, 4 KiB all-reduce out of place, calls 2-8
     * at a new size took 11-25 us instead of 1-3 (docs/performance-sets.md).
     * Not the rings: 4 times the pages, whose first pass costs each page
     * once in a stream of messages, and touching them here made 8 ranks'
     * init 45% longer. */
    touch_pages(ep->mbox_out, sizeof(shm_mbox_t), 1);
    touch_pages(ep->mbox_in, sizeof(shm_mbox_t), 0);
    /* a record may fill a quarter of the ring: four chunks in flight */
    /* a multiple of COLL_TP_FOLD_ALIGN: a DATA record never cuts an element */
    ep->max_payload = (ring / 4 - SHM_REC_HDR) / COLL_TP_FOLD_ALIGN * COLL_TP_FOLD_ALIGN;
}

/* Room for one record of rec_bytes, contiguous; NULL when the ring is too
 * full. The end of the ring is filled with a PAD record when the record
 * does not fit there. */
void *shm_ring_reserve(shm_tx_ring_t *r, size_t rec_bytes)
{
    uint64_t size = r->mask + 1, off = r->head & r->mask, contig = size - off;
    uint64_t need = contig < rec_bytes ? contig + rec_bytes : rec_bytes;

    if (size - (r->head - r->tail_cache) < need) {
        /* atomic: the idle hook compares it with the tail, unlocked */
        __atomic_store_n(&r->tail_cache, __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE),
                         __ATOMIC_RELAXED);
        if (size - (r->head - r->tail_cache) < need)
            return NULL;
    }
    if (contig < rec_bytes) {
        shm_rec_t *pad = (shm_rec_t *)(r->data + off);
        pad->type = SHM_PAD;
        pad->len = (uint32_t)(contig - SHM_REC_HDR);
        r->head += contig;
        off = 0;
    }
    return r->data + off;
}

void shm_ring_commit(shm_tx_ring_t *r, size_t rec_bytes)
{
    r->head += rec_bytes;
    /* seq_cst, not just release: see shm_maybe_wake (plain stores as in
     * shm_store_wake measured no faster here: 8-byte sendrecv, 2 ranks) */
    __atomic_store_n(&r->ctl->head, r->head, __ATOMIC_SEQ_CST);
}

static uint64_t shm_free_bytes(void)
{
    struct statvfs sv;
    if (statvfs("/dev/shm", &sv) != 0)
        return 0;
    return (uint64_t)sv.f_bavail * sv.f_frsize;
}

/* Higher rank: create the segment, reserve its space, write the header. */
coll_status_t shm_seg_create(shm_ep_t *ep)
{
    shm_iface_t *iface = ep->iface;
    const coll_tp_params_t *pr = &iface->super.params;
    size_t bytes = SHM_SEG_BYTES(iface->ring_bytes);
    coll_status_t st = COLL_OK;
    void *map = MAP_FAILED;
    int fd, err;

    shm_seg_name(ep->name, sizeof(ep->name), iface->addr.pid, iface->addr.nonce,
                 ep->super.peer);
    fd = shm_open(ep->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        st = coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: shm: cannot create "
                        "/dev/shm%s for %s: %s", pr->rank, ep->name, ep->super.desc,
                        strerror(errno));
        ep->name[0] = '\0';
        return st;
    }
    /* Reserve every page now: tmpfs would otherwise hand out pages on
     * first touch, and a full /dev/shm would then kill us with SIGBUS. */
    err = posix_fallocate(fd, 0, (off_t)bytes);
    if (err != 0) {
        if (err == ENOSPC)
            st = coll_error(COLL_SUBSYS_NET, COLL_ERR_NO_MEMORY, "rank %d: shm: /dev/shm has "
                            "%llu bytes free, needs %zu for the segment shared with %s; set "
                            "COLL_SHM_RING_SIZE lower, COLL_TRANSPORTS=tcp, or grow /dev/shm",
                            pr->rank, (unsigned long long)shm_free_bytes(), bytes,
                            ep->super.desc);
        else
            st = coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: shm: cannot reserve "
                            "%zu bytes in /dev/shm%s: %s", pr->rank, bytes, ep->name,
                            strerror(err));
        goto err;
    }
    /* MAP_POPULATE (here and in the peer's mapping): every page is mapped
     * now, in one pass, rather than by a fault on its first touch, which
     * cost 4-7 us a page on the development machine (a VM). Without it,
     * each new message size paid those faults through the first round of
     * the mailbox slots: 2 ranks, out of place, the first 6-9 calls of a
     * 4 KiB all-reduce took 7 us each instead of 1, of a 32 KiB one 37
     * instead of 6, so 20 timed calls averaged 3.0 and 10.9 us instead of
     * 1.1 and 8.2. The pages are reserved already (posix_fallocate). */
    map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
        st = coll_error(COLL_SUBSYS_NET, COLL_ERR_SYSTEM, "rank %d: shm: cannot map %zu bytes "
                        "of /dev/shm%s: %s", pr->rank, bytes, ep->name, strerror(errno));
        goto err;
    }
    close(fd);
    ep->seg = map;
    ep->seg_bytes = bytes;
    ep->seg->version = SHM_VERSION;
    ep->seg->ring_bytes = (uint32_t)iface->ring_bytes;
    ep->seg->rank_lo = (uint32_t)ep->super.peer;
    ep->seg->rank_hi = (uint32_t)pr->rank;
    ep->seg->nonce = iface->addr.nonce;
    __atomic_store_n(&ep->seg->magic, SHM_MAGIC, __ATOMIC_RELEASE);
    shm_rings_attach(ep);
    return COLL_OK;
err:
    close(fd);
    shm_unlink(ep->name);
    ep->name[0] = '\0';
    return st;
}

/* Lower rank: 1 once the peer's segment is mapped (and unlinked), 0 while
 * it is not there yet, -1 on an error (the endpoint failed). */
int shm_seg_try_map(shm_ep_t *ep)
{
    shm_iface_t *iface = ep->iface;
    const coll_tp_params_t *pr = &iface->super.params;
    size_t bytes = SHM_SEG_BYTES(iface->ring_bytes);
    struct stat sb;
    shm_seg_hdr_t *seg;
    int fd = shm_open(ep->name, O_RDWR | O_CLOEXEC, 0600);

    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        shm_ep_fail(ep, COLL_ERR_SYSTEM, "cannot open /dev/shm%s, created by %s: %s", ep->name,
                    ep->super.desc, strerror(errno));
        return -1;
    }
    /* Created but not yet reserved: look again later. */
    if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < SHM_SEG_HDR_BYTES) {
        close(fd);
        return 0;
    }
    size_t have = (size_t)sb.st_size;
    seg = mmap(NULL, have, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    close(fd);
    if (seg == MAP_FAILED) {
        shm_ep_fail(ep, COLL_ERR_SYSTEM, "cannot map /dev/shm%s, created by %s: %s", ep->name,
                    ep->super.desc, strerror(errno));
        return -1;
    }
    if (__atomic_load_n(&seg->magic, __ATOMIC_ACQUIRE) != SHM_MAGIC) {
        munmap(seg, have);
        return 0; /* the header is being written */
    }
    if (seg->version != SHM_VERSION || seg->ring_bytes != iface->ring_bytes || have != bytes ||
        seg->rank_lo != (uint32_t)pr->rank || seg->rank_hi != (uint32_t)ep->super.peer ||
        seg->nonce != ep->peer_addr.nonce) {
        uint32_t version = seg->version, ring = seg->ring_bytes;
        char msg[SHM_ABORT_TEXT];
        snprintf(msg, sizeof(msg), "/dev/shm%s from %s does not match (version %u, ring %u "
                 "bytes; ours: version %u, ring %zu bytes): set COLL_SHM_RING_SIZE alike on "
                 "every rank (its auto follows the ranks on the host, COLL_LOCAL_SIZE)",
                 ep->name, ep->super.desc, version, ring, SHM_VERSION, iface->ring_bytes);
        if (version == SHM_VERSION) { /* the same header layout: tell the creator */
            shm_ring_ctl_t *ctl = &seg->ctl[0];
            snprintf(ctl->abort_text, sizeof(ctl->abort_text), "rank %d: %s", pr->rank, msg);
            ctl->abort_len = (uint32_t)strlen(ctl->abort_text);
            __atomic_store_n(&ctl->closed, 1, __ATOMIC_RELEASE);
            shm_wake_peer(ep);
        }
        munmap(seg, have);
        shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s", msg);
        return -1;
    }
    /* Both sides have it mapped: the name can go. */
    shm_unlink(ep->name);
    ep->name[0] = '\0';
    ep->seg = seg;
    ep->seg_bytes = bytes;
    shm_rings_attach(ep);
    __atomic_store_n(&seg->acceptor_mapped, 1, __ATOMIC_SEQ_CST);
    return 1;
}

/* Unmap, and unlink the name if this side still owns it. */
void shm_seg_release(shm_ep_t *ep)
{
    if (ep->name[0] && ep->side == 1)
        shm_unlink(ep->name);
    ep->name[0] = '\0';
    if (ep->seg)
        munmap(ep->seg, ep->seg_bytes);
    ep->seg = NULL;
}
