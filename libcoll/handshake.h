/*
 * handshake.h: the authenticated opening of every connection (see wire.h
 * for the messages), as a non-blocking state machine so that one event
 * loop can serve many connections at once and a silent stranger cannot
 * hold up a legitimate peer.
 */
#ifndef COLL_HANDSHAKE_H
#define COLL_HANDSHAKE_H

#include "net.h"
#include "wire.h"

/* Server-side check of a verified HELLO: returns a COLL_VERDICT_*. */
typedef uint32_t (*coll_hs_validate_fn)(void *arg, const coll_hello_t *hello);

typedef struct coll_hs {
    int fd;
    int server;
    int state;
    uint16_t kind;
    const uint8_t *secret;
    uint64_t deadline_ns;
    size_t io_off;
    uint8_t greeting[COLL_GREETING_BYTES];
    uint8_t hello[COLL_HELLO_BYTES];
    uint8_t welcome[COLL_WELCOME_BYTES];
    coll_hello_t hello_fields;  /* client: sent; server: received and verified */
    uint32_t verdict;
    uint16_t peer_version;
    coll_status_t status;       /* final outcome once not COLL_INPROGRESS */
    coll_hs_validate_fn validate;
    void *validate_arg;
    char peer[COLL_ADDRSTR_LEN];
    char errmsg[256];
} coll_hs_t;

void coll_hs_server_start(coll_hs_t *hs, int fd, const coll_addr_t *peer, uint16_t kind,
                          const uint8_t *secret, uint64_t deadline_ns,
                          coll_hs_validate_fn validate, void *arg);
/* `fields` gives src/dst rank, nranks, round and flags; the rest is filled. */
void coll_hs_client_start(coll_hs_t *hs, int fd, const coll_addr_t *peer,
                          const coll_hello_t *fields, const uint8_t *secret,
                          uint64_t deadline_ns);

/* Advance without blocking. COLL_INPROGRESS until done; then COLL_OK or an
 * error with hs->errmsg saying why. Nothing is logged here: the owner
 * knows whether a failure is a stranger to drop or an error to raise. */
coll_status_t coll_hs_progress(coll_hs_t *hs);

/* Poll events the handshake waits for (EPOLLIN or EPOLLOUT). */
uint32_t coll_hs_events(const coll_hs_t *hs);

/* The MACs of HELLO (over "libcoll-hello", GREETING and the HELLO fields)
 * and of WELCOME (over "libcoll-welcome", the whole HELLO and the
 * verdict); exposed so that tests and fuzzers can play a peer that knows
 * the secret. */
void coll_hs_hello_mac(const uint8_t *secret, const uint8_t greeting[COLL_GREETING_BYTES],
                       const uint8_t hello[COLL_HELLO_BYTES], uint8_t out[COLL_SHA256_BYTES]);
void coll_hs_welcome_mac(const uint8_t *secret, const uint8_t hello[COLL_HELLO_BYTES],
                         uint32_t verdict, uint8_t out[COLL_SHA256_BYTES]);

#endif /* COLL_HANDSHAKE_H */
