/*
 * copy.h: the library's bulk copy: memcpy, except where glibc's memcpy is
 * many times slower than it should be.
 *
 * glibc 2.36 on this machine's AMD EPYC copies from just over 2 KiB to
 * just under 512 KiB with `rep movsb`, which runs at 2.5-2.8 GB/s when
 * the destination lies 1 to 31 bytes after the source modulo 4 KiB,
 * against 17-78 GB/s at any other distance (`reduce_bench -d`). Such
 * distances are common: malloc returns large blocks 16 bytes into a
 * page, and a shared-memory ring record's payload starts 32 bytes into a
 * cache line, so a copy from a malloc'd buffer into the ring met one at
 * every 64th ring position, 45 us instead of 4 for a 128 KiB piece. At
 * those distances and sizes we copy with 16-byte vector moves instead
 * (30-48 GB/s). The kernel's copies (process_vm_readv, sockets) have the
 * same trouble and are out of our reach: the shared-memory transport's
 * choice between reading and its ring (COLL_SHM_CMA_ADAPT) sees a read
 * made slow by it as a dear read.
 */
#ifndef COLL_COPY_H
#define COLL_COPY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The sizes where memcpy takes `rep movsb` here (above 2 KiB, below the
 * 512 KiB L2; the loop is 10-20% slower than memcpy from 512 KiB up). */
#define COLL_COPY_LOOP_MIN (2u << 10)
#define COLL_COPY_LOOP_MAX (512u << 10)

void coll_copy_loop(void *dst, const void *src, size_t len);

/* Is dst 1-31 bytes after src modulo the page? */
static inline int coll_copy_slow_distance(const void *dst, const void *src)
{
    uintptr_t d = ((uintptr_t)dst - (uintptr_t)src) & 4095u;

    return d != 0 && d < 32;
}

/* memcpy(dst, src, len) for bulk data, avoiding its slow distances; it
 * accepts the NULL buffers of zero-byte messages (memcpy itself may not be
 * given NULL, even for zero bytes). */
static inline void coll_copy(void *dst, const void *src, size_t len)
{
#if defined(__x86_64__)
    if (len > COLL_COPY_LOOP_MIN && len < COLL_COPY_LOOP_MAX &&
        coll_copy_slow_distance(dst, src)) {
        coll_copy_loop(dst, src, len);
        return;
    }
#endif
    if (len)
        memcpy(dst, src, len);
}

/* coll_copy with non-temporal stores at any size, where the CPU has them
 * (reduce.c, with the vector kernels): for data the call will not read
 * again when its buffers outgrow the cache (COLL_TP_HINT_STREAM). */
void coll_copy_stream(void *dst, const void *src, size_t len);

#endif /* COLL_COPY_H */
