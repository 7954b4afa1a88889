/*
 * algorithms.h: collective algorithms, one file each, written only against
 * the schedule interface of schedule.h (which is itself built on the
 * communicator's point-to-point layer). An algorithm builds the steps of
 * one call; it never touches sockets, and it reads only the call's
 * arguments, this rank and the number of ranks.
 *
 * Each algorithm is registered in registry.c with the restrictions under
 * which it runs and its alpha-beta-gamma cost:
 *   alpha  seconds per message (latency and per-message overhead)
 *   beta   seconds per byte on a link
 *   gamma  seconds per byte reduced locally
 * The cheapest usable algorithm runs unless COLL_ALGO names one. Every
 * rank must choose the same algorithm for a call, so every input of the
 * choice is agreed across ranks at init (comm.c agree_costs).
 */
#ifndef COLL_ALGORITHMS_H
#define COLL_ALGORITHMS_H

#include "schedule.h"

/* Inputs of a cost formula. */
typedef struct coll_cost_in {
    double p;       /* ranks */
    double n;       /* bytes of the vector the formula's header names */
    double alpha, beta, gamma;
    double copy;    /* seconds per byte of a local copy */
    double chunk;   /* pipeline chunk, bytes */
    int det;        /* COLL_DETERMINISTIC: cost the deterministic form */
    double crowd;   /* ranks per CPU on the most crowded host; above 1: some
                       host runs more ranks than it has CPUs for them */
    int pull;       /* every pair's transport lets a receiver copy a message out
                       of the sender's memory: data moves on the receiver's CPU */
    int one_host;   /* every rank on one host: what moves the bytes is CPUs, no wire */
} coll_cost_in_t;

typedef struct coll_algo {
    coll_coll_t coll;
    const char *name;
    /* Add the steps of this call to s. */
    void (*build)(coll_sched_t *s);
    /* NULL: always usable. Else 0 when it cannot run this call, with a
     * reason for COLL_ALGO users. */
    int (*usable)(const coll_args_t *a, int nranks, const char **why);
    /* Predicted seconds. */
    double (*cost)(const coll_cost_in_t *c);
} coll_algo_t;

/* Each algorithm file defines its entry, `const coll_algo_t
 * coll_algo_<collective>_<name>`, and each family of collectives lists its
 * entries in a NULL-terminated array in list_<family>.c. */
extern const coll_algo_t *const coll_algos_core[];      /* list_core.c: barrier, allreduce */
extern const coll_algo_t *const coll_algos_reduce[];    /* list_reduce.c: reduce, reduce_scatter */
extern const coll_algo_t *const coll_algos_rooted[];    /* list_rooted.c: bcast, scatter, gather */
extern const coll_algo_t *const coll_algos_exchange[];  /* list_exchange.c: allgather, alltoall(v) */

/* The registry (registry.c). */
const coll_algo_t *coll_algo_find(coll_coll_t coll, const char *name);
/* Call fn for every algorithm of `coll` (all collectives if COLL_NUM_COLLS). */
void coll_algo_foreach(coll_coll_t coll, void (*fn)(const coll_algo_t *algo, void *arg), void *arg);
/* Parse COLL_ALGO ("allreduce:ring,bcast:binomial") into forced[coll]
 * (NULL where nothing is forced). */
coll_status_t coll_algo_parse_forced(const char *spec, const coll_algo_t *forced[COLL_NUM_COLLS]);
/* COLL_ALGO_FALLBACK: what a forced algorithm that cannot run a call does. */
typedef enum coll_algo_fallback {
    COLL_ALGO_FALLBACK_ERROR,   /* the call fails with COLL_ERR_INVALID_USAGE */
    COLL_ALGO_FALLBACK_WARN,    /* log, then let the cost model choose */
    COLL_ALGO_FALLBACK_SILENT,  /* let the cost model choose */
} coll_algo_fallback_t;
coll_status_t coll_algo_parse_fallback(const char *spec, int *mode_p);
/* Choose the algorithm for a call (forced, checked, or cheapest). */
coll_status_t coll_algo_select(struct coll_comm *comm, const coll_args_t *a,
                               const coll_algo_t **algo_p);

/* Reduce `count` elements of every rank's src along the chain 0 -> 1 ->
 * ... -> p-1 (rank order: the deterministic result) into `result` on rank
 * p-1, in pipelined chunks with mtags tag_base + chunk. Returns a vertex
 * after which this rank's part is done (result complete on rank p-1, src
 * free again elsewhere). chain_reduce.c. */
coll_vid_t coll_chain_reduce(coll_sched_t *s, const void *src, void *result, size_t count,
                             uint32_t tag_base);

/* The ring reduce-scatter for pipeline chunk j of nch (ch elements each),
 * reading src and accumulating in work (same layout as the call's
 * vector; may be src): afterwards chunk j of block (rank+1) mod p of work
 * is reduced over all ranks. tmp0/tmp1 hold one chunk each, used only
 * when work is src (in place; otherwise they may be NULL); rs_send[t] gets the step-t send (its region may be overwritten once it
 * completes). The first send waits for `after` (-1: nothing). mtags
 * t * nch + j, t < p-1. Returns the last reduce.
 * ring_reduce_scatter.c. */
coll_vid_t coll_ring_rs_chunk(coll_sched_t *s, const void *src, void *work, size_t j, size_t nch,
                              size_t ch, void *tmp0, void *tmp1, coll_vid_t *rs_send,
                              coll_vid_t after);
/* Chunk j of block b of the call's vector: elements [*off, *off + return). */
size_t coll_ring_chunk(const coll_args_t *a, int p, size_t ch, int b, size_t j, size_t *off);

/* Costs shared by several formulas: the extra steps of folding a
 * non-power-of-two p (2 alpha + 2 n beta, + n gamma when it reduces). */
double coll_cost_fold(const coll_cost_in_t *c, int reduces);

/* ---- helpers shared by algorithms ---------------------------------------- */

/* x mod p in 0 .. p-1 for any x (rank r - k wraps around). */
static inline int coll_mod(int x, int p)
{
    return ((x % p) + p) % p;
}

/* Block j of a buffer of blocks of `bytes` each (all-to-all). */
static inline char *coll_slot(const void *buf, int j, size_t bytes)
{
    return (char *)buf + (size_t)j * bytes;
}

/* Block b of `count` elements split into p blocks: the first count % p
 * blocks hold one element more. */
static inline size_t coll_block_count(size_t count, int p, int b)
{
    return count / (size_t)p + ((size_t)b < count % (size_t)p);
}

static inline size_t coll_block_offset(size_t count, int p, int b)
{
    size_t base = count / (size_t)p, extra = count % (size_t)p;
    return (size_t)b * base + ((size_t)b < extra ? (size_t)b : extra);
}

static inline int coll_pow2_floor(int p)
{
    int q = 1;
    while (q * 2 <= p)
        q *= 2;
    return q;
}

static inline double coll_log2(double p)
{
    int k = 0;
    while ((1 << k) < (int)p)
        k++;
    return k; /* ceil(log2 p) */
}

/* How many times slower than one transfer alone a step runs whose m
 * transfers (of equal size, at once) share the CPUs of a crowded host.
 * Each transfer keeps two CPUs copying (the sender's into the socket or
 * ring, the receiver's out of it), and beta is probed with one transfer
 * whose two ends each have a CPU. The most crowded host holds its share
 * of the step's 2 m copies and one CPU per `crowd` ranks, so the copies
 * get at most 1 / (2 m crowd / p) of a CPU each. 1 unless crowd > 1: where
 * every rank has a CPU the measured choices stand as they are. */
static inline double coll_cpu_share(const coll_cost_in_t *c, double m)
{
    double f = c->p > 0 ? 2 * m * c->crowd / c->p : 1;
    return c->crowd > 1 && f > 1 ? f : 1;
}

/* Scratch bytes of the deterministic halving forms (allreduce butterfly,
 * reduce_scatter recursive_halving) for an n-byte vector on p ranks: each
 * of the log2 p' steps packs the half it gives up of the rows it holds
 * (n/2) and gathers the kept halves of twice as many rows (n); a folded-in
 * rank holds two rows from the start, which doubles both and adds the
 * two-row copy of 2n. */
static inline double coll_det_halving_scratch(double n, int p)
{
    int p2 = coll_pow2_floor(p), steps = 0;
    while ((1 << steps) < p2)
        steps++;
    return p2 == p ? 1.5 * n * steps : 3 * n * steps + 2 * n;
}

/* Folding for recursive algorithms on p ranks that are not a power of
 * two: with p2 the largest power of two <= p and rem = p - p2, ranks
 * 2i and 2i+1 (i < rem) pair up: the even one gives its data to the odd one
 * and sits out; the odd ones and the ranks >= 2 rem take part as virtual
 * ranks 0 .. p2-1. Consecutive virtual ranks map to consecutive real ranks,
 * so a block of virtual ranks is a contiguous range of real ranks. */
static inline int coll_fold_vrank(int r, int rem)
{
    return r < 2 * rem ? (r % 2 ? r / 2 : -1) : r - rem;
}

/* The real rank that plays virtual rank v. */
static inline int coll_fold_rank(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

/* First real rank whose data virtual rank v holds after folding. */
static inline int coll_fold_first(int v, int rem)
{
    return v < rem ? 2 * v : v + rem;
}

/* Elements per pipeline chunk for this call (COLL_PIPELINE_CHUNK). */
size_t coll_chunk_elems(const coll_args_t *a);
/* A reduction on one rank: the result is the rank's own vector, finished
 * for the average as every algorithm finishes it. */
void coll_sched_one_rank(coll_sched_t *s);
/* This process's measured seconds per byte of the reduction kernel and of
 * memcpy (once per process; communicators agree on the maximum). */
void coll_measure_local_costs(double *gamma_p, double *copy_p);

/* In a poll function: return the call's status unless it is COLL_OK, so
 * that COLL_INPROGRESS (run the step again) goes back too; COLL_CHECK
 * passes it. */
#define COLL_POLL_CHECK(call)                       \
    do {                                            \
        coll_status_t poll_status_ = (call);        \
        if (poll_status_ != COLL_OK)                \
            return poll_status_;                    \
    } while (0)

/* Mailbox algorithms (one poll step; schedule.h; mbox.c). Usable with
 * mailboxes toward every rank that hold `bytes`; *why otherwise. */
int coll_mbox_usable(const coll_args_t *a, int nranks, size_t bytes, const char **why);
/* Inside a poll function: write `len` bytes at base + k * stride to every
 * other rank k (stride 0: the same bytes to all; rank + 1 first; *step
 * counts the writes done); COLL_INPROGRESS until all are written. */
coll_status_t coll_mbox_put_all(coll_sched_t *s, const void *base, size_t stride, size_t len,
                                uint32_t *step);
/* coll_mbox_put_all, then COLL_OK once a `len`-byte message from every
 * other rank is there, COLL_INPROGRESS before. */
coll_status_t coll_mbox_exchange(coll_sched_t *s, const void *base, size_t stride, size_t len,
                                 uint32_t *step);
/* The cost of `waits` steps that each wait for one particular rank, on a
 * host with more ranks than CPUs: that rank is often not running, so a
 * switch to it and back (2 alpha) per wait; 0 where every rank has a CPU. */
static inline double coll_crowded_waits(const coll_cost_in_t *c, double waits)
{
    return c->crowd > 1 ? 2 * waits * c->alpha : 0;
}

/* coll_crowded_waits of an exchange's steps, counted only where receivers
 * read the senders' memory (c->pull): there a step waits for its partner
 * to run, and an exchange that posts everything at once waits once. Where
 * senders push (TCP) a step's data waits for its sender to run either
 * way, and the kernel's socket buffers let ranks run ahead: 4 ranks on 2
 * CPUs, all-gather of 16 MiB, the ring 11.7 ms against recursive
 * doubling's 13.9 (4 alternating launches), so steps are not priced there. */
static inline double coll_pull_waits(const coll_cost_in_t *c, double waits)
{
    return c->pull ? coll_crowded_waits(c, waits) : 0;
}

/* An exchange that posts all its p-1 sends and receives at once (the
 * linear all-gather and all-to-all): (p-1) alpha + n (p-1)/p beta and one
 * wait. */
static inline double coll_cost_all_at_once(const coll_cost_in_t *c)
{
    double q = c->p - 1;
    return q * c->alpha + c->n * q / c->p * c->beta + coll_pull_waits(c, 1);
}

/* The extra cost of a rooted mailbox algorithm (bcast, reduce, gather,
 * scatter oneshot) on a host with more ranks than CPUs: p-1 such waits.
 * Each call waits on particular ranks (the root for a free slot, a leaf
 * for the root's message), where messages let ranks run ahead through the
 * transport's buffers. 4 ranks on 2 CPUs, 64 B, with two mailbox slots:
 * 1.4 us a call against 0.4-0.6 us with the trees (with eight, whose
 * root runs further ahead, the broadcast's 0.78 against 0.83); the
 * reduce is 2.6x faster at 4 KiB, all are faster at 16 KiB. */
static inline double coll_mbox_rooted_wait(const coll_cost_in_t *c)
{
    return coll_crowded_waits(c, c->p - 1);
}

/* Release every other rank's message (after coll_mbox_exchange). */
coll_status_t coll_mbox_release_all(coll_sched_t *s);
/* Inside a poll function: once a `count`-element message from every other
 * rank is there, dst = the p vectors (own for this rank's) combined in
 * rank order with the call's op, finished for the average, and the
 * messages released; COLL_INPROGRESS, with nothing written, before. dst
 * may be own when this rank is 0 or 1 (whose vector goes in first). */
coll_status_t coll_mbox_combine(coll_sched_t *s, void *dst, const void *own, size_t count);
/* Add the poll step of a coll_mbox_combine user: with in_place, ranks
 * above 1 (whose vector goes in after the first combination has
 * overwritten it) first copy `own` (count elements) to scratch, and the
 * step gets the copy as its arg; otherwise its arg is NULL. */
void coll_mbox_combine_step(coll_sched_t *s, coll_sched_poll_fn poll, const void *own,
                            int in_place);
/* The build of the copying mailbox forms: nothing for count 0; else,
 * when copy_own, block dst_block of dst = block src_block of src (blocks
 * of count elements), and the poll step (arg NULL) beside it: the two
 * touch different blocks. */
void coll_mbox_copy_step(coll_sched_t *s, coll_sched_poll_fn poll, int copy_own, void *dst,
                         size_t dst_block, const void *src, size_t src_block);
/* Inside a poll function: once a block (count elements) from every other
 * rank k is there, copy each to block k of recvbuf and release them all;
 * COLL_INPROGRESS, with nothing copied, before. */
coll_status_t coll_mbox_take_blocks(coll_sched_t *s, void *recvbuf);
/* Inside a poll function: copy peer's message (count elements) to dst and
 * release it; COLL_INPROGRESS until it is there. */
coll_status_t coll_mbox_take(coll_sched_t *s, int peer, void *dst);
/* The usable check of a mailbox algorithm whose messages hold count
 * elements (a vector, or one block). */
int coll_mbox_usable_count(const coll_args_t *a, int nranks, const char **why);

/* Byte pointer arithmetic on user buffers. */
#define COLL_PTR(buf, elems, esize) ((void *)((char *)(buf) + (elems) * (esize)))

/* Block b of an all-gather's receive buffer (count elements each). */
static inline void *coll_recv_block(const coll_args_t *a, int b)
{
    return COLL_PTR(a->recvbuf, (size_t)b * a->count, a->esize);
}

/* ---- the algorithms ---------------------------------------------------------- */

extern const coll_algo_t coll_algo_barrier_dissemination, coll_algo_barrier_oneshot;
extern const coll_algo_t coll_algo_allreduce_ring, coll_algo_allreduce_butterfly,
    coll_algo_allreduce_recursive_doubling, coll_algo_allreduce_parallel,
    coll_algo_allreduce_naive, coll_algo_allreduce_oneshot;
extern const coll_algo_t coll_algo_reduce_binomial, coll_algo_reduce_rabenseifner,
    coll_algo_reduce_oneshot, coll_algo_reduce_scatter_ring,
    coll_algo_reduce_scatter_recursive_halving, coll_algo_reduce_scatter_pairwise,
    coll_algo_reduce_scatter_oneshot;
extern const coll_algo_t coll_algo_bcast_binomial, coll_algo_bcast_chain,
    coll_algo_bcast_scatter_allgather, coll_algo_bcast_oneshot, coll_algo_scatter_binomial,
    coll_algo_scatter_linear, coll_algo_scatter_oneshot, coll_algo_gather_binomial,
    coll_algo_gather_linear, coll_algo_gather_oneshot;
extern const coll_algo_t coll_algo_allgather_ring, coll_algo_allgather_recursive_doubling,
    coll_algo_allgather_bruck, coll_algo_allgather_oneshot, coll_algo_allgather_linear,
    coll_algo_alltoall_pairwise,
    coll_algo_alltoall_bruck, coll_algo_alltoall_oneshot, coll_algo_alltoall_linear,
    coll_algo_alltoallv_pairwise;

#endif /* COLL_ALGORITHMS_H */
