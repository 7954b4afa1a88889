/*
 * shm.h: the shared-memory transport's objects (one file each:
 * shm_ring.c, shm_iface.c, shm_ep.c, shm_msg.c) and its record format.
 *
 * For ranks on one host. Per pair of ranks one POSIX shared-memory segment
 * holds two single-producer/single-consumer byte rings, one per direction.
 * The higher rank creates it ("/coll.<pid>.<nonce>.<peer>"), reserves its
 * space up front (posix_fallocate: a sparse tmpfs file could SIGBUS on
 * first touch), the lower rank maps it and unlinks the name at once: a job
 * that is killed leaves nothing in /dev/shm.
 *
 * A ring carries records, 64-byte aligned, never wrapping (a PAD record
 * fills the end of the ring instead), each a 32-byte header and a payload:
 *   EAGER  tag, len, payload            messages up to the eager limit
 *   RTS    tag, aux=len, id=send id,    "I have len bytes for tag"; the
 *          payload = u64 address        address is for cross-memory attach
 *          [+ shm_rts_map_t]            and the region from coll_mem_alloc
 *                                       that holds it (shm_map.c)
 *   CTS    id=send id, aux=recv id      "copy them through the ring"
 *   DATA   id=recv id, aux=offset, len, payload (one chunk)
 *   FIN    id=send id                   "I read them myself" (or dropped
 *                                       them: the receive reports it)
 *   BYE    no fields                    the peer left the communicator
 * With COLL_CHECKSUM=1 (the same on every rank, checked at init), `flags`
 * holds the CRC-32C of the record (header with flags 0, then payload),
 * PAD records excepted; the reader checks it before acting on the record.
 * Data read with process_vm_readv, or out of a mapping of the sender's
 * memory (shm_map.c), is not covered: it never passes through the ring.
 * An abort is not a record (the ring may be full): the text goes into the
 * ring's control block and `closed` is set.
 *
 * Large messages take one copy: the receiver reads the sender's buffer
 * with process_vm_readv (Linux cross-memory attach) and answers FIN. Where
 * that is not permitted (seccomp, ptrace rules, COLL_SHM_CMA=0) the
 * receiver answers CTS and the data is pipelined through the ring.
 *
 * Waiting: the core spins, then sleeps in its event loop. Before it
 * sleeps, this transport's idle hook raises the rank's `asleep` flag in
 * every segment and looks at the rings once more; a peer that writes a
 * record (or frees space) for a sleeping rank sends one byte to that
 * rank's abstract unix datagram socket, which is in its event loop. Both
 * sides store then load with seq_cst atomics (Dekker), so no wakeup is
 * lost. A peer's death is seen through a pidfd in the event loop.
 * A receiver raises its `reading` flag while it copies a sender's buffer
 * with process_vm_readv; the sender counts that as progress and keeps
 * polling instead of sleeping, so the FIN that ends the read costs no
 * wake-up (shm_ep_being_read). The read itself waits for the end of the
 * endpoint's next poll (rndv_reads): a receive posted, or an RTS read,
 * while the rank still has its own sends to post would otherwise hold
 * those RTS back for the whole copy, and the peer's read of them would
 * start only after ours instead of beside it.
 */
#ifndef COLL_SHM_H
#define COLL_SHM_H

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "transport.h"
#include "util/match.h"

#define SHM_MAGIC 0x316d68736c6c6f63ull /* "collshm1" */
#define SHM_VERSION 10 /* 10: reply buffers in RTS; 9: mapped regions in RTS (shm_map.c) */
#define SHM_LINE 64
#define SHM_REC_HDR 32
#define SHM_ABORT_TEXT 512
/* Piece of a single-copy read that is reduced while in cache (cma_fold):
 * fits in L2 with the local operand's piece beside it, and each costs two
 * system calls where the fold is written back (write_back). 2 ranks on
 * the Intel VM (L2 2 MiB), all-reduce in place, alternating rounds, us:
 * 16 MiB 1687 with 64 KiB against 1546 with 256 KiB, 4 MiB 434 against
 * 382; in other rounds 256 KiB against 512 KiB and 1 MiB: 1635, 1701,
 * 2014 and 402, 425, 514. Reduce-scatters were level. */
#define SHM_BOUNCE_BYTES (256u << 10)
/* First DATA record of a message through the ring; each next one carries
 * as much as all before it and this, up to a quarter ring (32, 64, 128
 * KiB, ...): the receiver starts copying out after a small piece, and
 * the rest crosses in large ones. 2 ranks, 5 alternating launches,
 * against 128 KiB pieces throughout: all-reduce of 1 MiB 108 / 96 -> 103
 * / 93 us out / in place, of 4 MiB 426 / 325 -> 406 / 316, broadcast of
 * 1 MiB 71 -> 68 out of place; all-to-all of 1 MiB level; 64 MiB level.
 * 32 KiB pieces throughout took 64 MiB out of place 10% slower (14.7 ->
 * 16.2 ms): each record costs a cache line each way for head and tail. */
#define SHM_DATA_FIRST (32u << 10)
/* A message the receiver may read from the sender's memory (an RTS with
 * an address, up to COLL_SHM_CMA_MAX) is read, or asked for through the
 * ring, by which has been cheaper lately (COLL_SHM_CMA_ADAPT; shm_msg.c,
 * cheaper_way): faster from the choice to the last byte where each rank
 * has a CPU, less CPU time per byte in copies where ranks share CPUs.
 * Which is cheaper changes with where the two CPUs are. The way not taken
 * is tried again, for SHM_WAY_TRIAL messages in a row, after this many
 * messages, and after twice as many each time it lost again, up to
 * SHM_WAY_RETRY_MAX: a retry costs slower messages (2 ranks, all-gather
 * of 1 MiB in a phase where the ring wins: the read 110-250 ns/KiB
 * against 70-130 for the ring's two copies together; of 300 messages the
 * lower rank read 10 with a retry every 32, 4-5 with this rule), while a
 * way that became dearer is left at once by the averages alone. A trial
 * of one message priced the read by its worst: the first read after a
 * spell of the ring took 160-320 ns/KiB, the next 60-180, then 50-65.
 * Where each rank has a CPU the ring's first try waits for
 * SHM_WAY_FIRST_RING reads (retry_interval). */
#define SHM_WAY_RETRY 32
#define SHM_WAY_RETRY_MAX 1024
#define SHM_WAY_TRIAL 4
#define SHM_WAY_FIRST_RING 128
/* Where priced by delivery, the ring is taken only when it delivered this
 * much faster than the read: a message through the ring costs two copies
 * of CPU time against the read's one, which the delivery time does not
 * show where both directions move at once (2 ranks, all-gather of 1 MiB
 * in place, 1000 calls: both ways priced 70-100 ns/KiB, yet calls of 32
 * us reading against 47 with spells of up to 512 messages on the ring). */
#define SHM_WAY_RING_MARGIN 1.25
enum { SHM_WAY_READ, SHM_WAY_RING, SHM_NWAYS };
/* Set in an RTS's address: the message lies in huge pages, so the
 * receiver may read it above COLL_SHM_CMA_MAX where its own buffer does
 * too (shm_pages.c). Linux never gives user space an address with the
 * top bit set (on x86-64 and arm64 that half is the kernel's). */
#define SHM_RTS_HUGE (1ull << 63)
/* Set in an RTS's address (above the iface's share_max only beside
 * SHM_RTS_HUGE): the sender waits for this send alone and offers to copy
 * part of it (shm_share.c), in pieces of about 1 / SHM_SHARE_PIECES of
 * the message. */
#define SHM_RTS_SHARE (1ull << 62)
#define SHM_SHARE_PIECES 16
/* Set in an RTS's address: the message lies in memory from coll_mem_alloc,
 * named after the address (shm_rts_map_t); the receiver that maps that
 * region copies the message straight out of it. SHM_RTS_NOREAD beside it:
 * a receiver that cannot map it must not read with process_vm_readv
 * either, but ask for the data through the ring. */
#define SHM_RTS_MAPPED (1ull << 61)
#define SHM_RTS_NOREAD (1ull << 60)
/* Set in an RTS's address above COLL_SHM_CMA_MAX: the sender asked for
 * one copy (COLL_TP_HINT_ONE_COPY: the ring all-gather, the pairwise
 * all-to-all out of place, a scatter's root), so it has copies of its own
 * to make while the receiver copies, and the receiver may read the message
 * where it does not reduce it. The ring's second copy then buys nothing:
 * on the Intel VM of 2026-12-07, 2 ranks, reading the 8 MiB blocks of a
 * 16 MiB all-gather took it from 1923 to 1419 us out of place and from
 * 1335 to 832 in place (Open MPI: 1439 and 870). */
#define SHM_RTS_BUSY (1ull << 59)
/* Set in an RTS's address: a send its receiver only copies, on a host with
 * more ranks than CPUs (shm_msg.c, crowd_read). The receiver reads it at
 * any size and does not weigh the ring (choose_way): there the ring needs
 * both ranks on a CPU at once, chunk after chunk, where the read needs the
 * receiver alone. 4 ranks on the 2 CPUs of the VM of 2026-12-07, medians
 * of 3 alternating rounds, us out / in place: all-to-all of 16 MiB 5940 /
 * 6697 -> 4106 / 5866, broadcast of 16 MiB 5944 / 4361 -> 4231 / 4399,
 * with COLL_SHM_CMA_ADAPT=0 against its default. 57-bit user addresses
 * (5-level paging) leave bit 58 clear. */
#define SHM_RTS_CROWD (1ull << 58)
#define SHM_RTS_FLAGS                                                                     \
    (SHM_RTS_HUGE | SHM_RTS_SHARE | SHM_RTS_MAPPED | SHM_RTS_NOREAD | SHM_RTS_BUSY |      \
     SHM_RTS_CROWD)
/* A region from coll_mem_alloc as an RTS names it, after the address
 * (little endian on the wire, like the rest of the record). */
typedef struct shm_rts_map {
    uint64_t id;    /* the sender's region: unique in its process */
    uint64_t base;  /* in the sender's address space */
    uint64_t len;
    uint64_t ino;   /* of its memfd: the receiver checks the file it opened */
    int32_t fd;     /* the memfd, in the sender's process */
    uint32_t zero;
} shm_rts_map_t;
#define SHM_RTS_PLAIN 8 /* payload bytes of an RTS without a region */
#define SHM_RTS_WITH_MAP (SHM_RTS_PLAIN + sizeof(shm_rts_map_t))
/* An RTS whose sender takes the folded range back (COLL_TP_HINT_REPLY):
 * the address, then where the receiver may write the result. */
#define SHM_RTS_REPLY (SHM_RTS_PLAIN + 8)
/* FIN.aux: the receiver wrote the folded range into the sender's reply
 * buffer. */
#define SHM_FIN_REPLIED 1u
/* Regions of a peer mapped per endpoint; the least recently used goes. */
#define SHM_MAPS 32

/* The CPUs whose autos differ (COLL_SHM_CMA_THRESHOLD, _MAX, _CROWDED;
 * shm_iface.c); the tests ask it too, to know which auto applies. */
static inline int shm_cpu_is_intel(void)
{
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_is("intel");
#else
    return 0;
#endif
}

/* Copies timed per endpoint for that choice (ns per byte, moving averages) */
enum { SHM_COPY_IN, SHM_COPY_OUT, SHM_COPY_READ, SHM_NCOPIES };

/* Smallest and largest ring (COLL_SHM_RING_SIZE is clamped to these). */
#define SHM_RING_MIN (16u << 10)
#define SHM_RING_MAX (64u << 20)
/* An eager message that arrives before its receive is posted stays in the
 * ring (parked) until it is: a sender that runs ahead, like a broadcast's
 * root in a loop, then waits for room, where copying every message out to
 * the heap let it run ahead without bound and cost the reader two copies
 * and page faults per message. The reader copies a parked message out
 * after all when it must read past it: a receive posted for another
 * message, a rendezvous under way, the peer leaving, records of its own
 * that wait for room (ranks in a cycle of blocking sends: an eager send
 * must not deadlock), or a sender that found no room for this long (it
 * waits for something of ours that waits for something else). */
#define SHM_PARK_MAX_NS 1000000ull

enum shm_rec_type {
    SHM_PAD = 1,
    SHM_EAGER = 2,
    SHM_RTS = 3,
    SHM_CTS = 4,
    SHM_DATA = 5,
    SHM_FIN = 6,
    SHM_BYE = 7,
};

typedef struct shm_rec {
    uint32_t type;
    uint32_t len;   /* payload bytes after the header */
    uint32_t id;
    uint32_t flags;
    uint64_t tag;
    uint64_t aux;
} shm_rec_t;

_Static_assert(sizeof(shm_rec_t) == SHM_REC_HDR, "record header is 32 bytes");

/* One direction's control block. Head and tail live on their own cache
 * lines: the producer writes one, the consumer the other. */
typedef struct shm_ring_ctl {
    _Alignas(SHM_LINE) uint64_t head; /* producer: bytes written, ever */
    uint32_t closed;                  /* producer: 1 once it aborted */
    uint32_t abort_len;
    int32_t abort_status;             /* producer: its status (coll_tp_abort_status) */
    /* producer: since when (coll_time_ns) records have waited for room
     * without any being written; 0: none waits (see SHM_PARK_MAX_NS) */
    uint64_t stuck_since;
    _Alignas(SHM_LINE) uint64_t tail; /* consumer: bytes consumed, ever */
    _Alignas(SHM_LINE) char abort_text[SHM_ABORT_TEXT];
} shm_ring_ctl_t;

/* A message that both ranks copy (shm_share.c), published by its
 * receiver in the block of its side; the claim word and the sender's
 * count on lines of their own. */
typedef struct shm_share {
    /* receiver: (generation << 32), stored after the fields below; either
     * rank: + 1 claims the next piece */
    _Alignas(SHM_LINE) uint64_t claim;
    uint64_t src, dst, len, piece; /* the sender's and the receiver's addresses, bytes */
    uint32_t send_id;              /* the sender's id from the RTS */
    /* sender: (generation << 32) + its pieces written, and whether a write
     * failed; the receiver resets both */
    _Alignas(SHM_LINE) uint64_t written;
    uint32_t failed;
} shm_share_t;

/* The start of a segment; ring 0 carries lo -> hi, ring 1 hi -> lo. */
typedef struct shm_seg_hdr {
    uint64_t magic;                   /* written last by the creator */
    uint32_t version;
    uint32_t ring_bytes;
    uint32_t rank_lo, rank_hi;
    uint64_t nonce;                   /* the creator's */
    uint32_t acceptor_mapped;         /* set by the lower rank */
    struct {
        _Alignas(SHM_LINE) uint32_t v; /* side 0 = lo, 1 = hi: about to sleep */
    } asleep[2];
    struct {
        _Alignas(SHM_LINE) uint32_t v; /* side: reading the other side's memory now */
    } reading[2];
    /* lower rank: (choices << 1) | the way (SHM_WAY_*) it took last for a
     * message it could read (shm_msg.c, choose_way); 0: none yet */
    _Alignas(SHM_LINE) uint32_t lead_way;
    shm_share_t share[2];             /* by the receiver's side */
    shm_ring_ctl_t ctl[2];
} shm_seg_hdr_t;

/* Mailboxes (transport.h), one per direction after the rings. A slot's
 * sequence number shares the first cache line with its length and the
 * first 48 bytes of data, so that a small message is one line to move. */
#define SHM_MBOX_BYTES (16u << 10)
/* Slots per direction: how many calls a broadcast's root (or a reduce's
 * leaves) may run ahead of a reader. Two held back-to-back small rooted
 * calls to a lockstep; eight cost 200 KiB more per pair of ranks. */
#define SHM_MBOX_SLOTS 8u

typedef struct shm_mbox_slot {
    _Alignas(SHM_LINE) uint64_t seq; /* writer: the message it holds, stored last */
    uint64_t len;
    uint8_t data[SHM_MBOX_BYTES];
} shm_mbox_slot_t;

typedef struct shm_mbox {
    _Alignas(SHM_LINE) uint64_t released; /* reader: messages read, ever */
    shm_mbox_slot_t slot[SHM_MBOX_SLOTS];
} shm_mbox_t;

/* Bytes before the ring data (page aligned), and a whole segment: header,
 * two rings, two mailboxes (box 0 carries lo -> hi, as ring 0). */
#define SHM_SEG_HDR_BYTES ((sizeof(shm_seg_hdr_t) + 4095) & ~(size_t)4095)
#define SHM_SEG_BYTES(ring) (SHM_SEG_HDR_BYTES + 2 * (size_t)(ring) + 2 * sizeof(shm_mbox_t))

/* What a rank publishes (the address blob, little endian):
 *   u8 version, u8 flags, u16 zero, u32 pid, u64 nonce, u64 pid namespace,
 *   u64 /dev/shm device */
#define SHM_ADDR_BYTES 32
#define SHM_ADDR_USABLE 0x1 /* /dev/shm has room: peers may pick shm */
#define SHM_ADDR_CMA 0x2    /* its buffers may be read with process_vm_readv */
#define SHM_ADDR_MEMBARRIER 0x4 /* it fences for sleeping peers (shm_store_wake) */

typedef struct shm_addr {
    uint8_t version;
    uint8_t flags;
    uint32_t pid;
    uint64_t nonce;
    uint64_t pidns;
    uint64_t shmdev;
} shm_addr_t;

/* The producer side of a ring, in process memory. */
typedef struct shm_tx_ring {
    shm_ring_ctl_t *ctl;
    uint8_t *data;
    uint64_t head;        /* our copy of ctl->head */
    uint64_t tail_cache;  /* last tail we read */
    uint64_t mask;
} shm_tx_ring_t;

typedef struct shm_rx_ring {
    shm_ring_ctl_t *ctl;
    uint8_t *data;
    uint64_t tail;        /* our copy of ctl->tail */
    uint64_t mask;
} shm_rx_ring_t;

/* One item of an endpoint's send queue (kept while the ring is full). */
typedef struct shm_tx {
    coll_list_t link;
    shm_rec_t rec;
    coll_tp_req_t *req;   /* EAGER, RTS, DATA: its request */
    int heap;             /* a control record: free once written */
} shm_tx_t;

/* Per-request state, kept in coll_tp_req_t.scratch. */
typedef struct shm_req_priv {
    shm_tx_t tx;
    uint32_t id;          /* send: our id in RTS */
    uint32_t peer_id;     /* send: the receiver's id from CTS; read: the sender's id */
    uint64_t addr;        /* read: the sender's buffer (RTS) */
    int share;            /* read: the sender offered to copy part (SHM_RTS_SHARE) */
    size_t data_off;      /* send: payload bytes queued so far */
    int read_seen;        /* send: the peer was seen reading (logged once) */
    int weighed;          /* it could have been read: its copies are timed (choose_way) */
    uint64_t chosen;      /* read: when choose_way chose (0: not timed) */
    int mapped;           /* read: out of our mapping of the sender's region (shm_map.c) */
    int crowd;            /* read: for SHM_RTS_CROWD, not weighed */
    uint64_t reply;       /* read: where the sender takes the folded range back (0: nowhere) */
} shm_req_priv_t;

_Static_assert(sizeof(shm_req_priv_t) <= COLL_TP_REQ_SCRATCH, "shm request state too large");

static inline shm_req_priv_t *shm_priv(coll_tp_req_t *req)
{
    return (shm_req_priv_t *)req->scratch;
}

enum shm_ep_state {
    SHM_EP_WAIT_SEG,    /* lower rank: the segment does not exist yet */
    SHM_EP_WAIT_MAP,    /* higher rank: created, waiting for the peer to map it */
    SHM_EP_READY,
    SHM_EP_CLOSED,
};

typedef struct shm_iface shm_iface_t;

typedef struct shm_ep {
    coll_tp_ep_t super;
    shm_iface_t *iface;
    int state;
    int side;                 /* 0: we are the lower rank of the pair */
    shm_addr_t peer_addr;
    char name[64];            /* segment name, "" once unlinked */
    shm_seg_hdr_t *seg;
    size_t seg_bytes;
    shm_tx_ring_t tx;
    shm_rx_ring_t rx;
    shm_mbox_t *mbox_out, *mbox_in;
    /* What a mailbox call waits for (0: nothing), for the idle hook:
     * message mbox_want_in to arrive, or the release that lets message
     * mbox_want_out be written. */
    uint64_t mbox_want_in, mbox_want_out;
    uint64_t mbox_released;   /* writer: the reader's `released` as last read */
    size_t max_payload;       /* per record */
    int pidfd;
    coll_ev_source_t pid_src;
    uint64_t pid_check_ns;    /* kill(pid, 0) fallback when pidfd_open fails */
    struct sockaddr_un wake_addr; /* the peer's abstract socket */
    socklen_t wake_len;
    coll_status_t error;      /* why it closed; COLL_OK while usable */
    int peer_left;            /* got BYE */
    int bye_queued;
    int in_rx;                /* inside shm_ep_poll */
    /* Read by the idle hook, which runs without the communicator's lock:
     * only these, with atomics, and the shared control blocks. */
    int armed;                /* READY: the hook may look at the rings */
    int plain_stores;         /* both sides fence when they sleep (shm_store_wake) */
    int tx_blocked;           /* a record waits for space */
    /* the ring's head when the reader left an eager message in the ring
     * for its receive (0: it did not): the idle hook's "no new input" */
    uint64_t rx_parked_head;
    int rx_drain;             /* park nothing: the peer's process is gone */

    coll_list_t txq;          /* shm_tx_t */
    coll_match_t match;
    coll_list_t rndv_sends;   /* RTS written, waiting for CTS or FIN (req->link) */
    coll_list_t rndv_recvs;   /* CTS written, waiting for DATA (req->link) */
    coll_list_t rndv_reads;   /* matched RTS, read at the end of the next poll */
    int reads_due;            /* rndv_reads is not empty (the idle hook's view) */
    uint32_t next_send_id;
    uint32_t next_recv_id;
    /* choose_way: ns per byte of each copy (0: not timed yet), messages
     * since each way was last taken, messages taken each way (and of
     * them, the way the lower rank took last) */
    double copy_ns_per_byte[SHM_NCOPIES];
    uint64_t copies_timed[SHM_NCOPIES];
    double way_ns_per_byte[SHM_NWAYS]; /* from the choice to the last byte */
    uint64_t ways_timed[SHM_NWAYS];
    uint32_t way_since[SHM_NWAYS];
    /* the interval of retries (SHM_WAY_RETRY at first), the way being retried
     * plus one (0: none) and copies_timed of its copy when it was; the
     * retries judged, and of them those the retried way won; the ways left
     * because their average drifted up (each starts the interval over) */
    uint32_t retry_every;
    int retrying;
    uint32_t trial_left;      /* messages the retried way still takes */
    uint64_t retry_mark;
    uint32_t retries, retries_won, drifts;
    uint64_t way_taken[SHM_NWAYS];
    uint64_t way_followed;
    /* higher rank: seg->lead_way at our last choice, and our choices since
     * it last changed (lead_way in shm_msg.c) */
    uint32_t lead_seen, lead_idle;
    uint32_t lead_choices;    /* lower rank: choices published in seg->lead_way */
    /* shm_share.c, as receiver: the shared read waiting for the sender's
     * pieces (NULL: none), its error, the word the sender's count reaches
     * then (0: none; the idle hook reads it), the last generation; while
     * pieces are left to claim (share_taking, for the idle hook too),
     * whether it was published in this poll and how many pieces we read;
     * the numbers logged at the end: shared reads, their pieces, and of
     * them the sender's. As sender: pieces we wrote. */
    coll_tp_req_t *share_req;
    int share_err;
    uint64_t share_want;
    uint64_t share_gen;
    int share_taking, share_fresh;
    uint64_t share_ours;
    uint64_t share_reads, share_pieces, share_pieces_peer, share_written;
    /* shm_map.c, as receiver: the peer's regions mapped (SHM_MAPS of them,
     * allocated with the first), the clock of their last use, whether the
     * kernel refused us its memfds (then not asked again), and the
     * messages copied out of them (logged at the end) */
    struct shm_map *maps;
    uint64_t map_clock;
    int map_refused;
    uint64_t map_reads;
    uint64_t crowd_reads;     /* messages read for SHM_RTS_CROWD (logged at the end) */
    uint64_t replies;         /* folded messages written back (logged at the end) */
} shm_ep_t;

struct shm_iface {
    coll_tp_iface_t super;
    shm_addr_t addr;
    int wake_fd;              /* our abstract datagram socket */
    coll_ev_source_t wake_src;
    shm_ep_t **eps;           /* by peer rank */
    size_t ring_bytes;
    size_t eager_limit;
    size_t cma_threshold;
    size_t cma_max;           /* COLL_SHM_CMA_MAX; SIZE_MAX: none */
    size_t cma_max_spread;    /* the same where each rank of the host has a CPU */
    size_t share_max;         /* largest message shared (shm_share.c); SIZE_MAX: none */
    size_t cma_crowded;       /* COLL_SHM_CMA_CROWDED; 0: off */
    int pagemap_fd;           /* /proc/self/pagemap, for shm_pages_huge; -1: none */
    uint8_t *bounce;          /* SHM_BOUNCE_BYTES for cma_fold, allocated on first use */
    int cma;                  /* we may read peers' memory */
    int cma_adapt;            /* COLL_SHM_CMA_ADAPT */
    int share;                /* COLL_SHM_CMA_SHARE, until a write is refused */
    int map;                  /* COLL_SHM_MAP: name regions from coll_mem_alloc in RTS */
    int reply;                /* COLL_SHM_REPLY, until a write is refused */
    int membarrier;           /* registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED */
    int hook_set;
    int ntx_blocked;          /* endpoints whose records wait for room */
    coll_blocks_t blocks;     /* eager payloads that came before their receive */
};

/* shm_ring.c: the byte rings and the segment's life. */
void shm_rings_attach(shm_ep_t *ep);
void *shm_ring_reserve(shm_tx_ring_t *r, size_t rec_bytes);
void shm_ring_commit(shm_tx_ring_t *r, size_t rec_bytes);
/* Are the read and the ring priced by delivery, from the choice to the
 * last byte (each rank has a CPU), rather than by the copies' CPU time
 * (ranks share CPUs)? (cheaper_way in shm_msg.c) */
static inline int shm_ways_by_delivery(const shm_ep_t *ep)
{
    return !ep->iface->super.crowded;
}

static inline size_t shm_rec_bytes(size_t payload)
{
    return (SHM_REC_HDR + payload + SHM_LINE - 1) & ~(size_t)(SHM_LINE - 1);
}
coll_status_t shm_seg_create(shm_ep_t *ep);
int shm_seg_try_map(shm_ep_t *ep);
void shm_seg_release(shm_ep_t *ep);
void shm_seg_name(char *buf, size_t len, uint32_t pid, uint64_t nonce, int peer);

/* shm_pages.c: 1 when every page of buf[0, len) is present and huge
 * (THP or hugetlb); 0 when not, or where the kernel cannot say (before
 * Linux 6.7). fd: shm_pages_open's, or -1. */
int shm_pages_open(void);
int shm_pages_huge(int fd, const void *buf, size_t len);

/* shm_share.c */
/* Copy len bytes between our `local` and the peer's `remote` (write: to
 * it) with cross-memory attach: 0, or the errno. */
int shm_cma(shm_ep_t *ep, void *local, uint64_t remote, size_t len, int write);
/* Receiver: read our pieces of req from the sender's addr: 0 or the errno
 * when the message is in, -1 when the sender's pieces are still being
 * written (shm_share_poll ends it with shm_read_end). */
int shm_share_read(shm_ep_t *ep, coll_tp_req_t *req, uint64_t addr);
/* Receiver: publish req, matched now, for the sender to write while we
 * do other work; shm_share_poll reads what it left, from the next poll
 * on, and ends it. */
void shm_share_publish(shm_ep_t *ep, coll_tp_req_t *req, uint64_t addr);
int shm_share_poll(shm_ep_t *ep);
int shm_share_ready(const shm_ep_t *ep);
/* Receiver: fail the pending shared read, once no write into it is due. */
void shm_share_abandon(shm_ep_t *ep, coll_status_t status);
/* Sender: write the pieces the peer left of our sends; 1 when any. */
int shm_share_help(shm_ep_t *ep);
int shm_share_offered(const shm_ep_t *ep);

/* shm_map.c */
/* Sender: 1 and *m when req's buffer lies in a region from coll_mem_alloc
 * that its RTS should name. */
int shm_map_offer(const shm_ep_t *ep, const coll_tp_req_t *req, shm_rts_map_t *m);
/* Receiver: an RTS named a region; map it unless it is mapped already. */
void shm_map_learn(shm_ep_t *ep, const shm_rts_map_t *m);
/* Receiver: where the sender's [addr, addr + len) is in our mapping of
 * its region; NULL when no region mapped holds it. */
const uint8_t *shm_map_find(shm_ep_t *ep, uint64_t addr, size_t len);
void shm_map_release(shm_ep_t *ep);

/* shm_iface.c */
void shm_wake_peer(shm_ep_t *ep);
int shm_peer_addr(shm_ep_t *ep, const coll_peer_info_t *peer);
/* After we wrote records to, or consumed records from, ep's peer. Our
 * store of head (or tail) was seq_cst, and so is this load, as are the
 * sleeper's store of its flag and its loads of head and tail: in the one
 * total order of those operations one side sees the other's store, so no
 * wakeup is lost (no fences: ThreadSanitizer does not model them). */
static inline void shm_maybe_wake(shm_ep_t *ep)
{
    uint32_t *flag = &ep->seg->asleep[!ep->side].v;
    if (__atomic_load_n(flag, __ATOMIC_SEQ_CST) && __atomic_exchange_n(flag, 0, __ATOMIC_SEQ_CST))
        shm_wake_peer(ep);
}

/* Publish a counter the peer may be about to sleep on, then wake it if it
 * sleeps. The store must be seen before the load of its `asleep` flag
 * (Dekker). A seq_cst store pays for that with a locked instruction that
 * waits for the line to come over from the peer, on every message. Where
 * both sides registered for membarrier(2), the store is plain and the
 * ordering comes from the side about to sleep, which runs
 * MEMBARRIER_CMD_GLOBAL_EXPEDITED between raising its flag and its last
 * look (shm_idle_hook): rare and slow instead of always and fast. */
static inline void shm_store_wake(shm_ep_t *ep, uint64_t *counter, uint64_t value)
{
    if (ep->plain_stores) {
        __atomic_store_n(counter, value, __ATOMIC_RELEASE);
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the compiler keeps the load after */
    } else {
        __atomic_store_n(counter, value, __ATOMIC_SEQ_CST);
    }
    shm_maybe_wake(ep);
}

/* shm_ep.c */
coll_status_t shm_ep_connect(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                             coll_tp_ep_t **ep_p);
coll_status_t shm_ep_accept(coll_tp_iface_t *iface, const coll_peer_info_t *peer,
                            coll_tp_ep_t **ep_p);
coll_status_t shm_ep_ready(coll_tp_ep_t *ep);
coll_status_t shm_ep_flush(coll_tp_ep_t *ep);
coll_status_t shm_ep_close(coll_tp_ep_t *ep, coll_status_t why, const char *reason);
coll_status_t shm_ep_destroy(coll_tp_ep_t *ep);
void shm_ep_fail(shm_ep_t *ep, coll_status_t status, const char *fmt, ...) COLL_PRINTF(3, 4);
void shm_ep_connect_step(shm_ep_t *ep);
void shm_ep_check_alive(shm_ep_t *ep);

/* shm_msg.c */
coll_status_t shm_ep_isend(coll_tp_ep_t *ep, coll_tp_req_t *req);
coll_status_t shm_ep_irecv(coll_tp_ep_t *ep, coll_tp_req_t *req);
/* Consume what arrived and write what waits; returns 1 if anything moved. */
int shm_ep_poll(shm_ep_t *ep);
int shm_ep_being_read(shm_ep_t *ep);
void shm_tx_flush(shm_ep_t *ep);
/* Records wait in txq or not (`progress`: some were just written); keeps
 * the interface's count and the ring's stuck_since (SHM_PARK_MAX_NS). */
void shm_set_tx_blocked(shm_ep_t *ep, int blocked, int progress);
coll_status_t shm_tx_control(shm_ep_t *ep, const shm_rec_t *rec);
void shm_ep_fail_requests(shm_ep_t *ep, coll_status_t status);
void shm_ep_fail_pending_rndv(shm_ep_t *ep, coll_status_t status);
/* A read from the sender's memory ended with errno err (0: all in): FIN,
 * or the error, and the request completes. */
void shm_read_end(shm_ep_t *ep, coll_tp_req_t *req, int err);
int shm_ep_has_input(const shm_ep_t *ep);

/* shm_mbox.c */
coll_status_t shm_ep_mbox_query(coll_tp_ep_t *ep, size_t *bytes_p);
coll_status_t shm_ep_mbox_put(coll_tp_ep_t *ep, uint64_t seq, const void *buf, size_t len);
coll_status_t shm_ep_mbox_get(coll_tp_ep_t *ep, uint64_t seq, const void **buf_p,
                              size_t *len_p);
coll_status_t shm_ep_mbox_release(coll_tp_ep_t *ep, uint64_t seq);
int shm_ep_mbox_ready(const shm_ep_t *ep);

#endif /* COLL_SHM_H */
