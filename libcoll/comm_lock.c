/*
 * comm_lock.c: the slow side of the communicator's biased lock (see
 * comm_lock.h): claiming the bias, revoking it, and condition waits.
 */
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "comm_lock.h"
#include "log.h"
#include "param.h"

__thread char coll_thread_token;

/* ThreadSanitizer cannot see the order membarrier(2) gives the owner's
 * plain accesses, so it would report every hand-over as a race: under it
 * the lock is always the mutex. */
#if defined(__SANITIZE_THREAD__)
#define BIAS_BUILD 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BIAS_BUILD 0
#endif
#endif
#ifndef BIAS_BUILD
#define BIAS_BUILD 1
#endif

void coll_comm_bias_init(coll_comm_bias_t *bias, int rank)
{
    int on = 0;

    *bias = (coll_comm_bias_t){.rank = rank};
    if (!BIAS_BUILD || coll_param_bool(COLL_PARAM_LOCK_BIAS, &on) != COLL_OK || !on)
        return;
    /* Per communicator, not once per process: a forked child is not
     * registered, whatever its parent was; registering again is cheap. */
    bias->allowed = syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    if (!bias->allowed)
        COLL_INFO(COLL_SUBSYS_INIT, "rank %d: membarrier(2) is not available: the "
                  "communicator locks a mutex on every call", rank);
}

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* Called holding the mutex. The owner leaves its hold within a call or at
 * its next sleep, as it would release the mutex. */
static void revoke_bias(coll_comm_bias_t *bias)
{
    __atomic_store_n(&bias->revoked, 1, __ATOMIC_RELAXED);
    /* Cannot fail once registered (coll_comm_bias_init). */
    (void)syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    while (__atomic_load_n(&bias->in, __ATOMIC_ACQUIRE))
        sleep_us(20);
    COLL_INFO(COLL_SUBSYS_INIT, "rank %d: a second thread calls in: the communicator's lock "
              "is a mutex from now on", bias->rank);
}

void coll_comm_lock_slow(pthread_mutex_t *mutex, coll_comm_bias_t *bias)
{
    pthread_mutex_lock(mutex);
    const void *owner = __atomic_load_n(&bias->owner, __ATOMIC_RELAXED);
    if (owner && owner != &coll_thread_token && !__atomic_load_n(&bias->revoked, __ATOMIC_RELAXED))
        revoke_bias(bias);
    bias->held = 0; /* the owner's field until it is out */
}

void coll_comm_claim_bias(coll_comm_bias_t *bias)
{
    if (bias->allowed && !bias->held && !__atomic_load_n(&bias->owner, __ATOMIC_RELAXED) &&
        !__atomic_load_n(&bias->revoked, __ATOMIC_RELAXED))
        __atomic_store_n(&bias->owner, &coll_thread_token, __ATOMIC_RELAXED);
}

void coll_comm_cond_wait(pthread_mutex_t *mutex, coll_comm_bias_t *bias, pthread_cond_t *cond,
                         int ms)
{
    struct timespec ts;

    if (bias->held) {
        coll_comm_unlock_raw(mutex, bias);
        sleep_us(1000L * (ms < 1 ? ms : 1));
        coll_comm_lock_raw(mutex, bias);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cond, mutex, &ts);
}
