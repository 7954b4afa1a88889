/*
 * wire.h: everything that crosses a socket, in one place: the connection
 * handshake, bootstrap frames, and the bounds every length read from the
 * wire is checked against before anything is allocated.
 *
 * All integers are little-endian on the wire. Every connection opens with
 * an 8-byte prefix (magic, version, kind) that no future version may move,
 * so that peers of different versions can always name each other's version.
 *
 * Handshake (the accepting side speaks first, so a silent stranger learns
 * nothing and a client can check the server before revealing anything):
 *   server -> client  GREETING  prefix, server nonce (16 B)
 *   client -> server  HELLO     prefix, ranks, round, client nonce,
 *                               HMAC(secret, "hello" | GREETING | HELLO fields)
 *   server -> client  WELCOME   prefix, verdict,
 *                               HMAC(secret, "welcome" | HELLO | verdict)
 * A connection that does not complete its part within COLL_HANDSHAKE_TIMEOUT
 * or whose HMAC is wrong is closed without reading further.
 */
#ifndef COLL_WIRE_H
#define COLL_WIRE_H

#include <string.h>

#include "sha256.h"
#include "util.h"

#define COLL_WIRE_MAGIC 0x4c4c4f43u /* bytes "COLL" */
/* 2: the TCP transport's eager credit (its CREDIT frame; the window in its
 * address blob) */
#define COLL_WIRE_VERSION 2
#define COLL_SECRET_BYTES 32
#define COLL_NONCE_BYTES 16

/* What a connection is for (the prefix's kind field). */
enum coll_conn_kind {
    COLL_CONN_BOOT = 1, /* a rank joining through the bootstrap root */
    COLL_CONN_TCP = 2,  /* a TCP transport data connection */
};

/* WELCOME verdicts. */
enum coll_verdict {
    COLL_VERDICT_OK = 0,
    COLL_VERDICT_AUTH = 1,    /* HMAC did not verify: wrong secret */
    COLL_VERDICT_VERSION = 2, /* wire versions differ */
    COLL_VERDICT_RANK = 3,    /* rank out of range, unexpected or duplicate */
    COLL_VERDICT_NRANKS = 4,  /* job size disagrees */
    COLL_VERDICT_ROUND = 5,   /* another init round: retry later */
    COLL_VERDICT_KIND = 6,    /* wrong kind of connection for this port */
    COLL_VERDICT_NOT_READY = 7, /* no endpoint for that rank yet: retry */
};

#define COLL_PREFIX_BYTES 8
#define COLL_GREETING_BYTES (COLL_PREFIX_BYTES + COLL_NONCE_BYTES)
#define COLL_HELLO_FIELDS_BYTES (COLL_PREFIX_BYTES + 20 + COLL_NONCE_BYTES)
#define COLL_HELLO_BYTES (COLL_HELLO_FIELDS_BYTES + COLL_SHA256_BYTES)
#define COLL_WELCOME_BYTES (COLL_PREFIX_BYTES + 4 + COLL_SHA256_BYTES)

/* Bootstrap frames after the handshake: u32 type, u32 length, payload. */
enum coll_boot_frame {
    COLL_BOOT_RANKINFO = 1, /* rank -> root: this rank's peer info */
    COLL_BOOT_TABLE = 2,    /* root -> rank: every rank's peer info */
    COLL_BOOT_ERROR = 3,    /* root -> rank: text saying why the job failed */
};
#define COLL_BOOT_HDR_BYTES 8

/* Caps on wire lengths. */
#define COLL_WIRE_ERRTEXT_MAX 512     /* error texts */
#define COLL_WIRE_NRANKS_MAX (1 << 20)
#define COLL_TP_ADDR_MAX 128          /* one transport's address blob */
#define COLL_TP_MAX 8                 /* transports per rank */
#define COLL_WIRE_HOSTNAME_BYTES 64
/* One rank's serialized info at its largest (rank, pid, host hash,
 * hostname, count, then per transport id, length and blob): 1140 bytes.
 * The cap is exactly that, so that every info the encoder can produce
 * goes through the bootstrap. */
#define COLL_WIRE_PEERINFO_MAX                                                         \
    (4 + 4 + 8 + COLL_WIRE_HOSTNAME_BYTES + 4 + COLL_TP_MAX * (2 + 2 + COLL_TP_ADDR_MAX))

/* ---- little-endian codec with bounds checks ----------------------------- */

typedef struct coll_wbuf {
    uint8_t *p;
    size_t cap, off;
    int overflow;
} coll_wbuf_t;

typedef struct coll_rbuf {
    const uint8_t *p;
    size_t len, off;
    int underflow;
} coll_rbuf_t;

static inline void coll_put_bytes(coll_wbuf_t *w, const void *src, size_t n)
{
    if (w->overflow || n > w->cap - w->off) {
        w->overflow = 1;
        return;
    }
    memcpy(w->p + w->off, src, n);
    w->off += n;
}

static inline void coll_put_uint(coll_wbuf_t *w, uint64_t v, int nbytes)
{
    uint8_t b[8];
    for (int i = 0; i < nbytes; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    coll_put_bytes(w, b, (size_t)nbytes);
}

static inline void coll_get_bytes(coll_rbuf_t *r, void *dst, size_t n)
{
    if (r->underflow || n > r->len - r->off) {
        r->underflow = 1;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, r->p + r->off, n);
    r->off += n;
}

static inline uint64_t coll_get_uint(coll_rbuf_t *r, int nbytes)
{
    uint8_t b[8];
    uint64_t v = 0;
    coll_get_bytes(r, b, (size_t)nbytes);
    for (int i = 0; i < nbytes; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static inline uint32_t coll_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static inline void coll_store_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t coll_load_u64(const uint8_t *p)
{
    return (uint64_t)coll_load_u32(p) | (uint64_t)coll_load_u32(p + 4) << 32;
}

static inline void coll_store_u64(uint8_t *p, uint64_t v)
{
    coll_store_u32(p, (uint32_t)v);
    coll_store_u32(p + 4, (uint32_t)(v >> 32));
}

/* ---- handshake messages -------------------------------------------------- */

typedef struct coll_prefix {
    uint32_t magic;
    uint16_t version;
    uint16_t kind;
} coll_prefix_t;

typedef struct coll_hello {
    coll_prefix_t prefix;
    uint32_t src_rank;   /* the connecting rank */
    uint32_t dst_rank;   /* the rank it wants (UINT32_MAX for the root) */
    uint32_t nranks;
    uint32_t round;      /* bootstrap: init round; TCP: socket index */
    uint32_t flags;
    uint8_t nonce[COLL_NONCE_BYTES];
    uint8_t mac[COLL_SHA256_BYTES];
} coll_hello_t;

/* The wire protocol version this process speaks: COLL_WIRE_VERSION, unless
 * a test made it speak another (coll_wire_test_speak_version). */
uint16_t coll_wire_version(void);
/* Tests only (issue 6, item 7: version skew): speak wire protocol version
 * `v` from now on. Hidden like every internal function, so it is not in
 * libcoll.so's exports: only programs linked against libcoll.a (the tests)
 * can call it, and no environment variable or setting reaches it. */
void coll_wire_test_speak_version(uint16_t v);

void coll_prefix_encode(const coll_prefix_t *p, uint8_t out[COLL_PREFIX_BYTES]);
void coll_prefix_decode(const uint8_t in[COLL_PREFIX_BYTES], coll_prefix_t *p);
void coll_hello_encode(const coll_hello_t *h, uint8_t out[COLL_HELLO_BYTES]);
void coll_hello_decode(const uint8_t in[COLL_HELLO_BYTES], coll_hello_t *h);

#endif /* COLL_WIRE_H */
