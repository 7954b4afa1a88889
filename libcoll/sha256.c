/*
 * sha256.c: a compact SHA-256 and HMAC-SHA-256. Speed does not matter
 * here (a few hashes per connection); clarity and correctness do, and the
 * test suite checks both against published vectors.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "sha256.h"

static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t rotr(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void compress(uint32_t state[8], const uint8_t block[64])
{
    uint32_t w[64], v[8];

    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)block[4 * i] << 24 | (uint32_t)block[4 * i + 1] << 16 |
               (uint32_t)block[4 * i + 2] << 8 | (uint32_t)block[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, state, sizeof(v));
    for (int i = 0; i < 64; i++) {
        uint32_t e = v[4], a = v[0];
        uint32_t t1 = v[7] + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) +
                      ((e & v[5]) ^ (~e & v[6])) + round_constants[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) +
                      ((a & v[1]) ^ (a & v[2]) ^ (v[1] & v[2]));
        memmove(&v[1], &v[0], 7 * sizeof(uint32_t));
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        state[i] += v[i];
}

void coll_sha256_init(coll_sha256_t *ctx)
{
    static const uint32_t initial[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                        0xa54ff53a, 0x510e527f, 0x9b05688c,
                                        0x1f83d9ab, 0x5be0cd19};
    memcpy(ctx->state, initial, sizeof(initial));
    ctx->total_bytes = 0;
    ctx->block_len = 0;
}

void coll_sha256_update(coll_sha256_t *ctx, const void *data, size_t len)
{
    const uint8_t *p = data;

    ctx->total_bytes += len;
    while (len > 0) {
        size_t take = 64 - ctx->block_len;
        if (take > len)
            take = len;
        memcpy(ctx->block + ctx->block_len, p, take);
        ctx->block_len += take;
        p += take;
        len -= take;
        if (ctx->block_len == 64) {
            compress(ctx->state, ctx->block);
            ctx->block_len = 0;
        }
    }
}

void coll_sha256_final(coll_sha256_t *ctx, uint8_t out[COLL_SHA256_BYTES])
{
    uint64_t bits = ctx->total_bytes * 8;
    uint8_t pad = 0x80, zero = 0, lenbuf[8];

    coll_sha256_update(ctx, &pad, 1);
    while (ctx->block_len != 56)
        coll_sha256_update(ctx, &zero, 1);
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (uint8_t)(bits >> (56 - 8 * i));
    coll_sha256_update(ctx, lenbuf, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(ctx->state[i] >> 24);
        out[4 * i + 1] = (uint8_t)(ctx->state[i] >> 16);
        out[4 * i + 2] = (uint8_t)(ctx->state[i] >> 8);
        out[4 * i + 3] = (uint8_t)ctx->state[i];
    }
}

void coll_sha256(const void *data, size_t len, uint8_t out[COLL_SHA256_BYTES])
{
    coll_sha256_t ctx;
    coll_sha256_init(&ctx);
    coll_sha256_update(&ctx, data, len);
    coll_sha256_final(&ctx, out);
}

void coll_hmac_sha256(const void *key, size_t keylen, const void *const *parts,
                      const size_t *lens, int nparts, uint8_t out[COLL_SHA256_BYTES])
{
    uint8_t k[64] = {0}, pad[64], inner[COLL_SHA256_BYTES];
    coll_sha256_t ctx;

    if (keylen > 64)
        coll_sha256(key, keylen, k); /* long keys are hashed first (RFC 2104) */
    else
        memcpy(k, key, keylen);

    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    coll_sha256_init(&ctx);
    coll_sha256_update(&ctx, pad, 64);
    for (int i = 0; i < nparts; i++)
        coll_sha256_update(&ctx, parts[i], lens[i]);
    coll_sha256_final(&ctx, inner);

    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    coll_sha256_init(&ctx);
    coll_sha256_update(&ctx, pad, 64);
    coll_sha256_update(&ctx, inner, sizeof(inner));
    coll_sha256_final(&ctx, out);
}

int coll_mem_equal_ct(const void *a, const void *b, size_t len)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;
    for (size_t i = 0; i < len; i++)
        diff |= x[i] ^ y[i];
    return diff == 0;
}

int coll_random_bytes(void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
