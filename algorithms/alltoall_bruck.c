/*
 * alltoall_bruck.c: Bruck's all-to-all (Bruck et al., "Efficient
 * algorithms for all-to-all communications in multiport message-passing
 * systems", 1997), the log-step algorithm for small blocks.
 *
 * Number the blocks of rank r by distance: slot i holds the block rank r
 * sends to rank (r+i) mod p (the local rotation). In step k (distance
 * d = 2^k) every rank sends to rank r+d, in one message, every slot i with
 * bit k set, and receives the same slots from rank r-d. A block therefore
 * moves by the binary digits of its distance and keeps its slot number:
 * after ceil(log2 p) steps slot i of rank r holds the block that rank r-i
 * sent to r, and the inverse rotation puts it at block (r-i) mod p of
 * recvbuf.
 *
 * The slots are not kept in one array. Each step receives into a buffer of
 * its own, and a slot is read from wherever it last arrived (sendbuf if it
 * has not moved yet): that folds the rotation into the first packing and
 * the inverse rotation into the final copies, and needs no unpacking.
 * Slots that lie contiguously are packed with one copy, and a message of a
 * single contiguous run is sent without packing.
 *
 * Cost: ceil(log2 p) alpha + (n/2) ceil(log2 p) beta, n = p * count *
 * esize (exactly: n/p per slot with bit k set, over the steps k), plus
 * local copies of about (n/2) log2 p bytes (packing) + n (p-1)/p (the
 * final placement), priced at the memcpy rate the ranks agreed on at init
 * (so every rank picks the same algorithm), and a wait for a partner per
 * step (coll_pull_waits). Scratch: about (n/2) (log2 p + 1).
 * Any p. Fewer messages than pairwise but log2(p)/2 times the volume:
 * for small blocks. In place (sendbuf == recvbuf) recvbuf is written only
 * once every step is done.
 */
#include "algorithms.h"


typedef struct bruck {
    coll_sched_t *s;
    const coll_args_t *a;
    int p, r, steps;
    size_t bytes;     /* one block */
    char **arrived;   /* [steps]: the receive buffer of each step */
    coll_vid_t *vids; /* build-time list of copies, p entries */
} bruck_t;

/* Place of slot i in the receive buffer of step k (bit k of i is set):
 * the slots with bit k set below i come first. */
static size_t pos(int i, int k)
{
    return ((size_t)(i >> (k + 1)) << k) + (size_t)(i & ((1 << k) - 1));
}

/* Slots with bit k set. */
static int slots_of_step(int p, int k)
{
    int n = 0;
    for (int i = 1; i < p; i++)
        n += (i >> k) & 1;
    return n;
}

/* Where slot i is after steps 0 .. k-1: in the buffer of the last step
 * that moved it, i.e. the highest set bit of i below k; sendbuf if none. */
static const char *where(const bruck_t *b, int i, int k)
{
    int low = i & ((1 << k) - 1), j = -1;
    if (low == 0)
        return (const char *)b->a->sendbuf + (size_t)((b->r + i) % b->p) * b->bytes;
    while (low >> (j + 1))
        j++;
    return b->arrived[j] + pos(i, j) * b->bytes;
}

/* The copies of a list of (dst, src) blocks, merging runs that are
 * contiguous on both sides. Returns a join of them, or -1 if none. */
static coll_vid_t copy_runs(bruck_t *b, char *const *dst, const char *const *src, int n,
                            coll_vid_t dep)
{
    int nv = 0;
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && dst[j] == dst[j - 1] + b->bytes && src[j] == src[j - 1] + b->bytes)
            j++;
        b->vids[nv++] = coll_sched_copy(b->s, dst[i], src[i], (size_t)(j - i) * b->bytes,
                                        COLL_DEPS(dep));
        i = j;
    }
    return nv ? coll_sched_join(b->s, nv, b->vids) : -1;
}

/* One step: pack (unless the slots are one run), send, receive. Returns
 * the vertex after which the step is done both ways. */
static coll_vid_t step(bruck_t *b, int k, char *pack, char **dst, const char **src,
                       coll_vid_t prev)
{
    int d = 1 << k, n = 0, runs = 1;
    for (int i = 1; i < b->p; i++) {
        if (!((i >> k) & 1))
            continue;
        src[n] = where(b, i, k);
        dst[n] = pack + (size_t)n * b->bytes;
        runs += n > 0 && src[n] != src[n - 1] + b->bytes;
        n++;
    }
    size_t len = (size_t)n * b->bytes;
    const char *out = src[0];
    coll_vid_t ready = prev;
    if (runs > 1) {
        ready = copy_runs(b, dst, src, n, prev);
        out = pack;
    }
    coll_vid_t sv = coll_sched_send(b->s, out, len, (b->r + d) % b->p, (uint32_t)k,
                                    COLL_DEPS(ready));
    coll_vid_t rv = coll_sched_recv(b->s, b->arrived[k], len, (b->r - d + b->p) % b->p,
                                    (uint32_t)k, COLL_NODEPS);
    return coll_sched_join(b->s, COLL_DEPS(prev, sv, rv));
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    bruck_t b = {.s = s, .a = a, .p = coll_sched_size(s), .r = coll_sched_rank(s)};
    coll_vid_t prev = -1;

    b.bytes = a->count * a->esize;
    if (a->count == 0)
        return;
    if (!a->in_place) /* slot 0: our own block */
        coll_sched_copy(s, (char *)a->recvbuf + (size_t)b.r * b.bytes,
                        (const char *)a->sendbuf + (size_t)b.r * b.bytes, b.bytes, COLL_NODEPS);
    if (b.p == 1)
        return;
    while ((1 << b.steps) < b.p)
        b.steps++;
    b.arrived = coll_sched_scratch(s, (size_t)b.steps * sizeof(*b.arrived));
    b.vids = coll_sched_scratch(s, (size_t)b.p * sizeof(*b.vids));
    char **dst = coll_sched_scratch(s, (size_t)b.p * sizeof(*dst));
    const char **src = coll_sched_scratch(s, (size_t)b.p * sizeof(*src));
    int most = 0; /* slots in the largest message */
    for (int k = 0; k < b.steps; k++)
        most = COLL_MAX(most, slots_of_step(b.p, k));
    char *pack = coll_sched_scratch(s, (size_t)most * b.bytes);
    if (!b.arrived || !b.vids || !dst || !src || !pack)
        return;
    for (int k = 0; k < b.steps; k++)
        if (!(b.arrived[k] = coll_sched_scratch(s, (size_t)slots_of_step(b.p, k) * b.bytes)))
            return;
    /* the pack buffer is reused: a step packs once the previous one is done */
    for (int k = 0; k < b.steps; k++)
        prev = step(&b, k, pack, dst, src, prev);
    /* inverse rotation: slot i is block r-i; in place, this is the first
     * write to recvbuf, after every send has read sendbuf */
    for (int i = 1; i < b.p; i++) {
        src[i - 1] = where(&b, i, b.steps);
        dst[i - 1] = (char *)a->recvbuf + (size_t)((b.r - i + b.p) % b.p) * b.bytes;
    }
    copy_runs(&b, dst, src, b.p - 1, prev);
}

static double cost(const coll_cost_in_t *c)
{
    int p = (int)c->p, moved = 0; /* blocks sent, over all steps */
    for (int k = 0; (1 << k) < p; k++)
        moved += slots_of_step(p, k);
    double block = c->n / c->p;
    return coll_log2(c->p) * c->alpha + moved * block * c->beta +
           (moved + c->p - 1) * block * c->copy + coll_pull_waits(c, coll_log2(c->p));
}

const coll_algo_t coll_algo_alltoall_bruck = {
    COLL_ALLTOALL, "bruck", build, NULL, cost,
};
