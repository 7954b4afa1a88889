/*
 * alltoall_pairwise.c: the pairwise-exchange all-to-all. In step k
 * (1 <= k < p) rank r sends block r+k to rank r+k and receives block r-k
 * from rank r-k (mod p); a step starts when the one before has finished
 * both ways, so each rank has one message in flight each way and no link
 * is flooded by p-1 messages at once. Our own block is a local copy.
 *
 * In place (sendbuf == recvbuf) slot j is both the block for rank j (sent
 * in step j-r) and the block from rank j (received in step r-j). For
 * k > p/2 the slot received in step k was sent in step p-k < k, so the
 * block lands in place; for k <= p/2 it lands in scratch and is copied
 * into place once step p-k has sent the slot's old contents.
 *
 * Every rank sends and receives in each step, so over shared memory both
 * cores copy at once: the sender into the pair's ring, the receiver out
 * of it, each from cache. In place, sends therefore do not ask for one
 * copy (COLL_TP_HINT_ONE_COPY): a receiver reading the block from the
 * sender's memory moved 8.6-11 GB/s, alone on its core (2 ranks, 1 MiB,
 * 4 alternating launches of 20 calls: 82-130 us read in place against
 * 65-98 through the ring; 2 MiB 155-206 against 120-153; 4 ranks 1 MiB
 * 274-297 against 206-219; on the machine of 2026-12-06 still 58.6 ->
 * 68.5 us at 1 MiB and 228 -> 477 at 4 MiB, 5 alternating rounds). Out
 * of place they do, and the transport reads them or takes its ring by
 * which has been faster (COLL_SHM_CMA_ADAPT): there 2 ranks went 56.5 ->
 * 47.9 us at 1 MiB and 220 -> 204 at 4 MiB, 4 ranks level (175 -> 176 at
 * 1 MiB), 5 and 3 alternating rounds.
 *
 * Cost: (p-1) alpha + n (p-1)/p beta, n = p * count * esize, plus p-1
 * waits for a partner (coll_pull_waits); out of place a local copy of n/p
 * bytes; in place floor(p/2)/p n bytes of scratch and
 * of local copies. Any p.
 */
#include "algorithms.h"

/* Out of place, our own block is copied into recvbuf. The schedule starts
 * ready steps last in, first out: added after the first step's send and
 * receive, the copy starts before them; added before them, after.
 * Over TCP the copy goes first (2 ranks, 5 alternating launches: 1 MiB
 * 137 -> 104 us, 4 MiB 582 -> 434; on the machine of 2026-12-06, 4 MiB
 * 538-723 against 633-1160 us the other way; why is not established).
 * Where every pair shares memory the exchange goes first (2 ranks, 1 MiB,
 * 5 alternating rounds: 62.3-72.8 -> 57.7-68.6 us, Open MPI 60.5-72.3;
 * 4 ranks 194-211 -> 184-215; 16 MiB level, measured while the blocks
 * still went through the pair's ring, which both CPUs copy in step, so a
 * rank busy with its own block held back its peer's receive, we think).
 * Since the blocks may be read out of place, reading first and copying
 * after measured level (2 ranks, 1 MiB, two runs of 7 rounds that
 * disagreed: 62.9 -> 55.7 and 58.9 -> 61.4 us). */
static void own_block(coll_sched_t *s, const coll_args_t *a, int r, size_t bytes)
{
    if (!a->in_place)
        coll_sched_copy(s, coll_slot(a->recvbuf, r, bytes), coll_slot(a->sendbuf, r, bytes), bytes,
                        COLL_NODEPS);
}

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;
    coll_vid_t prev = -1;
    char *held = NULL; /* in place: the blocks received in steps 1 .. p/2 */
    uint32_t hint = a->in_place ? 0 : COLL_TP_HINT_ONE_COPY;

    if (a->count == 0)
        return;
    if (p == 1) {
        own_block(s, a, r, bytes);
        return;
    }
    coll_vid_t *done = coll_sched_scratch(s, (size_t)p * sizeof(*done)); /* [step] */
    if (a->in_place)
        held = coll_sched_scratch(s, (size_t)(p / 2) * bytes);
    if (!done || (a->in_place && !held))
        return;
    if (a->pull)
        own_block(s, a, r, bytes);
    for (int k = 1; k < p; k++) {
        int to = coll_mod(r + k, p), from = coll_mod(r - k, p);
        int parked = held && 2 * k <= p; /* copied to its place at the end */
        void *dst = parked ? coll_slot(held, k - 1, bytes) : coll_slot(a->recvbuf, from, bytes);
        coll_vid_t sv = coll_sched_send_hinted(s, coll_slot(a->sendbuf, to, bytes), bytes, to, 0,
                                               hint, COLL_DEPS(prev));
        coll_vid_t rv = (parked ? coll_sched_recv : coll_sched_recv_result)(
            s, dst, bytes, from, 0, COLL_DEPS(prev));
        done[k] = prev = coll_sched_join(s, COLL_DEPS(sv, rv));
        if (k == 1 && !a->pull)
            own_block(s, a, r, bytes);
    }
    for (int k = 1; held && 2 * k <= p; k++)
        coll_sched_copy(s, coll_slot(a->recvbuf, coll_mod(r - k, p), bytes),
                        coll_slot(held, k - 1, bytes), bytes, COLL_DEPS(done[p - k]));
}

static double cost(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return q * c->alpha + c->n * q / c->p * c->beta + coll_pull_waits(c, q);
}

const coll_algo_t coll_algo_alltoall_pairwise = {
    COLL_ALLTOALL, "pairwise", build, NULL, cost,
};
