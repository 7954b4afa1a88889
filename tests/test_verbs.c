/*
 * test_verbs.c: the libibverbs transport (transports/verbs).
 *
 * Everywhere (no RDMA device needed):
 *   - COLL_IB_HCA parsing and matching against a table of cases, bad
 *     syntax included (each must fail with a message naming the variable);
 *   - COLL_IB_GID_INDEX parsing and the automatic GID choice;
 *   - the wire records (address blob, connection record): round trips and
 *     rejection of every malformed field;
 *   - the registration cache, driven through its ops table by a counting
 *     registrar (the cache logic only: no transport is faked);
 *   - COLL_TRANSPORTS=verbs on a host without a verbs device: init fails
 *     on every rank, naming the rank and "no verbs device", within 10 s;
 *     a malformed COLL_IB_HCA fails init on every rank, naming it.
 * The benchmarks take -T verbs (a clean failure without a device).
 * Where ibv_get_device_list finds a device (e.g. a Soft-RoCE rxe): the
 * collectives and point-to-point at 2, 3 and 4 ranks forced through verbs,
 * checked exactly, and a rank SIGKILLed mid-transfer named by both
 * survivors within 10 s. Elsewhere those cases print "skipped: no verbs device".
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef COLL_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

#include "harness.h"
#include "verbs/verbs_cfg.h"

/* ---- COLL_IB_HCA ---------------------------------------------------------------- */

typedef struct hca_case {
    const char *spec;
    int ok;                 /* parses */
    const char *dev;        /* then: does dev:port match? */
    int port;
    int match;
} hca_case_t;

static const hca_case_t hca_cases[] = {
    {"", 1, "mlx5_0", 1, 1},
    {"mlx5", 1, "mlx5_3", 1, 1},            /* prefix */
    {"mlx5", 1, "mlx4_0", 1, 0},
    {"mlx5_0:1", 1, "mlx5_0", 1, 1},
    {"mlx5_0:1", 1, "mlx5_0", 2, 0},        /* other port */
    {"mlx5_0:1,mlx5_1:2", 1, "mlx5_1", 2, 1},
    {"mlx5_0:1,mlx5_1:2", 1, "mlx5_1", 1, 0},
    {"=mlx5_1", 1, "mlx5_10", 1, 0},        /* exact */
    {"=mlx5_1", 1, "mlx5_1", 1, 1},
    {"mlx5_1", 1, "mlx5_10", 1, 1},         /* prefix matches mlx5_10 too */
    {"^mlx5_0", 1, "mlx5_0", 1, 0},
    {"^mlx5_0", 1, "mlx5_1", 1, 1},
    {"^mlx5_0:1", 1, "mlx5_0", 2, 1},       /* only port 1 excluded */
    {"^=mlx5_1", 1, "mlx5_10", 1, 1},
    {"^=mlx5_1", 1, "mlx5_1", 1, 0},
    {"rxe0", 1, "rxe0", 1, 1},
    {"bnxt_re.0-a", 1, "bnxt_re.0-a", 1, 1},
    {"mlx5_0:255", 1, "mlx5_0", 255, 1},
    /* bad syntax */
    {"^", 0, NULL, 0, 0},
    {"=", 0, NULL, 0, 0},
    {"^=", 0, NULL, 0, 0},
    {"mlx5_0,", 0, NULL, 0, 0},
    {",mlx5_0", 0, NULL, 0, 0},
    {"mlx5_0,,mlx5_1", 0, NULL, 0, 0},
    {"mlx5_0:", 0, NULL, 0, 0},
    {":1", 0, NULL, 0, 0},
    {"mlx5_0:x", 0, NULL, 0, 0},
    {"mlx5_0:0", 0, NULL, 0, 0},
    {"mlx5_0:256", 0, NULL, 0, 0},
    {"mlx5_0:1:2", 0, NULL, 0, 0},
    {"=^mlx5_0", 0, NULL, 0, 0},
    {"mlx5 0", 0, NULL, 0, 0},
    {"mlx5_0;mlx5_1", 0, NULL, 0, 0},
    {"a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u,v,w,x,y,z,A,B,C,D,E,F,G", 0, NULL, 0, 0},
    {"a234567890123456789012345678901234567890123456789012345678901234", 0, NULL, 0, 0},
};

START_TEST(test_hca)
{
    const hca_case_t *c = &hca_cases[_i];
    verbs_hca_spec_t spec, sentinel;
    coll_status_t st;

    memset(&sentinel, 0x5a, sizeof(sentinel));
    spec = sentinel;
    st = verbs_hca_parse(c->spec, &spec);
    if (!c->ok) {
        ck_assert_msg(st == COLL_ERR_INVALID_ARG, "'%s' parsed (%s)", c->spec,
                      coll_status_str(st));
        ck_assert_msg(strstr(coll_get_last_error(NULL), "COLL_IB_HCA='") != NULL,
                      "'%s': message does not name the variable: %s", c->spec,
                      coll_get_last_error(NULL));
        ck_assert_msg(memcmp(&spec, &sentinel, sizeof(spec)) == 0, "output written on error");
        return;
    }
    ck_assert_msg(st == COLL_OK, "'%s': %s", c->spec, coll_get_last_error(NULL));
    ck_assert_msg(verbs_hca_match(&spec, c->dev, c->port) == c->match, "'%s' vs %s:%d: %d",
                  c->spec, c->dev, c->port, !c->match);
}
END_TEST

/* ---- COLL_IB_GID_INDEX and the automatic choice ----------------------------------- */

START_TEST(test_gid_index)
{
    static const struct { const char *text; int ok, index; } cases[] = {
        {"", 1, -1}, {"auto", 1, -1}, {"-1", 1, -1}, {"0", 1, 0}, {"3", 1, 3},
        {"255", 1, 255}, {"256", 0, 0}, {"-2", 0, 0}, {"3x", 0, 0}, {"x", 0, 0},
        {" 3", 0, 0}, {"99999999999999999999", 0, 0},
    };
    for (size_t i = 0; i < COLL_ARRAY_LEN(cases); i++) {
        int index = 1234;
        coll_status_t st = verbs_gid_index_parse(cases[i].text, &index);
        if (cases[i].ok) {
            ck_assert_msg(st == COLL_OK && index == cases[i].index, "'%s' -> %s %d",
                          cases[i].text, coll_status_str(st), index);
        } else {
            ck_assert_msg(st == COLL_ERR_INVALID_ARG && index == 1234, "'%s' accepted",
                          cases[i].text);
            ck_assert(strstr(coll_get_last_error(NULL), "COLL_IB_GID_INDEX") != NULL);
        }
    }
}
END_TEST

static void gid_set(verbs_gid_entry_t *e, int type, const char *hex)
{
    memset(e, 0, sizeof(*e));
    e->type = type;
    for (int i = 0; i < 16 && hex[2 * i]; i++)
        sscanf(hex + 2 * i, "%2hhx", &e->raw[i]);
}

START_TEST(test_gid_pick)
{
    verbs_gid_entry_t t[6];
    gid_set(&t[0], VERBS_GID_ROCE_V1, "fe800000000000000000000000000001");
    gid_set(&t[1], VERBS_GID_ROCE_V2, "fe800000000000000000000000000001");
    gid_set(&t[2], VERBS_GID_ROCE_V1, "00000000000000000000ffff0a000001");
    gid_set(&t[3], VERBS_GID_ROCE_V2, "00000000000000000000ffff0a000001");
    gid_set(&t[4], VERBS_GID_ROCE_V2, "20010db8000000000000000000000001");
    gid_set(&t[5], VERBS_GID_ROCE_V2, "00000000000000000000000000000000");
    ck_assert_int_eq(verbs_gid_pick(t, 6, 0), 3);  /* RoCE v2 IPv4 */
    ck_assert_int_eq(verbs_gid_pick(t, 3, 0), 1);  /* RoCE v2 link-local over v1 */
    ck_assert_int_eq(verbs_gid_pick(t, 1, 0), 0);  /* anything non-zero */
    ck_assert_int_eq(verbs_gid_pick(t + 4, 2, 0), 0); /* global IPv6 v2 */
    ck_assert_int_eq(verbs_gid_pick(t + 5, 1, 0), -1);
    ck_assert_int_eq(verbs_gid_pick(t + 5, 1, 1), 0); /* InfiniBand: index 0 */
    ck_assert_int_eq(verbs_gid_pick(t, 0, 1), -1);
}
END_TEST

/* ---- wire records ----------------------------------------------------------------- */

static verbs_conn_t sample_conn(void)
{
    verbs_conn_t c = {.link = VERBS_LINK_ETH, .port = 1, .mtu = 3, .lid = 0,
                      .qpn = 0x123456, .psn = 0xabcdef, .credits = 64, .slot_bytes = 8192};
    for (int i = 0; i < 16; i++)
        c.gid[i] = (uint8_t)(i * 17);
    return c;
}

START_TEST(test_wire_conn)
{
    verbs_conn_t c = sample_conn(), d;
    uint8_t buf[VERBS_CONN_BYTES];
    coll_wbuf_t w = {buf, sizeof(buf), 0, 0};

    verbs_conn_encode(&c, &w);
    ck_assert_msg(!w.overflow && w.off == VERBS_CONN_BYTES, "%zu bytes", w.off);
    coll_rbuf_t r = {buf, sizeof(buf), 0, 0};
    ck_assert_int_eq(verbs_conn_decode(&r, &d), COLL_OK);
    ck_assert(d.link == c.link && d.port == c.port && d.mtu == c.mtu && d.lid == c.lid &&
              memcmp(d.gid, c.gid, 16) == 0 && d.qpn == c.qpn && d.psn == c.psn &&
              d.credits == c.credits && d.slot_bytes == c.slot_bytes && r.off == sizeof(buf));
    /* Every truncation is rejected. */
    for (size_t n = 0; n < sizeof(buf); n++) {
        coll_rbuf_t t = {buf, n, 0, 0};
        ck_assert_msg(verbs_conn_decode(&t, &d) == COLL_ERR_PROTOCOL, "%zu bytes accepted", n);
    }
    /* Each bad field: (offset, byte) patched into a valid record. */
    static const struct { int off; uint8_t val; coll_status_t st; } bad[] = {
        {0, 2, COLL_ERR_VERSION_MISMATCH}, {1, 0, COLL_ERR_PROTOCOL}, {1, 3, COLL_ERR_PROTOCOL},
        {2, 0, COLL_ERR_PROTOCOL}, {3, 0, COLL_ERR_PROTOCOL}, {3, 6, COLL_ERR_PROTOCOL},
        {6, 1, COLL_ERR_PROTOCOL}, {27, 1, COLL_ERR_PROTOCOL}, {31, 1, COLL_ERR_PROTOCOL},
        {32, 0, COLL_ERR_PROTOCOL}, {35, 1, COLL_ERR_PROTOCOL}, {38, 0x20, COLL_ERR_PROTOCOL},
    };
    for (size_t i = 0; i < COLL_ARRAY_LEN(bad); i++) {
        uint8_t copy[sizeof(buf)];
        memcpy(copy, buf, sizeof(buf));
        copy[bad[i].off] = bad[i].val;
        if (bad[i].off == 32) /* credits 0 */
            memset(copy + 32, 0, 4);
        memset(&d, 0x77, sizeof(d));
        verbs_conn_t before = d;
        coll_rbuf_t t = {copy, sizeof(copy), 0, 0};
        ck_assert_msg(verbs_conn_decode(&t, &d) == bad[i].st, "byte %d = %u accepted",
                      bad[i].off, bad[i].val);
        ck_assert(memcmp(&d, &before, sizeof(d)) == 0);
    }
}
END_TEST

START_TEST(test_wire_addr)
{
    verbs_addr_t a = {.flags = VERBS_ADDR_HAS_DEVICE, .link = VERBS_LINK_IB, .tcp_len = 20}, d;
    uint8_t buf[COLL_TP_ADDR_MAX];
    coll_wbuf_t w = {buf, sizeof(buf), 0, 0};

    for (int i = 0; i < 20; i++)
        a.tcp[i] = (uint8_t)(200 - i);
    verbs_addr_encode(&a, &w);
    ck_assert(!w.overflow && w.off == 24);
    coll_rbuf_t r = {buf, w.off, 0, 0};
    ck_assert_int_eq(verbs_addr_decode(&r, &d), COLL_OK);
    ck_assert(d.flags == a.flags && d.link == a.link && d.tcp_len == 20 &&
              memcmp(d.tcp, a.tcp, 20) == 0 && r.off == w.off);
    /* The largest blob fits the bootstrap's cap. */
    a.tcp_len = VERBS_ADDR_TCP_MAX;
    coll_wbuf_t w2 = {buf, sizeof(buf), 0, 0};
    verbs_addr_encode(&a, &w2);
    ck_assert(!w2.overflow && w2.off == COLL_TP_ADDR_MAX);
    /* No device: link must be 0; a device: a known link; no unknown flag. */
    static const uint8_t bad[][4] = {{1, 0, 1, 0}, {1, 1, 0, 0}, {1, 1, 3, 0}, {1, 3, 1, 0},
                                     {1, 1, 1, 125}, {1, 1, 1, 5}, {2, 0, 0, 0}};
    for (size_t i = 0; i < COLL_ARRAY_LEN(bad); i++) {
        coll_rbuf_t t = {bad[i], 4, 0, 0};
        ck_assert_msg(verbs_addr_decode(&t, &d) != COLL_OK, "case %zu accepted", i);
    }
    static const uint8_t nodev[] = {1, 0, 0, 0};
    coll_rbuf_t t = {nodev, 4, 0, 0};
    ck_assert_int_eq(verbs_addr_decode(&t, &d), COLL_OK);
    ck_assert(!(d.flags & VERBS_ADDR_HAS_DEVICE));
}
END_TEST

/* ---- registration cache ------------------------------------------------------------ */

/* Counts registrations and checks that every deregistration is of a live one. */
typedef struct registrar {
    int live, regs, deregs;
    uint32_t next_key;
} registrar_t;

static coll_status_t reg_count(void *ctx, void *addr, size_t len, void **handle_p,
                               uint32_t *lkey_p, uint32_t *rkey_p)
{
    registrar_t *r = ctx;
    (void)addr, (void)len;
    r->live++;
    r->regs++;
    *handle_p = (void *)(uintptr_t)++r->next_key;
    *lkey_p = r->next_key;
    *rkey_p = r->next_key + 1000;
    return COLL_OK;
}

static void dereg_count(void *ctx, void *handle)
{
    registrar_t *r = ctx;
    ck_assert(handle != NULL && r->live > 0);
    r->live--;
    r->deregs++;
}

static const verbs_mr_ops_t count_ops = {.reg = reg_count, .dereg = dereg_count};

START_TEST(test_mr_cache)
{
    registrar_t rg = {0};
    verbs_mr_cache_t c;
    verbs_mr_t *m1, *m2, *m3, *m4;
    size_t pg;
    uint8_t *buf;

    verbs_mr_cache_init(&c, &count_ops, &rg, 2);
    pg = c.page;
    buf = aligned_alloc(pg, 16 * pg);
    ck_assert(buf != NULL);
    /* Covers whole pages; a range inside it is a hit. */
    ck_assert_int_eq(verbs_mr_get(&c, buf + 10, 2 * pg, &m1), COLL_OK);
    ck_assert(m1->start == (uintptr_t)buf && m1->end == (uintptr_t)(buf + 3 * pg));
    ck_assert_int_eq(verbs_mr_get(&c, buf + pg, pg, &m2), COLL_OK);
    ck_assert(m2 == m1 && m1->refs == 2 && rg.regs == 1 && c.hits == 1);
    verbs_mr_put(&c, m2);
    verbs_mr_put(&c, m1);
    ck_assert_int_eq(rg.live, 1); /* kept: cap 2 */
    /* Two more unused: the least recently used (m1) goes. */
    ck_assert_int_eq(verbs_mr_get(&c, buf + 5 * pg, pg, &m3), COLL_OK);
    verbs_mr_put(&c, m3);
    ck_assert_int_eq(verbs_mr_get(&c, buf + 8 * pg, pg, &m4), COLL_OK);
    verbs_mr_put(&c, m4);
    ck_assert_int_eq(rg.live, 2);
    ck_assert_int_eq(verbs_mr_get(&c, buf + 5 * pg, pg, &m3), COLL_OK); /* still cached */
    ck_assert_int_eq(rg.regs, 3);
    verbs_mr_put(&c, m3);
    ck_assert_int_eq(verbs_mr_get(&c, buf, pg, &m1), COLL_OK);          /* was evicted */
    ck_assert_int_eq(rg.regs, 4);
    ck_assert_int_eq(rg.live, 3); /* trimming waits for a put */
    /* In use is never evicted, whatever the cap. */
    ck_assert_int_eq(verbs_mr_get(&c, buf + 12 * pg, pg, &m2), COLL_OK);
    ck_assert_int_eq(rg.live, 4);
    verbs_mr_put(&c, m2);
    ck_assert_int_eq(rg.live, 3); /* m1 in use + 2 unused */
    verbs_mr_put(&c, m1);
    ck_assert_int_eq(rg.live, 2);
    /* A larger registration supersedes unused ones inside it. */
    ck_assert_int_eq(verbs_mr_get(&c, buf, 16 * pg, &m1), COLL_OK);
    ck_assert_int_eq(rg.live, 1);
    verbs_mr_put(&c, m1);
    /* Bad ranges. */
    ck_assert_int_eq(verbs_mr_get(&c, buf, 0, &m1), COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(verbs_mr_get(&c, (void *)(UINTPTR_MAX - 10), 100, &m1),
                     COLL_ERR_INVALID_ARG);
    verbs_mr_cache_fini(&c);
    ck_assert_int_eq(rg.live, 0);
    ck_assert_int_eq(rg.regs, rg.deregs);

    /* cap 0: registered for the time in use only. */
    verbs_mr_cache_init(&c, &count_ops, &rg, 0);
    ck_assert_int_eq(verbs_mr_get(&c, buf, pg, &m1), COLL_OK);
    ck_assert_int_eq(verbs_mr_get(&c, buf, pg, &m2), COLL_OK);
    ck_assert(m1 == m2 && rg.live == 1);
    verbs_mr_put(&c, m1);
    ck_assert_int_eq(rg.live, 1);
    verbs_mr_put(&c, m2);
    ck_assert_int_eq(rg.live, 0);
    verbs_mr_cache_fini(&c);
    free(buf);
}
END_TEST

/* ---- with and without a device ---------------------------------------------------- */


typedef struct nodev_result {
    int rank;
    coll_status_t st;
    double seconds;
    char msg[512];
} nodev_result_t;

static char tmp_dir[128];

/* Init must fail; the rank writes what it got for the parent to check.
 * arg: "NAME=value" set before init. */
static int rank_nodev(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    nodev_result_t res = {.rank = rank};
    coll_comm_t comm = NULL;
    char path[256];
    double t0 = harness_now();

    putenv((char *)arg);
    setenv("COLL_TIMEOUT", "20s", 1);
    res.st = coll_comm_init_rank(&comm, nranks, *id, rank);
    res.seconds = harness_now() - t0;
    snprintf(res.msg, sizeof(res.msg), "%s", coll_get_last_error(NULL));
    snprintf(path, sizeof(path), "%s/rank%d", tmp_dir, rank);
    FILE *f = fopen(path, "w");
    RANK_CHECK(f && fwrite(&res, sizeof(res), 1, f) == 1, "cannot write %s", path);
    fclose(f);
    if (comm)
        coll_comm_destroy(comm);
    return 0;
}

static void read_result(int r, nodev_result_t *res)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/rank%d", tmp_dir, r);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f && fread(res, sizeof(*res), 1, f) == 1, "rank %d wrote no result", r);
    fclose(f);
}

START_TEST(test_forced_no_device)
{
    int nranks = 2 + _i;
    if (harness_verbs_devices() > 0) {
        printf("test_verbs: forced without a device: skipped: this host has a verbs device\n");
        return;
    }
    double slowest = 0;
    harness_tmpdir_make(tmp_dir, sizeof(tmp_dir), "coll-verbs");
    ck_assert_int_eq(harness_run(nranks, rank_nodev, "COLL_TRANSPORTS=verbs", 30), 0);
    for (int r = 0; r < nranks; r++) {
        nodev_result_t res;
        read_result(r, &res);
        ck_assert_msg(res.st != COLL_OK, "rank %d: init succeeded without a verbs device", r);
#ifdef COLL_HAVE_VERBS
        char want[32];
        snprintf(want, sizeof(want), "rank %d", r);
        ck_assert_msg(res.st == COLL_ERR_UNSUPPORTED && strstr(res.msg, "no verbs device") &&
                      strstr(res.msg, want), "rank %d: %s: %s", r, coll_status_str(res.st),
                      res.msg);
#else
        ck_assert_msg(strstr(res.msg, "COLL_TRANSPORTS='verbs'"), "rank %d: %s", r, res.msg);
#endif
        ck_assert_msg(res.seconds < 10, "rank %d failed after %.1f s", r, res.seconds);
        slowest = res.seconds > slowest ? res.seconds : slowest;
        if (r == nranks - 1)
            printf("test_verbs: %d ranks, COLL_TRANSPORTS=verbs, no device: every rank failed "
                   "within %.1f ms (rank %d: %s)\n", nranks, slowest * 1e3, r, res.msg);
    }
    harness_tmpdir_remove(tmp_dir);
}
END_TEST

/* A bad COLL_IB_HCA fails init on every rank, device or not, verbs forced
 * or not: a typo must not silently turn RDMA off. */
START_TEST(test_bad_hca)
{
    harness_tmpdir_make(tmp_dir, sizeof(tmp_dir), "coll-verbs");
    ck_assert_int_eq(harness_run(2, rank_nodev, "COLL_IB_HCA=mlx5_0:x", 30), 0);
    for (int r = 0; r < 2; r++) {
        nodev_result_t res;
        read_result(r, &res);
#ifdef COLL_HAVE_VERBS
        ck_assert_msg(res.st == COLL_ERR_INVALID_ARG &&
                      strstr(res.msg, "COLL_IB_HCA='mlx5_0:x': port is not a number"),
                      "rank %d: %s: %s", r, coll_status_str(res.st), res.msg);
#else
        ck_assert_msg(res.st == COLL_OK, "rank %d: %s", r, res.msg);
#endif
    }
    harness_tmpdir_remove(tmp_dir);
}
END_TEST

/* Every rank's contribution is exact in int32 whatever the order. */
static int32_t val(int r, size_t i)
{
    return (int32_t)((r + 1) * 3 + (int)(i % 1009));
}

static void check_collectives(coll_comm_t comm, int rank, int n, size_t count)
{
    size_t bytes = count * n * sizeof(int32_t) + 4;
    int32_t *a = malloc(bytes), *b = malloc(bytes);
    RANK_CHECK(a && b, "out of memory");
    for (size_t i = 0; i < count; i++)
        a[i] = val(rank, i);
    RANK_OK(coll_allreduce(a, b, count, COLL_INT32, COLL_SUM, comm));
    for (size_t i = 0; i < count; i++) {
        int64_t want = 0;
        for (int r = 0; r < n; r++)
            want += val(r, i);
        RANK_CHECK(b[i] == (int32_t)want, "allreduce count %zu [%zu]: %d", count, i, b[i]);
    }
    int root = n - 1;
    for (size_t i = 0; i < count; i++)
        b[i] = rank == root ? val(root, i) : -1;
    RANK_OK(coll_broadcast(b, b, count, COLL_INT32, root, comm));
    for (size_t i = 0; i < count; i++)
        RANK_CHECK(b[i] == val(root, i), "broadcast count %zu [%zu]", count, i);
    RANK_OK(coll_allgather(a, b, count, COLL_INT32, comm));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
            RANK_CHECK(b[r * count + i] == val(r, i), "allgather count %zu", count);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
            b[r * count + i] = val(rank, r * count + i);
    RANK_OK(coll_alltoall(b, a, count, COLL_INT32, comm));
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < count; i++)
            RANK_CHECK(a[r * count + i] == val(r, rank * count + i), "alltoall count %zu", count);
    free(a);
    free(b);
}

static int rank_matrix(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    static const size_t counts[] = {0, 1, 7, 1000, 2047, 2048, 2049, 65536, 1u << 20};
    (void)arg;
    setenv("COLL_TRANSPORTS", "verbs", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (size_t k = 0; k < COLL_ARRAY_LEN(counts); k++)
        check_collectives(comm, rank, nranks, counts[k]);
    /* Point to point around the eager limit, both ways, unexpected first. */
    static const size_t sizes[] = {0, 1, 8000, 8191, 8192, 8193, 1u << 20, (16u << 20) + 3};
    uint8_t *s = malloc(sizes[7]), *r = malloc(sizes[7]);
    RANK_CHECK(s && r, "out of memory");
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    for (size_t k = 0; k < COLL_ARRAY_LEN(sizes); k++) {
        harness_fill(s, sizes[k], rank, (int)k);
        RANK_OK(coll_sendrecv(s, sizes[k], COLL_UINT8, right, (int)k, r, sizes[k], COLL_UINT8,
                              left, (int)k, comm));
        harness_verify(r, sizes[k], left, (int)k);
    }
    free(s);
    free(r);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_matrix)
{
    int nranks = 2 + _i;
    if (harness_verbs_devices() == 0) {
        printf("test_verbs: collectives over verbs at %d ranks: skipped: no verbs device\n",
               nranks);
        return;
    }
    ck_assert_msg(harness_run(nranks, rank_matrix, NULL, 120) == 0, "%d ranks over verbs",
                  nranks);
    printf("test_verbs: collectives and point-to-point over verbs at %d ranks: ok\n", nranks);
}
END_TEST

/* The benchmarks' -T verbs: a clean failure naming the missing device
 * where there is none (exit 1 or 2; 124 would be a hang), the sweep where
 * there is one, with the transport chosen for each peer logged at INFO. */
START_TEST(test_bench_flag)
{
    static char out[65536];
    char cmd[1024];
    const char *b = harness_build_dir();
    int dev = harness_verbs_devices() > 0, rc;

    if (getenv("COLL_TEST_SANITIZER")) { /* as test_bench: the benchmarks are not built then */
        printf("test_verbs: all_reduce_perf -T verbs: skipped: sanitized builds have no "
               "benchmarks\n");
        return;
    }
    snprintf(cmd, sizeof(cmd), "COLL_DEBUG=INFO COLL_DEBUG_SUBSYS=INIT timeout -k 5 60 "
             "%s/bin/collrun -n 2 %s/bin/all_reduce_perf -T verbs -b 8 -e 1M -f 32 -c 1 "
             "-n 2 -w 1 2>&1", b, b);
    rc = harness_sh(cmd, out, sizeof(out));
    if (dev) {
        ck_assert_msg(rc == 0 && strstr(out, "rank 1 via verbs"), "exit %d\n%s", rc, out);
    } else {
#ifdef COLL_HAVE_VERBS
        const char *want = "no verbs device";
#else
        const char *want = "COLL_TRANSPORTS='verbs' allows no transport";
#endif
        ck_assert_msg((rc == 1 || rc == 2) && strstr(out, want), "exit %d\n%s", rc, out);
        printf("test_verbs: all_reduce_perf -T verbs without a device: exit %d, '%s'\n", rc,
               want);
    }
}
END_TEST

/* ---- a rank killed mid-transfer (device needed) --------------------------------- */

static int rank_stream(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    (void)arg;
    setenv("COLL_TRANSPORTS", "verbs", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    harness_stream_ring(comm, rank, nranks, 16u << 20);
    coll_comm_abort(comm);
    return 0;
}

/* SIGKILL one of 3 ranks mid-stream: every survivor fails within 10 s with
 * COLL_ERR_PEER_FAILED naming it (the TCP side link sees the death at
 * once; the queue pair alone would need its retries, about 8 s). */
START_TEST(test_sigkill_named)
{
    int nranks = 3, victim = 1, statuses[3];
    pid_t pids[3];
    char expect[32];
    double t_kill;

    if (harness_verbs_devices() == 0) {
        printf("test_verbs: a rank killed mid-transfer over verbs: skipped: no verbs device\n");
        return;
    }
    int reports = harness_kill_mid_transfer(nranks, victim, rank_stream, NULL, pids, statuses,
                                            60, &t_kill);
    snprintf(expect, sizeof(expect), "rank %d (", victim);
    double slowest = harness_check_kill_reports(reports, t_kill, 10.0, expect, nranks - 1);
    printf("test_verbs: rank %d SIGKILLed mid-transfer over verbs: both survivors named it "
           "within %.0f ms\n", victim, slowest * 1e3);
}
END_TEST

static Suite *verbs_suite(void)
{
    Suite *s = suite_create("verbs");
    TCase *tc = tcase_create("config");
    tcase_add_loop_test(tc, test_hca, 0, (int)COLL_ARRAY_LEN(hca_cases));
    tcase_add_test(tc, test_gid_index);
    tcase_add_test(tc, test_gid_pick);
    tcase_add_test(tc, test_wire_conn);
    tcase_add_test(tc, test_wire_addr);
    tcase_add_test(tc, test_mr_cache);
    tcase_set_timeout(tc, 10);
    suite_add_tcase(s, tc);
    tc = tcase_create("device");
    tcase_add_loop_test(tc, test_forced_no_device, 0, 3);
    tcase_add_test(tc, test_bad_hca);
    tcase_add_test(tc, test_bench_flag);
    tcase_add_loop_test(tc, test_matrix, 0, 3);
    tcase_add_test(tc, test_sigkill_named);
    tcase_set_timeout(tc, 150);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(verbs_suite());
}
