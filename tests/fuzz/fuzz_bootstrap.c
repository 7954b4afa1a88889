/*
 * fuzz_bootstrap.c: the bootstrap frames after the handshake, through the
 * functions the bootstrap itself uses (bootstrap.h):
 *   mode 0, join side: coll_boot_read_reply reads the root's TABLE or
 *     ERROR frame from a socket; the fuzzer's bytes are what the "root"
 *     sends, then EOF.
 *   mode 1, root side: a RANKINFO frame, header (coll_boot_rankinfo_len)
 *     then payload (coll_boot_parse_rankinfo), as conn_read does.
 * Input: mode byte, a byte choosing nranks (1-4) and rank, then the frame.
 *
 * Invariants: a failure leaves the caller's table / info untouched and
 * has a message; an accepted TABLE is exactly the encoding of the infos
 * it produced (nothing skipped, nothing trailing) with rank i at index i;
 * an accepted RANKINFO is exactly one encoded info of the expected rank.
 */
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap.h"
#include "fuzz.h"

#define NRANKS_MAX 4

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

/* encode(info) must be the `len` bytes at p. */
static void check_encoding(const coll_peer_info_t *info, const uint8_t *p, size_t len)
{
    uint8_t buf[2 * COLL_WIRE_PEERINFO_MAX];
    coll_wbuf_t w = {buf, sizeof(buf), 0, 0};

    coll_peer_info_encode(info, &w);
    FUZZ_CHECK(!w.overflow && w.off == len && memcmp(buf, p, len) == 0,
               "accepted peer info does not re-encode to its %zu bytes (%zu)", len, w.off);
}

static void fuzz_join(const uint8_t *frame, size_t len, int nranks, int rank, int abort_now)
{
    static coll_peer_info_t table[NRANKS_MAX], sentinel[NRANKS_MAX];
    int sv[2], abort_flag = abort_now;
    coll_waiter_t waiter = {&abort_flag, NULL, NULL};
    coll_status_t st;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    FUZZ_CHECK(len == 0 || write(sv[1], frame, len) == (ssize_t)len, "short socketpair write");
    shutdown(sv[1], SHUT_WR);
    memset(sentinel, 0x5a, sizeof(sentinel));
    memcpy(table, sentinel, sizeof(table));
    fuzz_clear_errmsg();
    st = coll_boot_read_reply(sv[0], nranks, rank, "127.0.0.1:1", coll_time_ns() + 10000000000ull,
                              &waiter, table);
    close(sv[0]);
    close(sv[1]);
    if (st != COLL_OK) {
        FUZZ_CHECK(st < 0, "status %d", st);
        fuzz_check_errmsg("coll_boot_read_reply");
        FUZZ_CHECK(memcmp(table, sentinel, sizeof(table)) == 0, "table written on error");
        return;
    }
    FUZZ_CHECK(len >= COLL_BOOT_HDR_BYTES && coll_load_u32(frame) == COLL_BOOT_TABLE,
               "accepted a frame that is not a TABLE");
    size_t body = coll_load_u32(frame + 4), off = COLL_BOOT_HDR_BYTES;
    FUZZ_CHECK(body <= len - COLL_BOOT_HDR_BYTES, "accepted a truncated TABLE");
    for (int i = 0; i < nranks; i++) {
        uint32_t n = coll_load_u32(frame + off);
        FUZZ_CHECK(table[i].rank == (uint32_t)i, "entry %d has rank %u", i, table[i].rank);
        check_encoding(&table[i], frame + off + 4, n);
        off += 4 + n;
    }
    FUZZ_CHECK(off == COLL_BOOT_HDR_BYTES + body, "TABLE has %zu bytes beyond its entries",
               COLL_BOOT_HDR_BYTES + body - off);
}

static void fuzz_rankinfo(const uint8_t *frame, size_t len, uint32_t rank)
{
    coll_peer_info_t info, sentinel;

    if (len < COLL_BOOT_HDR_BYTES)
        return;
    uint32_t n = coll_boot_rankinfo_len(frame);
    if (n == 0) {
        FUZZ_CHECK(coll_load_u32(frame) != COLL_BOOT_RANKINFO || coll_load_u32(frame + 4) == 0 ||
                   coll_load_u32(frame + 4) > COLL_WIRE_PEERINFO_MAX,
                   "a valid RANKINFO header refused");
        return;
    }
    FUZZ_CHECK(n <= COLL_WIRE_PEERINFO_MAX, "length %u passes the cap", n);
    if (len - COLL_BOOT_HDR_BYTES < n)
        return; /* the root would wait for the rest */
    memset(&sentinel, 0x5a, sizeof(sentinel));
    info = sentinel;
    if (coll_boot_parse_rankinfo(frame + COLL_BOOT_HDR_BYTES, n, rank, &info) != COLL_OK) {
        FUZZ_CHECK(memcmp(&info, &sentinel, sizeof(info)) == 0, "info written on error");
        return;
    }
    FUZZ_CHECK(info.rank == rank, "accepted rank %u for rank %u", info.rank, rank);
    check_encoding(&info, frame + COLL_BOOT_HDR_BYTES, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint8_t mode = fuzz_byte(&in), who = fuzz_byte(&in);
    int nranks = 1 + (who & 3), rank = (who >> 2) % nranks;

    if (mode & 1)
        fuzz_rankinfo(in.p, in.len, (uint32_t)rank);
    else
        fuzz_join(in.p, in.len, nranks, rank, mode & 2);
    return 0;
}
