/*
 * param.h: every COLL_* environment variable, declared once with its type,
 * default and help text. `collinfo --params` prints this table and the test
 * suite checks that docs/env.md lists every entry.
 *
 * Values are read when they are needed (a communicator reads its settings
 * at init), so a program may change them between communicators.
 */
#ifndef COLL_PARAM_H
#define COLL_PARAM_H

#include "util.h"

typedef enum coll_param_type {
    COLL_PARAM_STR,
    COLL_PARAM_INT,
    COLL_PARAM_BOOL,
    COLL_PARAM_DURATION, /* "300", "300s", "1500ms", "5m"; plain numbers are seconds */
    COLL_PARAM_SIZE,     /* "65536", "64K", "4M", "1G" (powers of 1024) */
} coll_param_type_t;

/* X(id, type, default, help). The variable name is "COLL_" #id. */
#define COLL_PARAM_TABLE(X)                                                              \
    X(DEBUG, COLL_PARAM_STR, "WARN",                                                     \
      "Log level: NONE, WARN, INFO or TRACE (VERSION prints the version once at init)")  \
    X(DEBUG_SUBSYS, COLL_PARAM_STR, "ALL",                                               \
      "Subsystems to log, comma separated: INIT, BOOT, NET, P2P, ALGO, COLL, ENV, ALL; " \
      "a leading ^ excludes the listed ones")                                            \
    X(DEBUG_FILE, COLL_PARAM_STR, "",                                                    \
      "Write the log to this file instead of stderr; %h is the host name, %p the pid")   \
    X(TIMEOUT, COLL_PARAM_DURATION, "300s",                                              \
      "Deadline of every wait: an operation with no progress for this long fails "       \
      "with COLL_ERR_TIMEOUT and names the peer")                                        \
    X(HANG_REPORT, COLL_PARAM_STR, "",                                                   \
      "When a wait times out, write this rank's last 32 collectives (sequence number, "   \
      "collective, count, datatype, op, root, algorithm, state) and what the running "    \
      "ones wait for to this file; %r is the rank, %p the pid, %h the host. Empty: no "   \
      "report")                                                                          \
    X(HANDSHAKE_TIMEOUT, COLL_PARAM_DURATION, "500ms",                                   \
      "Time an incoming connection gets to prove it belongs to the job before it is "    \
      "dropped (a rank whose own connection is dropped retries). Waiting loops check "  \
      "it every 100 ms at most, so a stranger goes within this plus 0.1 s on an idle "  \
      "host")                                                                            \
    X(SOCKET_IFNAME, COLL_PARAM_STR, "",                                                 \
      "Network interfaces to use, as NCCL_SOCKET_IFNAME: comma separated prefixes, "    \
      "^ to exclude, = for exact names (e.g. eth0, ^docker,lo, =ib0)")                   \
    X(SOCKET_FAMILY, COLL_PARAM_STR, "",                                                 \
      "Address family for sockets: AF_INET or AF_INET6 (empty: either, IPv4 first)")     \
    X(TRANSPORTS, COLL_PARAM_STR, "",                                                    \
      "Transports allowed between distinct ranks, comma separated, in priority order "   \
      "(available: shm, verbs, ofi, tcp); empty means all (ofi then only for RDMA-class " \
      "libfabric providers)")                                                            \
    X(TCP_EAGER_LIMIT, COLL_PARAM_SIZE, "256K",                                          \
      "TCP messages up to this size are sent at once; larger ones wait for the "         \
      "receiver (rendezvous) so that no large buffer is allocated on the receiver. The " \
      "wait is a round trip on the wire, behind the data queued in the other direction " \
      "(up to 4M)")                                                                      \
    X(TCP_EAGER_LIMIT_LOCAL, COLL_PARAM_SIZE, "2M",                                      \
      "COLL_TCP_EAGER_LIMIT toward a peer on the same host whose ranks have a CPU each: " \
      "a rendezvous there waits for the receiver to come back to its progress loop, "    \
      "which costs more than the copy of a message that arrives before its receive")     \
    X(TCP_EAGER_LIMIT_CROWDED, COLL_PARAM_SIZE, "64K",                                   \
      "COLL_TCP_EAGER_LIMIT_LOCAL where a host of the communicator runs more ranks than " \
      "it has CPUs: receivers are often descheduled, most large messages would arrive "  \
      "before their receive and be copied once more")                                    \
    X(TCP_EAGER_WINDOW, COLL_PARAM_SIZE, "64M",                                          \
      "Eager TCP messages a peer may send us that no receive has taken yet, in bytes "  \
      "(each counts its length plus 128; up to 1G): beyond it the peer's messages wait " \
      "for their receive, which bounds the memory a sender running ahead costs us. It "  \
      "must cover what is in flight on the link (4M slowed a 1 Gbit/s ring). 0: every " \
      "message waits for its receive")                                                  \
    X(TCP_EAGER_WINDOW_LOCAL, COLL_PARAM_SIZE, "4M",                                     \
      "COLL_TCP_EAGER_WINDOW toward a peer on the same host, where little is in flight") \
    X(NSOCKS, COLL_PARAM_INT, "4",                                                       \
      "TCP sockets per peer (1..16; a pair uses the smaller of its two settings): large " \
      "messages are striped across them in COLL_TCP_CHUNK pieces")                       \
    X(TCP_CHUNK, COLL_PARAM_SIZE, "128K",                                                \
      "Piece of a large TCP message handed to one socket, and the most unsent bytes a "  \
      "socket keeps in the kernel (TCP_NOTSENT_LOWAT): bounds how long a clear-to-send " \
      "waits behind data going the other way")                                           \
    X(NSOCKS_LOCAL, COLL_PARAM_INT, "1",                                                 \
      "COLL_NSOCKS toward a peer on the same host (same boot and network namespace): "   \
      "that traffic never leaves the kernel, where more sockets only add system calls "  \
      "(1..16; a pair uses the smaller of its two settings)")                            \
    X(TCP_CHUNK_LOCAL, COLL_PARAM_SIZE, "2M",                                            \
      "COLL_TCP_CHUNK toward a peer on the same host: no wire to share with a "          \
      "clear-to-send, and each chunk costs a system call on both sides; unless "         \
      "COLL_PIPELINE_CHUNK is set, also the pipeline chunk where such a pair uses TCP")  \
    X(TCP_CONGESTION_LOCAL, COLL_PARAM_STR, "reno",                                    \
      "TCP congestion control (TCP_CONGESTION) of sockets toward a peer on the same "    \
      "host, whose traffic never leaves the kernel and cannot congest a link: reno "     \
      "costs the least per packet (bbr, a common default, paces every packet). Empty: " \
      "the system's default (net.ipv4.tcp_congestion_control), as for other peers")      \
    X(TCP_RECV_REDUCE_LOCAL, COLL_PARAM_STR, "in_place",                                 \
      "COLL_RECV_REDUCE toward a peer on the same host: 1 reduces a receive as it "      \
      "arrives, 64 KiB off the socket at a time, as toward other hosts; 0 receives "     \
      "whole chunks and reduces them after, which took 10-15% less time on 2 ranks "     \
      "(all-reduce of 1-4 MiB, AMD EPYC); in_place: as it arrives where the result "     \
      "overwrites the local operand (an in-place all-reduce: 2 ranks, 1 MiB, 326-341 "   \
      "-> 287-296 us on an Intel Xeon), whole chunks elsewhere. COLL_RECV_REDUCE=0 "     \
      "turns all off")                                                                   \
    X(TCP_POLL_DIRECT, COLL_PARAM_INT, "2",                                              \
      "Where a communicator has at most this many TCP sockets and its ranks have a CPU "  \
      "each, its wait loop reads each socket on every turn instead of asking epoll "      \
      "which is ready: a read that finds nothing costs what epoll_wait costs, and data "  \
      "is taken one system call sooner. With more sockets, or ranks sharing CPUs, one "   \
      "epoll_wait per turn is cheaper. 0: always epoll (0..16)")                          \
    X(SOCKET_BUFSIZE, COLL_PARAM_SIZE, "0",                                              \
      "SO_SNDBUF and SO_RCVBUF of TCP data sockets; 0 keeps the kernel's autotuning "    \
      "(which grows to net.ipv4.tcp_wmem/tcp_rmem)")                                     \
    X(COST_PROBE, COLL_PARAM_SIZE, "2M",                                                 \
      "Bytes of the link probe at communicator creation: every rank sends this much to " \
      "its ring neighbour (after a ping-pong for latency) and the slowest link sets the " \
      "cost model's alpha and beta; 0 uses the transports' fixed figures. Must be the "  \
      "same on every rank (init fails at once, naming both values, if not)")             \
    X(LINK_BANDWIDTH, COLL_PARAM_SIZE, "0",                                              \
      "Bytes per second of the slowest link for the cost model (e.g. 119M for 1 Gbit/s), " \
      "instead of the probe's or the transport's figure; 0: not forced")                 \
    X(LINK_LATENCY, COLL_PARAM_DURATION, "0",                                            \
      "Seconds per message (alpha) for the cost model, e.g. 20us, instead of the "       \
      "probe's or the transport's figure; 0: not forced")                                \
    X(POLL_SPIN, COLL_PARAM_DURATION, "200us",                                           \
      "How long a waiting thread polls (yielding the core between polls) after the "    \
      "last data moved before it sleeps in the kernel. Steps of mid-size collectives "   \
      "with more ranks than cores wait longer than 20us: sleeping then costs a wake-up " \
      "per step")                                                                         \
    X(INLINE_POLLS, COLL_PARAM_INT, "128",                                              \
      "Polls a blocking call whose algorithm is one mailbox step (the oneshot "          \
      "algorithms of small calls on one host) makes itself, a pause apart, before it "   \
      "hands the step to the progress engine and waits there; 0: always the engine")     \
    X(LOCK_BIAS, COLL_PARAM_BOOL, "1",                                                  \
      "Let the first thread that moves data through a communicator enter it without "    \
      "locked instructions; another thread calling in turns this off for that "          \
      "communicator (membarrier(2)). 0: a mutex on every call")                          \
    X(RECV_REDUCE, COLL_PARAM_BOOL, "1",                                                \
      "Reduce data as it arrives where the transport does it faster (shared memory: "    \
      "straight from the ring, or a cache-sized piece at a time from the peer's memory; " \
      "TCP toward other hosts: a cache-sized piece at a time off the socket) instead of " \
      "receiving it into a buffer and reducing that; 0: always the two steps")          \
    X(SHM_RING_SIZE, COLL_PARAM_STR, "auto",                                            \
      "Shared-memory transport: bytes of each ring (one per direction and pair of "      \
      "ranks on a host, in /dev/shm; a power of two, 16K to 64M); the same on every "    \
      "rank. auto: 256K where the count of ranks on the host (the launcher's, or "     \
      "COLL_LOCAL_SIZE) is above its online CPUs, whose ranks then take turns and "      \
      "keep less in cache with smaller rings; 512K elsewhere and where nothing gives "   \
      "the count")                                                                       \
    X(SHM_CMA, COLL_PARAM_BOOL, "1",                                                     \
      "Shared-memory transport: let receivers copy large messages straight from the "    \
      "sender's buffer (process_vm_readv); 0 copies them through the ring")              \
    X(SHM_CMA_THRESHOLD, COLL_PARAM_STR, "auto",                                         \
      "Shared-memory transport: messages from this size up to COLL_SHM_CMA_MAX may take " \
      "the single-copy path (COLL_SHM_CMA_ADAPT chooses, message by message, between it " \
      "and the ring; smaller ones are copied into the ring and out); the sends that ask " \
      "for it (the pairwise all-to-all out of place, the ring all-gather, scatter from " \
      "a root with several children) may take it at any size. auto: 1M on Intel CPUs, "  \
      "whose kernel copies (process_vm_readv) ran at 0.6-0.7 of memcpy's speed from 1 "  \
      "MiB; 4M elsewhere, above COLL_SHM_CMA_MAX, so only those sends (on AMD EPYC "     \
      "0.3); or a size")                                                                 \
    X(SHM_CMA_ADAPT, COLL_PARAM_BOOL, "1",                                              \
      "Shared-memory transport: a message the receiver may read from the sender's "     \
      "buffer (see COLL_SHM_CMA_THRESHOLD) is read, or copied through the ring, by "    \
      "which of the two delivered such messages faster lately between this pair, "    \
      "from the choice to the last byte, the ring only where 1.25 times faster (where " \
      "ranks share CPUs: by which cost less "                                          \
      "CPU time per byte in copies); the ring is first tried after 128 reads (where "  \
      "ranks share CPUs, for the second message), then the way not taken for 4 "       \
      "messages after 32, after twice as many each time it lost again, up to 1024; "  \
      "where messages go both ways the higher rank takes the lower rank's way; those " \
      "COLL_SHM_CMA_CROWDED offers are read unweighed; 0: always read")               \
    X(SHM_CMA_SHARE, COLL_PARAM_BOOL, "1",                                              \
      "Shared-memory transport: a sender that waits for a message and nothing else (a "  \
      "broadcast's root or forwarding rank, a scatter's root, a gather's senders, a "  \
      "blocking send) copies part of it into the receiver's buffer while the receiver " \
      "reads the rest, pieces taken from a shared counter; for messages from "          \
      "COLL_SHM_CMA_THRESHOLD up to COLL_SHM_CMA_MAX (at auto on Intel CPUs: at any "   \
      "size), and above it where both buffers lie in huge pages; where ranks share "   \
      "CPUs only while COLL_SHM_CMA_CROWDED is on; 0: the receiver reads such "        \
      "messages alone")                                                                \
    X(SHM_REPLY, COLL_PARAM_BOOL, "1",                                                  \
      "Shared-memory transport: a receiver that reads and reduces the last half "        \
      "exchanged by the butterfly all-reduce writes each reduced piece straight back "   \
      "into the sender's result (process_vm_writev) while it is in cache, so that the "  \
      "exchange of results that follows moves nothing; 0: the results cross in a "      \
      "message of their own, read from memory")                                        \
    X(SHM_CMA_MAX, COLL_PARAM_STR, "auto",                                              \
      "Shared-memory transport: received messages above this size go through the ring "  \
      "again, in cache-sized pieces that both sides copy at once (on an AMD EPYC "       \
      "process_vm_readv of 4 to 64 MiB ran at half the ring's speed in 4 KiB pages), "  \
      "unless both the sender's and the receiver's buffers lie wholly in huge pages "   \
      "(Linux 6.7 and later tell), or the sender asked for one copy (see "              \
      "COLL_SHM_CMA_THRESHOLD: it copies too) and the receiver does not reduce, where "  \
      "they may be read as smaller ones are; a sender that only waits (a broadcast's "  \
      "root) sends those above it through the ring (at auto on Intel CPUs it copies "  \
      "part of them, COLL_SHM_CMA_SHARE). auto: 2M, and 16M on Intel CPUs where each " \
      "rank of the host has a CPU; 0: no limit; or a size")                           \
    X(SHM_CMA_CROWDED, COLL_PARAM_STR, "auto",                                          \
      "Shared-memory transport, where a host has more ranks than CPUs: the sends of "   \
      "collectives that reduce nothing (broadcast, all-gather, all-to-all, gather, "     \
      "scatter) from this size are offered to their receivers to read in one copy, "    \
      "at any size (not only up to COLL_SHM_CMA_MAX), and read without being weighed "  \
      "against the ring (COLL_SHM_CMA_ADAPT): there the ring's second copy costs a CPU " \
      "that another rank waits for. auto: 64K on Intel CPUs (measured on an Intel VM, " \
      "docs/performance-sets.md); elsewhere 0, as on an AMD EPYC, where the ring was "       \
      "faster there; 0: off, as where each rank has a CPU; or a size")                 \
    X(SHM_MAP, COLL_PARAM_BOOL, "1",                                                     \
      "Shared-memory transport: a large message whose buffer lies in memory from "       \
      "coll_mem_alloc names its region, and its receiver maps the region (once) and "    \
      "copies the message straight out of it; 0: such buffers are sent as any other "  \
      "(on the sender: named to nobody; on the receiver: never mapped)")                \
    X(IB_HCA, COLL_PARAM_STR, "",                                                        \
      "verbs transport: RDMA devices and ports to use, as NCCL_IB_HCA: comma separated " \
      "name prefixes with an optional :port, ^ to exclude, = for exact names (e.g. "     \
      "mlx5_0:1,mlx5_1 or ^mlx5_2); empty: the first active port of any device")        \
    X(IB_GID_INDEX, COLL_PARAM_STR, "auto",                                              \
      "verbs transport: GID table index of the port (0..255); auto takes 0 on "          \
      "InfiniBand and the RoCE v2 GID of an IPv4 address on Ethernet")                   \
    X(IB_TIMEOUT, COLL_PARAM_INT, "18",                                                  \
      "verbs transport: queue pair ack timeout exponent (4.096 us x 2^value, 1..31; 18 " \
      "is about 1 s) before each of 7 retries")                                          \
    X(IB_MR_CACHE, COLL_PARAM_INT, "0",                                                  \
      "verbs transport: unused memory registrations kept for reuse (0: register each "   \
      "large buffer for the time of its transfer). Only for programs that never free "   \
      "a buffer and allocate another at its address while the communicator lives: a "   \
      "cached registration keeps the old pages")                                         \
    X(CHECKSUM, COLL_PARAM_BOOL, "0",                                                    \
      "Put a CRC-32C in every transport frame (TCP: header and payload; shared memory: " \
      "every ring record; verbs: every message, and each RDMA-written one whole; not "   \
      "the data that large shared-memory messages copy straight "                       \
      "from the sender's memory) and fail with COLL_ERR_DATA_CORRUPTION, naming the "   \
      "link, on a mismatch. Must be the same on every rank (init fails, naming both "    \
      "values, if not)")                                                                 \
    X(TEST_CORRUPT_FRAME, COLL_PARAM_INT, "0",                                           \
      "Test hook, for testing COLL_CHECKSUM only: flip the first payload byte of the "   \
      "n-th data frame of at least 64 bytes that this process receives (counted over "   \
      "all communicators and transports; init's own messages are smaller); 0: off")                                                          \
    X(OFI_PROVIDER, COLL_PARAM_STR, "",                                                  \
      "libfabric transport: provider to use (tcp, shm, verbs, efa, ...; as fi_info -p "  \
      "names them); empty: the first fi_getinfo offers for reliable datagrams with "    \
      "tagged messages")                                                                 \
    X(OFI_MR, COLL_PARAM_STR, "auto",                                                    \
      "libfabric transport: register buffers only when the provider needs it (auto) "   \
      "or always (exercises registration on providers that do not need it)")            \
    X(OFI_MATCH, COLL_PARAM_STR, "auto",                                                 \
      "libfabric transport: who matches messages to receives: ours (every message a "    \
      "frame of ours, large ones by rendezvous), provider (libfabric's tagged "          \
      "receives), or auto (ours for shm, whose matching deadlocks under load, and for "   \
      "tcp before libfabric 1.18, which hangs after a receive shorter than its "        \
      "message; the provider's otherwise). Must be the same on every rank")             \
    X(OFI_MR_CACHE, COLL_PARAM_INT, "64",                                                \
      "libfabric transport: registrations kept for reuse (0..4096; 0 registers each "   \
      "message and releases it when the message completes)")                             \
    X(ALGO, COLL_PARAM_STR, "",                                                          \
      "Force algorithms per collective, e.g. allreduce:ring,bcast:binomial (collinfo "   \
      "--algos lists them); empty: the cost model chooses")                              \
    X(ALGO_FALLBACK, COLL_PARAM_STR, "error",                                            \
      "When a forced algorithm cannot run a call: error (COLL_ERR_INVALID_USAGE), warn " \
      "(log and let the cost model choose) or silent")                                   \
    X(DETERMINISTIC, COLL_PARAM_BOOL, "0",                                               \
      "Make every reduction give the bits of reducing in rank order 0, 1, ..., n-1, "    \
      "whatever the algorithm")                                                          \
    X(CHECK_ARGS, COLL_PARAM_BOOL, "0",                                                  \
      "Before each collective, compare its arguments across ranks (collective, count, "  \
      "datatype, op, root, alltoallv counts, chosen algorithm): a mismatch fails the "   \
      "call on every rank with an error naming the rank and the field, instead of a "    \
      "hang or wrong data")                                                              \
    X(BIND, COLL_PARAM_STR, "none",                                                      \
      "Bind each rank's initialising thread to one CPU at init, for launchers that do "  \
      "not (torchrun, Slurm without --cpu-bind): local rank i to the i-th CPU of its "    \
      "affinity mask. none; auto (only when 2 to CPUs-in-mask ranks share the host); "   \
      "core (always, round robin). Threads started later inherit the binding")          \
    X(PIPELINE_CHUNK, COLL_PARAM_SIZE, "256K",                                           \
      "Pipeline chunk of the chunked algorithms (ring, chain): data moves and is "       \
      "reduced in pieces of this size so that links and reductions overlap. Unset, a "   \
      "link may ask for more: TCP between ranks of one host for COLL_TCP_CHUNK_LOCAL "   \
      "(the largest over ranks); TCP toward other hosts, with COLL_NSOCKS above 1, for "  \
      "twice COLL_TCP_EAGER_LIMIT in all-reduce calls where a rank's share of the "       \
      "vector holds 8 of those, so that each chunk is striped over the sockets")        \
    X(PIPELINE_WINDOW, COLL_PARAM_STR, "auto",                                          \
      "Bytes of its pipeline chunks (one per block) a rank of the ring all-reduce keeps " \
      "in flight: chunk j + w starts once chunk j is reduced, so that a chunk is still " \
      "in cache when it is sent on. auto: a sixteenth of the L3 where a host runs more "  \
      "ranks than CPUs (their copies do not overlap anyway), no limit elsewhere; 0: no " \
      "limit; or a size (at least one chunk is in flight)")                              \
    X(STREAM_MIN, COLL_PARAM_STR, "auto",                                               \
      "Bytes of memory a call's buffers take on one host (this rank's send and receive " \
      "buffers, times the ranks on its host) from which data received into the call's "  \
      "result is stored with non-temporal stores where a transport copies it out of "    \
      "buffers of its own (shared memory): such lines are not read before they are "     \
      "written and do not push out what the call still reads. auto: half the L3, or "    \
      "64 MiB where the kernel reports no L3 and CPUID's is a whole socket's; 0: "       \
      "never; or a size")                                                                \
    X(DET_SCRATCH_MAX, COLL_PARAM_SIZE, "256M",                                          \
      "Largest scratch buffer a deterministic algorithm may use; one that would need "   \
      "more is not usable for the call")                                                 \
    X(UNIQUE_ID, COLL_PARAM_STR, "",                                                     \
      "Unique id in hex (coll_unique_id_to_str) for coll_comm_init_env; with "           \
      "COLL_RANK and COLL_NRANKS")                                                       \
    X(RANK, COLL_PARAM_STR, "", "Rank of this process for coll_comm_init_env")           \
    X(NRANKS, COLL_PARAM_STR, "", "Number of ranks for coll_comm_init_env")              \
    X(LOCAL_RANK, COLL_PARAM_STR, "", "Rank of this process among those on its host")   \
    X(LOCAL_SIZE, COLL_PARAM_STR, "",                                                    \
      "Number of ranks on this host; also, where no launcher says, how many the shared-" \
      "memory transport makes room for in /dev/shm (unset: every rank of the job)")      \
    X(MASTER_ADDR, COLL_PARAM_STR, "",                                                   \
      "Host of rank 0, where the bootstrap root listens (overrides MASTER_ADDR and "     \
      "the Slurm node list)")                                                            \
    X(MASTER_PORT, COLL_PARAM_STR, "",                                                   \
      "Port of the bootstrap root on the master host (overrides MASTER_PORT; set it "   \
      "under torchrun, whose own store holds MASTER_PORT)")                              \
    X(SECRET, COLL_PARAM_STR, "",                                                        \
      "Job secret in hex (at least 32 hex digits) for coll_comm_init_env; without it "   \
      "the secret is derived from the job's identity, which keeps jobs apart but is "    \
      "not secret")

typedef enum coll_param_id {
#define COLL_PARAM_ENUM(id, type, def, help) COLL_PARAM_##id,
    COLL_PARAM_TABLE(COLL_PARAM_ENUM)
#undef COLL_PARAM_ENUM
    COLL_PARAM_COUNT
} coll_param_id_t;

typedef struct coll_param_info {
    const char *name; /* "COLL_TIMEOUT" */
    coll_param_type_t type;
    const char *default_value;
    const char *help;
} coll_param_info_t;

const coll_param_info_t *coll_param_info(coll_param_id_t id);

/* The raw value: the environment's, else the default. Never NULL. */
const char *coll_param_raw(coll_param_id_t id);
/* 1 when the variable is set in the environment (even to ""). */
int coll_param_is_set(coll_param_id_t id);

/* Typed getters: a malformed value is an error naming the variable. */
coll_status_t coll_param_int(coll_param_id_t id, int64_t *value_p);
coll_status_t coll_param_bool(coll_param_id_t id, int *value_p);
coll_status_t coll_param_duration_ns(coll_param_id_t id, uint64_t *value_p);
coll_status_t coll_param_size(coll_param_id_t id, size_t *value_p);
/* "auto" (*is_auto_p = 1, *value_p untouched: the caller resolves it) or
 * a size (*is_auto_p = 0). */
coll_status_t coll_param_size_or_auto(coll_param_id_t id, int *is_auto_p, size_t *value_p);
/* An integer that must lie in lo..hi; the error names the variable, the
 * range and `rank` (the caller's, for a message that says who). */
coll_status_t coll_param_int_range(coll_param_id_t id, int lo, int hi, int rank, int *value_p);
/* The same for a size in bytes (K, M, G suffixes; the range is written
 * with them where they are exact). */
coll_status_t coll_param_size_range(coll_param_id_t id, size_t lo, size_t hi, int rank,
                                    size_t *value_p);

/* Parsers, exposed for tests and fuzzing. Return 0 on success, -1 when
 * `text` is not a well-formed value of that kind. */
int coll_parse_int(const char *text, int64_t *value_p);
int coll_parse_bool(const char *text, int *value_p);
int coll_parse_duration_ns(const char *text, uint64_t *value_p);
int coll_parse_size(const char *text, size_t *value_p);

#endif /* COLL_PARAM_H */
