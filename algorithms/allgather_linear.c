/*
 * allgather_linear.c: every send and receive at once. Rank r sends its
 * block to each other rank and receives each other rank's block straight
 * into its place in recvbuf, all posted together in the order r+k / r-k
 * (k = 1 .. p-1), none waiting for another. Over a network the rank's
 * link carries the p-1 copies, the volume of the ring.
 *
 * The choice on a host with more ranks than CPUs where ranks share
 * memory: the ring forwards each block p-1 times, each time waiting for
 * one rank that is often not running, where here a rank that gets the CPU
 * moves every block to or from a partner that is ready (alltoall_linear.c
 * has the same reasoning). 4 ranks on 2 CPUs, medians of 4-6 alternating
 * launches, out of place: 64 KiB 28 -> 20 us, 1 MiB 270 -> 209 (its
 * blocks then read), 16 MiB 3.64 -> 2.66 ms. Where senders push the data (TCP)
 * each block waits for its sender to run anyway and linear was 7-12%
 * slower than the ring; there, and with a CPU per rank, the ring (listed
 * first) wins the tie.
 *
 * The sends do not ask for one copy (COLL_TP_HINT_ONE_COPY), for the
 * reason in alltoall_linear.c: read, a block's send is done only once
 * each receiver has run. 4 ranks on 2 CPUs, out / in place, us, 5
 * alternating rounds of 20 calls: 1 MiB 172 / 164 -> 166 / 155, 2 MiB
 * 324 / 292 -> 310 / 279, 4 MiB 871 / 581 -> 569 / 501, 8 MiB 1775 /
 * 1032 -> 1137 / 965; 4 rounds of 100 calls the same way; 256 KiB and
 * 16 MiB level. On Intel CPUs shared memory reads them there anyway
 * (COLL_SHM_CMA_CROWDED).
 *
 * Cost: (p-1) alpha + n (p-1)/p beta, n = p * count * esize, plus one
 * wait (coll_pull_waits). Any p. In place (sendbuf == recvbuf + r *
 * count) our block is already where it belongs; otherwise it is copied
 * there (n/p bytes).
 */
#include "algorithms.h"

static void build(coll_sched_t *s)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t bytes = a->count * a->esize;

    if (a->count == 0)
        return;
    for (int k = p - 1; k >= 1; k--) {
        int to = coll_mod(r + k, p), from = coll_mod(r - k, p);
        coll_sched_recv(s, coll_recv_block(a, from), bytes, from, 0, COLL_NODEPS);
        coll_sched_send(s, a->sendbuf, bytes, to, 0, COLL_NODEPS);
    }
    /* added last, started first (last in, first out), as in the ring */
    if (!a->in_place)
        coll_sched_copy(s, coll_recv_block(a, r), a->sendbuf, bytes, COLL_NODEPS);
}

const coll_algo_t coll_algo_allgather_linear = {
    .coll = COLL_ALLGATHER,
    .name = "linear",
    .build = build,
    .cost = coll_cost_all_at_once,
};
