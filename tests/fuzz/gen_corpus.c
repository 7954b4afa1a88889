/*
 * gen_corpus.c: writes the seed corpus of the fuzz targets from real
 * frames, made by the library's own encoders (peer info, HELLO, unique
 * id) and the frame layouts of wire.h, so that the fuzzers start from
 * inputs that pass every check. `make fuzz-corpus` runs it into
 * tests/fuzz/corpus/; the files are kept in the repository.
 *
 *   gen_corpus DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap.h"
#include "coll.h"
#include "handshake.h"
#include "verbs/verbs_cfg.h"
#include "tcp/tcp.h"

static const char *outdir;

static void put(const char *target, const char *name, const void *data, size_t len)
{
    char path[512];
    /* regress_*: inputs that found a bug (fuzz/README in docs/testing.md) */
    snprintf(path, sizeof(path), "%s/%s/%s%s", outdir, target,
             strncmp(name, "regress_", 8) == 0 ? "" : "seed_", name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* A selector byte (or two) in front of a payload. */
static void put2(const char *target, const char *name, const uint8_t *sel, size_t nsel,
                 const void *data, size_t len)
{
    uint8_t buf[16384];
    memcpy(buf, sel, nsel);
    memcpy(buf + nsel, data, len);
    put(target, name, buf, nsel + len);
}

static void put_text(const char *target, const char *name, uint8_t sel, const char *text)
{
    put2(target, name, &sel, 1, text, strlen(text));
}

/* A rank's info as comm.c describes it: one TCP address (wire form). */
static void make_info(coll_peer_info_t *info, uint32_t rank, uint32_t naddrs)
{
    coll_addr_t a;
    memset(info, 0, sizeof(*info));
    info->rank = rank;
    info->pid = 4242 + rank;
    info->host_hash = 0x0123456789abcdefull;
    snprintf(info->hostname, sizeof(info->hostname), "node%02u", rank);
    coll_addr_resolve("10.0.0.1", 40000 + (int)rank, "seed", &a);
    for (uint32_t i = 0; i < naddrs; i++) {
        info->addrs[i].tp_id = (uint16_t)(COLL_TP_TCP + i);
        info->addrs[i].len = COLL_WIRE_ADDR_BYTES;
        coll_addr_to_wire(&a, info->addrs[i].data);
    }
    info->naddrs = naddrs;
}

static size_t encode_info(const coll_peer_info_t *info, uint8_t *out, size_t cap)
{
    coll_wbuf_t w = {out, cap, 0, 0};
    coll_peer_info_encode(info, &w);
    return w.off;
}

/* The largest info the encoder can write: every transport slot used,
 * every address blob at its cap (it used to exceed the bootstrap's cap). */
static void make_largest_info(coll_peer_info_t *info, uint32_t rank)
{
    make_info(info, rank, COLL_TP_MAX);
    for (uint32_t i = 0; i < COLL_TP_MAX; i++) {
        info->addrs[i].len = COLL_TP_ADDR_MAX;
        memset(info->addrs[i].data, (int)(0x30 + i), COLL_TP_ADDR_MAX);
    }
}

static void peer_info_seeds(void)
{
    uint8_t buf[2048];
    coll_peer_info_t info;
    for (uint32_t n = 0; n <= 2; n++) {
        char name[32];
        make_info(&info, n, n);
        snprintf(name, sizeof(name), "info_%uaddrs", n);
        put("fuzz_peer_info", name, buf, encode_info(&info, buf, sizeof(buf)));
    }
    make_largest_info(&info, 0);
    put("fuzz_peer_info", "regress_info_largest", buf, encode_info(&info, buf, sizeof(buf)));
}

/* Bootstrap frames: u32 type, u32 length, payload (wire.h). */
static void bootstrap_seeds(void)
{
    uint8_t frame[8192], *p;
    coll_peer_info_t info;

    for (int nranks = 1; nranks <= 4; nranks++) {
        size_t off = COLL_BOOT_HDR_BYTES;
        for (int r = 0; r < nranks; r++) {
            make_info(&info, (uint32_t)r, 1);
            size_t n = encode_info(&info, frame + off + 4, sizeof(frame) - off - 4);
            coll_store_u32(frame + off, (uint32_t)n);
            off += 4 + n;
        }
        coll_store_u32(frame, COLL_BOOT_TABLE);
        coll_store_u32(frame + 4, (uint32_t)(off - COLL_BOOT_HDR_BYTES));
        /* mode 0 (join); who: nranks - 1 in the low bits, rank 0 */
        uint8_t sel[2] = {0, (uint8_t)(nranks - 1)};
        char name[32];
        snprintf(name, sizeof(name), "table_%dranks", nranks);
        put2("fuzz_bootstrap", name, sel, 2, frame, off);
    }
    static const char why[] = "bootstrap timed out: 3 of 4 ranks joined (missing: 2)";
    p = frame;
    coll_store_u32(p, COLL_BOOT_ERROR);
    coll_store_u32(p + 4, (uint32_t)(4 + strlen(why)));
    coll_store_u32(p + 8, (uint32_t)(int32_t)COLL_ERR_TIMEOUT);
    memcpy(p + 12, why, strlen(why));
    uint8_t sel_err[2] = {0, 3};
    put2("fuzz_bootstrap", "error_frame", sel_err, 2, frame, 12 + strlen(why));

    /* A one-rank TABLE holding the largest info. */
    make_largest_info(&info, 0);
    size_t big = encode_info(&info, frame + 12, sizeof(frame) - 12);
    coll_store_u32(frame, COLL_BOOT_TABLE);
    coll_store_u32(frame + 4, (uint32_t)(4 + big));
    coll_store_u32(frame + 8, (uint32_t)big);
    put2("fuzz_bootstrap", "regress_table_largest_info", (const uint8_t[]){0, 0}, 2, frame,
         12 + big);
    make_largest_info(&info, 1);
    big = encode_info(&info, frame + 8, sizeof(frame) - 8);
    coll_store_u32(frame, COLL_BOOT_RANKINFO);
    coll_store_u32(frame + 4, (uint32_t)big);
    put2("fuzz_bootstrap", "regress_rankinfo_largest_info", (const uint8_t[]){1, 1 << 2 | 1}, 2,
         frame, 8 + big);

    make_info(&info, 2, 1);
    size_t n = encode_info(&info, frame + COLL_BOOT_HDR_BYTES, sizeof(frame) - 8);
    coll_store_u32(frame, COLL_BOOT_RANKINFO);
    coll_store_u32(frame + 4, (uint32_t)n);
    uint8_t sel_ri[2] = {1, (uint8_t)(2 << 2 | 3)}; /* mode 1, rank 2 of 4 */
    put2("fuzz_bootstrap", "rankinfo_rank2", sel_ri, 2, frame, COLL_BOOT_HDR_BYTES + n);
}

static void handshake_seeds(void)
{
    uint8_t msg[COLL_GREETING_BYTES + COLL_WELCOME_BYTES];
    coll_hello_t h = {.prefix = {COLL_WIRE_MAGIC, COLL_WIRE_VERSION, COLL_CONN_BOOT},
                      .src_rank = 1, .dst_rank = UINT32_MAX, .nranks = 4, .round = 0};
    uint8_t hello[COLL_HELLO_BYTES];

    /* Server side: a HELLO the harness signs (flags: sign), verdict OK. */
    coll_hello_encode(&h, hello);
    put2("fuzz_handshake", "server_hello_signed", (const uint8_t[]){2, 0}, 2, hello,
         sizeof(hello));
    put2("fuzz_handshake", "server_hello_bytewise", (const uint8_t[]){2 | 1 << 3, 0}, 2, hello,
         sizeof(hello));
    put2("fuzz_handshake", "server_hello_refused", (const uint8_t[]){2, COLL_VERDICT_RANK}, 2,
         hello, sizeof(hello));
    /* The TCP transport's connections (flag bit 7), and a bootstrap HELLO
     * sent to a TCP port. */
    put2("fuzz_handshake", "server_hello_kind_mismatch", (const uint8_t[]){2 | 128, 0}, 2,
         hello, sizeof(hello));
    h.prefix.kind = COLL_CONN_TCP;
    h.dst_rank = 2;
    coll_hello_encode(&h, hello);
    put2("fuzz_handshake", "server_hello_tcp", (const uint8_t[]){2 | 128, 0}, 2, hello,
         sizeof(hello));
    h.prefix.kind = COLL_CONN_BOOT;
    h.dst_rank = UINT32_MAX;
    h.prefix.version = COLL_WIRE_VERSION + 1;
    coll_hello_encode(&h, hello);
    put2("fuzz_handshake", "server_hello_version_skew", (const uint8_t[]){2, 0}, 2, hello,
         sizeof(hello));

    /* Client side: GREETING then WELCOME(OK), signed by the harness. */
    coll_prefix_t pre = {COLL_WIRE_MAGIC, COLL_WIRE_VERSION, COLL_CONN_BOOT};
    memset(msg, 0x11, sizeof(msg));
    coll_prefix_encode(&pre, msg);
    coll_prefix_encode(&pre, msg + COLL_GREETING_BYTES);
    coll_store_u32(msg + COLL_GREETING_BYTES + COLL_PREFIX_BYTES, COLL_VERDICT_OK);
    put2("fuzz_handshake", "client_welcome_signed", (const uint8_t[]){1 | 2, 0}, 2, msg,
         sizeof(msg));
    put2("fuzz_handshake", "client_welcome_chunks", (const uint8_t[]){1 | 2 | 3 << 3, 0}, 2,
         msg, sizeof(msg));
    pre.kind = COLL_CONN_TCP;
    coll_prefix_encode(&pre, msg);
    coll_prefix_encode(&pre, msg + COLL_GREETING_BYTES);
    put2("fuzz_handshake", "client_welcome_tcp", (const uint8_t[]){1 | 2 | 128, 0}, 2, msg,
         sizeof(msg));
    pre.kind = COLL_CONN_BOOT;
    coll_prefix_encode(&pre, msg);
    coll_prefix_encode(&pre, msg + COLL_GREETING_BYTES);
    coll_store_u32(msg + COLL_GREETING_BYTES + COLL_PREFIX_BYTES, COLL_VERDICT_ROUND);
    put2("fuzz_handshake", "client_welcome_round", (const uint8_t[]){1 | 2, 0}, 2, msg,
         sizeof(msg));
    put2("fuzz_handshake", "server_http", (const uint8_t[]){0, 0}, 2,
         "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
}

static void uniqueid_seeds(void)
{
    coll_uid_t uid;
    coll_unique_id_t id;
    char text[COLL_UNIQUE_ID_STR_LEN];

    memset(uid.secret, 0x42, sizeof(uid.secret));
    coll_addr_resolve("10.1.2.3", 29500, "seed", &uid.root);
    coll_uid_encode(&uid, &id);
    put2("fuzz_uniqueid", "binary_v4", (const uint8_t[]){1}, 1, &id, sizeof(id));
    coll_unique_id_to_str(&id, text);
    put_text("fuzz_uniqueid", "text_v4", 0, text);
    coll_addr_resolve("fd00::2", 29500, "seed", &uid.root);
    coll_uid_encode(&uid, &id);
    put2("fuzz_uniqueid", "binary_v6", (const uint8_t[]){1}, 1, &id, sizeof(id));
    coll_unique_id_to_str(&id, text);
    put_text("fuzz_uniqueid", "text_v6", 0, text);
}

static void param_seeds(void)
{
    static const struct { uint8_t sel; const char *name, *text; } v[] = {
        {0, "int", "-12"}, {0, "int_max", "9223372036854775807"},
        {1, "bool_yes", "yes"}, {1, "bool_off", "OFF"},
        {2, "dur_s", "300s"}, {2, "dur_ms", "1500ms"}, {2, "dur_frac", "2.5m"},
        {2, "dur_us", "20us"}, {3, "size_k", "64K"}, {3, "size_mib", "256MiB"},
        {3, "size_plain", "65536"}, {3, "size_frac", "1.5G"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        put_text("fuzz_params", v[i].name, v[i].sel, v[i].text);
}

static void env_seeds(void)
{
    put_text("fuzz_env", "algo", 0, "allreduce:ring,bcast:binomial,allgather:bruck");
    put_text("fuzz_env", "algo_bad", 0, "allreduce:nosuch");
    put_text("fuzz_env", "fallback", 1, "warn");
    put2("fuzz_env", "slurm", (const uint8_t[]){2, 255}, 2, "node[01-04,7],gpu3", 18);
    put2("fuzz_env", "slurm_two", (const uint8_t[]){2, 255}, 2, "rack[1-2]n[3-4]", 15);
    put2("fuzz_env", "slurm_small", (const uint8_t[]){2, 4}, 2, "node[01-04]", 11);
    put_text("fuzz_env", "tasks", 4, "8(x3),8,8");
    put_text("fuzz_env", "tasks_mixed", 4, "2(x3),1");
    put2("fuzz_env", "ifname", (const uint8_t[]){3}, 1, "^docker,lo\0eth0", 15);
    put2("fuzz_env", "ifname_exact", (const uint8_t[]){3}, 1, "=ib0,eth1\0ib0", 13);
}

/* The verbs transport's address blob, connection record and settings. */
static void verbs_seeds(void)
{
    uint8_t buf[256];
    verbs_addr_t a = {.flags = VERBS_ADDR_HAS_DEVICE, .link = VERBS_LINK_ETH,
                      .tcp_len = COLL_WIRE_ADDR_BYTES + 1};
    verbs_conn_t c = {.link = VERBS_LINK_IB, .port = 1, .mtu = 5, .lid = 7, .qpn = 0x1234,
                      .psn = 0x777, .credits = 64, .slot_bytes = 8192};
    coll_wbuf_t w = {buf, sizeof(buf), 0, 0};

    memset(a.tcp, 0x42, sizeof(a.tcp));
    verbs_addr_encode(&a, &w);
    put2("fuzz_verbs_wire", "addr", (const uint8_t[]){0}, 1, buf, w.off);
    put2("fuzz_verbs_wire", "addr_nodev", (const uint8_t[]){0}, 1, (const uint8_t[]){1, 0, 0, 0}, 4);
    w.off = 0;
    verbs_conn_encode(&c, &w);
    put2("fuzz_verbs_wire", "conn", (const uint8_t[]){1}, 1, buf, w.off);
    put_text("fuzz_verbs_wire", "hca", 2, "mlx5_0:1,mlx5_1");
    put_text("fuzz_verbs_wire", "hca_exclude_exact", 2, "^=mlx5_2:2");
    put_text("fuzz_verbs_wire", "gid_index", 2, "3");
}

/* fuzz_tcp_frames: a setup byte, u16 receive sizes, then records of
 * (socket, length, bytes) that carry real frames. */
typedef struct tcp_seed {
    uint8_t buf[4096];
    size_t len;
} tcp_seed_t;

static void seed_bytes(tcp_seed_t *t, const void *p, size_t n)
{
    memcpy(t->buf + t->len, p, n);
    t->len += n;
}

/* A frame (header and payload) onto socket `sock`, in records of at most
 * 255 bytes. */
static void seed_frame(tcp_seed_t *t, int sock, uint8_t type, uint32_t id, uint64_t tag,
                       uint64_t len, uint64_t aux, const void *payload, size_t plen)
{
    uint8_t frame[1024];
    tcp_hdr_t h = {.type = type, .id = id, .tag = tag, .len = len, .aux = aux};
    tcp_hdr_encode(&h, frame);
    memcpy(frame + TCP_HDR_BYTES, payload, plen);
    for (size_t off = 0, total = TCP_HDR_BYTES + plen; off < total;) {
        uint8_t rec[2] = {(uint8_t)sock, (uint8_t)COLL_MIN(total - off, 255u)};
        seed_bytes(t, rec, 2);
        seed_bytes(t, frame + off, rec[1]);
        off += rec[1];
    }
}

static void seed_setup(tcp_seed_t *t, uint8_t setup, const uint16_t *sizes, int n)
{
    t->len = 0;
    seed_bytes(t, &setup, 1);
    for (int i = 0; i < n; i++) {
        uint8_t le[2] = {(uint8_t)sizes[i], (uint8_t)(sizes[i] >> 8)};
        seed_bytes(t, le, 2);
    }
}

static void tcp_frame_seeds(void)
{
    static const char T[] = "fuzz_tcp_frames";
    uint8_t data[256];
    tcp_seed_t t;

    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 7 + 1);
    seed_setup(&t, 1, (const uint16_t[]){16}, 1);
    seed_frame(&t, 0, TCP_EAGER, 0, 0, 16, 0, data, 16);
    put(T, "eager_posted", t.buf, t.len);
    seed_setup(&t, 0, NULL, 0);
    seed_frame(&t, 0, TCP_EAGER, 0, 1, 8, 0, data, 8);
    put(T, "eager_unexpected", t.buf, t.len);
    seed_setup(&t, 1, (const uint16_t[]){4}, 1);
    seed_frame(&t, 0, TCP_EAGER, 0, 0, 8, 0, data, 8);
    put(T, "eager_size_mismatch", t.buf, t.len);
    /* RTS, our CTS grants receive id 0, DATA striped over both sockets */
    seed_setup(&t, 1, (const uint16_t[]){100}, 1);
    seed_frame(&t, 0, TCP_RTS, 3, 0, 100, 0, NULL, 0);
    seed_frame(&t, 1, TCP_DATA, 0, 0, 60, 0, data, 60);
    seed_frame(&t, 0, TCP_DATA, 0, 0, 40, 60, data + 60, 40);
    put(T, "rendezvous", t.buf, t.len);
    /* our send's RTS (id 0) granted: its DATA flows out */
    seed_setup(&t, 4, NULL, 0);
    seed_frame(&t, 0, TCP_CTS, 0, 0, 0, 9, NULL, 0);
    put(T, "cts", t.buf, t.len);
    seed_setup(&t, 4, NULL, 0);
    seed_frame(&t, 0, TCP_CTS, 0, 0, 0, 0, NULL, 0);
    t.buf[t.len - TCP_HDR_BYTES + 1] = TCP_CTS_DISCARD; /* the flags byte */
    put(T, "cts_discard", t.buf, t.len);
    seed_setup(&t, 2, (const uint16_t[]){4, 4}, 2);
    seed_frame(&t, 0, TCP_BYE, 0, 0, 0, 0, NULL, 0);
    seed_frame(&t, 1, TCP_BYE, 0, 0, 0, 0, NULL, 0);
    put(T, "bye", t.buf, t.len);
    seed_setup(&t, 0, NULL, 0);
    seed_frame(&t, 1, TCP_ABORT, 0, 0, 12, 0, "rank 1: test", 12);
    put(T, "abort", t.buf, t.len);
    /* credit for eager bytes never sent (a protocol error), and none */
    seed_setup(&t, 0, NULL, 0);
    seed_frame(&t, 0, TCP_CREDIT, 0, 0, 0, 4096, NULL, 0);
    put(T, "credit_unowed", t.buf, t.len);
    seed_setup(&t, 0, NULL, 0);
    seed_frame(&t, 0, TCP_CREDIT, 0, 0, 0, 0, NULL, 0);
    put(T, "credit_zero", t.buf, t.len);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_corpus DIR\n");
        return 2;
    }
    outdir = argv[1];
    setenv("COLL_DEBUG", "NONE", 1);
    peer_info_seeds();
    bootstrap_seeds();
    handshake_seeds();
    uniqueid_seeds();
    param_seeds();
    env_seeds();
    verbs_seeds();
    tcp_frame_seeds();
    return 0;
}
