/*
 * crc32c.c: CRC-32C, by the SSE4.2 crc32 instruction (8 bytes per step)
 * where the CPU has it, else by a byte table built once. The running value
 * is kept inverted between calls in the usual way (init ~0, final ~), so
 * coll_crc32c(coll_crc32c(0, a, n), b, m) is the checksum of a then b.
 */
#include <pthread.h>
#include <string.h>

#include "crc32c.h"

#define CRC32C_POLY 0x82f63b78u

static uint32_t crc_table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
        crc_table[i] = c;
    }
}

uint32_t coll_crc32c_table(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;

    pthread_once(&table_once, table_init);
    crc = ~crc;
    while (len--)
        crc = (crc >> 8) ^ crc_table[(crc ^ *p++) & 0xff];
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *buf,
                                                               size_t len)
{
    const uint8_t *p = buf;
    uint64_t c = ~crc;

    for (; len >= 8; p += 8, len -= 8) {
        uint64_t v;
        memcpy(&v, p, 8); /* unaligned */
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}

static int have_sse42(void)
{
    static int known = -1; /* benign race: every thread computes the same */
    if (known < 0)
        known = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    return known;
}
#endif

uint32_t coll_crc32c(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
    if (have_sse42())
        return crc32c_sse42(crc, buf, len);
#endif
    return coll_crc32c_table(crc, buf, len);
}

/* The frame counter is process-wide so that a test can pick "the N-th
 * frame" without knowing which communicator or transport carries it. */
static int64_t corrupt_seen;

int coll_test_corrupt_due(int64_t n, size_t payload_len)
{
    return n > 0 && payload_len >= COLL_TEST_CORRUPT_MIN &&
           __atomic_add_fetch(&corrupt_seen, 1, __ATOMIC_RELAXED) == n;
}
