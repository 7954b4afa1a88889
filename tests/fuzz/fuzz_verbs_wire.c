/*
 * fuzz_verbs_wire.c: what the verbs transport reads from other processes
 * and from the environment (transports/verbs/verbs_cfg.h). The first
 * byte selects the parser:
 *   0  verbs_addr_decode  (the address blob from the bootstrap)
 *   1  verbs_conn_decode  (a peer's connection record)
 *   2  verbs_hca_parse and verbs_gid_index_parse (COLL_IB_HCA, COLL_IB_GID_INDEX)
 * Invariants: no read past the input (ASan), the output untouched on
 * error, and what a decoder accepts encodes back to the bytes it consumed.
 */
#include "fuzz.h"
#include "verbs/verbs_cfg.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static void fuzz_addr(const uint8_t *data, size_t size)
{
    static verbs_addr_t a, sentinel;
    coll_rbuf_t r = {data, size, 0, 0};
    uint8_t again[COLL_TP_ADDR_MAX];

    memset(&sentinel, 0xa5, sizeof(sentinel));
    a = sentinel;
    if (verbs_addr_decode(&r, &a) != COLL_OK) {
        FUZZ_CHECK(memcmp(&a, &sentinel, sizeof(a)) == 0, "decode wrote its output on error");
        return;
    }
    FUZZ_CHECK(a.tcp_len <= VERBS_ADDR_TCP_MAX, "tcp_len %u", a.tcp_len);
    coll_wbuf_t w = {again, sizeof(again), 0, 0};
    verbs_addr_encode(&a, &w);
    FUZZ_CHECK(!w.overflow && w.off == r.off && memcmp(again, data, r.off) == 0,
               "encode(decode(x)) differs from x (%zu vs %zu bytes)", w.off, r.off);
}

static void fuzz_conn(const uint8_t *data, size_t size)
{
    static verbs_conn_t c, sentinel;
    coll_rbuf_t r = {data, size, 0, 0};
    uint8_t again[VERBS_CONN_BYTES];

    memset(&sentinel, 0xa5, sizeof(sentinel));
    c = sentinel;
    if (verbs_conn_decode(&r, &c) != COLL_OK) {
        FUZZ_CHECK(memcmp(&c, &sentinel, sizeof(c)) == 0, "decode wrote its output on error");
        return;
    }
    FUZZ_CHECK(c.qpn <= 0xffffff && c.psn <= 0xffffff, "qpn %x psn %x", c.qpn, c.psn);
    FUZZ_CHECK(c.credits >= 1 && c.credits <= VERBS_CREDITS_MAX, "credits %u", c.credits);
    coll_wbuf_t w = {again, sizeof(again), 0, 0};
    verbs_conn_encode(&c, &w);
    FUZZ_CHECK(!w.overflow && w.off == r.off && r.off == VERBS_CONN_BYTES &&
               memcmp(again, data, r.off) == 0, "encode(decode(x)) differs from x");
}

static void fuzz_env(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    verbs_hca_spec_t spec;
    int index;

    if (verbs_hca_parse(s, &spec) == COLL_OK) {
        FUZZ_CHECK(spec.n >= 0 && spec.n <= VERBS_HCA_MAX, "%d entries", spec.n);
        for (int i = 0; i < spec.n; i++) {
            FUZZ_CHECK(spec.e[i].name[0] != '\0', "entry %d: empty name", i);
            FUZZ_CHECK(spec.e[i].port >= 0 && spec.e[i].port <= 255, "port %d", spec.e[i].port);
            FUZZ_CHECK(verbs_hca_match(&spec, spec.e[i].name, spec.e[i].port ? spec.e[i].port : 1)
                       == !spec.exclude, "'%s' does not match its own entry %d", s, i);
        }
    }
    if (verbs_gid_index_parse(s, &index) == COLL_OK)
        FUZZ_CHECK(index >= -1 && index <= 255, "gid index %d", index);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    switch (data[0] % 3) {
    case 0:
        fuzz_addr(data + 1, size - 1);
        break;
    case 1:
        fuzz_conn(data + 1, size - 1);
        break;
    default:
        fuzz_env(data + 1, size - 1);
        break;
    }
    return 0;
}
