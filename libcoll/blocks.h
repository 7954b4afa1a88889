/*
 * blocks.h: a few large heap blocks kept for reuse, so that memory which a
 * path needs again and again stays mapped.
 *
 * A block of 64 KiB or more from malloc is mostly fresh memory (its own
 * mmap, or heap grown again after free trimmed it), and the first write to
 * each of its 4 KiB pages faults. That costs about 0.25 us a page on bare
 * metal, and 9-10 us in a VM whose host hands back guest memory that the
 * guest freed (the development machine since 2026-12: a 512 KiB block
 * costs 1.2 ms to fault in, against 4 us to write once mapped;
 * docs/performance-sets.md, "Fresh pages"). Smaller blocks come from malloc's
 * free lists, already mapped. Users: the schedules' scratch (schedule.c),
 * the payloads of eager messages that arrive before their receive
 * (transports/util/match.h).
 *
 * Not thread-safe: each cache belongs to one communicator and is used under
 * its lock.
 */
#ifndef COLL_BLOCKS_H
#define COLL_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

/* Blocks below this are not kept. */
#define COLL_BLOCKS_MIN (64u * 1024)
#define COLL_BLOCKS_SLOTS_MAX 8

typedef struct coll_blocks {
    int nslots;     /* how many blocks it keeps, at most COLL_BLOCKS_SLOTS_MAX */
    uint64_t gives; /* blocks given so far: the order they came back in */
    struct {
        void *p;
        size_t len;
        uint64_t given; /* `gives` when it came back */
    } slot[COLL_BLOCKS_SLOTS_MAX];
} coll_blocks_t;

/* An empty cache that keeps up to `nslots` blocks. */
void coll_blocks_init(coll_blocks_t *c, int nslots);

/* A block of at least `bytes` (at least 1): the smallest kept block that
 * holds it (of equal ones the last given back, the likeliest in cache),
 * else malloc's; *len_p is set to its length, which
 * coll_blocks_give takes back. NULL when out of memory. c may be NULL
 * (plain malloc). */
void *coll_blocks_take(coll_blocks_t *c, size_t bytes, size_t *len_p);

/* Done with block p of len bytes (from coll_blocks_take): kept in a free
 * slot, or in place of the smallest kept block where that is smaller;
 * freed otherwise. c may be NULL (plain free). */
void coll_blocks_give(coll_blocks_t *c, void *p, size_t len);

/* Free every kept block. */
void coll_blocks_release(coll_blocks_t *c);

#endif /* COLL_BLOCKS_H */
