/*
 * bootstrap.h: how ranks find each other. One process holds the unique id
 * and runs the root: a thread that accepts one authenticated connection per
 * rank, collects each rank's peer info (its transports' addresses), and
 * answers every rank with the whole table. After that the root is gone
 * and ranks talk only through transports.
 */
#ifndef COLL_BOOTSTRAP_H
#define COLL_BOOTSTRAP_H

#include "net.h"
#include "transport.h"
#include "wire.h"

#define COLL_UID_MAGIC 0x44494c43u /* "CLID" */
#define COLL_UID_VERSION 1

/* The decoded content of a coll_unique_id_t. */
typedef struct coll_uid {
    coll_addr_t root;
    uint8_t secret[COLL_SECRET_BYTES];
} coll_uid_t;

void coll_uid_encode(const coll_uid_t *uid, coll_unique_id_t *id);
coll_status_t coll_uid_decode(const coll_unique_id_t *id, coll_uid_t *uid);

typedef struct coll_root coll_root_t;

/* Start a root thread listening on `bind_addr` (port 0: any free port; the
 * bound address is returned). It serves one job of init round `round`
 * until every rank has its table, a rank fails, or `deadline_ns`. */
coll_status_t coll_root_start(const coll_addr_t *bind_addr, const uint8_t *secret,
                              uint32_t round, uint64_t deadline_ns, coll_root_t **root_p,
                              coll_addr_t *bound_p);
enum coll_root_release_mode {
    COLL_ROOT_DETACH, /* let it serve on; it frees itself when done */
    COLL_ROOT_JOIN,   /* wait for it to finish serving (the job formed) */
    COLL_ROOT_CANCEL, /* tell connected ranks the job failed, then join */
};
void coll_root_release(coll_root_t *root, int mode);

/* Join the job: send `mine` to the root, get every rank's info into
 * table[nranks]. Retries while the root is not up yet; gives up at
 * deadline_ns or when the waiter's abort flag is set; serves the waiter
 * while it waits (net.h). */
coll_status_t coll_bootstrap_join(const coll_uid_t *uid, int nranks, int rank,
                                  uint32_t round, const coll_peer_info_t *mine,
                                  uint64_t deadline_ns, const coll_waiter_t *w,
                                  coll_peer_info_t *table);

/* ---- frame handling, exposed for tests and fuzzing ------------------------ */

/* Root side: the payload length a RANKINFO header announces, or 0 when
 * its type is wrong or the length is 0 or above COLL_WIRE_PEERINFO_MAX
 * (checked before anything is read into the fixed buffer). */
uint32_t coll_boot_rankinfo_len(const uint8_t hdr[COLL_BOOT_HDR_BYTES]);
/* Root side: a RANKINFO payload of `len` bytes that must be exactly one
 * peer info of `rank`. *info_p is written only on success. */
coll_status_t coll_boot_parse_rankinfo(const uint8_t *buf, size_t len, uint32_t rank,
                                       coll_peer_info_t *info_p);
/* Join side: a TABLE body, nranks entries of u32 length + peer info whose
 * rank is its index, filling the body exactly. COLL_ERR_PROTOCOL (nothing
 * logged, table untouched) when malformed. */
coll_status_t coll_boot_parse_table(const uint8_t *buf, size_t len, int nranks,
                                    coll_peer_info_t *table);
/* Join side: read the root's reply (a TABLE or an ERROR frame) from fd,
 * capping its length before allocating, into table[nranks]. `root_str`
 * names the root in messages. Errors are raised (coll_error). */
coll_status_t coll_boot_read_reply(int fd, int nranks, int rank, const char *root_str,
                                   uint64_t deadline_ns, const coll_waiter_t *w,
                                   coll_peer_info_t *table);

#endif /* COLL_BOOTSTRAP_H */
