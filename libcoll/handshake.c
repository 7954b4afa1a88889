/*
 * handshake.c: the connection handshake as a state machine. Each state
 * moves one message; partial reads and writes resume where they stopped.
 * The server reads the 8-byte prefix before the rest of a HELLO so that a
 * stranger is dropped on its first bytes and a peer of another version is
 * told our version before either side gives up.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "handshake.h"

enum {
    HS_SRV_GREET,        /* writing GREETING */
    HS_SRV_HELLO_PREFIX, /* reading the first 8 bytes of HELLO */
    HS_SRV_HELLO_REST,   /* reading the rest of HELLO */
    HS_SRV_WELCOME,      /* writing WELCOME (the verdict) */
    HS_CLI_GREET,        /* reading GREETING */
    HS_CLI_HELLO,        /* writing HELLO */
    HS_CLI_WELCOME,      /* reading WELCOME */
    HS_DONE,
};

/* A step's result meaning "moved a whole message, step again". */
#define HS_AGAIN ((coll_status_t)(COLL_INPROGRESS + 1))

static const char *kind_name(uint16_t kind)
{
    switch (kind) {
    case COLL_CONN_BOOT: return "bootstrap";
    case COLL_CONN_TCP: return "tcp data";
    default: return "unknown";
    }
}

static coll_status_t hs_fail(coll_hs_t *hs, coll_status_t status, const char *fmt, ...)
    COLL_PRINTF(3, 4);

static coll_status_t hs_fail(coll_hs_t *hs, coll_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hs->errmsg, sizeof(hs->errmsg), fmt, ap);
    va_end(ap);
    hs->state = HS_DONE;
    hs->status = status;
    return status;
}

void coll_hs_hello_mac(const uint8_t *secret, const uint8_t greeting[COLL_GREETING_BYTES],
                       const uint8_t hello[COLL_HELLO_BYTES], uint8_t out[COLL_SHA256_BYTES])
{
    static const char label[] = "libcoll-hello";
    const void *parts[] = {label, greeting, hello};
    size_t lens[] = {sizeof(label), COLL_GREETING_BYTES, COLL_HELLO_FIELDS_BYTES};
    coll_hmac_sha256(secret, COLL_SECRET_BYTES, parts, lens, 3, out);
}

void coll_hs_welcome_mac(const uint8_t *secret, const uint8_t hello[COLL_HELLO_BYTES],
                         uint32_t verdict, uint8_t out[COLL_SHA256_BYTES])
{
    static const char label[] = "libcoll-welcome";
    uint8_t v[4];
    coll_store_u32(v, verdict);
    const void *parts[] = {label, hello, v};
    size_t lens[] = {sizeof(label), COLL_HELLO_BYTES, sizeof(v)};
    coll_hmac_sha256(secret, COLL_SECRET_BYTES, parts, lens, 3, out);
}

static void hello_mac(const coll_hs_t *hs, uint8_t out[COLL_SHA256_BYTES])
{
    coll_hs_hello_mac(hs->secret, hs->greeting, hs->hello, out);
}

static void welcome_mac(const coll_hs_t *hs, uint32_t verdict, uint8_t out[COLL_SHA256_BYTES])
{
    coll_hs_welcome_mac(hs->secret, hs->hello, verdict, out);
}

static void write_prefix(uint8_t *out, uint16_t kind)
{
    coll_prefix_t p = {COLL_WIRE_MAGIC, coll_wire_version(), kind};
    coll_prefix_encode(&p, out);
}

/* Move bytes [io_off, len) of buf; 1 when complete, 0 when blocked, -1 on
 * error (errno set, EPIPE for EOF). */
static int hs_io(coll_hs_t *hs, uint8_t *buf, size_t len, int writing)
{
    while (hs->io_off < len) {
        ssize_t n = writing ? coll_sock_write(hs->fd, buf + hs->io_off, len - hs->io_off)
                            : coll_sock_read(hs->fd, buf + hs->io_off, len - hs->io_off);
        if (n < 0)
            return -1;
        if (n == 0)
            return 0;
        hs->io_off += (size_t)n;
    }
    hs->io_off = 0;
    return 1;
}

static void hs_common_start(coll_hs_t *hs, int fd, const coll_addr_t *peer,
                            const uint8_t *secret, uint64_t deadline_ns)
{
    memset(hs, 0, sizeof(*hs));
    hs->fd = fd;
    hs->secret = secret;
    hs->deadline_ns = deadline_ns;
    hs->status = COLL_INPROGRESS;
    coll_addr_str(peer, hs->peer);
}

void coll_hs_server_start(coll_hs_t *hs, int fd, const coll_addr_t *peer, uint16_t kind,
                          const uint8_t *secret, uint64_t deadline_ns,
                          coll_hs_validate_fn validate, void *arg)
{
    hs_common_start(hs, fd, peer, secret, deadline_ns);
    hs->server = 1;
    hs->kind = kind;
    hs->validate = validate;
    hs->validate_arg = arg;
    hs->state = HS_SRV_GREET;
    write_prefix(hs->greeting, kind);
    if (coll_random_bytes(hs->greeting + COLL_PREFIX_BYTES, COLL_NONCE_BYTES) != 0)
        hs_fail(hs, COLL_ERR_SYSTEM, "getrandom failed: %s", strerror(errno));
}

void coll_hs_client_start(coll_hs_t *hs, int fd, const coll_addr_t *peer,
                          const coll_hello_t *fields, const uint8_t *secret,
                          uint64_t deadline_ns)
{
    hs_common_start(hs, fd, peer, secret, deadline_ns);
    hs->hello_fields = *fields;
    hs->kind = fields->prefix.kind;
    hs->state = HS_CLI_GREET;
    if (coll_random_bytes(hs->hello_fields.nonce, COLL_NONCE_BYTES) != 0)
        hs_fail(hs, COLL_ERR_SYSTEM, "getrandom failed: %s", strerror(errno));
}

static coll_status_t verdict_status(uint32_t verdict)
{
    switch (verdict) {
    case COLL_VERDICT_AUTH: return COLL_ERR_AUTH;
    case COLL_VERDICT_VERSION: return COLL_ERR_VERSION_MISMATCH;
    case COLL_VERDICT_ROUND: /* the owner retries */
    case COLL_VERDICT_NOT_READY: return COLL_ERR_PEER_FAILED;
    default: return COLL_ERR_INVALID_USAGE;
    }
}

static const char *verdict_text(uint32_t verdict)
{
    switch (verdict) {
    case COLL_VERDICT_AUTH: return "wrong job secret (a unique id from another or an earlier job?)";
    case COLL_VERDICT_VERSION: return "wire protocol versions differ";
    case COLL_VERDICT_RANK: return "rank out of range, unexpected here, or already joined";
    case COLL_VERDICT_NRANKS: return "number of ranks differs from the other ranks'";
    case COLL_VERDICT_ROUND: return "another init round is in progress";
    case COLL_VERDICT_KIND: return "wrong kind of connection for this port";
    case COLL_VERDICT_NOT_READY: return "not ready for this connection yet (retry)";
    default: return "unknown verdict";
    }
}

/* ---- server ---- */

static coll_status_t srv_check_prefix(coll_hs_t *hs)
{
    coll_prefix_t p;
    coll_prefix_decode(hs->hello, &p);
    if (p.magic != COLL_WIRE_MAGIC)
        return hs_fail(hs, COLL_ERR_PROTOCOL, "not a libcoll peer (bad magic %08x)", p.magic);
    hs->peer_version = p.version;
    if (p.version != coll_wire_version()) {
        hs->verdict = COLL_VERDICT_VERSION;
        snprintf(hs->errmsg, sizeof(hs->errmsg),
                 "peer speaks wire protocol version %u, this process speaks version %u",
                 p.version, coll_wire_version());
    } else if (p.kind != hs->kind) {
        hs->verdict = COLL_VERDICT_KIND;
        snprintf(hs->errmsg, sizeof(hs->errmsg),
                 "peer opened a %s connection on a %s port", kind_name(p.kind),
                 kind_name(hs->kind));
    }
    return COLL_INPROGRESS;
}

static void srv_judge_hello(coll_hs_t *hs)
{
    uint8_t mac[COLL_SHA256_BYTES];

    coll_hello_decode(hs->hello, &hs->hello_fields);
    hello_mac(hs, mac);
    if (!coll_mem_equal_ct(mac, hs->hello_fields.mac, sizeof(mac))) {
        hs->verdict = COLL_VERDICT_AUTH;
        snprintf(hs->errmsg, sizeof(hs->errmsg), "peer failed to prove it knows the "
                 "job secret (a stale unique id, or not part of this job)");
        return;
    }
    hs->verdict = hs->validate ? hs->validate(hs->validate_arg, &hs->hello_fields)
                               : COLL_VERDICT_OK;
    if (hs->verdict != COLL_VERDICT_OK)
        snprintf(hs->errmsg, sizeof(hs->errmsg), "rank %u refused: %s",
                 hs->hello_fields.src_rank, verdict_text(hs->verdict));
}

static void srv_prepare_welcome(coll_hs_t *hs)
{
    write_prefix(hs->welcome, hs->kind);
    coll_store_u32(hs->welcome + COLL_PREFIX_BYTES, hs->verdict);
    if (hs->verdict == COLL_VERDICT_OK)
        welcome_mac(hs, hs->verdict, hs->welcome + COLL_PREFIX_BYTES + 4);
    else
        memset(hs->welcome + COLL_PREFIX_BYTES + 4, 0, COLL_SHA256_BYTES);
    hs->state = HS_SRV_WELCOME;
}

static coll_status_t srv_step(coll_hs_t *hs)
{
    int r;
    switch (hs->state) {
    case HS_SRV_GREET:
        r = hs_io(hs, hs->greeting, COLL_GREETING_BYTES, 1);
        if (r > 0)
            hs->state = HS_SRV_HELLO_PREFIX;
        break;
    case HS_SRV_HELLO_PREFIX:
        r = hs_io(hs, hs->hello, COLL_PREFIX_BYTES, 0);
        if (r > 0) {
            hs->io_off = COLL_PREFIX_BYTES;
            if (srv_check_prefix(hs) != COLL_INPROGRESS)
                return hs->status;
            if (hs->verdict != COLL_VERDICT_OK)
                srv_prepare_welcome(hs); /* tell a version/kind mismatch, then stop */
            else
                hs->state = HS_SRV_HELLO_REST;
        }
        break;
    case HS_SRV_HELLO_REST:
        r = hs_io(hs, hs->hello, COLL_HELLO_BYTES, 0);
        if (r > 0) {
            srv_judge_hello(hs);
            srv_prepare_welcome(hs);
        }
        break;
    case HS_SRV_WELCOME:
        r = hs_io(hs, hs->welcome, COLL_WELCOME_BYTES, 1);
        if (r > 0) {
            if (hs->verdict == COLL_VERDICT_OK) {
                hs->state = HS_DONE;
                hs->status = COLL_OK;
                return COLL_OK;
            }
            /* errmsg already says why (srv_judge_hello, srv_check_prefix) */
            hs->state = HS_DONE;
            hs->status = verdict_status(hs->verdict);
            return hs->status;
        }
        break;
    default:
        return hs->status;
    }
    if (r < 0)
        return hs_fail(hs, COLL_ERR_PROTOCOL, "connection %s during the handshake",
                       errno == EPIPE ? "closed" : strerror(errno));
    return r > 0 ? HS_AGAIN : COLL_INPROGRESS;
}

/* ---- client ---- */

static coll_status_t cli_check_greeting(coll_hs_t *hs)
{
    coll_prefix_t p;
    coll_prefix_decode(hs->greeting, &p);
    if (p.magic != COLL_WIRE_MAGIC)
        return hs_fail(hs, COLL_ERR_PROTOCOL,
                       "%s is not a libcoll endpoint (bad magic %08x)", hs->peer, p.magic);
    hs->peer_version = p.version;
    if (p.kind != hs->kind && p.version == coll_wire_version())
        return hs_fail(hs, COLL_ERR_INVALID_USAGE, "%s serves %s connections, not %s",
                       hs->peer, kind_name(p.kind), kind_name(hs->kind));
    /* A version mismatch is reported after our HELLO went out, so that the
     * server can name both versions too. */
    coll_hello_t *h = &hs->hello_fields;
    h->prefix.magic = COLL_WIRE_MAGIC;
    h->prefix.version = coll_wire_version();
    coll_hello_encode(h, hs->hello);
    hello_mac(hs, h->mac);
    coll_hello_encode(h, hs->hello);
    hs->state = HS_CLI_HELLO;
    return COLL_INPROGRESS;
}

static coll_status_t cli_check_welcome(coll_hs_t *hs)
{
    uint8_t mac[COLL_SHA256_BYTES];
    uint32_t verdict = coll_load_u32(hs->welcome + COLL_PREFIX_BYTES);

    hs->verdict = verdict; /* the owner retries on COLL_VERDICT_ROUND */
    if (verdict != COLL_VERDICT_OK)
        return hs_fail(hs, verdict_status(verdict), "%s refused this rank: %s", hs->peer,
                       verdict_text(verdict));
    welcome_mac(hs, verdict, mac);
    if (!coll_mem_equal_ct(mac, hs->welcome + COLL_PREFIX_BYTES + 4, sizeof(mac)))
        return hs_fail(hs, COLL_ERR_AUTH,
                       "%s could not prove it knows the job secret (not this job's peer)",
                       hs->peer);
    hs->state = HS_DONE;
    hs->status = COLL_OK;
    return COLL_OK;
}

static coll_status_t cli_step(coll_hs_t *hs)
{
    int r;
    switch (hs->state) {
    case HS_CLI_GREET:
        r = hs_io(hs, hs->greeting, COLL_GREETING_BYTES, 0);
        if (r > 0 && cli_check_greeting(hs) != COLL_INPROGRESS)
            return hs->status;
        break;
    case HS_CLI_HELLO:
        r = hs_io(hs, hs->hello, COLL_HELLO_BYTES, 1);
        if (r > 0) {
            if (hs->peer_version != coll_wire_version())
                return hs_fail(hs, COLL_ERR_VERSION_MISMATCH,
                               "%s speaks wire protocol version %u, this process speaks "
                               "version %u", hs->peer, hs->peer_version, coll_wire_version());
            hs->state = HS_CLI_WELCOME;
        }
        break;
    case HS_CLI_WELCOME:
        r = hs_io(hs, hs->welcome, COLL_WELCOME_BYTES, 0);
        if (r > 0) {
            cli_check_welcome(hs);
            return hs->status;
        }
        break;
    default:
        return hs->status;
    }
    if (r < 0)
        return hs_fail(hs, COLL_ERR_PEER_FAILED, "connection to %s %s during the handshake",
                       hs->peer, errno == EPIPE ? "closed" : strerror(errno));
    return r > 0 ? HS_AGAIN : COLL_INPROGRESS;
}

coll_status_t coll_hs_progress(coll_hs_t *hs)
{
    coll_status_t st;

    if (hs->state == HS_DONE)
        return hs->status;
    do {
        st = hs->server ? srv_step(hs) : cli_step(hs);
    } while (st == HS_AGAIN);
    if (st == COLL_INPROGRESS && hs->state != HS_DONE && coll_time_ns() > hs->deadline_ns)
        return hs_fail(hs, COLL_ERR_TIMEOUT, hs->server ? "no handshake within the deadline "
                       "(a silent or foreign client)" : "%s did not complete the handshake in "
                       "time", hs->peer);
    return hs->state == HS_DONE ? hs->status : st;
}

uint32_t coll_hs_events(const coll_hs_t *hs)
{
    switch (hs->state) {
    case HS_SRV_GREET:
    case HS_SRV_WELCOME:
    case HS_CLI_HELLO:
        return EPOLLOUT;
    default:
        return EPOLLIN;
    }
}
