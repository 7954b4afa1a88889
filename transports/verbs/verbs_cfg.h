/*
 * verbs_cfg.h: the parts of the verbs transport that need no RDMA device
 * and no libibverbs, compiled everywhere so that they are tested
 * everywhere (tests/test_verbs.c, tests/fuzz/fuzz_verbs_wire.c):
 *   - COLL_IB_HCA and COLL_IB_GID_INDEX parsing, device/port matching and
 *     the automatic GID choice (verbs_hca.c);
 *   - the wire encoding of the iface address blob and of the per-peer
 *     connection record (verbs_wire.c);
 *   - the memory registration cache (verbs_mr.c), which registers through
 *     a small ops table: ibv_reg_mr in the transport.
 */
#ifndef COLL_VERBS_CFG_H
#define COLL_VERBS_CFG_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"
#include "wire.h"

/* ---- COLL_IB_HCA: NCCL_IB_HCA syntax ---------------------------------------
 * "mlx5_0:1,mlx5_1" comma list of device names (prefixes unless the list
 * starts with '='), each with an optional ":port"; a leading '^' excludes
 * the listed ones ("^=mlx5_2" excludes exactly mlx5_2). Empty: all. */
#define VERBS_HCA_MAX 32
#define VERBS_HCA_NAME_MAX 64

typedef struct verbs_hca_entry {
    char name[VERBS_HCA_NAME_MAX];
    int port; /* 0: any port */
} verbs_hca_entry_t;

typedef struct verbs_hca_spec {
    int exclude;
    int exact;
    int n;
    verbs_hca_entry_t e[VERBS_HCA_MAX];
} verbs_hca_spec_t;

/* COLL_ERR_INVALID_ARG with a message quoting the text on bad syntax. */
coll_status_t verbs_hca_parse(const char *text, verbs_hca_spec_t *spec_p);
int verbs_hca_match(const verbs_hca_spec_t *spec, const char *dev, int port);

/* COLL_IB_GID_INDEX: "auto" (or empty) gives -1, else 0..255. */
coll_status_t verbs_gid_index_parse(const char *text, int *index_p);

enum verbs_gid_type {
    VERBS_GID_IB = 0,
    VERBS_GID_ROCE_V1 = 1,
    VERBS_GID_ROCE_V2 = 2,
};

typedef struct verbs_gid_entry {
    uint8_t raw[16];
    int type; /* enum verbs_gid_type */
} verbs_gid_entry_t;

/* The GID index to use when COLL_IB_GID_INDEX is auto: 0 on InfiniBand;
 * on Ethernet the RoCE v2 GID of an IPv4 address (routable, what NCCL and
 * most RoCE fabrics use), else a global RoCE v2 IPv6 one, else any
 * non-zero RoCE v2, else any non-zero GID. -1 if the table has none. */
int verbs_gid_pick(const verbs_gid_entry_t *tbl, int n, int is_ib);

/* ---- wire --------------------------------------------------------------------
 * Iface address blob (bootstrap, <= COLL_TP_ADDR_MAX bytes):
 *   u8 version, u8 flags (HAS_DEVICE), u8 link layer, u8 tcp_len,
 *   tcp_len bytes: the inner TCP iface's blob (connection records travel
 *   over it).
 * Connection record (one per peer, over the inner TCP endpoint):
 *   u8 version, u8 link layer, u8 port, u8 mtu (IBV_MTU_256..4096 = 1..5),
 *   u16 lid, u16 zero, u8 gid[16], u32 qpn, u32 psn, u32 credits,
 *   u32 slot bytes; qpn and psn are 24-bit. */
#define VERBS_WIRE_VERSION 1
#define VERBS_ADDR_HAS_DEVICE 0x1
#define VERBS_ADDR_TCP_MAX (COLL_TP_ADDR_MAX - 4)
#define VERBS_CONN_BYTES 40
/* Receive slots per peer (the sender's credits) and their size. */
#define VERBS_CREDITS_MAX 4096
#define VERBS_SLOT_MIN 256
#define VERBS_SLOT_MAX (1u << 20)

enum verbs_link {
    VERBS_LINK_IB = 1,
    VERBS_LINK_ETH = 2,
};

typedef struct verbs_addr {
    uint8_t flags;
    uint8_t link;
    uint8_t tcp_len;
    uint8_t tcp[VERBS_ADDR_TCP_MAX];
} verbs_addr_t;

typedef struct verbs_conn {
    uint8_t link;
    uint8_t port;
    uint8_t mtu;
    uint16_t lid;
    uint8_t gid[16];
    uint32_t qpn;
    uint32_t psn;
    uint32_t credits;
    uint32_t slot_bytes;
} verbs_conn_t;

void verbs_addr_encode(const verbs_addr_t *a, coll_wbuf_t *w);
/* COLL_ERR_VERSION_MISMATCH or COLL_ERR_PROTOCOL; *a set only on success. */
coll_status_t verbs_addr_decode(coll_rbuf_t *r, verbs_addr_t *a);
void verbs_conn_encode(const verbs_conn_t *c, coll_wbuf_t *w);
coll_status_t verbs_conn_decode(coll_rbuf_t *r, verbs_conn_t *c);

/* ---- registration cache ------------------------------------------------------
 * Registrations cover whole pages and are looked up by range: a buffer
 * inside a cached registration reuses it. At most `cap` registrations are
 * kept once unused (least recently used go first); cap 0 registers each
 * buffer for the time it is in use. A cached registration pins the pages
 * it had: a buffer freed and allocated again at the same address would
 * reach the old pages, which is why the cache is off by default
 * (COLL_IB_MR_CACHE, docs/transports.md). */
typedef struct verbs_mr_ops {
    coll_status_t (*reg)(void *ctx, void *addr, size_t len, void **handle_p, uint32_t *lkey_p,
                         uint32_t *rkey_p);
    void (*dereg)(void *ctx, void *handle);
} verbs_mr_ops_t;

typedef struct verbs_mr {
    coll_list_t link;
    uintptr_t start, end; /* [start, end), page aligned */
    void *handle;
    uint32_t lkey, rkey;
    int refs;
} verbs_mr_t;

typedef struct verbs_mr_cache {
    const verbs_mr_ops_t *ops;
    void *ctx;
    coll_list_t lru; /* most recently used first */
    int n;
    int cap;
    size_t page;
    uint64_t hits, misses;
} verbs_mr_cache_t;

void verbs_mr_cache_init(verbs_mr_cache_t *c, const verbs_mr_ops_t *ops, void *ctx, int cap);
/* Release every registration; none may be in use. */
void verbs_mr_cache_fini(verbs_mr_cache_t *c);
/* A registration covering [addr, addr + len), len > 0, held until put. */
coll_status_t verbs_mr_get(verbs_mr_cache_t *c, const void *addr, size_t len, verbs_mr_t **mr_p);
void verbs_mr_put(verbs_mr_cache_t *c, verbs_mr_t *mr);

#endif /* COLL_VERBS_CFG_H */
