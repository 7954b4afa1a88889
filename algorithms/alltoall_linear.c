/*
 * alltoall_linear.c: every send and receive at once (Open MPI's "basic
 * linear"). Rank r posts its p-1 receives and p-1 sends in the pairwise
 * order (to r+k, from r-k, k = 1 .. p-1) and no message waits for
 * another, so a rank that gets the CPU does all the work it can: every
 * block to or from a partner that is ready moves. On a host with more
 * ranks than CPUs the pairwise exchange waits p-1 times for one
 * particular partner, which is often not running. Over shared memory, 4
 * ranks on 2 CPUs, medians of 5 alternating launches, out of place, when
 * the blocks were still read: 1 MiB 263 -> 220 us, 64 KiB 42 -> 20
 * (docs/algorithms.md); through the rings since, 1 MiB 257-267 against
 * 177-187 (docs/performance-sets.md). Where senders push the
 * data (TCP) each block still waits for its sender to run, the two were
 * level, and pairwise, which never floods a link with p-1 messages at
 * once, wins the tie; so it does with a CPU per rank.
 *
 * In place (sendbuf == recvbuf) slot j is both the block for rank j and
 * the block from rank j = r-k, as in alltoall_pairwise.c: for k > p/2 the
 * block lands in its slot once our send to rank j has gone; for k <= p/2
 * in scratch, copied into its slot once that send has gone. The rank
 * across (j, whose k' = p-k < p/2) receives ours into scratch at once,
 * so no pair waits on itself. Until 2026-12-07 every block landed in
 * scratch and was copied once all our sends had gone: 4 ranks on 2 CPUs,
 * 5 alternating rounds of 20 calls, us: 1 MiB 338 -> 294, 16 MiB 5769 ->
 * 4375 (Open MPI 385 and 4753).
 *
 * The sends do not ask for one copy (COLL_TP_HINT_ONE_COPY): a send that
 * its receiver reads is done only once that receiver has run and read
 * it, and on a host with more ranks than CPUs blocks through the ring,
 * which the sender finishes itself, came faster. 4 ranks on 2 CPUs,
 * alternating rounds, us: in place (copies out of scratch wait for every
 * send; 5 rounds of 100 calls) 1 MiB 232 -> 205, 2 MiB 469 -> 398, 4 MiB
 * 1280 -> 794, 8 MiB 3481 -> 2153; out of place, 1 MiB 203-221 -> 177-187
 * in 3 runs of 8 rounds (Open MPI 190-223), 2 MiB 581 -> 330, 4 MiB 906
 * -> 645, 8 MiB 1975 -> 1372 (5 rounds of 20 calls); 16 MiB, whose
 * blocks exceed COLL_SHM_CMA_MAX and took the ring already, level. That
 * was on an AMD EPYC; on Intel CPUs shared memory reads them there anyway
 * (COLL_SHM_CMA_CROWDED, for every collective that reduces nothing).
 *
 * Cost: (p-1) alpha + n (p-1)/p beta, n = p * count * esize, plus one
 * wait (coll_pull_waits); out of place a local copy of n/p bytes, in
 * place floor(p/2)/p n bytes of scratch and of local copies. Any p.
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;
    char *held = NULL; /* in place: the block from rank r-k, k <= p/2, in slot k-1 */

    if (a->count == 0)
        return;
    coll_vid_t *sends = coll_sched_scratch(s, 2 * (size_t)p * sizeof(*sends)); /* [k-1] */
    coll_vid_t *recvs = sends ? sends + p : NULL;                              /* [k-1] */
    if (a->in_place && p > 1)
        held = coll_sched_scratch(s, (size_t)(p / 2) * bytes);
    if (!sends || (a->in_place && p > 1 && !held))
        return;
    /* The schedule starts ready steps last in, first out: the own block's
     * copy, added last, runs first, as in alltoall_pairwise.c. */
    if (!held) {
        for (int k = p - 1; k >= 1; k--) {
            int to = coll_mod(r + k, p), from = coll_mod(r - k, p);
            coll_sched_recv(s, coll_slot(a->recvbuf, from, bytes), bytes, from, 0, COLL_NODEPS);
            coll_sched_send(s, coll_slot(a->sendbuf, to, bytes), bytes, to, 0, COLL_NODEPS);
        }
        if (!a->in_place)
            coll_sched_copy(s, coll_slot(a->recvbuf, r, bytes), coll_slot(a->sendbuf, r, bytes),
                            bytes, COLL_NODEPS);
        return;
    }
    for (int k = p - 1; k >= 1; k--) {
        int to = coll_mod(r + k, p);
        sends[k - 1] = coll_sched_send(s, coll_slot(a->sendbuf, to, bytes), bytes, to, 0,
                                       COLL_NODEPS);
    }
    for (int k = p - 1; k >= 1; k--) {
        int from = coll_mod(r - k, p);
        if (2 * k > p) /* the slot went to `from` in send p-k */
            recvs[k - 1] = coll_sched_recv(s, coll_slot(a->recvbuf, from, bytes), bytes, from, 0,
                                           COLL_DEPS(sends[p - k - 1]));
        else
            recvs[k - 1] = coll_sched_recv(s, coll_slot(held, k - 1, bytes), bytes, from, 0,
                                           COLL_NODEPS);
    }
    for (int k = 1; 2 * k <= p; k++)
        coll_sched_copy(s, coll_slot(a->recvbuf, coll_mod(r - k, p), bytes),
                        coll_slot(held, k - 1, bytes), bytes,
                        COLL_DEPS(sends[p - k - 1], recvs[k - 1]));
}

const coll_algo_t coll_algo_alltoall_linear = {
    .coll = COLL_ALLTOALL,
    .name = "linear",
    .build = build,
    .cost = coll_cost_all_at_once,
};
