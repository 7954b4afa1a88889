/*
 * util.h: small helpers shared by every layer: error-check macros, time,
 * branch hints and an intrusive doubly linked list.
 */
#ifndef COLL_UTIL_H
#define COLL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "coll.h"

#define COLL_LIKELY(x)   __builtin_expect(!!(x), 1)
#define COLL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define COLL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define COLL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define COLL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define COLL_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Does [addr, addr + len) lie wholly in [base, base + span)? Written so
 * that no sum can wrap. */
static inline int coll_span_within(uint64_t addr, uint64_t len, uint64_t base, uint64_t span)
{
    return addr >= base && addr - base <= span && len <= span - (addr - base);
}

/* memset(p, 0, n) through the C library's vector stores. For a constant n
 * of a few hundred bytes GCC emits an inline `rep stosq`, whose start-up
 * cost (tens of cycles) made clearing a request and the call's arguments
 * about a tenth of a 16-byte all-reduce; hiding n keeps the libc call. */
static inline void coll_zero(void *p, size_t n)
{
    __asm__("" : "+r"(n));
    memset(p, 0, n);
}

#define coll_container_of(ptr, type, member) \
    ((type *)((char *)(ptr) - offsetof(type, member)))

/* Propagate an error; the callee already set the message and logged. */
#define COLL_CHECK(call)                                 \
    do {                                                 \
        coll_status_t check_status_ = (call);            \
        if (COLL_UNLIKELY(check_status_ < 0))            \
            return check_status_;                        \
    } while (0)

/* Same, but jump to the function's single cleanup label. */
#define COLL_CHECK_GOTO(call, status, label)             \
    do {                                                 \
        (status) = (call);                               \
        if (COLL_UNLIKELY((status) < 0))                 \
            goto label;                                  \
    } while (0)

/* ---- time ------------------------------------------------------------- */

static inline uint64_t coll_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The same clock to the kernel's tick (a few ms), for about a tenth of
 * the cost: for records that say how long something took, not for
 * deadlines below a second. */
static inline uint64_t coll_time_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double coll_time_sec(void)
{
    return (double)coll_time_ns() * 1e-9;
}

/* A spinning wait's pause between two looks at memory another core
 * writes: frees the core's resources for a hyper-thread sibling and
 * saves the pipeline flush when the store arrives. */
static inline void coll_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* Milliseconds from now until `deadline_ns`, clamped to [0, cap_ms]. */
static inline int coll_ms_until(uint64_t deadline_ns, int cap_ms)
{
    uint64_t now = coll_time_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999) / 1000000;
    return ms > (uint64_t)cap_ms ? cap_ms : (int)ms;
}

/* ---- intrusive list (circular, with a sentinel head) ------------------ */

typedef struct coll_list {
    struct coll_list *prev, *next;
} coll_list_t;

static inline void coll_list_init(coll_list_t *head)
{
    head->prev = head->next = head;
}

static inline int coll_list_empty(const coll_list_t *head)
{
    return head->next == head;
}

static inline void coll_list_insert_after(coll_list_t *pos, coll_list_t *item)
{
    item->prev = pos;
    item->next = pos->next;
    pos->next->prev = item;
    pos->next = item;
}

static inline void coll_list_push_back(coll_list_t *head, coll_list_t *item)
{
    coll_list_insert_after(head->prev, item);
}

static inline void coll_list_del(coll_list_t *item)
{
    item->prev->next = item->next;
    item->next->prev = item->prev;
    item->prev = item->next = item;
}

#define coll_list_first(head, type, member) \
    coll_container_of((head)->next, type, member)

#define coll_list_for_each_safe(pos, tmp, head) \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
         (pos) = (tmp), (tmp) = (pos)->next)

#endif /* COLL_UTIL_H */
