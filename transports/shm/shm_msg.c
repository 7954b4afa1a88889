/*
 * shm_msg.c: moving messages over a ready shared-memory endpoint: the send
 * queue (only used while the ring is full), reading the ring, matching,
 * and the two large-message paths: the receiver reads the sender's buffer
 * with process_vm_readv (one copy, then FIN), or asks for the data to be
 * pipelined through the ring (CTS, then DATA chunks: two copies).
 *
 * Every field read from the ring is checked before it is used: a record
 * that would cross the end of the ring, an unknown type, a CTS, FIN or
 * DATA for an id we never issued, or DATA outside its receive buffer fails
 * the link and names the peer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "crc32c.h"
#include "error.h"
#include "log.h"
#include "shm.h"

/* COLL_CHECKSUM: the record's CRC-32C, computed with flags 0. */
static uint32_t rec_crc(const shm_rec_t *h, const uint8_t *payload)
{
    shm_rec_t z = *h;
    z.flags = 0;
    return coll_crc32c(coll_crc32c(0, &z, sizeof(z)), payload, h->len);
}

/* Commit a record written at slot, with its checksum when they are on. */
static void rec_commit(shm_ep_t *ep, uint8_t *slot, size_t bytes)
{
    if (ep->iface->super.params.checksum) {
        shm_rec_t *h = (shm_rec_t *)slot;
        h->flags = rec_crc(h, slot + SHM_REC_HDR);
    }
    shm_ring_commit(&ep->tx, bytes);
}

/* ---- sending ------------------------------------------------------------ */

/* Records wait in txq (blocked) or not; `progress`: some were written. The
 * peer reads stuck_since to tell a sender waiting for a receive to be
 * posted from one that cannot go on at all (SHM_PARK_MAX_NS). */
void shm_set_tx_blocked(shm_ep_t *ep, int blocked, int progress)
{
    uint64_t *since = ep->tx.ctl ? &ep->tx.ctl->stuck_since : NULL; /* NULL: not attached */

    if (since && !blocked)
        __atomic_store_n(since, 0, __ATOMIC_RELAXED);
    else if (since && (progress || !ep->tx_blocked))
        __atomic_store_n(since, coll_time_ns(), __ATOMIC_RELAXED);
    ep->iface->ntx_blocked += blocked - ep->tx_blocked;
    __atomic_store_n(&ep->tx_blocked, blocked, __ATOMIC_RELAXED);
}

/* Up to which size a plain message may be read: COLL_SHM_CMA_MAX, which
 * auto sets higher on Intel CPUs where each rank has a CPU
 * (shm_iface.c, read_cma_max). */
static size_t read_max(const shm_iface_t *iface)
{
    return iface->super.crowded ? iface->cma_max : iface->cma_max_spread;
}

/* Could the receiver read a message with this RTS address and length
 * from the sender's memory (choose_way's question)? Only such messages'
 * copies are timed (priv->weighed). Above read_max only from huge
 * pages into huge pages (dst_huge: the receiver's buffer is; the sender,
 * which cannot know, passes 1), from a busy sender (SHM_RTS_BUSY) into
 * a receive that does not reduce (fold: it does; the sender passes 0),
 * or into a fold that writes its result back (reply, write_back): its
 * read spares the exchange back, which the ring's folds do not (2 ranks,
 * 64 MiB all-reduce, 4 alternating rounds: 17388 / 11326 -> 13413 / 7579
 * us out / in place; 4 ranks on 2 CPUs, 16 MiB, 8 rounds: 8419 / 6652
 * -> 6984 / 5832 with every read up to 16M). */
static int readable(const shm_ep_t *ep, uint64_t addr, size_t len, int dst_huge, int fold,
                    int reply)
{
    const shm_iface_t *iface = ep->iface;

    if (!addr || !iface->cma)
        return 0;
    return len <= read_max(iface) || ((addr & SHM_RTS_HUGE) && dst_huge) ||
           ((addr & SHM_RTS_BUSY) && !fold) || reply;
}

/* When a copy that choose_way weighs starts; 0 (not timed) for a message
 * that could not have been read (priv->weighed), or for a copy that
 * reduces as it goes (its time is the reduction's too). The others' copies
 * are not the chosen ones' price: the link probe's at init are the first
 * into their buffers (300-800 ns/KiB, against 30-70 for the blocks of a
 * 1 MiB all-gather), and a 16 MiB all-gather's blocks stream through
 * memory. Priced by them, the ring lost to the read for the first
 * SHM_WAY_RETRY messages, the whole of a short run. */
static uint64_t copy_start(const shm_ep_t *ep, coll_tp_req_t *req)
{
    return ep->iface->cma && ep->iface->cma_adapt && !req->fold && shm_priv(req)->weighed
               ? coll_time_ns()
               : 0;
}

/* Fold one sample of len bytes, started at t0, into the average at avg.
 * The noise of such samples is mostly upward (the rank preempted), so a
 * lower sample is taken as it is, and a higher one moves the average a
 * quarter of the way, counting at most twice it: one slow copy does not
 * turn the choice, a slower phase of the machine does after a few. */
static void price_fold(double *avg, uint64_t t0, size_t len)
{
    double x = (double)(coll_time_ns() - t0) / (double)len;

    if (*avg > 0 && x > *avg)
        x = 0.75 * *avg + 0.25 * COLL_MIN(x, 2 * *avg);
    *avg = x > 0 ? x : 1e-6; /* 0 means not timed yet */
}

/* One copy of len bytes, started at t0 (copy_start), into the endpoint's
 * average for that copy. */
static void copy_timed(shm_ep_t *ep, int copy, uint64_t t0, size_t len)
{
    if (t0 == 0 || len == 0)
        return;
    ep->copies_timed[copy]++;
    price_fold(&ep->copy_ns_per_byte[copy], t0, len);
}

/* One message of len bytes that came `way`, chosen at t0 (priv->chosen),
 * into the endpoint's average for that way. */
static void way_timed(shm_ep_t *ep, int way, uint64_t t0, size_t len)
{
    if (t0 == 0 || len == 0)
        return;
    ep->ways_timed[way]++;
    price_fold(&ep->way_ns_per_byte[way], t0, len);
}

/* Does the sender of req offer to copy part of it (shm_share.c)? From
 * COLL_SHM_CMA_THRESHOLD, where the receiver would read it alone. Above
 * share_max it counts only where both buffers lie in huge pages
 * (SHM_RTS_HUGE and the receiver's own): on the AMD EPYC, in 4 KiB pages
 * the ring was as fast or faster there at every size but 16 MiB, in huge
 * pages the shared read from 4 MiB up (docs/performance-sets.md). Below
 * COLL_SHM_CMA_MAX the two copies beat one read: on the Intel VM of
 * 2026-12-07, 2 ranks, 4 KiB pages, alternating rounds, us in place (out
 * of place): broadcast of 1 MiB 66 -> 47, of 2 MiB 192 (197) -> 103
 * (170); scatter of 2 MiB 65 -> 45; gather of 2 MiB 67 (176) -> 49 (112).
 * There they beat the ring above it too, so share_max is unbounded at
 * auto on Intel CPUs: broadcast of 4, 16 and 64 MiB 418 (762) -> 274
 * (418), 1557 (3020) -> 889 (1444), 7222 (13598) -> 5448 (8072); scatter
 * of 16 MiB 876 (1559) -> 561 (769). Where ranks share CPUs a sender
 * that only waits offers it too where COLL_SHM_CMA_CROWDED is on (Intel
 * CPUs at auto; its reads go the same way): a rank that waits for data
 * leaves its CPU free, as the broadcast's other ranks do while the root
 * sends to the first; 4 ranks on the 2 CPUs of that VM, 5-8 alternating
 * rounds, us in place (out of place): broadcast of 1 MiB 257 (287) -> 216
 * (240), of 16 MiB 5189 (4559) -> 3034 (3657), of 64 MiB 33524 (26389)
 * -> 18806 (19906); scatter of 64 MiB 8173 (9425) -> 5488 (6144). */
static int offers_share(const shm_ep_t *ep, const coll_tp_req_t *req)
{
    const shm_iface_t *iface = ep->iface;

    return iface->share && iface->cma && (!iface->super.crowded || iface->cma_crowded) &&
           (req->hints & COLL_TP_HINT_WAITS) && req->len >= iface->cma_threshold;
}

/* Is req a send its receiver should read, being one that it only copies
 * (COLL_TP_HINT_PLAIN) on a host with more ranks than CPUs, from
 * COLL_SHM_CMA_CROWDED? There the ring's second copy takes a CPU from a
 * rank that waits for one. 4 ranks on 2 CPUs of the VM of 2026-12-07,
 * medians of 3 alternating rounds, us out / in place: all-gather 1 MiB
 * 398 / 263 -> 286 / 228, 16 MiB 6969 / 4697 -> 4833 / 3880; broadcast
 * 16 MiB 9034 / 6058 -> 4798 / 5449; all-to-all 1 MiB 517 / 638 -> 287 /
 * 403. Not the all-reduce's all-gather phase: with its blocks read the
 * 4-rank all-reduce of 16 MiB in place took 10.5 -> 13.5 ms. */
static int crowd_read(const shm_ep_t *ep, const coll_tp_req_t *req)
{
    const shm_iface_t *iface = ep->iface;

    return iface->cma && iface->super.crowded && iface->cma_crowded &&
           (req->hints & COLL_TP_HINT_PLAIN) && req->len >= iface->cma_crowded;
}

/* The address in an RTS that a receiver may read with process_vm_readv,
 * with its SHM_RTS_HUGE, SHM_RTS_SHARE, SHM_RTS_BUSY or SHM_RTS_CROWD; 0:
 * it asks for the data through the ring (CTS). */
static uint64_t rts_addr(const shm_ep_t *ep, const coll_tp_req_t *req)
{
    int crowd = crowd_read(ep, req);
    int one_copy =
        req->len >= ep->iface->cma_threshold || (req->hints & COLL_TP_HINT_ONE_COPY) || crowd;
    int share = offers_share(ep, req);
    uint64_t addr = ep->iface->cma && (one_copy || share) ? (uint64_t)(uintptr_t)req->buf : 0;

    if (addr && share && req->len <= ep->iface->share_max)
        return addr | SHM_RTS_SHARE; /* any pages: both CPUs copy, once */
    if (addr && crowd)
        return addr | SHM_RTS_CROWD;
    if (!addr || req->len <= ep->iface->cma_max)
        return addr;
    int huge = shm_pages_huge(ep->iface->pagemap_fd, req->buf, req->len);
    if (huge)
        addr |= share ? SHM_RTS_HUGE | SHM_RTS_SHARE : SHM_RTS_HUGE;
    if (req->hints & COLL_TP_HINT_ONE_COPY)
        addr |= SHM_RTS_BUSY;
    else if (!huge && (req->hints & COLL_TP_HINT_WAITS))
        addr = 0; /* a sender that only waits lends the ring's copies its CPU */
    return addr;
}

/* Write one record (or, for DATA, as many chunks as fit). Returns 1 when
 * the item is fully written, 0 when the ring is full. */
static int tx_push(shm_ep_t *ep, shm_tx_t *tx)
{
    coll_tp_req_t *req = tx->req;
    uint8_t *slot;

    if (tx->rec.type == SHM_DATA) {
        shm_req_priv_t *priv = shm_priv(req);
        while (priv->data_off < req->len) {
            size_t piece = COLL_MIN(priv->data_off + SHM_DATA_FIRST, ep->max_payload);
            size_t len = COLL_MIN(req->len - priv->data_off, piece);
            size_t bytes = shm_rec_bytes(len);
            if (!(slot = shm_ring_reserve(&ep->tx, bytes)))
                return 0;
            shm_rec_t h = {.type = SHM_DATA, .len = (uint32_t)len, .id = priv->peer_id,
                           .tag = req->tag, .aux = priv->data_off};
            memcpy(slot, &h, sizeof(h));
            uint64_t t0 = copy_start(ep, req);
            coll_copy(slot + SHM_REC_HDR, (const uint8_t *)req->buf + priv->data_off, len);
            copy_timed(ep, SHM_COPY_IN, t0, len);
            rec_commit(ep, slot, bytes);
            priv->data_off += len;
            req->bytes_done = priv->data_off;
        }
        return 1;
    }
    shm_rts_map_t map;
    int mapped = tx->rec.type == SHM_RTS && shm_map_offer(ep, req, &map);
    int reply = tx->rec.type == SHM_RTS && !mapped && req->reply && ep->iface->cma;
    if (tx->rec.type == SHM_RTS)
        tx->rec.len = mapped ? SHM_RTS_WITH_MAP : reply ? SHM_RTS_REPLY : SHM_RTS_PLAIN;
    size_t bytes = shm_rec_bytes(tx->rec.len);
    if (!(slot = shm_ring_reserve(&ep->tx, bytes)))
        return 0;
    memcpy(slot, &tx->rec, sizeof(tx->rec));
    if (tx->rec.type == SHM_EAGER) {
        coll_copy(slot + SHM_REC_HDR, req->buf, req->len);
    } else if (tx->rec.type == SHM_RTS) {
        uint64_t addr = rts_addr(ep, req);
        /* a receiver whose buffer is in 4 KiB pages takes the ring: this
         * copy is then timed as one that could have been read, which
         * matters little where both sides' buffers are alike */
        shm_priv(req)->weighed = !mapped && readable(ep, addr, req->len, 1, 0, 0) &&
                                 !(addr & (SHM_RTS_SHARE | SHM_RTS_CROWD));
        if (mapped) {
            addr = (addr ? addr : (uint64_t)(uintptr_t)req->buf | SHM_RTS_NOREAD) | SHM_RTS_MAPPED;
            memcpy(slot + SHM_REC_HDR + SHM_RTS_PLAIN, &map, sizeof(map));
        } else if (reply) {
            uint64_t back = (uint64_t)(uintptr_t)req->reply;
            memcpy(slot + SHM_REC_HDR + SHM_RTS_PLAIN, &back, sizeof(back));
        }
        memcpy(slot + SHM_REC_HDR, &addr, sizeof(addr));
    }
    rec_commit(ep, slot, bytes);
    return 1;
}

/* The item left the queue: what it means for its request. */
static void tx_done(shm_tx_t *tx)
{
    if (tx->heap) {
        free(tx);
    } else if (tx->rec.type == SHM_EAGER || tx->rec.type == SHM_DATA) {
        tx->req->bytes_done = tx->req->len;
        tx->req->complete(tx->req, COLL_OK);
    } /* RTS: the request waits in rndv_sends for CTS or FIN */
}

void shm_tx_flush(shm_ep_t *ep)
{
    int wrote = 0;

    while (ep->state == SHM_EP_READY && !coll_list_empty(&ep->txq)) {
        shm_tx_t *tx = coll_list_first(&ep->txq, shm_tx_t, link);
        size_t before = tx->req ? shm_priv(tx->req)->data_off : 0;
        int done = tx_push(ep, tx);
        if (!done) {
            /* a stream that wrote some chunks goes behind the others */
            if (tx->rec.type == SHM_DATA && shm_priv(tx->req)->data_off != before) {
                wrote = 1;
                coll_list_del(&tx->link);
                coll_list_push_back(&ep->txq, &tx->link);
            }
            break;
        }
        wrote = 1;
        coll_list_del(&tx->link);
        tx_done(tx);
    }
    shm_set_tx_blocked(ep, !coll_list_empty(&ep->txq), wrote);
    if (wrote && ep->state == SHM_EP_READY)
        shm_maybe_wake(ep);
}

/* Queue an item, ahead of the others or behind them, and write what fits. */
static void tx_queue(shm_ep_t *ep, shm_tx_t *tx, int first)
{
    if (first)
        coll_list_insert_after(&ep->txq, &tx->link);
    else
        coll_list_push_back(&ep->txq, &tx->link);
    shm_set_tx_blocked(ep, 1, 0);
    if (ep->state == SHM_EP_READY && !ep->in_rx)
        shm_tx_flush(ep);
}

/* Queue an item behind the others, or write it now if none waits. */
static void tx_send(shm_ep_t *ep, shm_tx_t *tx)
{
    if (ep->state == SHM_EP_READY && coll_list_empty(&ep->txq) && tx_push(ep, tx)) {
        tx_done(tx);
        shm_maybe_wake(ep);
        return;
    }
    tx_queue(ep, tx, 0);
}

/* A record that belongs to no request (CTS, FIN, BYE). A CTS or FIN
 * answers one of the peer's sends and is ordered with none of ours, so
 * it goes ahead of what waits in the queue: a CTS that waited behind our
 * own message's data held the peer's message until ours had crossed, and
 * the two directions of an exchange took turns (2 ranks, 512 KiB each
 * way: 53 us an exchange, each direction's copies one after the other).
 * A BYE stays behind everything. */
coll_status_t shm_tx_control(shm_ep_t *ep, const shm_rec_t *rec)
{
    int first = rec->type != SHM_BYE;

    if (ep->state == SHM_EP_READY && (first || coll_list_empty(&ep->txq))) {
        void *slot = shm_ring_reserve(&ep->tx, shm_rec_bytes(0));
        if (slot) {
            memcpy(slot, rec, sizeof(*rec));
            rec_commit(ep, slot, shm_rec_bytes(0));
            shm_maybe_wake(ep);
            return COLL_OK;
        }
    }
    shm_tx_t *tx = calloc(1, sizeof(*tx));
    if (!tx) {
        shm_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot queue a control record for %s",
                    ep->super.desc);
        return COLL_ERR_NO_MEMORY;
    }
    tx->rec = *rec;
    tx->heap = 1;
    tx_queue(ep, tx, first); /* it did not fit just now */
    return COLL_OK;
}

coll_status_t shm_ep_isend(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    shm_ep_t *ep = (shm_ep_t *)tep;
    shm_req_priv_t *priv = shm_priv(req);

    /* A peer that aborted while we were not looking: learn it now rather
     * than after our message sat in its ring. */
    if (ep->state == SHM_EP_READY && __atomic_load_n(&ep->rx.ctl->closed, __ATOMIC_ACQUIRE))
        shm_ep_poll(ep);
    if (ep->state == SHM_EP_CLOSED || ep->peer_left || ep->bye_queued) {
        req->complete(req, ep->error != COLL_OK ? ep->error : COLL_ERR_PEER_FAILED);
        return COLL_OK;
    }
    coll_zero(priv, sizeof(*priv));
    coll_list_init(&priv->tx.link);
    priv->tx.req = req;
    if (req->len <= ep->iface->eager_limit && !crowd_read(ep, req)) {
        priv->tx.rec = (shm_rec_t){.type = SHM_EAGER, .len = (uint32_t)req->len, .tag = req->tag};
    } else {
        priv->id = ep->next_send_id++;
        priv->tx.rec = (shm_rec_t){.type = SHM_RTS, .len = SHM_RTS_PLAIN, .id = priv->id,
                                   .tag = req->tag, .aux = req->len};
        coll_list_push_back(&ep->rndv_sends, &req->link);
    }
    tx_send(ep, &priv->tx);
    return COLL_OK;
}

/* ---- receiving ---------------------------------------------------------- */

/* Read len bytes at the peer's addr into dst: 0, or the errno. */
static int cma_read(shm_ep_t *ep, void *dst, uint64_t addr, size_t len)
{
    return shm_cma(ep, dst, addr, len, 0);
}

/* The folded piece [off, off + n) of req, still in cache, into the
 * sender's reply buffer (COLL_TP_HINT_REPLY): one write here against a
 * second read of the whole range from memory later (2 ranks, 16 MiB
 * all-reduce, the butterfly). Where the kernel refuses the write, the
 * rest is folded only and the results cross as a message after all: the
 * pieces already written hold the result the message brings again. */
static int write_back(shm_ep_t *ep, coll_tp_req_t *req, size_t off, size_t n)
{
    shm_req_priv_t *priv = shm_priv(req);
    int err = shm_cma(ep, (uint8_t *)req->buf + off, priv->reply + off, n, 1);

    if (err != EPERM && err != ENOSYS && err != EACCES)
        return err;
    priv->reply = 0;
    ep->iface->reply = 0;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: writing to %s's memory is not permitted "
              "(process_vm_writev: %s); reduced results cross as messages from now on",
              ep->iface->super.params.rank, ep->super.desc, strerror(err));
    return 0;
}

/* A receive that reduces: read the peer's data a cache-sized piece at a
 * time and fold each piece while it is still in cache, instead of copying
 * the whole message to memory and reading it back for the reduction. */
static int cma_fold(shm_ep_t *ep, coll_tp_req_t *req, uint64_t addr, size_t len)
{
    shm_iface_t *iface = ep->iface;
    int err = 0;

    if (!iface->bounce && !(iface->bounce = malloc(SHM_BOUNCE_BYTES)))
        return ENOMEM;
    for (size_t off = 0; off < len && !err; off += SHM_BOUNCE_BYTES) {
        size_t n = COLL_MIN(len - off, (size_t)SHM_BOUNCE_BYTES);
        err = cma_read(ep, iface->bounce, addr + off, n);
        if (!err)
            req->fold(req, off, iface->bounce, n);
        if (!err && shm_priv(req)->reply)
            err = write_back(ep, req, off, n);
    }
    return err;
}

static void on_abort_notice(shm_ep_t *ep);

/* Is a goodbye waiting in the ring (behind the record being read)? */
static int ring_has_bye(shm_ep_t *ep)
{
    uint64_t head = __atomic_load_n(&ep->rx.ctl->head, __ATOMIC_ACQUIRE), pos = ep->rx.tail;

    while (pos != head) {
        uint64_t off = pos & ep->rx.mask, room = ep->rx.mask + 1 - off;
        const shm_rec_t *h = (const shm_rec_t *)(ep->rx.data + off);
        size_t bytes = h->type == SHM_PAD ? (size_t)room : shm_rec_bytes(h->len);
        if (h->type == SHM_BYE)
            return 1;
        if (bytes > room)
            return 0;
        pos += bytes;
    }
    return 0;
}

/* Where ranks share CPUs, the way for a message we may read (shm.h,
 * SHM_WAY_RETRY): the one that costs less CPU time per byte, both ranks'
 * copies counted: a read, or the sender's copy into the ring (as timed for
 * our own sends to this peer; where we sent none, as our copy out) and
 * ours out of it. Not the message's time from choice to arrival: there
 * that favoured reads where they made the calls slower (a read completes
 * one message sooner by doing its whole copy alone, while through the
 * ring both directions of an exchange move at once on the CPU they
 * share): 2 ranks on one CPU, all-gather of 1 MiB, read messages
 * arrived at 10.4 GB/s against 9.9 through the ring, yet the calls took
 * 147 / 105 us out of / in place against 119 / 84. A way never timed
 * goes first (reading before the ring). */
static int cheaper_copies(const double *c)
{
    double ring = (c[SHM_COPY_IN] > 0 ? c[SHM_COPY_IN] : c[SHM_COPY_OUT]) + c[SHM_COPY_OUT];

    if (c[SHM_COPY_READ] == 0)
        return SHM_WAY_READ;
    if (c[SHM_COPY_OUT] == 0)
        return SHM_WAY_RING;
    return ring < c[SHM_COPY_READ] ? SHM_WAY_RING : SHM_WAY_READ;
}

/* Where each rank has a CPU of its own, the way that delivered faster
 * lately, from the choice to the last byte: the copies' CPU time leaves
 * out what the ring spends waiting for room, for the sender and for
 * records, most of its cost there (2 ranks, all-gather of 1 MiB: the read
 * 56-59 ns/KiB against the ring's two copies 28-36 each, yet calls of 31
 * us reading against 54 through the ring; from choice to last byte 53-78
 * against 79-131). The ring is first tried as a retry (adapt_way), after
 * SHM_WAY_FIRST_RING reads: a pair's first reads pay for the kernel's first
 * look at the pages (1500-5400 ns/KiB, then 130-150, then 50-80 from
 * about the fifth), and priced by them the ring won the whole of a short
 * run. Where ranks share CPUs, by the copies (cheaper_copies). */
static int cheaper_way(const shm_ep_t *ep)
{
    const double *w = ep->way_ns_per_byte;

    if (!shm_ways_by_delivery(ep))
        return cheaper_copies(ep->copy_ns_per_byte);
    if (w[SHM_WAY_READ] == 0 || w[SHM_WAY_RING] == 0)
        return SHM_WAY_READ;
    return w[SHM_WAY_RING] * SHM_WAY_RING_MARGIN < w[SHM_WAY_READ] ? SHM_WAY_RING
                                                                   : SHM_WAY_READ;
}

/* How many messages (or copies, where priced by copies) priced `way`. */
static uint64_t way_samples(const shm_ep_t *ep, int way)
{
    if (!shm_ways_by_delivery(ep))
        return ep->copies_timed[way == SHM_WAY_READ ? SHM_COPY_READ : SHM_COPY_OUT];
    return ep->ways_timed[way];
}

/* For the higher rank of the pair: the way the lower one took last for a
 * message from us, where it chose one since our choice before last; -1
 * where it did not (traffic one way only). Each rank weighs its own
 * copies, which the other's choice changes: left to themselves, the two
 * ranks of an exchange settled apart in 2 of 10 launches, and then the
 * one that reads makes both its copies (into the ring, and the read)
 * while the other makes one. 2 ranks, all-gather of 1 MiB: 126 / 86 and
 * 106 / 101 us out / in place in those, 62-93 / 49-62 where they agreed. */
static int lead_way(shm_ep_t *ep)
{
    uint32_t v = __atomic_load_n(&ep->seg->lead_way, __ATOMIC_RELAXED);

    if (v != ep->lead_seen) {
        ep->lead_seen = v;
        ep->lead_idle = 0;
    } else if (ep->lead_idle < UINT32_MAX) {
        ep->lead_idle++;
    }
    return v != 0 && ep->lead_idle <= 1 ? (int)(v & 1) : -1;
}

/* Messages the way not taken waits for its retry: ep->retry_every, but
 * where priced by delivery the ring's first try waits for
 * SHM_WAY_FIRST_RING reads: a try costs a few slower messages, which a
 * short run cannot win back (2 ranks, 20 in-place all-gathers of 1 MiB
 * after 26 others: 37-44 us a call with the try among them, 33-35
 * without). */
static uint32_t retry_interval(const shm_ep_t *ep, int untaken)
{
    if (untaken == SHM_WAY_RING && ep->ways_timed[SHM_WAY_RING] == 0 &&
        shm_ways_by_delivery(ep))
        return COLL_MAX(ep->retry_every, (uint32_t)SHM_WAY_FIRST_RING);
    return ep->retry_every;
}

/* cheaper_way's answer `way`, or the other way, retried for
 * SHM_WAY_TRIAL messages after it went untaken for ep->retry_every
 * (SHM_WAY_RETRY). Once a retry is priced, the interval doubles where
 * the retried way lost again and starts over where it won. */
static int adapt_way(shm_ep_t *ep, int way)
{
    uint32_t every = ep->retry_every;
    int tried = ep->retrying - 1;

    if (ep->trial_left > 0) {
        ep->trial_left--;
        return tried;
    }
    /* Leaving a way because its average drifted up, not because a retry
     * lost, starts the interval over: the other way's lost retries say
     * nothing of this one (a read left on a slow sample waited 512
     * messages on the ring). */
    if (!ep->retrying && ep->way_since[way] > 0 && shm_ways_by_delivery(ep)) {
        every = SHM_WAY_RETRY;
        ep->drifts++;
    }
    if (ep->retrying && way_samples(ep, tried) != ep->retry_mark) {
        every = way == tried ? SHM_WAY_RETRY : COLL_MIN(2 * every, SHM_WAY_RETRY_MAX);
        ep->retries++;
        ep->retries_won += way == tried;
        ep->retrying = 0;
    }
    ep->retry_every = every;
    if (ep->way_since[!way] < retry_interval(ep, !way))
        return way;
    if (!ep->retrying) {
        ep->retrying = !way + 1;
        ep->retry_mark = way_samples(ep, !way);
        ep->trial_left = SHM_WAY_TRIAL - 1;
    }
    return !way;
}

/* The lower rank's way lately (lead_way), or adapt_way's; with
 * COLL_SHM_CMA_ADAPT=0 always the read. The lower rank publishes its
 * choice. */
static int choose_way(shm_ep_t *ep)
{
    int way = SHM_WAY_READ, led = -1;

    if (ep->iface->cma_adapt && ep->side == 1)
        led = lead_way(ep);
    if (led >= 0) {
        way = led;
        ep->way_followed++;
    } else if (ep->iface->cma_adapt) {
        way = adapt_way(ep, cheaper_way(ep));
    }
    if (ep->side == 0)
        __atomic_store_n(&ep->seg->lead_way, (++ep->lead_choices << 1) | (uint32_t)way,
                         __ATOMIC_RELAXED);
    ep->way_since[way] = 0;
    ep->way_since[!way]++;
    ep->way_taken[way]++;
    return way;
}

/* Ask for the data through the ring. */
static void send_cts(shm_ep_t *ep, coll_tp_req_t *req, uint32_t send_id)
{
    shm_priv(req)->id = ep->next_recv_id++;
    shm_rec_t cts = {.type = SHM_CTS, .id = send_id, .aux = shm_priv(req)->id};
    coll_list_push_back(&ep->rndv_recvs, &req->link);
    shm_tx_control(ep, &cts);
}

/* Copy or fold a matched message out of our mapping of the sender's
 * region (shm_map.c), then FIN; through the ring where the mapping went
 * since the RTS matched. */
static void read_mapped(shm_ep_t *ep, coll_tp_req_t *req)
{
    shm_req_priv_t *priv = shm_priv(req);
    uint32_t *reading = &ep->seg->reading[ep->side].v;
    const uint8_t *src = shm_map_find(ep, priv->addr, req->len);

    if (!src) {
        send_cts(ep, req, priv->peer_id);
        return;
    }
    __atomic_store_n(reading, 1, __ATOMIC_RELAXED);
    coll_tp_deliver(req, 0, src, req->len);
    __atomic_store_n(reading, 0, __ATOMIC_RELAXED);
    ep->map_reads++;
    shm_read_end(ep, req, 0);
}

/* Copy a matched message straight out of the sender's memory, alone or
 * with the sender (shm_share.c), then FIN; where the kernel does not allow
 * it, fall back to the ring for good. */
static void read_now(shm_ep_t *ep, coll_tp_req_t *req)
{
    shm_req_priv_t *priv = shm_priv(req);
    uint32_t *reading = &ep->seg->reading[ep->side].v;
    int err;

    if (priv->mapped) {
        read_mapped(ep, req);
        return;
    }
    if (!ep->iface->cma) { /* refused by an earlier read: one INFO line is enough */
        send_cts(ep, req, priv->peer_id);
        return;
    }
    __atomic_store_n(reading, 1, __ATOMIC_RELAXED);
    uint64_t t0 = copy_start(ep, req); /* 0 for a shared read: not weighed */
    /* one shared read at a time per peer; later ones are read alone */
    if (priv->share && ep->iface->share && !ep->share_req)
        err = shm_share_read(ep, req, priv->addr);
    else
        err = req->fold ? cma_fold(ep, req, priv->addr, req->len)
                        : cma_read(ep, req->buf, priv->addr, req->len);
    if (!err) {
        copy_timed(ep, SHM_COPY_READ, t0, req->len);
        way_timed(ep, SHM_WAY_READ, t0 ? priv->chosen : 0, req->len);
        ep->crowd_reads += (uint64_t)priv->crowd;
    }
    __atomic_store_n(reading, 0, __ATOMIC_RELAXED);
    if (err >= 0) /* -1: the sender's pieces are still coming (shm_share_poll) */
        shm_read_end(ep, req, err);
}

void shm_read_end(shm_ep_t *ep, coll_tp_req_t *req, int err)
{
    shm_req_priv_t *priv = shm_priv(req);
    shm_rec_t fin = {.type = SHM_FIN, .id = priv->peer_id};
    size_t msg_len = req->len;

    /* A sender that leaves fails its large sends nobody answered, then
     * says goodbye: its buffer may be gone, whatever we read. */
    if ((err == 0 || err == ESRCH || err == EFAULT) && ring_has_bye(ep)) {
        req->complete(req, COLL_ERR_PEER_FAILED);
        return;
    }
    /* It aborted and went away while we read: its reason, not "died". */
    if (err != 0 && __atomic_load_n(&ep->rx.ctl->closed, __ATOMIC_ACQUIRE)) {
        on_abort_notice(ep);
        req->complete(req, COLL_ERR_PEER_FAILED);
        return;
    }
    if (err == 0) {
        if (priv->reply) {
            fin.aux = SHM_FIN_REPLIED;
            req->replied = 1;
            ep->replies++;
        }
        shm_tx_control(ep, &fin);
        req->bytes_done = msg_len;
        req->complete(req, COLL_OK);
        return;
    }
    if (err == ESRCH) {
        shm_ep_fail(ep, COLL_ERR_PEER_FAILED, "%s died without leaving the communicator "
                    "(killed or crashed?)", ep->super.desc);
        req->complete(req, COLL_ERR_PEER_FAILED);
        return;
    }
    if (err != EPERM && err != ENOSYS && err != EACCES) {
        shm_ep_fail(ep, COLL_ERR_PEER_FAILED, "cannot read %zu bytes of %s's message (tag "
                    "%llx) from its memory: %s", msg_len, ep->super.desc,
                    (unsigned long long)req->tag, strerror(err));
        req->complete(req, COLL_ERR_PEER_FAILED);
        return;
    }
    ep->iface->cma = 0;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: cross-memory attach to %s is not permitted "
              "(process_vm_readv: %s; seccomp or ptrace rules?); large messages are copied "
              "through the shared ring from now on", ep->iface->super.params.rank,
              ep->super.desc, strerror(err));
    send_cts(ep, req, priv->peer_id);
}

/* Leave req to read_due: the sender's message at addr. */
static void read_later(shm_ep_t *ep, coll_tp_req_t *req, uint32_t send_id, uint64_t addr)
{
    shm_priv(req)->peer_id = send_id;
    shm_priv(req)->addr = addr;
    coll_list_push_back(&ep->rndv_reads, &req->link);
    __atomic_store_n(&ep->reads_due, 1, __ATOMIC_RELAXED);
}

/* Answer an RTS that matched `req` (NULL: nobody will ever take it). A
 * read from the sender's memory waits for the end of the next poll
 * (shm.h); so do the receives matched after it. */
static void answer_rts(shm_ep_t *ep, coll_tp_req_t *req, uint32_t send_id, size_t msg_len,
                       uint64_t addr, uint64_t reply)
{
    if (!req || req->len != msg_len) {
        shm_rec_t fin = {.type = SHM_FIN, .id = send_id};
        shm_tx_control(ep, &fin); /* the sender completes; we report the mismatch */
        if (req)
            coll_match_size_mismatch(req, msg_len);
        return;
    }
    shm_priv(req)->mapped = shm_priv(req)->crowd = 0;
    shm_priv(req)->reply =
        req->fold && (req->hints & COLL_TP_HINT_REPLY) && ep->iface->reply ? reply : 0;
    if (addr & SHM_RTS_MAPPED) {
        if (shm_map_find(ep, addr & ~SHM_RTS_FLAGS, msg_len)) {
            shm_priv(req)->mapped = 1;
            shm_priv(req)->share = shm_priv(req)->weighed = 0;
            read_later(ep, req, send_id, addr & ~SHM_RTS_FLAGS);
            return;
        }
        addr = (addr & SHM_RTS_NOREAD) ? 0 : addr & ~SHM_RTS_MAPPED;
    }
    /* Above COLL_SHM_CMA_MAX, in 4 KiB pages, the ring's pipelined copies
     * (or folds) are faster than reading the peer's memory, which is not
     * in cache. */
    int dst_huge = (addr & SHM_RTS_HUGE) && ep->iface->cma &&
                   shm_pages_huge(ep->iface->pagemap_fd, req->buf, msg_len);
    int crowd = (addr & SHM_RTS_CROWD) && ep->iface->cma && !req->fold;
    shm_priv(req)->crowd = crowd;
    shm_priv(req)->share = (addr & SHM_RTS_SHARE) && ep->iface->share && !req->fold &&
                           (dst_huge || msg_len <= ep->iface->share_max);
    shm_priv(req)->weighed = !crowd && !shm_priv(req)->share &&
                             readable(ep, addr, msg_len, dst_huge, req->fold != NULL,
                                      shm_priv(req)->reply != 0);
    if (shm_priv(req)->share && ep->iface->cma && !ep->share_req) {
        /* the sender waits: it may write all of it while we are busy */
        shm_priv(req)->peer_id = send_id;
        shm_share_publish(ep, req, addr & ~SHM_RTS_FLAGS);
        return;
    }
    shm_priv(req)->chosen = copy_start(ep, req);
    if (crowd || shm_priv(req)->share ||
        (shm_priv(req)->weighed && choose_way(ep) == SHM_WAY_READ)) {
        read_later(ep, req, send_id, addr & ~SHM_RTS_FLAGS);
        return;
    }
    send_cts(ep, req, send_id);
}

/* The reads answer_rts left for now, in the order they matched. */
static int read_due(shm_ep_t *ep)
{
    int moved = 0;

    while (ep->state == SHM_EP_READY && !coll_list_empty(&ep->rndv_reads)) {
        coll_tp_req_t *req = coll_list_first(&ep->rndv_reads, coll_tp_req_t, link);
        coll_list_del(&req->link);
        read_now(ep, req);
        moved = 1;
    }
    __atomic_store_n(&ep->reads_due, !coll_list_empty(&ep->rndv_reads), __ATOMIC_RELAXED);
    return moved;
}

static coll_tp_req_t *find_by_id(coll_list_t *list, uint32_t id)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, list) {
        coll_tp_req_t *req = coll_container_of(pos, coll_tp_req_t, link);
        if (shm_priv(req)->id == id)
            return req;
    }
    return NULL;
}

static void on_eager(shm_ep_t *ep, const shm_rec_t *h, const uint8_t *payload)
{
    coll_tp_req_t *req = coll_match_take_posted(&ep->match, h->tag);

    if (req) {
        coll_match_complete_copy(req, payload, h->len);
    } else if (coll_match_keep_copy(&ep->match, h->tag, payload, h->len) != 0) {
        shm_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot buffer a %u-byte message from %s",
                    h->len, ep->super.desc);
    }
}

static void on_rts(shm_ep_t *ep, const shm_rec_t *h, const uint8_t *payload)
{
    uint64_t addr, reply = 0;
    coll_tp_req_t *req;

    if (h->len != SHM_RTS_PLAIN && h->len != SHM_RTS_WITH_MAP && h->len != SHM_RTS_REPLY) {
        shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent a malformed request-to-send (%u bytes)",
                    ep->super.desc, h->len);
        return;
    }
    memcpy(&addr, payload, sizeof(addr));
    if (h->len == SHM_RTS_REPLY)
        memcpy(&reply, payload + SHM_RTS_PLAIN, sizeof(reply));
    if (h->len == SHM_RTS_WITH_MAP && (addr & SHM_RTS_MAPPED) && ep->iface->map) {
        shm_rts_map_t map;
        memcpy(&map, payload + SHM_RTS_PLAIN, sizeof(map));
        shm_map_learn(ep, &map);
    }
    req = coll_match_take_posted(&ep->match, h->tag);
    if (req) {
        answer_rts(ep, req, h->id, h->aux, addr, reply);
        return;
    }
    if (coll_match_keep_remote(&ep->match, h->tag, h->aux, h->id, (void *)(uintptr_t)addr,
                               reply) != 0)
        shm_ep_fail(ep, COLL_ERR_NO_MEMORY, "cannot record a message from %s", ep->super.desc);
}

/* CTS or FIN for one of our large sends. */
static void on_grant(shm_ep_t *ep, const shm_rec_t *h)
{
    coll_tp_req_t *req = find_by_id(&ep->rndv_sends, h->id);

    if (!req && ep->bye_queued)
        return; /* a send we gave up when we started leaving */
    if (!req) {
        shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s answered unknown message %u", ep->super.desc,
                    h->id);
        return;
    }
    coll_list_del(&req->link);
    if (h->type == SHM_FIN) {
        req->bytes_done = req->len;
        req->replied = req->reply && (h->aux & SHM_FIN_REPLIED);
        req->complete(req, COLL_OK);
        return;
    }
    shm_req_priv_t *priv = shm_priv(req);
    priv->peer_id = (uint32_t)h->aux;
    priv->data_off = 0;
    priv->tx.rec = (shm_rec_t){.type = SHM_DATA};
    coll_list_push_back(&ep->txq, &priv->tx.link);
    shm_set_tx_blocked(ep, 1, 0);
}

static void on_data(shm_ep_t *ep, const shm_rec_t *h, const uint8_t *payload)
{
    coll_tp_req_t *req = find_by_id(&ep->rndv_recvs, h->id);

    if (!req && ep->bye_queued)
        return; /* for a receive we gave up when we started leaving */
    if (!req || h->aux > req->len || h->len > req->len - h->aux) {
        shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s sent data for %s (id %u, offset %llu, %u bytes)",
                    ep->super.desc, req ? "outside its receive buffer" : "no receive", h->id,
                    (unsigned long long)h->aux, h->len);
        return;
    }
    uint64_t t0 = copy_start(ep, req);
    coll_tp_deliver(req, h->aux, payload, h->len);
    copy_timed(ep, SHM_COPY_OUT, t0, h->len);
    req->bytes_done += h->len;
    if (req->bytes_done >= req->len) {
        way_timed(ep, SHM_WAY_RING, t0 ? shm_priv(req)->chosen : 0, req->len);
        coll_list_del(&req->link);
        req->complete(req, COLL_OK);
    }
}

static void on_bye(shm_ep_t *ep)
{
    ep->peer_left = 1;
    COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: %s left the communicator",
              ep->iface->super.params.rank, ep->super.desc);
    coll_match_fail_posted(&ep->match, COLL_ERR_PEER_FAILED);
    shm_ep_fail_pending_rndv(ep, COLL_ERR_PEER_FAILED);
    /* Nobody reads the ring any more: what still waits for room there
     * would wait until COLL_TIMEOUT. */
    while (!coll_list_empty(&ep->txq)) {
        shm_tx_t *tx = coll_list_first(&ep->txq, shm_tx_t, link);
        coll_list_del(&tx->link);
        if (tx->heap)
            free(tx);
        else
            tx->req->complete(tx->req, COLL_ERR_PEER_FAILED);
    }
    shm_set_tx_blocked(ep, 0, 0);
}

/* The test hook (crc32c.h) on a record that carries data, then, with
 * checksums on, the check: 1 when the record must not be used. */
static int rec_corrupted(shm_ep_t *ep, const shm_rec_t *h, uint8_t *payload)
{
    const coll_tp_params_t *pr = &ep->iface->super.params;

    if ((h->type == SHM_EAGER || h->type == SHM_DATA) &&
        coll_test_corrupt_due(pr->test_corrupt_frame, h->len))
        payload[0] ^= 0x01;
    if (!pr->checksum || h->type == SHM_PAD)
        return 0;
    uint32_t got = rec_crc(h, payload);
    if (got == h->flags)
        return 0;
    shm_ep_fail(ep, COLL_ERR_DATA_CORRUPTION, "data corruption on the link from %s to rank %d "
                "(shared memory): a record (type %u, %u bytes) failed its CRC-32C (computed "
                "%08x, sent %08x); its message was not delivered", ep->super.desc, pr->rank,
                h->type, h->len, got, h->flags);
    return 1;
}

/* One record at `off`; returns its footprint in the ring, 0 on a fault. */
static size_t on_record(shm_ep_t *ep, uint64_t off)
{
    const shm_rec_t *rp = (const shm_rec_t *)(ep->rx.data + off);
    uint64_t room = ep->rx.mask + 1 - off;
    shm_rec_t h;

    memcpy(&h, rp, sizeof(h));
    size_t bytes = h.type == SHM_PAD ? (size_t)room : shm_rec_bytes(h.len);
    if (room < SHM_REC_HDR || bytes > room || (h.type == SHM_PAD && h.len != room - SHM_REC_HDR)) {
        shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s wrote a record of %u bytes across the end of "
                    "the ring", ep->super.desc, h.len);
        return 0;
    }
    uint8_t *payload = (uint8_t *)rp + SHM_REC_HDR;
    if (rec_corrupted(ep, &h, payload))
        return 0;
    switch (h.type) {
    case SHM_PAD: break;
    case SHM_EAGER: on_eager(ep, &h, payload); break;
    case SHM_RTS: on_rts(ep, &h, payload); break;
    case SHM_CTS:
    case SHM_FIN: on_grant(ep, &h); break;
    case SHM_DATA: on_data(ep, &h, payload); break;
    case SHM_BYE: on_bye(ep); break;
    default:
        shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s wrote an unknown record type %u",
                    ep->super.desc, h.type);
        return 0;
    }
    return bytes;
}

static void on_abort_notice(shm_ep_t *ep)
{
    char text[SHM_ABORT_TEXT];
    size_t len = COLL_MIN((size_t)ep->rx.ctl->abort_len, sizeof(text) - 1);

    memcpy(text, ep->rx.ctl->abort_text, len);
    text[len] = '\0';
    shm_ep_fail(ep, coll_tp_abort_status(ep->rx.ctl->abort_status), "%s aborted: %s",
                ep->super.desc, text);
}

/* For the idle hook (no lock): only shared words and atomics. The
 * consumer's own tail is in the control block too; a blocked producer
 * looks for any room freed since it last read the tail. */
int shm_ep_has_input(const shm_ep_t *ep)
{
    const shm_ring_ctl_t *rx = ep->rx.ctl, *tx = ep->tx.ctl;
    uint64_t head = __atomic_load_n(&rx->head, __ATOMIC_SEQ_CST);
    return (head != __atomic_load_n(&rx->tail, __ATOMIC_RELAXED) &&
            head != __atomic_load_n(&ep->rx_parked_head, __ATOMIC_RELAXED)) ||
           __atomic_load_n(&rx->closed, __ATOMIC_SEQ_CST) ||
           __atomic_load_n(&ep->reads_due, __ATOMIC_RELAXED) || shm_share_ready(ep) ||
           __atomic_load_n(&ep->share_taking, __ATOMIC_RELAXED) ||
           shm_share_offered(ep) ||
           (__atomic_load_n(&ep->tx_blocked, __ATOMIC_RELAXED) &&
            __atomic_load_n(&tx->tail, __ATOMIC_SEQ_CST) !=
                __atomic_load_n(&ep->tx.tail_cache, __ATOMIC_RELAXED));
}

/* A receiver is copying one of our large sends out of our memory: we
 * keep polling for its FIN instead of sleeping (a sleeping sender costs
 * the reader a wake-up per message; shm.h). */
int shm_ep_being_read(shm_ep_t *ep)
{
    if (coll_list_empty(&ep->rndv_sends) ||
        !__atomic_load_n(&ep->seg->reading[!ep->side].v, __ATOMIC_RELAXED))
        return 0;
    shm_req_priv_t *priv = shm_priv(coll_list_first(&ep->rndv_sends, coll_tp_req_t, link));
    if (!priv->read_seen) {
        priv->read_seen = 1;
        COLL_TRACE(COLL_SUBSYS_NET, "rank %d: shm: %s is reading a message from our memory; "
                   "we poll for its end instead of sleeping", ep->iface->super.params.rank,
                   ep->super.desc);
    }
    return 1;
}

/* May the eager message at `off` wait in the ring for its receive
 * (SHM_PARK_MAX_NS)? Only while nothing behind it is needed now. */
static int may_park(shm_ep_t *ep, uint64_t off)
{
    const shm_rec_t *h = (const shm_rec_t *)(ep->rx.data + off);
    uint64_t stuck;

    if (__atomic_load_n(&h->type, __ATOMIC_RELAXED) != SHM_EAGER ||
        !coll_list_empty(&ep->match.posted) || !coll_list_empty(&ep->rndv_sends) ||
        !coll_list_empty(&ep->rndv_recvs) || !coll_list_empty(&ep->rndv_reads) ||
        ep->bye_queued || ep->rx_drain || ep->iface->ntx_blocked > 0)
        return 0;
    stuck = __atomic_load_n(&ep->rx.ctl->stuck_since, __ATOMIC_RELAXED);
    return stuck == 0 || coll_time_ns() - stuck < SHM_PARK_MAX_NS;
}

/* Read the records in the ring up to its head, or up to one that may be
 * parked; that one's head in *parked (0: none). 1 when any was read. */
static int read_records(shm_ep_t *ep, uint64_t *parked)
{
    uint64_t head = __atomic_load_n(&ep->rx.ctl->head, __ATOMIC_ACQUIRE);
    int moved = 0;

    *parked = 0;
    while (ep->state == SHM_EP_READY && ep->rx.tail != head) {
        if (may_park(ep, ep->rx.tail & ep->rx.mask)) {
            *parked = head;
            break;
        }
        size_t bytes = on_record(ep, ep->rx.tail & ep->rx.mask);
        if (!bytes)
            break;
        ep->rx.tail += bytes;
        /* free the space at once: a sender may wait for it */
        __atomic_store_n(&ep->rx.ctl->tail, ep->rx.tail, __ATOMIC_SEQ_CST);
        moved = 1;
        if (ep->rx.tail == head)
            head = __atomic_load_n(&ep->rx.ctl->head, __ATOMIC_ACQUIRE);
    }
    return moved;
}

int shm_ep_poll(shm_ep_t *ep)
{
    uint64_t parked;
    int moved;

    if (ep->in_rx)
        return 0;
    ep->in_rx = 1;
    moved = read_records(ep, &parked);
    if (ep->state == SHM_EP_READY && __atomic_load_n(&ep->rx.ctl->closed, __ATOMIC_ACQUIRE)) {
        /* it aborted: what it sent before is kept for its receives */
        ep->rx_drain = 1;
        moved |= read_records(ep, &parked);
        if (ep->state == SHM_EP_READY)
            on_abort_notice(ep);
    }
    __atomic_store_n(&ep->rx_parked_head, parked, __ATOMIC_RELAXED);
    if (moved && ep->state == SHM_EP_READY)
        shm_maybe_wake(ep);
    ep->in_rx = 0;
    if (ep->state == SHM_EP_READY && !coll_list_empty(&ep->txq)) {
        uint64_t before = ep->tx.head;
        shm_tx_flush(ep);
        moved |= ep->tx.head != before;
    }
    /* after the flush: our own RTS go out before we spend a copy's time */
    if (ep->state == SHM_EP_READY && !coll_list_empty(&ep->rndv_reads)) {
        ep->in_rx = 1;
        moved |= read_due(ep);
        ep->in_rx = 0;
    }
    if (ep->state == SHM_EP_READY && ep->share_req)
        moved |= shm_share_poll(ep);
    if (ep->state == SHM_EP_READY)
        moved |= shm_share_help(ep);
    return moved;
}

coll_status_t shm_ep_irecv(coll_tp_ep_t *tep, coll_tp_req_t *req)
{
    shm_ep_t *ep = (shm_ep_t *)tep;
    coll_unexp_t *ux = coll_match_take_unexpected(&ep->match, req->tag);

    if (!ux) {
        coll_status_t why = COLL_OK;
        if (ep->state == SHM_EP_CLOSED || ep->peer_left || ep->bye_queued)
            why = ep->error != COLL_OK ? ep->error
                  : ep->bye_queued ? COLL_ERR_INVALID_USAGE : COLL_ERR_PEER_FAILED;
        coll_match_post(&ep->match, req, why);
        return COLL_OK;
    }
    if (ux->data) {
        coll_match_deliver_eager(&ep->match, req, ux);
    } else if (ep->state == SHM_EP_READY && !ep->peer_left) {
        answer_rts(ep, req, ux->id, ux->len, (uint64_t)(uintptr_t)ux->ctx, ux->aux);
    } else {
        req->complete(req, COLL_ERR_PEER_FAILED);
    }
    free(ux);
    return COLL_OK;
}

/* Is this request's own queue item (an RTS not yet written) queued? */
static int tx_queued(shm_tx_t *tx)
{
    return tx->link.next && tx->link.next != &tx->link;
}

void shm_ep_fail_pending_rndv(shm_ep_t *ep, coll_status_t status)
{
    coll_list_t *lists[] = {&ep->rndv_sends, &ep->rndv_recvs, &ep->rndv_reads};

    for (size_t i = 0; i < COLL_ARRAY_LEN(lists); i++) {
        while (!coll_list_empty(lists[i])) {
            coll_tp_req_t *req = coll_list_first(lists[i], coll_tp_req_t, link);
            if (i == 0 && tx_queued(&shm_priv(req)->tx))
                coll_list_del(&shm_priv(req)->tx.link);
            coll_list_del(&req->link);
            req->complete(req, status);
        }
    }
    __atomic_store_n(&ep->reads_due, 0, __ATOMIC_RELAXED);
    shm_share_abandon(ep, status);
    shm_set_tx_blocked(ep, !coll_list_empty(&ep->txq), 0);
}

void shm_ep_fail_requests(shm_ep_t *ep, coll_status_t status)
{
    while (!coll_list_empty(&ep->txq)) {
        shm_tx_t *tx = coll_list_first(&ep->txq, shm_tx_t, link);
        coll_list_del(&tx->link);
        if (tx->heap)
            free(tx);
        else if (tx->rec.type != SHM_RTS) /* an RTS's request is in rndv_sends */
            tx->req->complete(tx->req, status);
    }
    shm_ep_fail_pending_rndv(ep, status);
    coll_match_fail_posted(&ep->match, status);
}
