/*
 * crc32c.h: CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the
 * checksum of iSCSI, ext4 and SCTP, for COLL_CHECKSUM: every transport
 * frame carries one so that a corrupted frame is reported, never delivered.
 *
 * Usage: crc = coll_crc32c(0, buf, len); continue a running checksum over
 * the next bytes with coll_crc32c(crc, more, n). The SSE4.2 instruction
 * is used where the CPU has it, a table otherwise; both give the same bits.
 */
#ifndef COLL_CRC32C_H
#define COLL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t coll_crc32c(uint32_t crc, const void *buf, size_t len);
/* The table-driven version alone (for tests: it must equal the other). */
uint32_t coll_crc32c_table(uint32_t crc, const void *buf, size_t len);

/* Test hook COLL_TEST_CORRUPT_FRAME=n (param.h; the core reads it into
 * coll_tp_params_t.test_corrupt_frame): counts the data frames of at least
 * COLL_TEST_CORRUPT_MIN payload bytes that this process receives, over
 * every communicator and transport, and returns 1 for the n-th, whose first
 * payload byte the transport then flips before checking it, as a bad link
 * would. The minimum keeps init's own small messages out of the count, so
 * that n = 1 is the program's first message of that size. */
#define COLL_TEST_CORRUPT_MIN 64
int coll_test_corrupt_due(int64_t n, size_t payload_len);

#endif /* COLL_CRC32C_H */
