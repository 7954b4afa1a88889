/*
 * fuzz_handshake.c: the connection handshake (handshake.c), both sides,
 * driven through its real non-blocking state machine over a socketpair.
 * The fuzzer's bytes are what the other side sends, in chunks the input
 * chooses (so partial reads are exercised). With the "sign" flag the
 * harness plays a peer that knows the job secret: it fills in the correct
 * MAC over the fuzzed fields, so the fuzzer also reaches the verdicts and
 * the WELCOME check instead of stopping at every HMAC.
 *
 * Input: flags byte, verdict byte (server: what validate() answers), then
 * the peer's bytes. Flags: bit 0 client side (else server), bit 1 sign,
 * bit 2 deadline already passed, bits 3-5 chunk size (0: all at once,
 * k: 2^(k-1) bytes), bit 6 keep the connection open at the end (else EOF),
 * bit 7 our side is a TCP data connection (else a bootstrap one): the
 * transport opens its connections with this same handshake.
 *
 * Invariants: success only for a peer that proved the secret and spoke
 * our version and kind; validate() only ever sees an authenticated HELLO;
 * what our side sent is well formed and correctly signed; every failure
 * has a message; the machine ends (done or, only with the connection
 * open and time left, still waiting).
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "handshake.h"

#define RX_MAX 512

static const uint8_t secret[COLL_SECRET_BYTES] = "0123456789abcdef0123456789abcdef";

typedef struct fuzz_hs {
    coll_hs_t hs;
    int peer_fd;
    uint8_t rx[RX_MAX]; /* what our side sent to the peer */
    size_t rx_len;
    uint8_t *tx;        /* what the peer sends (the input, maybe signed) */
    size_t tx_len;
    uint32_t verdict;   /* validate()'s answer */
    int validated;
    uint16_t kind;      /* COLL_CONN_BOOT or COLL_CONN_TCP */
} fuzz_hs_t;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static void drain(fuzz_hs_t *f)
{
    uint8_t sink[256];
    ssize_t n;
    while ((n = read(f->peer_fd, sink, sizeof(sink))) > 0) {
        size_t keep = COLL_MIN((size_t)n, RX_MAX - f->rx_len);
        memcpy(f->rx + f->rx_len, sink, keep);
        f->rx_len += keep;
    }
}

static uint32_t validate(void *arg, const coll_hello_t *hello)
{
    fuzz_hs_t *f = arg;
    uint8_t mac[COLL_SHA256_BYTES];

    /* Only an authenticated HELLO may reach the owner's checks. */
    FUZZ_CHECK(f->rx_len >= COLL_GREETING_BYTES && f->tx_len >= COLL_HELLO_BYTES,
               "validate before GREETING/HELLO were exchanged");
    coll_hs_hello_mac(secret, f->rx, f->tx, mac);
    FUZZ_CHECK(memcmp(mac, f->tx + COLL_HELLO_FIELDS_BYTES, sizeof(mac)) == 0,
               "validate() called for a HELLO whose MAC is wrong");
    FUZZ_CHECK(hello->prefix.magic == COLL_WIRE_MAGIC &&
               hello->prefix.version == COLL_WIRE_VERSION, "validate() got a bad prefix");
    f->validated = 1;
    return f->verdict;
}

/* Server side: the HELLO MAC is over our GREETING (sent at start). */
static void sign_hello(fuzz_hs_t *f)
{
    if (f->tx_len >= COLL_HELLO_BYTES && f->rx_len >= COLL_GREETING_BYTES)
        coll_hs_hello_mac(secret, f->rx, f->tx, f->tx + COLL_HELLO_FIELDS_BYTES);
}

/* Client side: the WELCOME MAC is over our HELLO and the verdict. */
static void sign_welcome(fuzz_hs_t *f)
{
    uint8_t *welcome = f->tx + COLL_GREETING_BYTES;
    if (f->tx_len >= COLL_GREETING_BYTES + COLL_WELCOME_BYTES &&
        f->rx_len >= COLL_HELLO_BYTES)
        coll_hs_welcome_mac(secret, f->rx, coll_load_u32(welcome + COLL_PREFIX_BYTES),
                            welcome + COLL_PREFIX_BYTES + 4);
}

static int prefix_ok(const fuzz_hs_t *f, const uint8_t *p)
{
    coll_prefix_t x;
    coll_prefix_decode(p, &x);
    return x.magic == COLL_WIRE_MAGIC && x.version == COLL_WIRE_VERSION && x.kind == f->kind;
}

static void check_server(const fuzz_hs_t *f, coll_status_t st)
{
    uint8_t mac[COLL_SHA256_BYTES];

    FUZZ_CHECK(f->rx_len >= COLL_GREETING_BYTES && prefix_ok(f, f->rx), "bad GREETING sent");
    if (st != COLL_OK)
        return;
    FUZZ_CHECK(f->validated && f->verdict == COLL_VERDICT_OK, "accepted without validate()");
    FUZZ_CHECK(prefix_ok(f, f->tx), "accepted a HELLO with a foreign prefix");
    FUZZ_CHECK(f->rx_len == COLL_GREETING_BYTES + COLL_WELCOME_BYTES, "sent %zu bytes",
               f->rx_len);
    const uint8_t *welcome = f->rx + COLL_GREETING_BYTES;
    FUZZ_CHECK(prefix_ok(f, welcome) && coll_load_u32(welcome + COLL_PREFIX_BYTES) == 0,
               "WELCOME of an accepted peer is not OK");
    coll_hs_welcome_mac(secret, f->tx, 0, mac);
    FUZZ_CHECK(memcmp(mac, welcome + COLL_PREFIX_BYTES + 4, sizeof(mac)) == 0,
               "WELCOME MAC wrong");
    coll_hello_t h;
    coll_hello_decode(f->tx, &h);
    FUZZ_CHECK(memcmp(&h, &f->hs.hello_fields, sizeof(h)) == 0,
               "hello_fields differ from the HELLO received");
}

static void check_client(const fuzz_hs_t *f, coll_status_t st, const coll_hello_t *fields)
{
    uint8_t mac[COLL_SHA256_BYTES];
    coll_hello_t sent;

    if (f->rx_len >= COLL_HELLO_BYTES) {
        /* Anything we sent is our own, correctly signed HELLO. */
        FUZZ_CHECK(prefix_ok(f, f->rx), "HELLO sent with a bad prefix");
        coll_hello_decode(f->rx, &sent);
        FUZZ_CHECK(sent.src_rank == fields->src_rank && sent.dst_rank == fields->dst_rank &&
                   sent.nranks == fields->nranks && sent.round == fields->round,
                   "HELLO fields differ from the caller's");
        coll_hs_hello_mac(secret, f->tx, f->rx, mac);
        FUZZ_CHECK(memcmp(mac, sent.mac, sizeof(mac)) == 0, "HELLO MAC wrong");
    }
    if (st != COLL_OK)
        return;
    const uint8_t *welcome = f->tx + COLL_GREETING_BYTES;
    FUZZ_CHECK(f->tx_len >= COLL_GREETING_BYTES + COLL_WELCOME_BYTES, "accepted a short reply");
    FUZZ_CHECK(prefix_ok(f, f->tx), "accepted a foreign GREETING");
    FUZZ_CHECK(coll_load_u32(welcome + COLL_PREFIX_BYTES) == COLL_VERDICT_OK,
               "accepted a refusal");
    coll_hs_welcome_mac(secret, f->rx, 0, mac);
    FUZZ_CHECK(memcmp(mac, welcome + COLL_PREFIX_BYTES + 4, sizeof(mac)) == 0,
               "accepted a WELCOME whose MAC is wrong");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint8_t flags = fuzz_byte(&in), vbyte = fuzz_byte(&in);
    int client = flags & 1, sign = flags & 2, keep_open = flags & 64;
    size_t chunk = (flags >> 3) & 7 ? (size_t)1 << (((flags >> 3) & 7) - 1) : SIZE_MAX;
    uint16_t kind = flags & 128 ? COLL_CONN_TCP : COLL_CONN_BOOT;
    coll_hello_t fields = {.prefix.kind = kind, .src_rank = 3, .dst_rank = UINT32_MAX,
                           .nranks = 8, .round = 1};
    coll_addr_t peer = {0};
    fuzz_hs_t *f = calloc(1, sizeof(*f));
    int sv[2];
    coll_status_t st;

    if (!f || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    peer.ss.ss_family = AF_INET;
    peer.len = sizeof(struct sockaddr_in);
    f->peer_fd = sv[1];
    f->verdict = vbyte % 8;
    f->kind = kind;
    f->tx = malloc(in.len ? in.len : 1);
    memcpy(f->tx, in.p, in.len);
    f->tx_len = in.len;
    uint64_t deadline = flags & 4 ? 0 : coll_time_ns() + 60ull * 1000000000ull;
    if (client)
        coll_hs_client_start(&f->hs, sv[0], &peer, &fields, secret, deadline);
    else
        coll_hs_server_start(&f->hs, sv[0], &peer, kind, secret, deadline, validate, f);

    st = coll_hs_progress(&f->hs);
    drain(f);
    if (sign && !client)
        sign_hello(f);
    for (size_t pos = 0; pos < f->tx_len && st == COLL_INPROGRESS;) {
        size_t n = COLL_MIN(chunk, f->tx_len - pos);
        /* The client sends HELLO only after the whole GREETING: stop the
         * chunk there so that the WELCOME can be signed over it. */
        if (client && pos < COLL_GREETING_BYTES)
            n = COLL_MIN(n, COLL_GREETING_BYTES - pos);
        if (sign && client && pos == COLL_GREETING_BYTES)
            sign_welcome(f);
        ssize_t w = write(f->peer_fd, f->tx + pos, n);
        FUZZ_CHECK(w > 0, "socketpair write failed: %s", strerror(errno));
        pos += (size_t)w;
        st = coll_hs_progress(&f->hs);
        drain(f);
    }
    if (!keep_open)
        shutdown(f->peer_fd, SHUT_WR);
    for (int i = 0; i < 4 && st == COLL_INPROGRESS; i++) {
        st = coll_hs_progress(&f->hs);
        drain(f);
    }

    if (st == COLL_INPROGRESS) {
        FUZZ_CHECK(keep_open && deadline != 0, "handshake still running after EOF or deadline");
        uint32_t ev = coll_hs_events(&f->hs);
        FUZZ_CHECK(ev == EPOLLIN || ev == EPOLLOUT, "waits for events %x", ev);
    } else if (st != COLL_OK) {
        FUZZ_CHECK(st < 0 && f->hs.errmsg[0], "status %d without a message", st);
        FUZZ_CHECK(coll_hs_progress(&f->hs) == st, "a finished handshake changed its outcome");
    }
    if (client)
        check_client(f, st, &fields);
    else
        check_server(f, st);

    /* HELLO codec: decode then encode gives the same bytes back. */
    if (f->tx_len >= COLL_HELLO_BYTES) {
        uint8_t again[COLL_HELLO_BYTES];
        coll_hello_t h;
        coll_hello_decode(f->tx, &h);
        coll_hello_encode(&h, again);
        FUZZ_CHECK(memcmp(again, f->tx, sizeof(again)) == 0, "hello encode(decode(x)) != x");
    }
    close(sv[0]);
    close(sv[1]);
    free(f->tx);
    free(f);
    return 0;
}
