/*
 * copy.c: the copy loop for the distances where memcpy is slow (copy.h).
 */
#include "copy.h"

/* unaligned 16-byte vectors: SSE2 moves on x86-64, which every CPU has */
typedef unsigned char coll_v16_t __attribute__((vector_size(16), aligned(1)));

/* The compiler would otherwise see the loop as a memcpy and call it. */
#if defined(__clang__)
#define COPY_LOOP_ATTR __attribute__((no_builtin("memcpy")))
#elif defined(__GNUC__)
#define COPY_LOOP_ATTR __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define COPY_LOOP_ATTR
#endif

COPY_LOOP_ATTR
void coll_copy_loop(void *dst, const void *src, size_t len)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t i = 0;

    for (; i + 64 <= len; i += 64) {
        coll_v16_t a = *(const coll_v16_t *)(s + i), b = *(const coll_v16_t *)(s + i + 16);
        coll_v16_t c = *(const coll_v16_t *)(s + i + 32), e = *(const coll_v16_t *)(s + i + 48);
        *(coll_v16_t *)(d + i) = a;
        *(coll_v16_t *)(d + i + 16) = b;
        *(coll_v16_t *)(d + i + 32) = c;
        *(coll_v16_t *)(d + i + 48) = e;
    }
    if (i < len)
        memcpy(d + i, s + i, len - i); /* under 64 bytes: never `rep movsb` */
}
