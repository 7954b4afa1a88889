/*
 * wire.c: encoders and decoders for the fixed handshake messages. Decoders
 * accept any bytes (they are fuzzed); validation is the caller's job.
 */
#include "wire.h"

/* Written only by tests, before the connections it concerns: atomic so
 * that the bootstrap root thread may read it meanwhile. */
static uint16_t wire_version = COLL_WIRE_VERSION;

uint16_t coll_wire_version(void)
{
    return __atomic_load_n(&wire_version, __ATOMIC_RELAXED);
}

void coll_wire_test_speak_version(uint16_t v)
{
    __atomic_store_n(&wire_version, v, __ATOMIC_RELAXED);
}

void coll_prefix_encode(const coll_prefix_t *p, uint8_t out[COLL_PREFIX_BYTES])
{
    coll_store_u32(out, p->magic);
    out[4] = (uint8_t)p->version;
    out[5] = (uint8_t)(p->version >> 8);
    out[6] = (uint8_t)p->kind;
    out[7] = (uint8_t)(p->kind >> 8);
}

void coll_prefix_decode(const uint8_t in[COLL_PREFIX_BYTES], coll_prefix_t *p)
{
    p->magic = coll_load_u32(in);
    p->version = (uint16_t)(in[4] | in[5] << 8);
    p->kind = (uint16_t)(in[6] | in[7] << 8);
}

void coll_hello_encode(const coll_hello_t *h, uint8_t out[COLL_HELLO_BYTES])
{
    coll_wbuf_t w = {out, COLL_HELLO_BYTES, 0, 0};
    uint8_t prefix[COLL_PREFIX_BYTES];

    coll_prefix_encode(&h->prefix, prefix);
    coll_put_bytes(&w, prefix, sizeof(prefix));
    coll_put_uint(&w, h->src_rank, 4);
    coll_put_uint(&w, h->dst_rank, 4);
    coll_put_uint(&w, h->nranks, 4);
    coll_put_uint(&w, h->round, 4);
    coll_put_uint(&w, h->flags, 4);
    coll_put_bytes(&w, h->nonce, COLL_NONCE_BYTES);
    coll_put_bytes(&w, h->mac, COLL_SHA256_BYTES);
}

void coll_hello_decode(const uint8_t in[COLL_HELLO_BYTES], coll_hello_t *h)
{
    coll_rbuf_t r = {in, COLL_HELLO_BYTES, COLL_PREFIX_BYTES, 0};

    coll_prefix_decode(in, &h->prefix);
    h->src_rank = (uint32_t)coll_get_uint(&r, 4);
    h->dst_rank = (uint32_t)coll_get_uint(&r, 4);
    h->nranks = (uint32_t)coll_get_uint(&r, 4);
    h->round = (uint32_t)coll_get_uint(&r, 4);
    h->flags = (uint32_t)coll_get_uint(&r, 4);
    coll_get_bytes(&r, h->nonce, COLL_NONCE_BYTES);
    coll_get_bytes(&r, h->mac, COLL_SHA256_BYTES);
}
