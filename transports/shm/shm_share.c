/*
 * shm_share.c: a large message copied by both ranks of the pair at once.
 *
 * A sender that waits for its send and nothing else (a broadcast's root,
 * a blocking send: COLL_TP_HINT_WAITS) offers its CPU in the RTS
 * (SHM_RTS_SHARE). The receiver then publishes the message in the
 * segment's share block toward it (shm_share_t: where the data lies on
 * both sides, in pieces) and reads pieces with process_vm_readv; the
 * sender, polling for the end of its send, claims pieces of the same
 * counter and writes them into the receiver's buffer with
 * process_vm_writev. Either copy alone runs at one CPU's speed (16 MiB on
 * the development machine: 2035-2196 us read by one rank, 1049-1070 split
 * between two); a sender that is busy elsewhere claims nothing and the
 * receiver reads it all, as it would have. A receive whose RTS matched
 * it is published at once and read from the receiver's next poll on, so
 * that a receiver with work of its own before it waits (a gather's root
 * copying its own block; a compute step after coll_irecv) leaves the
 * sender the whole copy meanwhile.
 *
 * The receiver sends FIN once every piece is in, the sender's included:
 * it may not hand its buffer back while the sender still writes into it.
 * `written` counts the sender's pieces and carries the generation, so a
 * sender that looked at an older message never adds to a newer one's
 * count, and claims carry it too (a compare-and-swap on the whole word).
 * A write that fails (ptrace rules that allow reading but not writing)
 * marks the message `failed`, and the receiver reads it all again.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/uio.h>

#include "log.h"
#include "shm.h"

#define GEN(w) ((w) >> 32)
#define LOW(w) ((uint32_t)(w))

/* Copy len bytes between our `local` and the peer's `remote` (write: to
 * the peer): 0, or the errno. */
int shm_cma(shm_ep_t *ep, void *local, uint64_t remote, size_t len, int write)
{
    size_t done = 0;

    while (done < len) {
        struct iovec l = {.iov_base = (uint8_t *)local + done, .iov_len = len - done};
        struct iovec r = {.iov_base = (void *)(uintptr_t)(remote + done), .iov_len = len - done};
        pid_t pid = (pid_t)ep->peer_addr.pid;
        ssize_t n = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                          : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EFAULT;
        done += (size_t)n;
    }
    return 0;
}

/* Pieces of about a sixteenth of the message, so that the one who finishes
 * last waits at most a piece's copy for the other, from 64 KiB (each call
 * costs a system call and the pinning of its pages) to 1 MiB. */
static size_t piece_bytes(size_t len)
{
    size_t p = (len / SHM_SHARE_PIECES + 0xffff) & ~(size_t)0xffff;
    return COLL_MAX(COLL_MIN(p, (size_t)1 << 20), (size_t)1 << 16);
}

/* Are the sender's pieces of our shared read all in? For the idle hook
 * too (no lock): share_want and the shared word only. */
int shm_share_ready(const shm_ep_t *ep)
{
    uint64_t want = __atomic_load_n(&ep->share_want, __ATOMIC_RELAXED);

    return want != 0 &&
           __atomic_load_n(&ep->seg->share[ep->side].written, __ATOMIC_SEQ_CST) == want;
}

/* No shared read pending on ep any more. */
static void share_clear(shm_ep_t *ep)
{
    ep->share_req = NULL;
    __atomic_store_n(&ep->share_want, 0, __ATOMIC_RELAXED);
}

/* Our shared read is complete: its error, or 0. A write of the sender's
 * that failed is read again, the whole message by us. */
static int share_end(shm_ep_t *ep, coll_tp_req_t *req)
{
    shm_share_t *sh = &ep->seg->share[ep->side];
    int err = ep->share_err;

    share_clear(ep);
    if (!err && __atomic_load_n(&sh->failed, __ATOMIC_ACQUIRE))
        err = shm_cma(ep, req->buf, __atomic_load_n(&sh->src, __ATOMIC_RELAXED), req->len, 0);
    return err;
}

/* The claims of our shared read are over, at claim word k (the next
 * piece anyone would have taken): the sender's pieces are the claimed
 * ones we did not take, and the word `written` reaches want then. */
static void share_claimed(shm_ep_t *ep, uint64_t k, uint64_t n)
{
    k = COLL_MIN(k, n);
    ep->share_pieces_peer += k - ep->share_ours;
    __atomic_store_n(&ep->share_taking, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ep->share_want, ep->share_gen << 32 | (k - ep->share_ours),
                     __ATOMIC_RELAXED);
}

/* Close the claim word of our shared read of n pieces, so that nobody
 * takes a piece after: the piece index it had reached. */
static uint64_t share_close(shm_ep_t *ep, uint64_t n)
{
    return LOW(__atomic_exchange_n(&ep->seg->share[ep->side].claim, ep->share_gen << 32 | n,
                                   __ATOMIC_ACQ_REL));
}

/* The pieces of our shared read of len bytes (the piece we published). */
static uint64_t share_pieces(const shm_ep_t *ep, size_t len)
{
    uint64_t piece = __atomic_load_n(&ep->seg->share[ep->side].piece, __ATOMIC_RELAXED);
    return (len + piece - 1) / piece;
}

/* Claim and read the pieces of our shared read nobody took yet; then,
 * or after a failed read (no more claims then: the sender's last ones
 * may still be in flight, and we wait for them all the same), what the
 * sender owes is known. */
static void share_take(shm_ep_t *ep)
{
    shm_share_t *sh = &ep->seg->share[ep->side];
    coll_tp_req_t *req = ep->share_req;
    size_t len = req->len, piece = __atomic_load_n(&sh->piece, __ATOMIC_RELAXED);
    uint64_t n = share_pieces(ep, len), k, src = __atomic_load_n(&sh->src, __ATOMIC_RELAXED);
    uint8_t *dst = req->buf;
    int err = 0;

    while ((k = LOW(__atomic_fetch_add(&sh->claim, 1, __ATOMIC_ACQ_REL))) < n) {
        size_t off = (size_t)k * piece;
        ep->share_ours++;
        if ((err = shm_cma(ep, dst + off, src + off, COLL_MIN(piece, len - off), 0)) != 0)
            break;
    }
    if (err) {
        ep->share_err = err;
        k = share_close(ep, n);
    }
    share_claimed(ep, k, n);
}

/* Publish req, whose data lies at the sender's addr, in our share block;
 * no piece is claimed yet. */
static void share_open(shm_ep_t *ep, coll_tp_req_t *req, uint64_t addr)
{
    shm_share_t *sh = &ep->seg->share[ep->side];
    size_t len = req->len, piece = piece_bytes(len);
    uint64_t gen;

    if (++ep->share_gen == UINT32_MAX + 1ull)
        ep->share_gen = 1;
    gen = ep->share_gen;
    /* The claim word is closed while the fields change: a sender that
     * read the last message's word, left at its pieces + 1, could
     * otherwise match it against this message's larger length, take a
     * piece the old word still allows, and add it to this message's
     * count, which would then never equal what we wait for (a hang, seen
     * with 1 MiB and 64 MiB messages in turn). A sender that reads the new
     * length or piece (acquire, in claim) sees the word closed. */
    __atomic_store_n(&sh->claim, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->src, addr, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->dst, (uint64_t)(uintptr_t)req->buf, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->len, (uint64_t)len, __ATOMIC_RELEASE);
    __atomic_store_n(&sh->piece, (uint64_t)piece, __ATOMIC_RELEASE);
    __atomic_store_n(&sh->send_id, shm_priv(req)->peer_id, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->written, gen << 32, __ATOMIC_RELAXED);
    ep->share_req = req;
    ep->share_ours = 0;
    ep->share_err = 0;
    ep->share_fresh = 0;
    ep->share_reads++;
    ep->share_pieces += share_pieces(ep, len);
    __atomic_store_n(&ep->share_taking, 1, __ATOMIC_RELAXED);
    /* seq_cst, then the look at its `asleep` flag: a sender about to
     * sleep sees the pieces (shm_share_offered) or is woken */
    __atomic_store_n(&sh->claim, gen << 32, __ATOMIC_SEQ_CST);
    shm_maybe_wake(ep);
}

void shm_share_publish(shm_ep_t *ep, coll_tp_req_t *req, uint64_t addr)
{
    share_open(ep, req, addr);
    ep->share_fresh = 1;
}

int shm_share_read(shm_ep_t *ep, coll_tp_req_t *req, uint64_t addr)
{
    share_open(ep, req, addr);
    share_take(ep);
    return shm_share_ready(ep) ? share_end(ep, req) : -1;
}

/* A read published when its RTS matched is taken from the next poll on,
 * not the one that matched it, nor in a busy one: a receiver that goes on with work of its
 * own (a gather's root copying its own block, a compute step after
 * coll_irecv and coll_test) leaves the sender the whole copy meanwhile. */
int shm_share_poll(shm_ep_t *ep)
{
    coll_tp_req_t *req = ep->share_req;
    uint32_t *reading = &ep->seg->reading[ep->side].v;
    int moved = 0;

    if (!req)
        return 0;
    if (ep->share_fresh) {
        ep->share_fresh = 0;
        return 1;
    }
    if (__atomic_load_n(&ep->share_taking, __ATOMIC_RELAXED) && !ep->iface->super.busy) {
        __atomic_store_n(reading, 1, __ATOMIC_RELAXED);
        share_take(ep);
        __atomic_store_n(reading, 0, __ATOMIC_RELAXED);
        moved = 1;
    }
    if (!shm_share_ready(ep))
        return moved;
    shm_read_end(ep, req, share_end(ep, req));
    return 1;
}

/* For the idle hook (no lock): the peer published pieces of one of our
 * sends that nobody claimed yet. */
int shm_share_offered(const shm_ep_t *ep)
{
    const shm_share_t *sh = &ep->seg->share[!ep->side];
    uint64_t c = __atomic_load_n(&sh->claim, __ATOMIC_SEQ_CST);
    uint64_t piece = __atomic_load_n(&sh->piece, __ATOMIC_RELAXED);

    return GEN(c) != 0 && (uint64_t)LOW(c) * piece < __atomic_load_n(&sh->len, __ATOMIC_RELAXED);
}

/* The message the peer published is one of our sends still waiting for
 * its FIN, where it lies: *src_p, its buffer. */
static int piece_is_ours(shm_ep_t *ep, const shm_share_t *sh, const void **src_p)
{
    uint32_t id = __atomic_load_n(&sh->send_id, __ATOMIC_RELAXED);
    uint64_t src = __atomic_load_n(&sh->src, __ATOMIC_RELAXED);
    coll_list_t *pos, *tmp;

    coll_list_for_each_safe(pos, tmp, &ep->rndv_sends) {
        coll_tp_req_t *req = coll_container_of(pos, coll_tp_req_t, link);
        if (shm_priv(req)->id == id) {
            *src_p = req->buf;
            return src == (uint64_t)(uintptr_t)req->buf &&
                   __atomic_load_n(&sh->len, __ATOMIC_RELAXED) == req->len;
        }
    }
    return 0;
}

/* Claim piece k of the generation in word c; 1 when it is ours. */
static int claim(shm_share_t *sh, uint64_t c, uint64_t *k_p)
{
    uint64_t len = __atomic_load_n(&sh->len, __ATOMIC_ACQUIRE);
    uint64_t piece = __atomic_load_n(&sh->piece, __ATOMIC_ACQUIRE);

    /* len or piece may be a newer message's than c: then the receiver
     * closed the word before it stored them (shm_share_read), and the
     * swap sees that and fails */
    if (GEN(c) == 0 || piece == 0 || (uint64_t)LOW(c) * piece >= len)
        return 0;
    *k_p = LOW(c);
    return __atomic_compare_exchange_n(&sh->claim, &c, c + 1, 0, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

/* Write piece k into the peer's buffer; a failure makes the receiver read
 * the message again, and ends our help where the kernel forbids it. */
static void write_piece(shm_ep_t *ep, shm_share_t *sh, const void *src, uint64_t k)
{
    uint64_t len = __atomic_load_n(&sh->len, __ATOMIC_RELAXED);
    uint64_t piece = __atomic_load_n(&sh->piece, __ATOMIC_RELAXED), off = k * piece;
    uint64_t dst = __atomic_load_n(&sh->dst, __ATOMIC_RELAXED);
    int err = shm_cma(ep, (uint8_t *)src + off, dst + off, COLL_MIN(piece, len - off), 1);

    if (err) {
        __atomic_store_n(&sh->failed, 1, __ATOMIC_RELEASE);
        if (err == EPERM || err == EACCES || err == ENOSYS) {
            ep->iface->share = 0;
            COLL_INFO(COLL_SUBSYS_NET, "rank %d: shm: cannot write into %s's memory "
                      "(process_vm_writev: %s); its receivers read our large sends alone "
                      "from now on", ep->iface->super.params.rank, ep->super.desc,
                      strerror(err));
        }
    }
    ep->share_written++;
}

int shm_share_help(shm_ep_t *ep)
{
    shm_share_t *sh = &ep->seg->share[!ep->side];
    const void *src;
    uint64_t c, k;
    int moved = 0;

    if (coll_list_empty(&ep->rndv_sends) || !ep->iface->share || ep->iface->super.busy)
        return 0;
    for (;;) {
        c = __atomic_load_n(&sh->claim, __ATOMIC_ACQUIRE);
        if (!claim(sh, c, &k)) {
            if (__atomic_load_n(&sh->claim, __ATOMIC_ACQUIRE) != c)
                continue; /* the receiver claimed one meanwhile */
            break;
        }
        if (!piece_is_ours(ep, sh, &src)) {
            shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s asked us to write a piece of a message "
                        "(id %u) that is not one of our sends waiting for it", ep->super.desc,
                        __atomic_load_n(&sh->send_id, __ATOMIC_RELAXED));
            return 1;
        }
        write_piece(ep, sh, src, k);
        __atomic_fetch_add(&sh->written, 1, __ATOMIC_SEQ_CST);
        shm_maybe_wake(ep);
        moved = 1;
    }
    return moved;
}

/* The link failed with our shared read pending. A sender still alive may
 * be writing a piece it claimed into the buffer we are about to hand
 * back: wait for its count (at most a second; each piece is at most 1 MiB)
 * unless its process is gone. */
void shm_share_abandon(shm_ep_t *ep, coll_status_t status)
{
    coll_tp_req_t *req = ep->share_req;
    uint64_t until = coll_time_ns() + 1000000000ull;

    if (!req)
        return;
    if (__atomic_load_n(&ep->share_taking, __ATOMIC_RELAXED)) {
        uint64_t n = share_pieces(ep, req->len);
        share_claimed(ep, share_close(ep, n), n);
    }
    while (!shm_share_ready(ep) && coll_time_ns() < until &&
           !(kill((pid_t)ep->peer_addr.pid, 0) < 0 && errno == ESRCH))
        sched_yield();
    share_clear(ep);
    req->complete(req, status);
}
