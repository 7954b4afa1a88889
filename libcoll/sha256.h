/*
 * sha256.h: SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), used to
 * prove knowledge of the job secret on every connection without sending
 * the secret itself.
 */
#ifndef COLL_SHA256_H
#define COLL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define COLL_SHA256_BYTES 32

typedef struct coll_sha256 {
    uint32_t state[8];
    uint64_t total_bytes;
    uint8_t block[64];
    size_t block_len;
} coll_sha256_t;

void coll_sha256_init(coll_sha256_t *ctx);
void coll_sha256_update(coll_sha256_t *ctx, const void *data, size_t len);
void coll_sha256_final(coll_sha256_t *ctx, uint8_t out[COLL_SHA256_BYTES]);
void coll_sha256(const void *data, size_t len, uint8_t out[COLL_SHA256_BYTES]);

/* HMAC over the concatenation of `nparts` buffers. */
void coll_hmac_sha256(const void *key, size_t keylen, const void *const *parts,
                      const size_t *lens, int nparts, uint8_t out[COLL_SHA256_BYTES]);

/* Constant-time comparison: 1 when equal. */
int coll_mem_equal_ct(const void *a, const void *b, size_t len);

/* Fill `buf` from the kernel's CSPRNG (getrandom); 0 on success. */
int coll_random_bytes(void *buf, size_t len);

#endif /* COLL_SHA256_H */
