/*
 * comm_lock.h: the communicator's lock, biased to the thread that uses it.
 *
 * Most programs call a communicator from one thread. A mutex costs that
 * thread two locked instructions per call, and each waits for the call's
 * stores (the peer's mailbox line, say) to leave the core: on 2 ranks
 * with shared memory, a tenth of a small broadcast (docs/performance-sets.md).
 * So the first thread that makes a call other than a query, destroy or
 * abort owns a bias: from its next call on it enters by storing bias.in =
 * 1 and reading bias.revoked, plain instructions. Any other thread that
 * wants the lock takes the mutex, sets bias.revoked, and issues
 * membarrier(2), which runs a full barrier
 * on every CPU running a thread of this process: after it, either the
 * owner's store of bias.in is visible (and the other thread waits for it
 * to go back to 0) or the owner's next read of bias.revoked sees 1 (and
 * the owner takes the mutex instead). From then on every thread,
 * the owner included, uses the mutex: revocation is for good.
 *
 * Holding the lock by either way is the same to the code under it; only
 * coll_comm_lock/unlock and coll_comm_cond_wait know the difference.
 */
#ifndef COLL_COMM_LOCK_H
#define COLL_COMM_LOCK_H

#include <pthread.h>

struct coll_comm;

typedef struct coll_comm_bias {
    const void *owner; /* atomic: the owning thread's token (coll_thread_token); NULL: none */
    int in;            /* atomic: the owner holds the lock through the bias */
    int revoked;       /* atomic: another thread took the lock; set once */
    int allowed;       /* COLL_LOCK_BIAS and membarrier(2) available */
    int held;          /* the current hold came through the bias (read by its holder) */
    int rank;          /* for messages */
} coll_comm_bias_t;

/* Its address names the calling thread. */
extern __thread char coll_thread_token;

/* At creation: whether the communicator of `rank` may be biased. */
void coll_comm_bias_init(coll_comm_bias_t *bias, int rank);
/* The mutex, revoking another thread's bias. */
void coll_comm_lock_slow(pthread_mutex_t *mutex, coll_comm_bias_t *bias);
/* Called holding the lock by every call but a query, destroy or abort:
 * the first such thread owns the bias from its next call on. */
void coll_comm_claim_bias(coll_comm_bias_t *bias);

static inline void coll_comm_lock_raw(pthread_mutex_t *mutex, coll_comm_bias_t *bias)
{
    if (__atomic_load_n(&bias->owner, __ATOMIC_RELAXED) == &coll_thread_token) {
        __atomic_store_n(&bias->in, 1, __ATOMIC_RELAXED);
        /* only the compiler must keep the store before the load; the
         * revoking thread's membarrier orders them on the CPU */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&bias->revoked, __ATOMIC_ACQUIRE)) {
            bias->held = 1;
            return;
        }
        __atomic_store_n(&bias->in, 0, __ATOMIC_RELEASE);
    }
    coll_comm_lock_slow(mutex, bias);
}

static inline void coll_comm_unlock_raw(pthread_mutex_t *mutex, coll_comm_bias_t *bias)
{
    if (bias->held) {
        bias->held = 0;
        __atomic_store_n(&bias->in, 0, __ATOMIC_RELEASE);
        return;
    }
    pthread_mutex_unlock(mutex);
}

#define coll_comm_lock(comm) coll_comm_lock_raw(&(comm)->lock, &(comm)->bias)
#define coll_comm_unlock(comm) coll_comm_unlock_raw(&(comm)->lock, &(comm)->bias)

/* Wait on `cond` (a CLOCK_MONOTONIC condition variable) for at most `ms`
 * milliseconds with the lock released. A hold through the bias has no
 * mutex for the condition variable to release: it sleeps up to 1 ms
 * without the lock instead (a second thread, the only one that could
 * signal, revokes the bias first, so this is the rare case). */
void coll_comm_cond_wait(pthread_mutex_t *mutex, coll_comm_bias_t *bias, pthread_cond_t *cond,
                         int ms);

#endif
