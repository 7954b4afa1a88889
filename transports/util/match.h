/*
 * match.h: tag matching for one endpoint, shared by transports that do
 * their own matching (self, tcp, later shm). A receive matches the oldest
 * arrival with the same tag, an arrival the oldest receive with that tag,
 * which is what keeps messages with equal tags in order.
 */
#ifndef COLL_MATCH_H
#define COLL_MATCH_H

#include <stdlib.h>
#include <string.h>

#include "blocks.h"
#include "transport.h"

/* Payload blocks of 64 KiB and more an interface keeps for its endpoints'
 * eager messages that arrive before their receive (blocks.h): a fresh
 * block faults in every page, once per message. Bounded by the eager
 * limit: 8 x 2 MiB for TCP between ranks of a host. */
#define COLL_MATCH_BLOCKS 8

/* A message that arrived before its receive was posted. */
typedef struct coll_unexp {
    coll_list_t link;
    uint64_t tag;
    size_t len;   /* message length in bytes */
    void *data;   /* eager payload (owned), or NULL when it is still remote */
    size_t cap;   /* bytes of the block that holds data (coll_blocks_take) */
    uint32_t id;  /* transport handle for the remote payload */
    void *ctx;    /* transport context (e.g. the matching send request) */
    uint64_t aux; /* a second word of it (shm: the sender's reply buffer) */
} coll_unexp_t;

typedef struct coll_match {
    coll_list_t posted;     /* coll_tp_req_t, by link */
    coll_list_t unexpected; /* coll_unexp_t */
    coll_blocks_t *blocks;  /* where eager payloads' blocks are kept (the
                               interface's, shared by its endpoints), or NULL */
} coll_match_t;

/* `blocks` may be NULL: each payload is then malloc'ed and freed. */
static inline void coll_match_init(coll_match_t *m, coll_blocks_t *blocks)
{
    coll_list_init(&m->posted);
    coll_list_init(&m->unexpected);
    m->blocks = blocks;
}

/* A block for an eager payload of len bytes, its length in *cap_p. */
static inline void *coll_match_payload_block(coll_match_t *m, size_t len, size_t *cap_p)
{
    return coll_blocks_take(m->blocks, len, cap_p);
}

/* The payload of ux is no longer needed. */
static inline void coll_match_drop_payload(coll_match_t *m, coll_unexp_t *ux)
{
    if (ux->data)
        coll_blocks_give(m->blocks, ux->data, ux->cap);
    ux->data = NULL;
}

static inline coll_tp_req_t *coll_match_take_posted(coll_match_t *m, uint64_t tag)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, &m->posted) {
        coll_tp_req_t *req = coll_container_of(pos, coll_tp_req_t, link);
        if (req->tag == tag) {
            coll_list_del(pos);
            return req;
        }
    }
    return NULL;
}

static inline coll_unexp_t *coll_match_take_unexpected(coll_match_t *m, uint64_t tag)
{
    coll_list_t *pos, *tmp;
    coll_list_for_each_safe(pos, tmp, &m->unexpected) {
        coll_unexp_t *ux = coll_container_of(pos, coll_unexp_t, link);
        if (ux->tag == tag) {
            coll_list_del(pos);
            return ux;
        }
    }
    return NULL;
}

/* An eager message no receive waits for: keep a copy of its payload.
 * 0, or -1 when out of memory (nothing is kept then). */
static inline int coll_match_keep_copy(coll_match_t *m, uint64_t tag, const void *payload,
                                       size_t len)
{
    coll_unexp_t *ux = calloc(1, sizeof(*ux));
    void *data = ux ? coll_match_payload_block(m, len, &ux->cap) : NULL;

    if (!data) {
        free(ux);
        return -1;
    }
    coll_copy(data, payload, len);
    ux->tag = tag;
    ux->len = len;
    ux->data = data;
    coll_list_push_back(&m->unexpected, &ux->link);
    return 0;
}

/* A message still at the sender (its handle `id`, transport context
 * `ctx` and `aux`) that no receive waits for. 0, or -1 when out of memory. */
static inline int coll_match_keep_remote(coll_match_t *m, uint64_t tag, size_t len, uint32_t id,
                                         void *ctx, uint64_t aux)
{
    coll_unexp_t *ux = calloc(1, sizeof(*ux));

    if (!ux)
        return -1;
    ux->tag = tag;
    ux->len = len;
    ux->id = id;
    ux->ctx = ctx;
    ux->aux = aux;
    coll_list_push_back(&m->unexpected, &ux->link);
    return 0;
}

/* No unexpected message matched `req`: wait for one, or fail at once with
 * `why` when the endpoint can deliver nothing more (why != COLL_OK). */
static inline void coll_match_post(coll_match_t *m, coll_tp_req_t *req, coll_status_t why)
{
    if (why != COLL_OK)
        req->complete(req, why);
    else
        coll_list_push_back(&m->posted, &req->link);
}

/* The sender's length differs from the receive's: bytes_done tells the
 * core the sender's length, for its message. */
static inline void coll_match_size_mismatch(coll_tp_req_t *req, size_t msg_len)
{
    req->bytes_done = msg_len;
    req->complete(req, COLL_ERR_SIZE_MISMATCH);
}

/* A whole message of `len` bytes at payload for `req`: copied (or folded)
 * and the receive completed, or failed when the lengths differ. */
static inline void coll_match_complete_copy(coll_tp_req_t *req, const void *payload, size_t len)
{
    if (len == req->len) {
        coll_tp_deliver(req, 0, payload, len);
        req->bytes_done = len;
        req->complete(req, COLL_OK);
    } else {
        coll_match_size_mismatch(req, len);
    }
}

/* A receive matched an unexpected eager message (ux->data): copy it out and
 * complete the receive; drops the copy, not ux. */
static inline void coll_match_deliver_eager(coll_match_t *m, coll_tp_req_t *req,
                                            coll_unexp_t *ux)
{
    coll_match_complete_copy(req, ux->data, ux->len);
    coll_match_drop_payload(m, ux);
}

/* Complete every posted receive with `status` (the endpoint is going away). */
static inline void coll_match_fail_posted(coll_match_t *m, coll_status_t status)
{
    while (!coll_list_empty(&m->posted)) {
        coll_tp_req_t *req = coll_list_first(&m->posted, coll_tp_req_t, link);
        coll_list_del(&req->link);
        req->complete(req, status);
    }
}

static inline void coll_match_free_unexpected(coll_match_t *m)
{
    while (!coll_list_empty(&m->unexpected)) {
        coll_unexp_t *ux = coll_list_first(&m->unexpected, coll_unexp_t, link);
        coll_list_del(&ux->link);
        coll_match_drop_payload(m, ux);
        free(ux);
    }
}

#endif /* COLL_MATCH_H */
