/*
 * shm_mbox.c: the mailboxes of a pair's segment (transport.h, shm.h).
 *
 * Writer: copy the data and length into slot t % SHM_MBOX_SLOTS, then
 * store t in the slot's seq. Reader: seq == t says message t is complete;
 * after reading it stores t in `released`, which lets the writer reuse
 * the slot for t + SHM_MBOX_SLOTS. Both stores go through
 * shm_store_wake, and the idle hook looks at what a call waits for
 * (shm_ep_mbox_ready) after raising its `asleep` flag: the same Dekker
 * pairing as the rings, so a sleeping peer is always woken.
 */
#include "shm.h"

static coll_status_t usable(const shm_ep_t *ep)
{
    if (ep->state == SHM_EP_READY)
        return COLL_OK;
    return ep->error != COLL_OK ? ep->error : COLL_ERR_PEER_FAILED;
}

coll_status_t shm_ep_mbox_query(coll_tp_ep_t *tep, size_t *bytes_p)
{
    (void)tep;
    *bytes_p = SHM_MBOX_BYTES;
    return COLL_OK;
}

coll_status_t shm_ep_mbox_put(coll_tp_ep_t *tep, uint64_t seq, const void *buf, size_t len)
{
    shm_ep_t *ep = (shm_ep_t *)tep;
    COLL_CHECK(usable(ep));
    if (len > SHM_MBOX_BYTES || seq == 0)
        return COLL_ERR_INVALID_ARG;
    shm_mbox_t *box = ep->mbox_out;
    /* the reader's counter is read only when the copy says the slot may
     * be taken, so a writer running ahead does not pull that line over
     * on every message */
    if (seq > SHM_MBOX_SLOTS && ep->mbox_released < seq - SHM_MBOX_SLOTS) {
        ep->mbox_released = __atomic_load_n(&box->released, __ATOMIC_ACQUIRE);
        if (ep->mbox_released < seq - SHM_MBOX_SLOTS) {
            __atomic_store_n(&ep->mbox_want_out, seq, __ATOMIC_RELAXED);
            return COLL_INPROGRESS;
        }
    }
    __atomic_store_n(&ep->mbox_want_out, 0, __ATOMIC_RELAXED);
    shm_mbox_slot_t *slot = &box->slot[seq % SHM_MBOX_SLOTS];
    coll_copy(slot->data, buf, len);
    slot->len = len;
    shm_store_wake(ep, &slot->seq, seq);
    return COLL_OK;
}

coll_status_t shm_ep_mbox_get(coll_tp_ep_t *tep, uint64_t seq, const void **buf_p,
                              size_t *len_p)
{
    shm_ep_t *ep = (shm_ep_t *)tep;
    COLL_CHECK(usable(ep));
    shm_mbox_slot_t *slot = &ep->mbox_in->slot[seq % SHM_MBOX_SLOTS];
    if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != seq) {
        __atomic_store_n(&ep->mbox_want_in, seq, __ATOMIC_RELAXED);
        return COLL_INPROGRESS;
    }
    __atomic_store_n(&ep->mbox_want_in, 0, __ATOMIC_RELAXED);
    /* the peer's own length word: a bad one is a broken peer, not a
     * reason to read past the slot */
    size_t len = slot->len;
    if (len > SHM_MBOX_BYTES) {
        shm_ep_fail(ep, COLL_ERR_PROTOCOL, "%s wrote a %zu-byte mailbox message; slots hold %u",
                    ep->super.desc, len, SHM_MBOX_BYTES);
        return COLL_ERR_PROTOCOL;
    }
    *buf_p = slot->data;
    *len_p = len;
    return COLL_OK;
}

coll_status_t shm_ep_mbox_release(coll_tp_ep_t *tep, uint64_t seq)
{
    shm_ep_t *ep = (shm_ep_t *)tep;
    COLL_CHECK(usable(ep));
    shm_store_wake(ep, &ep->mbox_in->released, seq);
    return COLL_OK;
}

/* For the idle hook (no lock held): is what a mailbox call waits for
 * there now? */
int shm_ep_mbox_ready(const shm_ep_t *ep)
{
    uint64_t in = __atomic_load_n(&ep->mbox_want_in, __ATOMIC_RELAXED);
    uint64_t out = __atomic_load_n(&ep->mbox_want_out, __ATOMIC_RELAXED);
    const shm_mbox_slot_t *slot = &ep->mbox_in->slot[in % SHM_MBOX_SLOTS];

    if (in && __atomic_load_n(&slot->seq, __ATOMIC_SEQ_CST) == in)
        return 1;
    return out &&
           __atomic_load_n(&ep->mbox_out->released, __ATOMIC_SEQ_CST) >= out - SHM_MBOX_SLOTS;
}
