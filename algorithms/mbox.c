/*
 * mbox.c: what the mailbox algorithms (*_oneshot.c) share: whether a call
 * fits, the exchange of one message with every other rank, and combining
 * every rank's vector in rank order where the messages lie.
 */
#include <string.h>

#include "algorithms.h"
#include "copy.h"
#include "reduce.h"

int coll_mbox_usable(const coll_args_t *a, int nranks, size_t bytes, const char **why)
{
    if (nranks < 2)
        *why = "one rank";
    else if (!a->mbox_bytes)
        *why = "not every pair of ranks has mailboxes (shared memory)";
    else if (a->mbox_bytes < bytes)
        *why = "the message is larger than a mailbox";
    else
        return 1;
    return 0;
}

coll_status_t coll_mbox_put_all(coll_sched_t *s, const void *base, size_t stride, size_t len,
                                uint32_t *step)
{
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    coll_status_t st;

    for (; *step < (uint32_t)(p - 1); (*step)++) {
        int to = (r + 1 + (int)*step) % p;
        const char *buf = base ? (const char *)base + (size_t)to * stride : NULL;
        if ((st = coll_sched_mbox_put(s, to, buf, len)) != COLL_OK)
            return st;
    }
    return COLL_OK;
}

/* COLL_OK once a `len`-byte message from every other rank is there: a
 * step that uses them must not have used some on an earlier pass (a
 * combination would fold twice, an in-place copy would read overwritten
 * data). */
static coll_status_t all_there(coll_sched_t *s, size_t len)
{
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    const void *in;

    for (int k = 0; k < p; k++)
        if (k != r)
            COLL_POLL_CHECK(coll_sched_mbox_get(s, k, len, &in));
    return COLL_OK;
}

coll_status_t coll_mbox_exchange(coll_sched_t *s, const void *base, size_t stride, size_t len,
                                 uint32_t *step)
{
    COLL_POLL_CHECK(coll_mbox_put_all(s, base, stride, len, step));
    return all_there(s, len);
}

coll_status_t coll_mbox_release_all(coll_sched_t *s)
{
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    for (int k = 0; k < p; k++)
        if (k != r)
            COLL_POLL_CHECK(coll_sched_mbox_release(s, k));
    return COLL_OK;
}

coll_status_t coll_mbox_combine(coll_sched_t *s, void *dst, const void *own, size_t count)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t len = count * a->esize;
    const void *lhs, *rhs;

    COLL_POLL_CHECK(all_there(s, len));
    for (int k = 1; k < p; k++) {
        lhs = dst;
        if (k == 1 && r == 0)
            lhs = own;
        else if (k == 1)
            COLL_POLL_CHECK(coll_sched_mbox_get(s, 0, len, &lhs));
        if (k == r)
            rhs = own;
        else
            COLL_POLL_CHECK(coll_sched_mbox_get(s, k, len, &rhs));
        COLL_POLL_CHECK(coll_reduce_local(dst, lhs, rhs, count, a->dt, a->op));
    }
    if (a->op == COLL_AVG)
        COLL_POLL_CHECK(coll_reduce_finish_avg(dst, count, a->dt, p));
    return coll_mbox_release_all(s);
}

coll_status_t coll_mbox_take_blocks(coll_sched_t *s, void *recvbuf)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;
    const void *in;

    COLL_POLL_CHECK(all_there(s, bytes));
    for (int k = 0; k < p; k++) {
        if (k == r)
            continue;
        COLL_POLL_CHECK(coll_sched_mbox_get(s, k, bytes, &in));
        coll_copy(COLL_PTR(recvbuf, (size_t)k * a->count, a->esize), in, bytes);
    }
    return coll_mbox_release_all(s);
}

coll_status_t coll_mbox_take(coll_sched_t *s, int peer, void *dst)
{
    const coll_args_t *a = coll_sched_args(s);
    size_t bytes = a->count * a->esize;
    const void *in;

    COLL_POLL_CHECK(coll_sched_mbox_get(s, peer, bytes, &in));
    coll_copy(dst, in, bytes);
    return coll_sched_mbox_release(s, peer);
}

int coll_mbox_usable_count(const coll_args_t *a, int nranks, const char **why)
{
    return coll_mbox_usable(a, nranks, a->count * a->esize, why);
}

void coll_mbox_copy_step(coll_sched_t *s, coll_sched_poll_fn poll, int copy_own, void *dst,
                         size_t dst_block, const void *src, size_t src_block)
{
    const coll_args_t *a = coll_sched_args(s);

    if (a->count == 0)
        return;
    if (copy_own)
        coll_sched_copy(s, COLL_PTR(dst, dst_block * a->count, a->esize),
                        COLL_PTR(src, src_block * a->count, a->esize), a->count * a->esize,
                        COLL_NODEPS);
    coll_sched_poll(s, poll, NULL, COLL_NODEPS);
}

void coll_mbox_combine_step(coll_sched_t *s, coll_sched_poll_fn poll, const void *own,
                            int in_place)
{
    const coll_args_t *a = coll_sched_args(s);
    size_t bytes = a->count * a->esize;
    void *copy = NULL;
    coll_vid_t c = -1;

    if (in_place && coll_sched_rank(s) > 1) {
        copy = coll_sched_scratch(s, bytes);
        if (!copy)
            return;
        c = coll_sched_copy(s, copy, own, bytes, COLL_NODEPS);
    }
    coll_sched_poll(s, poll, copy, COLL_DEPS(c));
}
