/*
 * fuzz_peer_info.c: coll_peer_info_decode, the parser of what every rank
 * publishes through the bootstrap (and what the root and every joining
 * rank read from the network). Invariants: the decoder never reads past
 * its buffer (ASan), leaves *info untouched on error, and what it accepts
 * encodes back to exactly the bytes it consumed.
 */
#include "fuzz.h"
#include "transport.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static coll_peer_info_t info, sentinel;
    coll_rbuf_t r = {data, size, 0, 0};
    uint8_t again[COLL_WIRE_PEERINFO_MAX + 64];

    memset(&sentinel, 0xa5, sizeof(sentinel));
    info = sentinel;
    if (coll_peer_info_decode(&r, &info) != COLL_OK) {
        FUZZ_CHECK(memcmp(&info, &sentinel, sizeof(info)) == 0,
                   "decode wrote its output on error");
        return 0;
    }
    FUZZ_CHECK(r.off <= size && !r.underflow, "consumed %zu of %zu bytes", r.off, size);
    FUZZ_CHECK(info.naddrs <= COLL_TP_MAX, "naddrs %u", info.naddrs);
    FUZZ_CHECK(memchr(info.hostname, '\0', sizeof(info.hostname)) != NULL,
               "hostname not terminated");
    for (uint32_t i = 0; i < info.naddrs; i++)
        FUZZ_CHECK(info.addrs[i].len <= COLL_TP_ADDR_MAX, "address %u: %u bytes", i,
                   info.addrs[i].len);

    /* Round trip: the encoding of what was accepted is what was read. */
    coll_wbuf_t w = {again, sizeof(again), 0, 0};
    coll_peer_info_encode(&info, &w);
    FUZZ_CHECK(!w.overflow && w.off == r.off && memcmp(again, data, r.off) == 0,
               "encode(decode(x)) differs from x (%zu vs %zu bytes)", w.off, r.off);
    FUZZ_CHECK(w.off <= COLL_WIRE_PEERINFO_MAX, "a valid peer info of %zu bytes exceeds "
               "the bootstrap cap %d", w.off, COLL_WIRE_PEERINFO_MAX);
    return 0;
}
