/*
 * test_shm.c: the shared-memory transport (COLL_TRANSPORTS=shm, so that a
 * silent fallback to TCP fails the test): point-to-point at sizes around
 * every threshold (eager, ring quarter, single copy), tags from 0 to
 * COLL_TAG_MAX, messages that arrive before their receive, equal tags in
 * order; each through cross-memory attach, through the ring
 * (COLL_SHM_CMA=0), and through the fallback taken when process_vm_readv
 * is refused at first use (a seccomp filter installed after init); a
 * sender that sees its reader's flag (it polls on instead of sleeping); the
 * pairwise all-to-all's blocks below the single-copy threshold read in
 * place (its hint to the transport); messages above COLL_SHM_CMA_MAX read
 * where both ranks' buffers lie in huge pages, and only there; eager
 * messages parked in the ring for their receive, more than a ring holds,
 * sent before they are received by ranks in a cycle, by a rank another
 * one waits for, and by a rank that left. Then a rank SIGKILLed mid 64 MiB
 * transfer (through the ring, or read in one copy) is named within 10 s;
 * no segment is left in /dev/shm after a normal exit, an abort or a killed job; and a
 * tiny /dev/shm gives a clear message and TCP, while two emulated hosts of
 * 2 ranks each need room for their own pair only. Mailboxes: the one-shot
 * all-reduce and barrier at 2-8 ranks (blocking, non-blocking beside
 * schedules, in place, every mailbox size up to the slot), a broadcast root
 * as many calls ahead as a mailbox has slots, refused with a reason over
 * TCP, and a rank killed in the middle of it named within 10 s. Memory
 * from coll_mem_alloc: the call's errors; messages copied out of the
 * sender's mapped region at every size, early, from more regions than a
 * receiver keeps, and never from a freed region whose address now holds
 * other memory; the ring where the receiver maps nothing; collectives in
 * it at 2 and 4 ranks; a rank killed mid-stream named. The butterfly
 * all-reduce's folded halves written back to the sender (COLL_SHM_REPLY)
 * at 2, 3 and 4 ranks, off, and where process_vm_writev is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "comm.h"
#include "harness.h"
#include "shm/shm.h"

/* ---- point to point ------------------------------------------------------------ */

/* PATH_CMA: cross-memory attach from 512K (COLL_SHM_CMA_THRESHOLD; the
 * default leaves it to sends that ask for one copy) up to COLL_SHM_CMA_MAX
 * (2M) and the ring above it; PATH_CMA_ALL: cross-memory attach from 4M
 * (shm_only_logged's threshold) at any size; PATH_REFUSED: as PATH_CMA, with
 * process_vm_readv refused. */
enum { PATH_CMA, PATH_CMA_ALL, PATH_RING, PATH_REFUSED, NPATHS };
static const char *path_names[] = {"cross-memory attach up to 2 MiB, then the ring",
                                   "cross-memory attach (COLL_SHM_CMA_MAX=0)",
                                   "ring (COLL_SHM_CMA=0)",
                                   "ring after process_vm_readv was refused"};

/* Around the eager limit (a quarter ring: 128K with the default 512K
 * ring, 64K with a 256K one), the largest DATA piece (a quarter ring less
 * the 32-byte record header, rounded down), the growing pieces before it
 * (32K, 64K, then the largest: 229312 + 1 ends in a 1-byte piece), the
 * single-copy threshold (512K where PATH_CMA sets it), a ring, and far
 * beyond. */
static const size_t sizes[] = {0, 1, 7, 63, 64, 65, 4095, 65503, 65504, 65505, 65535, 65536,
                               65537, 131039, 131040, 131041, 131071, 131072, 131073,
                               229312 + 1, 262144 + 3, 524287, 524288,
                               524289, 1u << 20, (4u << 20) + 1, 64u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* System call nr fails with EPERM from now on, as under a container's
 * seccomp profile. */
static void refuse_syscall(unsigned nr)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
    RANK_CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
               prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, "seccomp: %s",
               strerror(errno));
}

static void refuse_cma(void)
{
    refuse_syscall(__NR_process_vm_readv);
}

static char log_dir[128];

/* This rank over shared memory only, its NET log in log_dir/rank<r>.log
 * (where the test reads which path was taken). */
static void shm_only_logged(int rank)
{
    char logpath[256];

    snprintf(logpath, sizeof(logpath), "%s/rank%d.log", log_dir, rank);
    setenv("COLL_DEBUG", "INFO", 1);
    setenv("COLL_DEBUG_SUBSYS", "NET", 1);
    setenv("COLL_DEBUG_FILE", logpath, 1);
    setenv("COLL_TRANSPORTS", "shm", 1);
    /* the same paths on every CPU: auto reads plain messages from 1M on
     * Intel ones (the link probe's at init among them), from 4M on others,
     * up to 16M on Intel ones where each rank has a CPU, and where ranks
     * share CPUs the sends of collectives that reduce nothing from 64K on
     * Intel ones */
    setenv("COLL_SHM_CMA_THRESHOLD", "4M", 1);
    setenv("COLL_SHM_CMA_MAX", "2M", 1);
    setenv("COLL_SHM_CMA_CROWDED", "0", 1);
}

static int rank_p2p(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int path = *(int *)arg, peer = 1 - rank;
    uint8_t *buf = malloc(64u << 20);
    coll_request_t reqs[64];

    shm_only_logged(rank);
    /* every message that may be read is read (or, refused, tried) */
    setenv("COLL_SHM_CMA_ADAPT", "0", 1);
    if (path == PATH_CMA || path == PATH_REFUSED)
        setenv("COLL_SHM_CMA_THRESHOLD", "512K", 1);
    if (path == PATH_RING)
        setenv("COLL_SHM_CMA", "0", 1);
    if (path == PATH_CMA_ALL) {
        /* the sender polls throughout and logs that it saw the reader's flag
         * (it does not help copy: that has a test of its own) */
        setenv("COLL_SHM_CMA_MAX", "0", 1);
        setenv("COLL_SHM_CMA_SHARE", "0", 1);
        setenv("COLL_DEBUG", "TRACE", 1);
        setenv("COLL_POLL_SPIN", "5s", 1);
    }
    coll_comm_t comm = harness_init(rank, nranks, id);
    if (path == PATH_REFUSED)
        refuse_cma();
    RANK_CHECK(buf != NULL, "out of memory");
    /* every size, both ways */
    for (size_t k = 0; k < NSIZES && rank < 2; k++) {
        size_t n = sizes[k];
        if (rank == 0) {
            harness_fill(buf, n, 0, (int)k);
            RANK_OK(coll_send(buf, n, COLL_UINT8, peer, (int)k, comm));
            memset(buf, 0, n);
            RANK_OK(coll_recv(buf, n, COLL_UINT8, peer, (int)k, comm));
            harness_verify(buf, n, 1, (int)k);
        } else {
            RANK_OK(coll_recv(buf, n, COLL_UINT8, peer, (int)k, comm));
            harness_verify(buf, n, 0, (int)k);
            harness_fill(buf, n, 1, (int)k);
            RANK_OK(coll_send(buf, n, COLL_UINT8, peer, (int)k, comm));
        }
    }
    /* messages that arrive before their receive, on tags 0 .. COLL_TAG_MAX,
     * received in the opposite order; two per tag, which must stay in order */
    static const int tags[] = {0, 1, 2, 1000, 65535, 65536, 1 << 24, COLL_TAG_MAX};
    size_t ntags = sizeof(tags) / sizeof(tags[0]);
    if (rank == 0) {
        size_t slot = (300u << 10) + 64;
        uint8_t *out = malloc(2 * ntags * slot);
        for (size_t t = 0; t < ntags; t++)
            for (int j = 0; j < 2; j++) {
                size_t n = (j ? 300u << 10 : 100) + t, off = (2 * t + (size_t)j) * slot;
                harness_fill(out + off, n, 0, (int)(t * 2) + j);
                RANK_OK(coll_isend(out + off, n, COLL_UINT8, 1, tags[t], comm,
                                   &reqs[2 * t + (size_t)j]));
            }
        RANK_OK(coll_waitall((int)(2 * ntags), reqs));
        free(out);
    } else if (rank == 1) {
        usleep(100 * 1000); /* they are all there (the large ones as requests) */
        for (size_t t = ntags; t-- > 0;)
            for (int j = 0; j < 2; j++) {
                size_t n = (j ? 300u << 10 : 100) + t;
                RANK_OK(coll_recv(buf, n, COLL_UINT8, 0, tags[t], comm));
                harness_verify(buf, n, 0, (int)(t * 2) + j);
            }
    }
    /* a receive of the wrong size fails with the sender's size (a large
     * message: the receiver tells the sender to drop it) */
    if (rank == 0) {
        coll_status_t st = coll_send(buf, 1u << 20, COLL_UINT8, 1, 77, comm);
        RANK_CHECK(st == COLL_OK || st == COLL_ERR_PEER_FAILED, "mismatched send: %s",
                   coll_status_str(st));
    } else if (rank == 1) {
        coll_status_t st = coll_recv(buf, (1u << 20) + 1, COLL_UINT8, 0, 77, comm);
        RANK_CHECK(st == COLL_ERR_SIZE_MISMATCH, "1 MiB into 1 MiB + 1: %s", coll_status_str(st));
    }
    free(buf);
    coll_comm_abort(comm);
    return 0;
}

START_TEST(test_p2p_paths)
{
    int path = _i;
    char cmd[512], out[256];

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2, rank_p2p, &path, 120) == 0, "p2p over %s", path_names[path]);
    /* the path really taken, from the ranks' logs */
    const char *needle = path == PATH_CMA ? "cross-memory attach from 524288 bytes and for sends "
                                            "that ask for one copy up to 2097152 bytes"
                         : path == PATH_CMA_ALL ? "cross-memory attach from 4194304 bytes and for "
                                                  "sends that ask for one copy)"
                         : path == PATH_RING ? "cross-memory attach disabled"
                                             : "is not permitted";
    snprintf(cmd, sizeof(cmd), "cat %s/rank*.log | grep -c '%s'", log_dir, needle);
    harness_sh(cmd, out, sizeof(out));
    ck_assert_msg(atoi(out) >= 1, "no '%s' in the logs of %s", needle, log_dir);
    if (path == PATH_CMA_ALL) { /* the 64 MiB messages, read while their sender polls */
        snprintf(cmd, sizeof(cmd), "cat %s/rank*.log | grep -c 'is reading a message from our "
                 "memory'", log_dir);
        harness_sh(cmd, out, sizeof(out));
        ck_assert_msg(atoi(out) >= 1, "no sender saw its reader's flag (logs in %s)", log_dir);
    }
    if (path == PATH_REFUSED) { /* one line, not one per message */
        snprintf(cmd, sizeof(cmd), "cat %s/rank*.log | grep -c 'is not permitted'", log_dir);
        harness_sh(cmd, out, sizeof(out));
        ck_assert_msg(atoi(out) == 1, "%s lines saying so", out);
    }
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- COLL_SHM_CMA_THRESHOLD, _MAX and _CROWDED: auto, a size, neither ---------- */

/* auto: a threshold of 1M on Intel CPUs and 4M on others, a limit of 2M
 * and on Intel CPUs 16M where each rank has a CPU, plain sends read from
 * 64K on Intel CPUs where ranks share CPUs (shm_iface.c); sizes as given;
 * a value that is neither fails init on every rank, naming the variable
 * and the value, within seconds. */
enum { THRESH_AUTO, THRESH_SIZE, THRESH_BAD, THRESH_BAD_MAX, THRESH_BAD_CROWDED, NTHRESH };
static const char *thresh_values[] = {"auto", "256K", "half", "auto", "auto"};
static const char *max_values[] = {"auto", "8M", "auto", "wide", "auto"};
static const char *crowd_values[] = {"auto", "48K", "auto", "auto", "many"};
static const char *thresh_bad[] = {[THRESH_BAD] = "COLL_SHM_CMA_THRESHOLD='half'",
                                   [THRESH_BAD_MAX] = "COLL_SHM_CMA_MAX='wide'",
                                   [THRESH_BAD_CROWDED] = "COLL_SHM_CMA_CROWDED='many'"};

static int rank_threshold(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int c = *(int *)arg;
    const char *bad = thresh_bad[c];
    coll_comm_t comm;

    shm_only_logged(rank);
    setenv("COLL_SHM_CMA_THRESHOLD", thresh_values[c], 1);
    setenv("COLL_SHM_CMA_MAX", max_values[c], 1);
    setenv("COLL_SHM_CMA_CROWDED", crowd_values[c], 1);
    double t0 = harness_now();
    coll_status_t st = coll_comm_init_rank(&comm, nranks, *id, rank);
    if (c >= THRESH_BAD) {
        RANK_CHECK(st == COLL_ERR_INVALID_ARG && strstr(coll_get_last_error(NULL), bad),
                   "init: %s: %s", coll_status_str(st), coll_get_last_error(NULL));
        RANK_CHECK(harness_now() - t0 < 5, "init failed after %.1f s", harness_now() - t0);
        return 0;
    }
    RANK_OK(st);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_cma_threshold)
{
    int c = _i, intel = shm_cpu_is_intel();
    char cmd[512], out[64], want[256];

    if (c == THRESH_SIZE)
        snprintf(want, sizeof(want), "from 262144 bytes and for sends that ask for one copy up "
                 "to 8388608 bytes, .*; where ranks share CPUs, collectives that reduce "
                 "nothing from 49152 bytes");
    else if (intel)
        snprintf(want, sizeof(want), "from 1048576 bytes and for sends that ask for one copy "
                 "up to 2097152 bytes (16777216 where each rank has a CPU), .*; where ranks "
                 "share CPUs, collectives that reduce nothing from 65536 bytes");
    else
        snprintf(want, sizeof(want), "for sends that ask for one copy up to 2097152 bytes");
    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2, rank_threshold, &c, 60) == 0,
                  "COLL_SHM_CMA_THRESHOLD=%s COLL_SHM_CMA_MAX=%s COLL_SHM_CMA_CROWDED=%s",
                  thresh_values[c], max_values[c], crowd_values[c]);
    if (c < THRESH_BAD) {
        snprintf(cmd, sizeof(cmd), "cat %s/rank*.log | grep -c 'cross-memory attach %s'",
                 log_dir, want);
        harness_sh(cmd, out, sizeof(out));
        ck_assert_msg(atoi(out) >= 1, "COLL_SHM_CMA_THRESHOLD=%s COLL_SHM_CMA_MAX=%s: no rank "
                      "logged 'cross-memory attach %s' (logs in %s)", thresh_values[c],
                      max_values[c], want, log_dir);
    }
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- exchange steps take one copy below the threshold -------------------------- */

/* Blocks of 200000 bytes: above the eager limit (128K), below the
 * single-copy threshold (4M), where a plain message goes through the
 * ring. The pairwise all-to-all out of place and the ring all-gather mark
 * their sends COLL_TP_HINT_ONE_COPY, so the receivers read them with
 * process_vm_readv (COLL_SHM_CMA_ADAPT=0: always, where the receiver
 * could also ask for them through the ring); the refused cases show it:
 * with process_vm_readv refused after init, each rank says so once and
 * the data still arrive, through the ring. The linear all-to-all does
 * not mark them (alltoall_linear.c): refused, no rank ever tries a read.
 * Even cases allow it, odd ones refuse it; case / 2 is the exchange
 * (exch_algo). */
enum { EXCH_A2A, EXCH_A2A_REFUSED, EXCH_AG, EXCH_AG_REFUSED, EXCH_PW, EXCH_PW_REFUSED, NEXCH };
enum { KIND_A2A_LINEAR, KIND_AG_RING, KIND_A2A_PAIRWISE };

static const char *exch_algo(int kind)
{
    return kind == KIND_AG_RING ? "allgather:ring"
           : kind == KIND_A2A_PAIRWISE ? "alltoall:pairwise" : "alltoall:linear";
}
#define EXCH_COUNT 50000 /* int32 per block */

static uint32_t exch_val(int from, int to, size_t i)
{
    return (uint32_t)from * 1000003u + (uint32_t)to * 7919u + (uint32_t)i;
}

/* All-to-all: block j of rank r's output goes to rank j. All-gather: each
 * rank sends its block for rank 0 (to = 0), in place in the second pass. */
static int exch_pass(int rank, int nranks, coll_comm_t comm, int allgather, int in_place,
                     uint32_t *out, uint32_t *in)
{
    size_t n = (size_t)nranks * EXCH_COUNT;
    uint32_t *dst = in_place ? out : in;
    uint32_t *src = allgather && in_place ? out + (size_t)rank * EXCH_COUNT : out;

    memset(in, 0, n * sizeof(*in));
    memset(out, 0, n * sizeof(*out));
    for (int j = 0; j < (allgather ? 1 : nranks); j++)
        for (size_t i = 0; i < EXCH_COUNT; i++)
            src[(size_t)j * EXCH_COUNT + i] = exch_val(rank, allgather ? 0 : j, i);
    if (allgather)
        RANK_OK(coll_allgather(src, dst, EXCH_COUNT, COLL_INT32, comm));
    else
        RANK_OK(coll_alltoall(out, dst, EXCH_COUNT, COLL_INT32, comm));
    for (int j = 0; j < nranks; j++)
        for (size_t i = 0; i < EXCH_COUNT; i++) {
            uint32_t want = exch_val(j, allgather ? 0 : rank, i);
            RANK_CHECK(dst[(size_t)j * EXCH_COUNT + i] == want,
                       "%s: block from rank %d, element %zu: %u, expected %u",
                       in_place ? "in place" : "out of place", j, i,
                       dst[(size_t)j * EXCH_COUNT + i], want);
        }
    return 0;
}

/* Two exchanges of 4 MiB with the ring neighbours: messages above
 * COLL_SHM_CMA_MAX (2M) whose senders do not ask for one copy, which go
 * through the ring with no choice made. */
#define UNREAD_BYTES (4u << 20)

static int unread_traffic(int nranks, coll_comm_t comm)
{
    int rank = 0;
    uint8_t *out = calloc(UNREAD_BYTES, 1), *in = calloc(UNREAD_BYTES, 1);

    RANK_CHECK(out && in, "out of memory");
    RANK_OK(coll_comm_rank(comm, &rank));
    for (int k = 0; k < 2; k++)
        RANK_OK(coll_sendrecv(out, UNREAD_BYTES, COLL_UINT8, (rank + 1) % nranks, k, in,
                              UNREAD_BYTES, COLL_UINT8, (rank + nranks - 1) % nranks, k, comm));
    free(out);
    free(in);
    return 0;
}

/* `calls` exchanges of `kind` (exch_algo), out of place and in place by
 * turns, logged; COLL_SHM_CMA_ADAPT = adapt; process_vm_readv refused
 * after init where `refused`; after unread_traffic where `unread_first`. */
static int exch_calls(int rank, int nranks, const coll_unique_id_t *id, int kind,
                      const char *adapt, int refused, int unread_first, int calls)
{
    int allgather = kind == KIND_AG_RING;
    size_t n = (size_t)nranks * EXCH_COUNT;
    uint32_t *out = malloc(n * sizeof(*out)), *in = malloc(n * sizeof(*in));

    shm_only_logged(rank);
    setenv("COLL_ALGO", exch_algo(kind), 1);
    setenv("COLL_SHM_CMA_ADAPT", adapt, 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    if (refused)
        refuse_cma();
    RANK_CHECK(out && in, "out of memory");
    if (unread_first && unread_traffic(nranks, comm) != 0)
        return 1;
    for (int k = 0; k < calls; k++)
        if (exch_pass(rank, nranks, comm, allgather, k & 1, out, in) != 0)
            return 1;
    free(out);
    free(in);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

static int rank_exchange(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int c = *(int *)arg;

    /* every block is read (or tried) */
    return exch_calls(rank, nranks, id, c / 2, "0", c & 1, 0, 2);
}

START_TEST(test_exchange_one_copy)
{
    int c = _i;
    char cmd[512], out[256];

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(4, rank_exchange, &c, 120) == 0, "%s of 200000-byte blocks, %s",
                  exch_algo(c / 2),
                  c & 1 ? "process_vm_readv refused" : "allowed");
    snprintf(cmd, sizeof(cmd), "cat %s/rank*.log | grep -c 'is not permitted'", log_dir);
    harness_sh(cmd, out, sizeof(out));
    /* refused: at least one rank tried (each says it once), but for the
     * linear all-to-all, which never asks for a read */
    int lines = atoi(out), tries = (c & 1) && c / 2 != KIND_A2A_LINEAR;
    ck_assert_msg(tries ? lines >= 1 && lines <= 4 : lines == 0,
                  "%s: %d lines saying process_vm_readv was refused", exch_algo(c / 2), lines);
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- read or through the ring, by what each costs ----------------------------- */

/* 256 ring all-gathers of 200000-byte blocks on 2 ranks, which the
 * receiver may read (the ring all-gather's sends ask for one copy). With
 * COLL_SHM_CMA_ADAPT=1 (WAYS_ADAPT) rank 0's first message is read (no
 * read timed yet), then each goes the cheaper way and the other way is
 * tried after 32 untaken messages (the ring's first try after 128 reads
 * where the ranks have a CPU each and the ways are priced by delivery),
 * so both are taken; where every retry lost, the interval doubled after
 * each (check_retries); rank 1 takes the way rank 0 took last, which it
 * has seen for all but its first message or two.
 * With 0 (WAYS_READ) every one is read. With 0 on rank 0 only
 * (WAYS_LEAD_READS) rank 1 reads too, where by its own costs it would
 * try the ring. After messages that could not have been read (the link
 * probe at init, unread_traffic), whose copies must not price the ways
 * (priced by them, the ring lost to the read for 32 messages, the whole
 * of a short run): WAYS_UNTIMED, one all-gather, which rank 0 reads,
 * leaves the ring's copies untimed in its log; WAYS_EACH_ONCE, two, of
 * which rank 0 reads the first and, priced by the copies (ranks sharing
 * CPUs), takes the ring for the second, each way untried until then, and
 * priced by delivery reads the second too. Each rank's log says how many
 * came which way. */
#define WAY_CALLS 256
enum { WAYS_ADAPT, WAYS_READ, WAYS_LEAD_READS, WAYS_UNTIMED, WAYS_EACH_ONCE, NWAYS_CASES };

static int way_calls(int c)
{
    return c == WAYS_UNTIMED ? 1 : c == WAYS_EACH_ONCE ? 2 : WAY_CALLS;
}

/* After a WAYS_UNTIMED run: rank 0 logged the ring's copies untimed. */
static void check_ring_untimed(void)
{
    char cmd[512], out[256];
    double read = -1, in = -1, cout = -1;

    snprintf(cmd, sizeof(cmd), "grep -o 'read [0-9]*, copy into the ring [0-9]*, out of it "
             "[0-9]*' %s/rank0.log", log_dir);
    harness_sh(cmd, out, sizeof(out));
    ck_assert_msg(sscanf(out, "read %lf, copy into the ring %lf, out of it %lf", &read, &in,
                         &cout) == 3, "rank 0 logged no copy costs (logs in %s)", log_dir);
    ck_assert_msg(read > 0 && in == 0 && cout == 0, "rank 0's copy costs in ns/KiB: read %.0f, "
                  "into the ring %.0f, out of it %.0f; expected the read timed and the ring "
                  "not (its copies were all of messages that could not have been read)",
                  read, in, cout);
}

/* Did rank 0 price the ways by delivery (ranks with a CPU each) rather
 * than by the copies? */
static int priced_by_delivery(void)
{
    char cmd[512], out[64] = "";

    snprintf(cmd, sizeof(cmd), "grep -o 'priced by delivery' %s/rank0.log", log_dir);
    harness_sh(cmd, out, sizeof(out));
    return strstr(out, "delivery") != NULL;
}

/* After a WAYS_ADAPT run: rank 0's retries of the way not taken. Where
 * none of them was cheaper and no way was left on a drift of its price
 * (which starts the interval over), each doubled the interval (at most
 * 1024): in 256 messages at most two where priced by delivery (the ring
 * first after 128 reads, then after 64 untaken), three by the copies
 * (after 32 untaken, 64 and 128), where retries every 32 would have made
 * more. Drifts are counted only where priced by delivery. */
static void check_retries(void)
{
    char cmd[512], out[256];
    unsigned retries = 0, won = 0, every = 0, drifts = 0;

    snprintf(cmd, sizeof(cmd), "grep -o 'retried [0-9]* times, [0-9]* of them cheaper, now "
             "after [0-9]* messages; left on a drift [0-9]*' %s/rank0.log", log_dir);
    harness_sh(cmd, out, sizeof(out));
    ck_assert_msg(sscanf(out, "retried %u times, %u of them cheaper, now after %u messages; "
                         "left on a drift %u", &retries, &won, &every, &drifts) == 4,
                  "rank 0 logged no retries (logs in %s)", log_dir);
    ck_assert_msg(every >= 32 && every <= 1024 && (every & (every - 1)) == 0,
                  "rank 0 retries the other way after %u messages", every);
    ck_assert_msg(drifts == 0 || priced_by_delivery(), "rank 0 left a way on a drift %u "
                  "times, priced by the copies", drifts);
    unsigned most = priced_by_delivery() ? 2 : 3;
    if (won == 0 && drifts == 0)
        ck_assert_msg(retries <= most && every == 32u << retries, "rank 0: %u retries, none "
                      "cheaper, and now the next after %u messages; expected at most %u and "
                      "%u", retries, every, most, 32u << COLL_MIN(retries, 5u));
}

static int rank_ways(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int c = *(int *)arg;
    const char *adapt = c == WAYS_READ || (c == WAYS_LEAD_READS && rank == 0) ? "0" : "1";

    return exch_calls(rank, nranks, id, KIND_AG_RING, adapt, 0, c == WAYS_UNTIMED,
                      way_calls(c));
}

START_TEST(test_read_or_ring)
{
    static const char *what[] = {"read or through the ring", "always read",
                                 "rank 0 always reads", "after messages that no choice priced",
                                 "two, after messages that no choice priced"};
    int c = _i, calls = way_calls(c);
    char cmd[512], out[256];

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2, rank_ways, &c, 120) == 0, "%d all-gathers, %s", calls, what[c]);
    for (int r = 0; r < 2; r++) {
        unsigned long nread = 0, nring = 0, nled = 0;
        snprintf(cmd, sizeof(cmd), "grep -o '[0-9]* were read and [0-9]* came through the "
                 "ring, [0-9]*' %s/rank%d.log", log_dir, r);
        harness_sh(cmd, out, sizeof(out));
        ck_assert_msg(sscanf(out, "%lu were read and %lu came through the ring, %lu", &nread,
                             &nring, &nled) == 3,
                      "rank %d logged no count of the ways (logs in %s)", r, log_dir);
        ck_assert_msg(nread + nring == (unsigned long)calls, "rank %d: %lu read + %lu through "
                      "the ring, expected %d messages", r, nread, nring, calls);
        if (c == WAYS_READ || c == WAYS_LEAD_READS)
            ck_assert_msg(nring == 0, "rank %d: %lu through the ring (%s)", r, nring, what[c]);
        else if (c >= WAYS_UNTIMED && r == 0 && priced_by_delivery())
            ck_assert_msg(nread == (unsigned long)calls && nring == 0, "rank 0: %lu read, %lu "
                          "through the ring (%s, priced by delivery), expected %d and 0",
                          nread, nring, what[c], calls);
        else if (c >= WAYS_UNTIMED && r == 0)
            ck_assert_msg(nread == 1 && nring == (unsigned long)calls - 1, "rank 0: %lu read, "
                          "%lu through the ring (%s), expected 1 and %d", nread, nring,
                          what[c], calls - 1);
        else if (c >= WAYS_UNTIMED) /* rank 1 follows rank 0's ways, a message late or not */
            continue;
        else if (r == 0)
            ck_assert_msg(nread >= 1 && nring >= 1, "rank 0: %lu read, %lu through the ring: "
                          "a way was never tried", nread, nring);
        else
            ck_assert_msg(nled >= WAY_CALLS - 2, "rank 1 took rank 0's last way for %lu of %d "
                          "messages", nled, WAY_CALLS);
    }
    if (c == WAYS_UNTIMED || (c == WAYS_EACH_ONCE && priced_by_delivery()))
        check_ring_untimed();
    if (c == WAYS_ADAPT)
        check_retries();
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- blocks above COLL_SHM_CMA_MAX from busy senders ---------------------------- */

/* Two ring all-gathers of 4 MiB blocks on 2 ranks, above COLL_SHM_CMA_MAX
 * (2M), in 4 KiB pages, with COLL_SHM_CMA_ADAPT=0: the ring all-gather's
 * sends ask for one copy (their senders copy too), and a receive that does
 * not reduce reads such blocks at any size (SHM_RTS_BUSY), where the
 * sendrecvs of unread_traffic, whose senders only wait, go through the
 * ring (test_huge_blocks, test_read_or_ring). */
static int rank_busy_reads(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    uint8_t *mine = malloc(UNREAD_BYTES), *all = malloc(2 * (size_t)UNREAD_BYTES);

    (void)arg;
    shm_only_logged(rank);
    setenv("COLL_ALGO", exch_algo(KIND_AG_RING), 1);
    setenv("COLL_SHM_CMA_ADAPT", "0", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(mine && all, "out of memory");
    for (int k = 0; k < 2; k++) {
        harness_fill(mine, UNREAD_BYTES, rank, k);
        RANK_OK(coll_allgather(mine, all, UNREAD_BYTES, COLL_UINT8, comm));
        for (int r = 0; r < nranks; r++)
            harness_verify(all + (size_t)r * UNREAD_BYTES, UNREAD_BYTES, r, k);
    }
    free(mine);
    free(all);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_busy_reads)
{
    char cmd[512], out[256];

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2, rank_busy_reads, NULL, 120) == 0, "all-gathers of 4 MiB blocks");
    for (int r = 0; r < 2; r++) {
        unsigned long nread = 0, nring = 0, nled = 0;
        snprintf(cmd, sizeof(cmd), "grep -o '[0-9]* were read and [0-9]* came through the "
                 "ring, [0-9]*' %s/rank%d.log", log_dir, r);
        harness_sh(cmd, out, sizeof(out));
        /* no such line: no message could have been read */
        if (sscanf(out, "%lu were read and %lu came through the ring, %lu", &nread, &nring,
                   &nled) != 3)
            nread = nring = 0;
        ck_assert_msg(nread == 2 && nring == 0, "rank %d: %lu blocks of 4 MiB read, %lu "
                      "through the ring by choice; expected 2 and 0 (logs in %s)", r, nread,
                      nring, log_dir);
    }
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- plain sends where ranks share CPUs (COLL_SHM_CMA_CROWDED) ------------------- */

/* The nth CPU this process may use (0: the first); -1 where there is none. */
static int nth_own_cpu(int nth)
{
    cpu_set_t all;

    if (sched_getaffinity(0, sizeof(all), &all) != 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all) && nth-- == 0)
            return c;
    return -1;
}

#define CROWD_BLOCK (96 << 10) /* an all-gather's block: below the eager limit */
#define CROWD_BCAST (4 << 20)  /* a broadcast: above COLL_SHM_CMA_MAX, from a root that waits */

/* test_crowd_reads' cases: COLL_SHM_CMA_CROWDED=64K, 0 (off), and 64K
 * with process_vm_readv refused after init. */
enum { CROWD_ON, CROWD_OFF, CROWD_REFUSED, NCROWD };

/* 4 ranks on one CPU, case *arg: two linear all-gathers of 96 KiB blocks
 * and a binomial broadcast of 4 MiB, the results checked.
 * COLL_SHM_CMA_ADAPT keeps its default: such reads are not weighed
 * against the ring (SHM_RTS_CROWD). */
static int rank_crowd_reads(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int c = *(const int *)arg;
    uint8_t *mine = malloc(CROWD_BLOCK), *all = malloc((size_t)nranks * CROWD_BLOCK);
    uint8_t *big = malloc(CROWD_BCAST);
    int cpu = nth_own_cpu(0);

    RANK_CHECK(mine && all && big, "out of memory");
    RANK_CHECK(harness_bind_cpu(cpu) == 0, "bind to CPU %d", cpu);
    shm_only_logged(rank);
    setenv("COLL_ALGO", "allgather:linear,bcast:binomial", 1);
    setenv("COLL_SHM_CMA_CROWDED", c == CROWD_OFF ? "0" : "64K", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(comm->crowd > 1, "%g ranks per CPU, expected more than 1", comm->crowd);
    if (c == CROWD_REFUSED)
        refuse_cma();
    for (int k = 0; k < 2; k++) {
        harness_fill(mine, CROWD_BLOCK, rank, k);
        RANK_OK(coll_allgather(mine, all, CROWD_BLOCK, COLL_UINT8, comm));
        for (int r = 0; r < nranks; r++)
            harness_verify(all + (size_t)r * CROWD_BLOCK, CROWD_BLOCK, r, k);
    }
    if (rank == 0)
        harness_fill(big, CROWD_BCAST, 0, 7);
    RANK_OK(coll_broadcast(big, big, CROWD_BCAST, COLL_UINT8, 0, comm));
    harness_verify(big, CROWD_BCAST, 0, 7);
    free(mine);
    free(all);
    free(big);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

/* The counts that open the lines of rank's log matching `pattern` (a
 * grep -o pattern that starts with the count), summed (none: 0). */
static unsigned long counts_logged(int rank, const char *pattern)
{
    char cmd[512], out[64];

    snprintf(cmd, sizeof(cmd), "grep -o '%s' %s/rank%d.log | awk '{n += $1} END {print n + 0}'",
             pattern, log_dir, rank);
    harness_sh(cmd, out, sizeof(out));
    return strtoul(out, NULL, 10);
}

/* Messages each rank read from its peers' memory because ranks share CPUs. */
static unsigned long reads_logged(int rank)
{
    return counts_logged(rank, "[0-9]* messages from .* were read where ranks share");
}

/* CROWD_ON: every block of the all-gathers (eager where ranks have CPUs
 * of their own) and the broadcast's 4 MiB (through the ring from a root
 * that waits) is read: 3 blocks twice on each rank, and one broadcast
 * message on each rank but the root. CROWD_OFF: none is. CROWD_REFUSED:
 * none is, the data still arrive (through the ring), and each rank that
 * tried says once that it may not read. */
START_TEST(test_crowd_reads)
{
    static const char *what[] = {"64K", "0", "64K, process_vm_readv refused"};
    char cmd[512], out[64];
    int c = _i;

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(4, rank_crowd_reads, &c, 120) == 0,
                  "all-gathers and a broadcast, 4 ranks on one CPU, COLL_SHM_CMA_CROWDED=%s",
                  what[c]);
    for (int r = 0; r < 4; r++) {
        unsigned long want = c == CROWD_ON ? 6ul + (r != 0) : 0, n = reads_logged(r);
        ck_assert_msg(n == want, "rank %d: %lu messages read with COLL_SHM_CMA_CROWDED=%s, "
                      "expected %lu (logs in %s)", r, n, what[c], want, log_dir);
    }
    snprintf(cmd, sizeof(cmd), "cat %s/rank*.log | grep -c 'is not permitted'", log_dir);
    harness_sh(cmd, out, sizeof(out));
    int lines = atoi(out);
    ck_assert_msg(c == CROWD_REFUSED ? lines >= 1 && lines <= 4 : lines == 0,
                  "COLL_SHM_CMA_CROWDED=%s: %d lines saying process_vm_readv was refused",
                  what[c], lines);
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- blocks above COLL_SHM_CMA_MAX in huge pages --------------------------------- */

/* 4 MiB messages each way between 2 ranks, above COLL_SHM_CMA_MAX (2M),
 * every one that may be read read (COLL_SHM_CMA_ADAPT=0): where both
 * ranks' buffers lie in huge pages all are read; where either side's lie
 * in 4 KiB pages none is (the ring's copies are cheaper there). */
#define HUGE_MSG (4u << 20)
#define HUGE_ROUNDS 4
#define HUGE_ALIGN (2u << 20)
enum { HUGE_BOTH, HUGE_NEITHER, HUGE_RANK0_ONLY, NHUGE };

/* len bytes on a 2 MiB boundary in huge pages (THP) or 4 KiB ones,
 * touched; *map_p, *map_len_p: what to munmap. */
static uint8_t *pages_alloc(size_t len, int huge, void **map_p, size_t *map_len_p)
{
    size_t map_len = len + HUGE_ALIGN;
    void *map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (map == MAP_FAILED)
        return NULL;
    uint8_t *buf = (uint8_t *)(((uintptr_t)map + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
    madvise(buf, len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(buf, 0, len);
    *map_p = map;
    *map_len_p = map_len;
    return buf;
}

/* Why this machine cannot lie buffers in huge pages and say so, or NULL. */
static const char *no_huge_pages(void)
{
    void *map;
    size_t map_len;
    int fd = shm_pages_open();
    uint8_t *buf = pages_alloc(HUGE_ALIGN, 1, &map, &map_len);
    int huge = buf && shm_pages_huge(fd, buf, HUGE_ALIGN);

    if (buf)
        munmap(map, map_len);
    if (fd >= 0)
        close(fd);
    return fd < 0    ? "the kernel has no PAGEMAP_SCAN (Linux < 6.7)"
           : !buf    ? "mmap failed"
           : !huge   ? "transparent huge pages are off (or none was free)"
                     : NULL;
}

static int rank_huge(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int c = *(int *)arg, peer = 1 - rank;
    int huge = c == HUGE_BOTH || (c == HUGE_RANK0_ONLY && rank == 0);
    void *maps[2];
    size_t map_lens[2];
    uint8_t *out = pages_alloc(HUGE_MSG, huge, &maps[0], &map_lens[0]);
    uint8_t *in = pages_alloc(HUGE_MSG, huge, &maps[1], &map_lens[1]);
    int fd = shm_pages_open();

    shm_only_logged(rank);
    setenv("COLL_SHM_CMA_ADAPT", "0", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(out && in, "out of memory");
    RANK_CHECK(shm_pages_huge(fd, out, HUGE_MSG) == huge &&
                   shm_pages_huge(fd, in, HUGE_MSG) == huge,
               "buffers not in the %s pages asked for (memory too fragmented for THP?)",
               huge ? "huge" : "4 KiB");
    close(fd);
    for (int k = 0; k < HUGE_ROUNDS; k++) {
        harness_fill(out, HUGE_MSG, rank, k);
        RANK_OK(coll_sendrecv(out, HUGE_MSG, COLL_UINT8, peer, k, in, HUGE_MSG, COLL_UINT8, peer,
                              k, comm));
        harness_verify(in, HUGE_MSG, peer, k);
    }
    RANK_OK(coll_comm_destroy(comm));
    munmap(maps[0], map_lens[0]);
    munmap(maps[1], map_lens[1]);
    return 0;
}

START_TEST(test_huge_blocks)
{
    static const char *what[] = {"both ranks' buffers in huge pages", "neither's",
                                 "rank 0's only"};
    const char *why = no_huge_pages();
    int c = _i;
    char cmd[512], out[256];

    if (why) {
        printf("test_shm: blocks above COLL_SHM_CMA_MAX, %s: skipped: %s\n", what[c], why);
        return;
    }
    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2, rank_huge, &c, 120) == 0, "4 MiB messages, %s", what[c]);
    for (int r = 0; r < 2; r++) {
        unsigned long nread = 0, nring = 0;
        snprintf(cmd, sizeof(cmd), "grep -o '[0-9]* were read and [0-9]* came through the "
                 "ring' %s/rank%d.log", log_dir, r);
        harness_sh(cmd, out, sizeof(out));
        int logged = sscanf(out, "%lu were read and %lu", &nread, &nring) == 2;
        if (c == HUGE_BOTH)
            ck_assert_msg(logged && nread == HUGE_ROUNDS && nring == 0, "rank %d: %lu of %d "
                          "messages read, %lu through the ring (%s; logs in %s)", r, nread,
                          HUGE_ROUNDS, nring, what[c], log_dir);
        else
            ck_assert_msg(!logged, "rank %d: %lu read, %lu through the ring; expected no "
                          "message the receiver could read (%s)", r, nread, nring, what[c]);
    }
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- blocking sends copied by both ranks (shm_share.c) ---------------------------- */

/* 4 MiB blocking sends each way in turn: the receiver reads pieces while
 * the waiting sender writes others into its buffer, where both buffers
 * lie in huge pages and COLL_SHM_CMA_SHARE is on; 2 MiB ones, from
 * COLL_SHM_CMA_THRESHOLD up to COLL_SHM_CMA_MAX, in any pages; with both
 * at auto, 4 MiB ones in any pages on Intel CPUs (the limit does not
 * bound a copy by both there) and none elsewhere (the threshold is 4M,
 * the limit 2M); the same with the two ranks on one CPU and
 * COLL_SHM_CMA_CROWDED at auto too (on Intel CPUs on, elsewhere off). */
enum { SHARE_HUGE, SHARE_OFF, SHARE_4K, SHARE_4K_BELOW, SHARE_4K_AUTO, SHARE_CROWDED, NSHARE };

static size_t share_msg(int c)
{
    return c == SHARE_4K_BELOW ? 2u << 20 : HUGE_MSG;
}

static int shared(int c)
{
    return c == SHARE_HUGE || c == SHARE_4K_BELOW ||
           ((c == SHARE_4K_AUTO || c == SHARE_CROWDED) && shm_cpu_is_intel());
}

static int rank_share(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int c = *(int *)arg, peer = 1 - rank;
    void *maps[2];
    size_t map_lens[2];
    size_t len = share_msg(c);
    int huge = c == SHARE_HUGE || c == SHARE_OFF;
    uint8_t *out = pages_alloc(len, huge, &maps[0], &map_lens[0]);
    uint8_t *in = pages_alloc(len, huge, &maps[1], &map_lens[1]);

    shm_only_logged(rank);
    if (c == SHARE_OFF)
        setenv("COLL_SHM_CMA_SHARE", "0", 1);
    if (c == SHARE_4K_BELOW) /* shm_only_logged's limit, 2M, is the message's */
        setenv("COLL_SHM_CMA_THRESHOLD", "1M", 1);
    if (c == SHARE_4K_AUTO || c == SHARE_CROWDED) {
        unsetenv("COLL_SHM_CMA_THRESHOLD");
        unsetenv("COLL_SHM_CMA_MAX");
    }
    if (c == SHARE_CROWDED) {
        int cpu = nth_own_cpu(0);
        RANK_CHECK(harness_bind_cpu(cpu) == 0, "bind to CPU %d", cpu);
        unsetenv("COLL_SHM_CMA_CROWDED");
    }
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK((comm->crowd > 1) == (c == SHARE_CROWDED), "%g ranks per CPU", comm->crowd);
    RANK_CHECK(out && in, "out of memory");
    for (int k = 0; k < 2 * HUGE_ROUNDS; k++) {
        if (k % 2 == rank) {
            harness_fill(out, len, rank, k);
            RANK_OK(coll_send(out, len, COLL_UINT8, peer, k, comm));
        } else {
            RANK_OK(coll_recv(in, len, COLL_UINT8, peer, k, comm));
            harness_verify(in, len, peer, k);
        }
    }
    RANK_OK(coll_comm_destroy(comm));
    munmap(maps[0], map_lens[0]);
    munmap(maps[1], map_lens[1]);
    return 0;
}

/* From rank r's log: messages copied by both, the peer's pieces of them,
 * all their pieces, our pieces written into the peer; 0 when not logged. */
static int share_logged(int r, unsigned long v[4])
{
    char cmd[512], out[256];

    snprintf(cmd, sizeof(cmd), "grep -o '[0-9]* messages from .* were copied by both of us: it "
             "wrote [0-9]* of their [0-9]* pieces; we wrote [0-9]*' %s/rank%d.log", log_dir, r);
    harness_sh(cmd, out, sizeof(out));
    char *tail = strstr(out, "copied by both");
    return sscanf(out, "%lu", &v[0]) == 1 && tail &&
           sscanf(tail, "copied by both of us: it wrote %lu of their %lu pieces; we wrote %lu",
                  &v[1], &v[2], &v[3]) == 3;
}

START_TEST(test_shared_copy)
{
    static const char *what[] = {"huge pages", "huge pages, COLL_SHM_CMA_SHARE=0",
                                 "4 KiB pages, above COLL_SHM_CMA_MAX",
                                 "4 KiB pages, up to COLL_SHM_CMA_MAX",
                                 "4 KiB pages, COLL_SHM_CMA_THRESHOLD and _MAX at auto",
                                 "4 KiB pages, both ranks on one CPU, every limit at auto"};
    const char *why = no_huge_pages();
    int c = _i;
    unsigned long v[2][4];

    if (why && (c == SHARE_HUGE || c == SHARE_OFF)) {
        printf("test_shm: blocking sends copied by both ranks, %s: skipped: %s\n", what[c], why);
        return;
    }
    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2, rank_share, &c, 120) == 0, "%zu MiB blocking sends, %s",
                  share_msg(c) >> 20, what[c]);
    for (int r = 0; r < 2; r++) {
        int logged = share_logged(r, v[r]);
        if (!shared(c)) {
            ck_assert_msg(!logged, "rank %d: %lu messages copied by both (%s)", r, v[r][0],
                          what[c]);
            continue;
        }
        /* 16 pieces of 256 KiB (or 128 KiB) a message (shm_share.c, piece_bytes) */
        ck_assert_msg(logged && v[r][0] == HUGE_ROUNDS && v[r][2] == 16 * HUGE_ROUNDS,
                      "rank %d: %lu of %d messages copied by both, %lu pieces (logs in %s)", r,
                      logged ? v[r][0] : 0, HUGE_ROUNDS, logged ? v[r][2] : 0, log_dir);
    }
    if (shared(c)) {
        for (int r = 0; r < 2; r++)
            ck_assert_msg(v[r][1] == v[1 - r][3], "rank %d counted %lu pieces written by rank "
                          "%d, which counted %lu", r, v[r][1], 1 - r, v[1 - r][3]);
        printf("test_shm: blocking sends copied by both ranks, %s: the senders wrote %lu and "
               "%lu of %d pieces\n", what[c], v[1][1], v[0][1], 16 * HUGE_ROUNDS);
    }
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* A receiver busy with other work after its receive matched: rank 1
 * posts the receive of a 2 MiB blocking send once the RTS waits in its
 * ring (100 ms), matches it with one coll_test and then sleeps without
 * progress; the waiting sender writes every piece meanwhile
 * (shm_share_publish), and the receive finds nothing left to read when it
 * waits. */
#define SHARE_BUSY_ROUNDS 8

static int rank_share_busy(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const size_t len = 2u << 20;
    uint8_t *buf = malloc(len);
    coll_request_t req;
    int done = 0;

    (void)arg;
    shm_only_logged(rank);
    setenv("COLL_SHM_CMA_THRESHOLD", "1M", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(buf, "out of memory");
    for (int k = 0; k < SHARE_BUSY_ROUNDS; k++) {
        if (rank == 0) {
            harness_fill(buf, len, 0, k);
            RANK_OK(coll_send(buf, len, COLL_UINT8, 1, k, comm));
            continue;
        }
        usleep(100000); /* the RTS arrives */
        RANK_OK(coll_irecv(buf, len, COLL_UINT8, 0, k, comm, &req));
        coll_status_t st = coll_test(&req, &done);
        RANK_CHECK(st == COLL_OK || st == COLL_INPROGRESS, "coll_test: %s",
                   coll_status_str(st));
        RANK_CHECK(!done, "round %d: done at the first coll_test", k);
        usleep(200000); /* busy elsewhere: no progress */
        RANK_OK(coll_wait(&req));
        harness_verify(buf, len, 0, k);
    }
    RANK_OK(coll_comm_destroy(comm));
    free(buf);
    return 0;
}

START_TEST(test_shared_copy_busy)
{
    unsigned long v[4];

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2, rank_share_busy, NULL, 60) == 0,
                  "2 MiB blocking sends to a receiver busy after matching them");
    ck_assert_msg(share_logged(1, v), "rank 1 logged no copy by both (logs in %s)", log_dir);
    /* 16 pieces of 128 KiB a message (piece_bytes) */
    ck_assert_msg(v[0] == SHARE_BUSY_ROUNDS && v[1] == v[2] && v[2] == 16 * SHARE_BUSY_ROUNDS,
                  "rank 1: %lu messages copied by both, the sender wrote %lu of %lu pieces; "
                  "expected %d messages, all %d pieces by the sender (logs in %s)", v[0], v[1],
                  v[2], SHARE_BUSY_ROUNDS, 16 * SHARE_BUSY_ROUNDS, log_dir);
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* Large local copies in pieces with the transports polled between them
 * (schedule.c, copy_local): gathers out of place with 6 MiB + 5 byte
 * blocks from every root, both algorithms, and a broadcast out of place
 * of 9 MiB + 3 from the last rank, checked byte by byte; the root's own
 * block is copied while its leaves' RTS come in, and the leaves write
 * their blocks meanwhile. */
#define POLLED_BLOCK ((6u << 20) + 5)
#define POLLED_BCAST ((9u << 20) + 3)

static int rank_copy_polled(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const char *algo = arg;
    uint8_t *mine = malloc(POLLED_BCAST), *all = malloc((size_t)nranks * POLLED_BLOCK);

    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_ALGO", algo, 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(mine && all, "out of memory");
    for (int root = 0; root < nranks; root++) {
        harness_fill(mine, POLLED_BLOCK, rank, root);
        memset(all, 0xee, (size_t)nranks * POLLED_BLOCK);
        RANK_OK(coll_gather(mine, all, POLLED_BLOCK, COLL_UINT8, root, comm));
        for (int r = 0; rank == root && r < nranks; r++)
            harness_verify(all + (size_t)r * POLLED_BLOCK, POLLED_BLOCK, r, root);
    }
    if (rank == nranks - 1)
        harness_fill(mine, POLLED_BCAST, rank, 99);
    RANK_OK(coll_broadcast(mine, all, POLLED_BCAST, COLL_UINT8, nranks - 1, comm));
    harness_verify(all, POLLED_BCAST, nranks - 1, 99);
    RANK_OK(coll_comm_destroy(comm));
    free(mine);
    free(all);
    return 0;
}

START_TEST(test_copy_polled)
{
    static const char *algos[] = {"gather:linear,broadcast:binomial",
                                  "gather:binomial,broadcast:chain"};
    int nranks = 2 + 2 * (_i / 2);

    ck_assert_msg(harness_run(nranks, rank_copy_polled, (void *)algos[_i % 2], 120) == 0,
                  "%d ranks, %s: 6 MiB gathers and a 9 MiB broadcast out of place", nranks,
                  algos[_i % 2]);
}
END_TEST

/* COLL_SHM_RING_SIZE's auto (shm_iface.c, ring_auto): 256 KiB rings where
 * the launcher's count of ranks on the host is above its online CPUs, 512
 * KiB elsewhere and where nothing gives the count; and collectives whose
 * messages cross the eager limit and the DATA chunks of either ring size,
 * checked exactly. Cases: COLL_LOCAL_SIZE=4, no count, 256K set. */
enum { RING_COUNTED, RING_UNCOUNTED, RING_SET, NRING };
static void logs_show(int ok, const char *what, const char *logs);
static const size_t ring_counts[] = {(64u << 10) / 4 + 1, (1u << 20) / 4 + 3, (5u << 20) / 4 + 1};

static int rank_ring_auto(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int how = *(int *)arg;
    size_t most = ring_counts[COLL_ARRAY_LEN(ring_counts) - 1];
    int32_t *x = malloc(most * 4), *y = malloc(most * 4);
    uint8_t *all = malloc((size_t)nranks * most);

    shm_only_logged(rank); /* the same paths on every CPU */
    if (how == RING_COUNTED)
        setenv("COLL_LOCAL_SIZE", "4", 1);
    if (how == RING_SET)
        setenv("COLL_SHM_RING_SIZE", "256K", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(x && y && all, "out of memory");
    for (size_t c = 0; c < COLL_ARRAY_LEN(ring_counts); c++) {
        size_t n = ring_counts[c];
        for (size_t i = 0; i < n; i++)
            x[i] = rank + (int32_t)(i % 7);
        RANK_OK(coll_allreduce(x, y, n, COLL_INT32, COLL_SUM, comm));
        RANK_OK(coll_allreduce(x, x, n, COLL_INT32, COLL_SUM, comm));
        for (size_t i = 0; i < n; i++)
            RANK_CHECK(x[i] == y[i] && y[i] == nranks * (nranks - 1) / 2 + nranks * (int32_t)(i % 7),
                       "all-reduce of %zu: element %zu is %d / %d", n, i, (int)y[i], (int)x[i]);
        harness_fill((uint8_t *)x, n, rank, (int)c);
        RANK_OK(coll_allgather(x, all, n, COLL_UINT8, comm));
        for (int r = 0; r < nranks; r++)
            harness_verify(all + (size_t)r * n, n, r, (int)c);
        if (rank == 1)
            harness_fill(all, n * 4, 1, (int)c + 10);
        RANK_OK(coll_broadcast(all, all, n * 4, COLL_UINT8, 1, comm));
        harness_verify(all, n * 4, 1, (int)c + 10);
    }
    RANK_OK(coll_comm_destroy(comm));
    free(x);
    free(y);
    free(all);
    return 0;
}

START_TEST(test_ring_auto)
{
    int how = _i;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t want = how == RING_SET || (how == RING_COUNTED && cpus < 4) ? 256u << 10 : 512u << 10;
    char cmd[256], out[16384], line[64];

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(4, rank_ring_auto, &how, 120) == 0,
                  "4 ranks (case %d): all-reduce, all-gather and broadcast", how);
    snprintf(cmd, sizeof(cmd), "grep -h 'shm: connected to' %s/rank*.log", log_dir);
    harness_sh(cmd, out, sizeof(out));
    snprintf(line, sizeof(line), "(ring %zu bytes", want);
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "connected to")); p++)
        lines++;
    logs_show(lines == 12, "expected 12 connections (4 ranks, 3 peers each)", out);
    int alike = 1;
    for (const char *p = out; (p = strstr(p, "(ring ")); p++)
        alike &= strncmp(p, line, strlen(line)) == 0;
    printf("test_shm: rings, case %d, %ld CPUs: %s %zu bytes\n", how, cpus,
           alike ? "every ring" : "not every ring", want);
    logs_show(alike, "rings not of the size expected", out);
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* A stream of 64 MiB blocking sends from rank 0 to rank 1, in huge pages,
 * so copied by both: either killed mid-message, the other names it. */
static int rank_share_stream(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const size_t bytes = 64u << 20;
    void *map;
    size_t map_len;
    uint8_t *buf = pages_alloc(bytes, 1, &map, &map_len);
    coll_status_t st = COLL_OK;

    (void)arg;
    setenv("COLL_TRANSPORTS", "shm", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(buf, "out of memory");
    for (int i = 0; st == COLL_OK; i++) {
        st = rank == 0 ? coll_send(buf, bytes, COLL_UINT8, 1, i & 0xffff, comm)
                       : coll_recv(buf, bytes, COLL_UINT8, 0, i & 0xffff, comm);
        if (i == 0 && st == COLL_OK)
            RANK_CHECK(write(harness_ready_fd, "r", 1) == 1, "ready");
    }
    harness_report(comm, rank, st);
    coll_comm_abort(comm);
    munmap(map, map_len);
    return 0;
}

START_TEST(test_shared_copy_killed)
{
    int victim = _i, statuses[2];
    pid_t pids[2];
    char expect[64];
    double t_kill;
    const char *why = no_huge_pages();

    if (why) {
        printf("test_shm: a rank killed during a copy by both: skipped: %s\n", why);
        return;
    }
    int reports = harness_kill_mid_transfer(2, victim, rank_share_stream, NULL, pids, statuses,
                                            30, &t_kill);
    snprintf(expect, sizeof(expect), "rank %d (pid %d", victim, (int)pids[victim]);
    harness_check_kill_reports(reports, t_kill, 10.0, expect, 1);
    ck_assert_msg(WIFEXITED(statuses[1 - victim]) && WEXITSTATUS(statuses[1 - victim]) == 0,
                  "survivor %d failed", 1 - victim);
}
END_TEST

/* ---- copies by both, each larger than the last ---------------------------------- */

/* SHARE_STREAM blocking sends from rank 0 to rank 1, 1 MiB + 3 and 64 MiB
 * in turn, every one copied by both (from 1 MiB, no limit): the sender
 * helps with the last message while the receiver publishes the next in
 * the same share block. A sender that matched the last message's claim
 * word, ended at 18, against the next one's length took a piece of it
 * twice and counted one more than the receiver waits for: a hang. */
#define SHARE_STREAM 40

static int rank_share_sizes(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const size_t lens[] = {(1u << 20) + 3, 64u << 20};
    uint8_t *buf = malloc(64u << 20);

    (void)arg;
    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_SHM_CMA_THRESHOLD", "1M", 1);
    setenv("COLL_SHM_CMA_MAX", "0", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(buf, "out of memory");
    for (int k = 0; k < SHARE_STREAM; k++) {
        size_t n = lens[k % 2];
        if (rank == 0) {
            harness_fill(buf, n, 0, k);
            RANK_OK(coll_send(buf, n, COLL_UINT8, 1, k, comm));
        } else {
            RANK_OK(coll_recv(buf, n, COLL_UINT8, 0, k, comm));
            harness_verify(buf, n, 0, k);
        }
    }
    RANK_OK(coll_comm_destroy(comm));
    free(buf);
    return 0;
}

START_TEST(test_shared_copy_sizes)
{
    ck_assert_msg(harness_run(2, rank_share_sizes, NULL, 60) == 0,
                  "%d blocking sends of 1 MiB + 3 and 64 MiB in turn, copied by both",
                  SHARE_STREAM);
}
END_TEST

/* ---- a rank killed mid-transfer ------------------------------------------------- */

/* How the 64 MiB messages of a killed stream travel. KILL_CMA_ALL: read
 * in one copy, so the victim may die in the middle of a read with its
 * `reading` flag raised, which must not keep its senders from noticing. */
enum { KILL_DEFAULT, KILL_RING, KILL_CMA_ALL };

static int rank_stream(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    setenv("COLL_TRANSPORTS", "shm", 1);
    if (*(int *)arg == KILL_RING)
        setenv("COLL_SHM_CMA", "0", 1);
    if (*(int *)arg == KILL_CMA_ALL) {
        setenv("COLL_SHM_CMA_MAX", "0", 1);
        setenv("COLL_SHM_CMA_ADAPT", "0", 1);
    }
    coll_comm_t comm = harness_init(rank, nranks, id);
    harness_stream_ring(comm, rank, nranks, 64u << 20);
    coll_comm_abort(comm);
    return 0;
}

/* Kill `victim` of 4 ranks running fn once all are under way: every
 * survivor names it (rank and pid) within 10 s and exits cleanly. */
static void kill_one_of_four(int victim, harness_rank_fn fn, void *arg)
{
    int nranks = 4, statuses[4];
    pid_t pids[4];
    char expect[64];
    double t_kill;

    int reports = harness_kill_mid_transfer(nranks, victim, fn, arg, pids, statuses, 30,
                                            &t_kill);
    snprintf(expect, sizeof(expect), "rank %d (pid %d", victim, (int)pids[victim]);
    harness_check_kill_reports(reports, t_kill, 10.0, expect, nranks - 1);
    for (int r = 0; r < nranks; r++) /* a survivor's leak check fails it under ASan */
        ck_assert_msg(r == victim || (WIFEXITED(statuses[r]) && WEXITSTATUS(statuses[r]) == 0),
                      "survivor %d failed", r);
}

START_TEST(test_sigkill_named)
{
    int how = _i < 3 ? KILL_DEFAULT : _i == 3 ? KILL_RING : KILL_CMA_ALL;
    kill_one_of_four(1 + _i % 3, rank_stream, &how);
}
END_TEST

/* ---- nothing left in /dev/shm ---------------------------------------------------- */

/* Segments in /dev/shm named after one of these pids ("coll.<pid>."). */
static int leftovers(const pid_t *pids, int n, char *names, size_t len)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    int found = 0;

    names[0] = '\0';
    ck_assert_msg(d != NULL, "opendir /dev/shm: %s", strerror(errno));
    while ((e = readdir(d))) {
        for (int r = 0; r < n; r++) {
            char prefix[32];
            snprintf(prefix, sizeof(prefix), "coll.%d.", (int)pids[r]);
            if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
                found++;
                strncat(names, e->d_name, len - strlen(names) - 2);
                strncat(names, " ", len - strlen(names) - 1);
            }
        }
    }
    closedir(d);
    return found;
}

enum { END_DESTROY, END_ABORT, END_KILLED };

static int rank_end(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int how = *(int *)arg;
    float x[1024];

    setenv("COLL_TRANSPORTS", "shm", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (int i = 0; i < 1024; i++)
        x[i] = (float)rank;
    RANK_OK(coll_allreduce(x, x, 1024, COLL_FLOAT32, COLL_SUM, comm));
    RANK_CHECK(x[5] == (float)(nranks * (nranks - 1) / 2), "sum %g", x[5]);
    /* the ranks that abort first fail the others' barrier: that is fine */
    if (how == END_ABORT)
        (void)coll_barrier(comm);
    if (how == END_DESTROY) {
        RANK_OK(coll_comm_destroy(comm));
    } else if (how == END_ABORT) {
        RANK_OK(coll_comm_abort(comm));
    } else {
        for (;;) /* until the test kills us */
            pause();
    }
    return 0;
}

START_TEST(test_no_leftovers)
{
    int how = _i, nranks = 4, statuses[8];
    pid_t pids[8];
    char names[1024];

    harness_spawn(nranks, rank_end, &how, pids);
    if (how == END_KILLED) {
        usleep(1500 * 1000); /* connected and summed */
        for (int r = 0; r < nranks; r++)
            kill(pids[r], SIGKILL);
        harness_wait(nranks, pids, 30, statuses);
    } else {
        ck_assert_int_eq(harness_wait(nranks, pids, 30, statuses), 0);
    }
    ck_assert_msg(leftovers(pids, nranks, names, sizeof(names)) == 0,
                  "left in /dev/shm after %s: %s",
                  how == END_DESTROY ? "destroy" : how == END_ABORT ? "abort" : "SIGKILL", names);
}
END_TEST

/* Ranks that disagree on the ring size: init fails on both, saying what to
 * set, at once rather than at the init deadline; nothing is left behind. */
static int rank_mismatch(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm;
    (void)arg;

    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_TIMEOUT", "20s", 1);
    if (rank == 1)
        setenv("COLL_SHM_RING_SIZE", "128K", 1);
    double t0 = harness_now();
    coll_status_t st = coll_comm_init_rank(&comm, nranks, *id, rank);
    RANK_CHECK(st == COLL_ERR_PROTOCOL && strstr(coll_get_last_error(NULL), "COLL_SHM_RING_SIZE"),
               "init: %s: %s", coll_status_str(st), coll_get_last_error(NULL));
    RANK_CHECK(harness_now() - t0 < 5, "init failed after %.1f s", harness_now() - t0);
    return 0;
}

START_TEST(test_ring_mismatch)
{
    pid_t pids[2];
    int statuses[2];
    char names[512];

    harness_spawn(2, rank_mismatch, NULL, pids);
    ck_assert_int_eq(harness_wait(2, pids, 30, statuses), 0);
    ck_assert_msg(leftovers(pids, 2, names, sizeof(names)) == 0, "left: %s", names);
}
END_TEST

/* ---- a tiny /dev/shm ----------------------------------------------------------- */

static int rank_tiny(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    char logpath[256];
    coll_comm_t comm;
    (void)arg;

    snprintf(logpath, sizeof(logpath), "%s/rank%d.log", log_dir, rank);
    setenv("COLL_DEBUG", "INFO", 1);
    setenv("COLL_DEBUG_FILE", logpath, 1);
    /* shm alone cannot reach the peer: a clear error, no crash */
    setenv("COLL_TRANSPORTS", "shm", 1);
    coll_status_t st = coll_comm_init_rank(&comm, nranks, *id, rank);
    RANK_CHECK(st == COLL_ERR_UNREACHABLE && strstr(coll_get_last_error(NULL), "no allowed "
               "transport"), "shm only: %s: %s", coll_status_str(st), coll_get_last_error(NULL));
    return 0;
}

static int rank_tiny_fallback(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    char logpath[256];
    float x[64];
    (void)arg;

    snprintf(logpath, sizeof(logpath), "%s/fallback%d.log", log_dir, rank);
    setenv("COLL_DEBUG", "INFO", 1);
    setenv("COLL_DEBUG_FILE", logpath, 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (int i = 0; i < 64; i++)
        x[i] = 1;
    RANK_OK(coll_allreduce(x, x, 64, COLL_FLOAT32, COLL_SUM, comm));
    RANK_CHECK(x[63] == (float)nranks, "sum %g", x[63]);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_tiny_dev_shm)
{
    char cmd[512], out[4096];

    /* our own mount namespace (Check runs each test in its own process) */
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=256k") != 0) {
        printf("skipped: cannot mount a small /dev/shm here (%s; needs root)\n", strerror(errno));
        return;
    }
    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_int_eq(harness_run(2, rank_tiny_fallback, NULL, 60), 0);
    snprintf(cmd, sizeof(cmd), "cat %s/fallback*.log", log_dir);
    harness_sh(cmd, out, sizeof(out));
    ck_assert_msg(strstr(out, "/dev/shm has ") && strstr(out, "using tcp instead") &&
                  strstr(out, "COLL_SHM_RING_SIZE"), "no clear message:\n%s", out);
    ck_assert_msg(strstr(out, "tcp: connected to"), "not over tcp:\n%s", out);
    ck_assert_msg(!strstr(out, "unhandled"), "%s", out);
    ck_assert_int_eq(harness_run(2, rank_tiny, NULL, 60), 0);
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- /dev/shm sized for this host's ranks, not the job's --------------------------- */

/* Two hosts of 2 ranks on this machine: each host a UTS namespace of its
 * own name and a /dev/shm of its own (tmpfs mounts made by the test, one
 * per host, bind-mounted by its ranks), with room for one pair's segment
 * (1.3 MB at the default ring) and not for the 6 of 4 ranks on one host. */
static char host_shm[2][160];

static int become_host(int host)
{
    char name[16];

    snprintf(name, sizeof(name), "shmhost%d", host);
    return unshare(CLONE_NEWNS | CLONE_NEWUTS) == 0 &&
           mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
           mount(host_shm[host], "/dev/shm", NULL, MS_BIND, NULL) == 0 &&
           sethostname(name, strlen(name)) == 0;
}

/* arg: 1 to start as a launcher does (COLL_LOCAL_SIZE=2 beside the rank,
 * coll_comm_init_env), 0 with coll_comm_init_rank, where nothing says how
 * many ranks share a host. */
static int rank_two_hosts(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    char logpath[256], idstr[COLL_UNIQUE_ID_STR_LEN], num[16];
    coll_comm_t comm = NULL;
    float x[64];

    RANK_CHECK(become_host(rank / 2), "host %d: %s", rank / 2, strerror(errno));
    snprintf(logpath, sizeof(logpath), "%s/hosts%d.log", log_dir, rank);
    setenv("COLL_DEBUG", "INFO", 1);
    setenv("COLL_DEBUG_FILE", logpath, 1);
    if (*(const int *)arg) {
        RANK_OK(coll_unique_id_to_str(id, idstr));
        setenv("COLL_UNIQUE_ID", idstr, 1);
        snprintf(num, sizeof(num), "%d", rank);
        setenv("COLL_RANK", num, 1);
        snprintf(num, sizeof(num), "%d", nranks);
        setenv("COLL_NRANKS", num, 1);
        setenv("COLL_LOCAL_SIZE", "2", 1);
        RANK_OK(coll_comm_init_env(&comm, NULL));
    } else {
        RANK_OK(coll_comm_init_rank(&comm, nranks, *id, rank));
    }
    for (int i = 0; i < 64; i++)
        x[i] = (float)(rank + 1);
    RANK_OK(coll_allreduce(x, x, 64, COLL_FLOAT32, COLL_SUM, comm));
    RANK_CHECK(x[63] == 10.0f, "sum %g", x[63]);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

/* Our own mount namespace with a tmpfs per host; 0 (after printing why)
 * where this cannot be had. */
static int make_hosts(void)
{
    if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        printf("skipped: cannot make a mount namespace here (%s; needs root)\n", strerror(errno));
        return 0;
    }
    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    for (int h = 0; h < 2; h++) {
        snprintf(host_shm[h], sizeof(host_shm[h]), "%s/shm%d", log_dir, h);
        ck_assert_msg(mkdir(host_shm[h], 0700) == 0 &&
                      mount("tmpfs", host_shm[h], "tmpfs", 0, "size=2m") == 0,
                      "tmpfs at %s: %s", host_shm[h], strerror(errno));
    }
    return 1;
}

/* Run the 4 ranks and return their logs. One run per test: the test's
 * process reads the log settings when it first makes a unique id, and
 * the ranks it forks after that keep them. */
static void run_hosts(int hinted, char *out, size_t len)
{
    char cmd[256];

    ck_assert_int_eq(harness_run(4, rank_two_hosts, &hinted, 60), 0);
    snprintf(cmd, sizeof(cmd), "cat %s/hosts*.log", log_dir);
    harness_sh(cmd, out, len);
    for (int h = 0; h < 2; h++)
        umount(host_shm[h]);
    harness_tmpdir_remove(log_dir);
}

/* Logs too long for a Check message go to stdout before the assertion. */
static void logs_show(int ok, const char *what, const char *logs)
{
    if (!ok)
        printf("%s\n", logs);
    ck_assert_msg(ok, "%s (the ranks' logs are above)", what);
}

/* The launcher says 2 ranks per host: one pair fits, and shm carries it. */
START_TEST(test_dev_shm_per_host)
{
    char out[16384], want[64];

    if (!make_hosts())
        return;
    run_hosts(1, out, sizeof(out));
    logs_show(!strstr(out, "using tcp instead"), "fell back to tcp", out);
    for (int r = 0; r < 4; r++) {
        snprintf(want, sizeof(want), "rank %d: peers by transport: shm 1, tcp 2", r);
        logs_show(strstr(out, want) != NULL, want, out);
    }
}
END_TEST

/* Nothing says how many: room for all 4 is asked, and the message says
 * what to set. */
START_TEST(test_dev_shm_per_host_unknown)
{
    char out[16384];

    if (!make_hosts())
        return;
    run_hosts(0, out, sizeof(out));
    logs_show(strstr(out, "(4 ranks on this host, were all of the job's here: set "
                          "COLL_LOCAL_SIZE") && strstr(out, "peers by transport: tcp 3"),
              "no fallback with a clear message", out);
}
END_TEST

/* ---- reductions as data arrives (COLL_RECV_REDUCE) ------------------------------ */

/* How the received blocks of a ring all-reduce reach the reduction: the
 * pipeline chunk and the single-copy threshold pick the path. */
static const struct fold_case {
    const char *name, *chunk, *cma_threshold, *fold;
} fold_cases[] = {
    {"eager records, folded", "16K", "512K", "1"},
    {"ring data records, folded", "256K", "512K", "1"},
    {"single-copy pieces, folded", "2M", "512K", "1"},
    {"received then reduced (COLL_RECV_REDUCE=0)", "2M", "512K", "0"},
};
#define NFOLD (int)(sizeof(fold_cases) / sizeof(fold_cases[0]))

/* Element i of rank r, and what the reduction over p ranks must give:
 * small integers, so that every float sum is exact in any order. */
static double fold_value(int r, size_t i, int dt)
{
    return dt == COLL_FLOAT64 ? (double)(r + 1) * (double)(1 + i % 3) : (double)(r + 1 + (int)(i % 7));
}

static double fold_expect(int p, size_t i, int dt)
{
    return dt == COLL_FLOAT64 ? (double)(1 + i % 3) : (double)(p * (p + 1) / 2 + p * (int)(i % 7));
}

static double fold_get(const void *buf, size_t i, int dt)
{
    return dt == COLL_FLOAT32 ? ((const float *)buf)[i]
           : dt == COLL_INT64 ? (double)((const int64_t *)buf)[i]
                              : ((const double *)buf)[i];
}

static void fold_put(void *buf, size_t i, int dt, double v)
{
    if (dt == COLL_FLOAT32)
        ((float *)buf)[i] = (float)v;
    else if (dt == COLL_INT64)
        ((int64_t *)buf)[i] = (int64_t)v;
    else
        ((double *)buf)[i] = v;
}

/* Float and int64 sum, double min, and with `avg` a float average too:
 * all-reduces of 1000003 elements (an odd count, so blocks and chunks end
 * off any alignment), out of place and in place, each result checked
 * (exactly; the average to a millionth). `name` labels failures. */
static void fold_kinds_check(coll_comm_t comm, int rank, int nranks, int avg, const char *name)
{
    static const struct { int dt, op; size_t esize; } kinds[] = {
        {COLL_FLOAT32, COLL_SUM, 4}, {COLL_INT64, COLL_SUM, 8}, {COLL_FLOAT64, COLL_MIN, 8},
        {COLL_FLOAT32, COLL_AVG, 4}};
    const size_t count = 1000003;
    size_t nkinds = sizeof(kinds) / sizeof(kinds[0]) - !avg;

    for (size_t k = 0; k < nkinds; k++) {
        int dt = kinds[k].dt, is_avg = kinds[k].op == COLL_AVG;
        void *in = malloc(count * kinds[k].esize), *out = malloc(count * kinds[k].esize);
        RANK_CHECK(in && out, "out of memory");
        for (int in_place = 0; in_place < 2; in_place++) {
            for (size_t i = 0; i < count; i++)
                fold_put(in, i, dt, fold_value(rank, i, dt));
            RANK_OK(coll_allreduce(in, in_place ? in : out, count, (coll_datatype_t)dt,
                                   (coll_op_t)kinds[k].op, comm));
            const void *res = in_place ? in : out;
            for (size_t i = 0; i < count; i++) {
                double want = fold_expect(nranks, i, dt) / (is_avg ? nranks : 1);
                double got = fold_get(res, i, dt), off = got > want ? got - want : want - got;
                RANK_CHECK(is_avg ? off <= 1e-6 * want : got == want,
                           "%s, type %d, op %d, %s: element %zu is %g, expected %g", name, dt,
                           kinds[k].op, in_place ? "in place" : "out of place", i, got, want);
            }
        }
        free(in);
        free(out);
    }
}

static int rank_fold(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const struct fold_case *fc = &fold_cases[*(int *)arg];

    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_ALGO", "allreduce:ring", 1);
    setenv("COLL_PIPELINE_CHUNK", fc->chunk, 1);
    setenv("COLL_SHM_CMA_THRESHOLD", fc->cma_threshold, 1);
    setenv("COLL_RECV_REDUCE", fc->fold, 1);
    setenv("COLL_SHM_CMA_ADAPT", "0", 1); /* the single-copy cases read every piece */
    coll_comm_t comm = harness_init(rank, nranks, id);
    fold_kinds_check(comm, rank, nranks, 0, fc->name);
    coll_comm_destroy(comm);
    return 0;
}

START_TEST(test_fold_paths)
{
    int c = _i;
    ck_assert_msg(harness_run(3, rank_fold, &c, 120) == 0, "all-reduce over %s",
                  fold_cases[c].name);
}
END_TEST

/* ---- folded results written back (COLL_SHM_REPLY) ------------------------------- */

/* The butterfly all-reduce's last exchange: each side reads its peer's
 * half, folds it into its own and writes the result back (write_back), so
 * that the exchange of results moves nothing. */
static const struct reply_case {
    const char *name;
    int nranks, refuse_write;
    const char *reply;
    int active; /* ranks that fold in the last exchange write back every call but the average */
} reply_cases[] = {
    {"2 ranks", 2, 0, "1", 1},
    {"3 ranks (rank 0 folded in first)", 3, 0, "1", 1},
    {"4 ranks", 4, 0, "1", 1},
    {"COLL_SHM_REPLY=0", 2, 0, "0", 0},
    {"process_vm_writev refused", 2, 1, "1", 0},
};
#define NREPLY (int)(sizeof(reply_cases) / sizeof(reply_cases[0]))
#define REPLY_CALLS 6 /* fold_kinds_check's three kinds that are not an average, in place and out */

static int rank_reply(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const struct reply_case *rc = &reply_cases[*(int *)arg];

    /* halves of about 2 MiB of float: read, not through the ring */
    shm_only_logged(rank);
    setenv("COLL_ALGO", "allreduce:butterfly", 1);
    setenv("COLL_SHM_CMA_THRESHOLD", "512K", 1);
    setenv("COLL_SHM_CMA_ADAPT", "0", 1); /* every half that may be read is */
    setenv("COLL_SHM_REPLY", rc->reply, 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    if (rc->refuse_write)
        refuse_syscall(__NR_process_vm_writev);
    fold_kinds_check(comm, rank, nranks, 1, rc->name);
    coll_comm_destroy(comm);
    return 0;
}

/* Messages a rank wrote back. */
static unsigned long replies_logged(int rank)
{
    return counts_logged(rank, "[0-9]* reduced messages from .* were written back");
}

START_TEST(test_reply)
{
    const struct reply_case *rc = &reply_cases[_i];
    char cmd[512], out[64];
    int c = _i;

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(rc->nranks, rank_reply, &c, 120) == 0, "butterfly all-reduce, %s",
                  rc->name);
    for (int r = 0; r < rc->nranks; r++) {
        /* with 3 ranks rank 0 hands its vector to rank 1 and takes no part */
        int folds = rc->active && !(rc->nranks == 3 && r == 0);
        unsigned long want = folds ? REPLY_CALLS : 0, n = replies_logged(r);
        ck_assert_msg(n == want, "%s: rank %d wrote %lu folded halves back, expected %lu "
                      "(logs in %s)", rc->name, r, n, want, log_dir);
    }
    snprintf(cmd, sizeof(cmd), "cat %s/rank*.log | grep -c 'writing to .* is not permitted'",
             log_dir);
    harness_sh(cmd, out, sizeof(out));
    int lines = atoi(out);
    ck_assert_msg(rc->refuse_write ? lines >= 1 && lines <= rc->nranks : lines == 0,
                  "%s: %d lines saying process_vm_writev was refused", rc->name, lines);
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* ---- results stored past the cache (COLL_STREAM_MIN) ---------------------------- */

/* Element i of rank r's contribution, small integers so that float sums
 * are exact in any order. */
static float streamed_in(int r, size_t i)
{
    return (float)(r + 1 + (int)(i % 13));
}

static void streamed_check(const float *got, size_t n, const float *want, const char *what,
                         int rank)
{
    for (size_t i = 0; i < n; i++)
        RANK_CHECK(got[i] == want[i], "rank %d, %s: element %zu is %g, expected %g", rank,
                   what, i, got[i], want[i]);
}

/* Every algorithm that receives into its result with
 * coll_sched_recv_result, through the ring with streaming at any size
 * (COLL_STREAM_MIN=1; single copies off), out of place and in place. Odd
 * counts, so that blocks and ring records start off any alignment. The
 * streamed copy's own edges are test_reduce's test_copy_local. */
static int rank_streamed(int rank, int p, const coll_unique_id_t *id, void *arg)
{
    const size_t n = 100003; /* floats per block */
    float *in = malloc((size_t)p * n * sizeof(float));
    float *out = malloc((size_t)p * n * sizeof(float));
    float *want = malloc((size_t)p * n * sizeof(float));
    (void)arg;
    RANK_CHECK(in && out && want, "out of memory");
    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_STREAM_MIN", "1", 1);
    setenv("COLL_SHM_CMA", "0", 1);
    setenv("COLL_PIPELINE_CHUNK", "64K", 1);
    setenv("COLL_ALGO", "allreduce:ring,allgather:ring,broadcast:binomial,alltoall:pairwise", 1);
    coll_comm_t comm = harness_init(rank, p, id);
    for (int in_place = 0; in_place < 2; in_place++) {
        const char *how = in_place ? "in place" : "out of place";
        char what[64];
        /* all-reduce of p blocks */
        for (size_t i = 0; i < (size_t)p * n; i++) {
            in[i] = streamed_in(rank, i);
            want[i] = 0;
            for (int r = 0; r < p; r++)
                want[i] += streamed_in(r, i);
        }
        RANK_OK(coll_allreduce(in, in_place ? in : out, (size_t)p * n, COLL_FLOAT32, COLL_SUM,
                               comm));
        snprintf(what, sizeof(what), "all-reduce %s", how);
        streamed_check(in_place ? in : out, (size_t)p * n, want, what, rank);
        /* all-gather: block r from rank r */
        for (size_t i = 0; i < (size_t)p * n; i++)
            want[i] = streamed_in((int)(i / n), i % n);
        for (size_t i = 0; i < n; i++)
            (in_place ? out + (size_t)rank * n : in)[i] = streamed_in(rank, i);
        RANK_OK(coll_allgather(in_place ? out + (size_t)rank * n : in, out, n, COLL_FLOAT32,
                               comm));
        snprintf(what, sizeof(what), "all-gather %s", how);
        streamed_check(out, (size_t)p * n, want, what, rank);
        /* broadcast from the last rank */
        for (size_t i = 0; i < n; i++)
            want[i] = in[i] = streamed_in(p - 1, i);
        RANK_OK(coll_broadcast(in, in_place || rank != p - 1 ? in : out, n, COLL_FLOAT32, p - 1,
                               comm));
        snprintf(what, sizeof(what), "broadcast %s", how);
        streamed_check(in_place || rank != p - 1 ? in : out, n, want, what, rank);
        /* all-to-all: block k of rank r's input goes to rank k */
        for (size_t i = 0; i < (size_t)p * n; i++) {
            in[i] = streamed_in(rank, i) * (float)(i / n + 1);
            want[i] = streamed_in((int)(i / n), (size_t)rank * n + i % n) * (float)(rank + 1);
        }
        RANK_OK(coll_alltoall(in, in_place ? in : out, n, COLL_FLOAT32, comm));
        snprintf(what, sizeof(what), "all-to-all %s", how);
        streamed_check(in_place ? in : out, (size_t)p * n, want, what, rank);
    }
    coll_comm_destroy(comm);
    free(in);
    free(out);
    free(want);
    return 0;
}

START_TEST(test_stream_results)
{
    int p = 2 + _i;
    ck_assert_msg(harness_run(p, rank_streamed, NULL, 120) == 0, "results streamed, %d ranks", p);
}
END_TEST

/* ---- mailboxes: the one-shot all-reduce ---------------------------------------- */

/* Rank r's element i: small integers, so the float sum is exact. */
static float oneshot_in(int r, size_t i)
{
    return (float)((int)((i * 7 + (size_t)r * 3) % 17) - 8);
}

static void oneshot_check(const float *got, size_t n, int nranks, int avg, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < nranks; r++)
            want += oneshot_in(r, i);
        if (avg)
            want /= (float)nranks;
        RANK_CHECK(got[i] == want, "%s: element %zu of %zu is %g, expected %g", what, i, n,
                   (double)got[i], (double)want);
    }
}

static void oneshot_fill(float *buf, size_t n, int rank)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = oneshot_in(rank, i);
}

/* The barrier holds everyone back: between two barriers every rank adds
 * one to a counter all the ranks share (arg, mapped before the fork), and
 * after the first each must see the whole round's additions. */
static void oneshot_barriers(coll_comm_t comm, int nranks, int *counter)
{
    for (int i = 0; i < 200; i++) {
        __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST);
        RANK_OK(coll_barrier(comm));
        int seen = __atomic_load_n(counter, __ATOMIC_SEQ_CST);
        RANK_CHECK(seen == (i + 1) * nranks, "barrier %d: the counter is %d, expected %d", i,
                   seen, (i + 1) * nranks);
        RANK_OK(coll_barrier(comm));
    }
}

/* Forced with no fallback: a call oneshot cannot run fails the test. */
static int rank_oneshot(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    enum { SLOT = 4096, NB = 6, BIG = 1 << 18 }; /* floats: 16 KiB, the slot */
    static const size_t counts[] = {1, 2, 3, 12, 13, 255, 1024, SLOT - 1, SLOT};
    float *s = malloc(SLOT * sizeof(float)), *r = malloc(SLOT * sizeof(float));
    float *nb = malloc(NB * SLOT * sizeof(float)), *big = malloc(BIG * sizeof(float));
    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_ALGO", "allreduce:oneshot,barrier:oneshot", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(s && r && nb && big, "out of memory");
    oneshot_barriers(comm, nranks, arg);
    for (int round = 0; round < 3; round++) /* slots reused many times over */
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
            for (int in_place = 0; in_place < 2; in_place++)
                for (int avg = 0; avg < 2; avg++) {
                    size_t n = counts[k];
                    oneshot_fill(s, n, rank);
                    float *dst = in_place ? s : r;
                    RANK_OK(coll_allreduce(s, dst, n, COLL_FLOAT32, avg ? COLL_AVG : COLL_SUM,
                                           comm));
                    oneshot_check(dst, n, nranks, avg, in_place ? "in place" : "out of place");
                }
    /* several in flight with a larger vector among them, which falls back
     * to a schedule of messages on the same communicator; waited for in
     * reverse: mailbox collectives run in call order whatever the waits */
    coll_request_t reqs[NB + 1];
    coll_comm_t mixed;
    setenv("COLL_ALGO_FALLBACK", "silent", 1);
    RANK_OK(coll_comm_split(comm, 0, rank, &mixed));
    oneshot_fill(big, BIG, rank);
    for (int j = 0; j < NB; j++) {
        oneshot_fill(nb + (size_t)j * SLOT, SLOT - (size_t)j, rank);
        RANK_OK(coll_iallreduce(nb + (size_t)j * SLOT, nb + (size_t)j * SLOT, SLOT - (size_t)j,
                                COLL_FLOAT32, COLL_SUM, mixed, &reqs[j]));
        if (j == 2)
            RANK_OK(coll_iallreduce(big, big, BIG, COLL_FLOAT32, COLL_SUM, mixed, &reqs[NB]));
    }
    for (int j = NB; j >= 0; j--)
        RANK_OK(coll_wait(&reqs[j]));
    for (int j = 0; j < NB; j++)
        oneshot_check(nb + (size_t)j * SLOT, SLOT - (size_t)j, nranks, 0, "in flight");
    oneshot_check(big, BIG, nranks, 0, "the large vector in flight");
    RANK_OK(coll_comm_destroy(mixed));
    RANK_OK(coll_comm_destroy(comm));
    free(s);
    free(r);
    free(nb);
    free(big);
    return 0;
}

/* Run fn on p ranks with a zeroed int that all of them share (its arg). */
static void run_with_counter(int p, harness_rank_fn fn, const char *what)
{
    int *counter = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    ck_assert(counter != MAP_FAILED);
    *counter = 0;
    ck_assert_msg(harness_run(p, fn, counter, 60) == 0, "%s on %d ranks", what, p);
    munmap(counter, sizeof(int));
}

START_TEST(test_oneshot)
{
    run_with_counter(2 + _i, rank_oneshot, "oneshot");
}
END_TEST

/* ---- mailboxes: a blocking call's step without the engine --------------------- */

/* Round i: rank i % p calls LATE_MS after the others, so their inline
 * polls run out and the engine takes the step over halfway (their
 * messages are out, the late one's is not): in place, with the copy of
 * its vector a rank above 1 keeps, and out of place, sum and mean. The
 * late rank finds every message there and ends inline: its log (TRACE,
 * which names every schedule the engine starts) has no line for those
 * calls. */
static int rank_inline(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    enum { ROUNDS = 12, N = 300, LATE_MS = 50 };
    float s[N], r[N];
    char logpath[256];
    (void)arg;
    snprintf(logpath, sizeof(logpath), "%s/inline%d.log", log_dir, rank);
    setenv("COLL_DEBUG", "TRACE", 1);
    setenv("COLL_DEBUG_SUBSYS", "COLL", 1);
    setenv("COLL_DEBUG_FILE", logpath, 1);
    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_ALGO", "allreduce:oneshot", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (int i = 0; i < ROUNDS; i++) {
        int late = i % nranks == rank, in_place = i / nranks % 2, avg = i % 3 == 0;
        float *dst = in_place ? s : r;
        RANK_OK(coll_barrier(comm));
        oneshot_fill(s, N, rank);
        if (late)
            usleep(LATE_MS * 1000);
        int before = harness_count_lines(logpath, "allreduce #");
        RANK_OK(coll_allreduce(s, dst, N, COLL_FLOAT32, avg ? COLL_AVG : COLL_SUM, comm));
        oneshot_check(dst, N, nranks, avg, in_place ? "in place" : "out of place");
        if (late)
            RANK_CHECK(harness_count_lines(logpath, "allreduce #") == before,
                       "round %d: the late rank's all-reduce went through the engine (%s)", i,
                       logpath);
    }
    RANK_CHECK(harness_count_lines(logpath, "allreduce #") > 0,
               "no all-reduce was handed to the engine, though the others called %d ms late",
               LATE_MS);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_inline)
{
    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2 + _i * 2, rank_inline, NULL, 60) == 0,
                  "inline mailbox steps on %d ranks (logs in %s)", 2 + _i * 2, log_dir);
    harness_tmpdir_remove(log_dir); /* kept above when the run fails */
}
END_TEST

/* A root runs as many small broadcasts ahead as a mailbox has slots: it
 * makes them all before any other rank calls (the others wait for its
 * word in the shared counter, arg), then each rank receives them in
 * order. With fewer slots the root would wait for a release that cannot
 * come, and the others' deadline fails the test. */
static int rank_run_ahead(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    enum { AHEAD = SHM_MBOX_SLOTS, N = 5 };
    int *counter = arg, v[N];
    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_ALGO", "broadcast:oneshot", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);

    for (int k = 0; k < AHEAD; k++) {
        if (rank == 0) {
            for (int i = 0; i < N; i++)
                v[i] = k * 100 + i;
        } else {
            for (int t = 0; t < 10000 && !__atomic_load_n(counter, __ATOMIC_ACQUIRE); t++)
                usleep(1000);
            RANK_CHECK(__atomic_load_n(counter, __ATOMIC_ACQUIRE),
                       "the root did not make %d broadcasts within 10 s before the others "
                       "called", AHEAD);
            memset(v, 0xff, sizeof(v));
        }
        RANK_OK(coll_broadcast(v, v, N, COLL_INT32, 0, comm));
        for (int i = 0; i < N; i++)
            RANK_CHECK(v[i] == k * 100 + i, "broadcast %d: element %d is %d, expected %d", k,
                       i, v[i], k * 100 + i);
    }
    if (rank == 0)
        __atomic_store_n(counter, 1, __ATOMIC_RELEASE);
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_run_ahead)
{
    run_with_counter(2 + _i, rank_run_ahead, "run ahead");
}
END_TEST

/* Over TCP there are no mailboxes: the forced algorithm says so. */
static int rank_oneshot_tcp(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    float x = 1;
    (void)arg;
    setenv("COLL_TRANSPORTS", "tcp", 1);
    setenv("COLL_ALGO", "allreduce:oneshot", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    coll_status_t st = coll_allreduce(&x, &x, 1, COLL_FLOAT32, COLL_SUM, comm);
    RANK_CHECK(st == COLL_ERR_INVALID_USAGE && strstr(coll_get_last_error(comm), "oneshot") &&
               strstr(coll_get_last_error(comm), "mailboxes"),
               "forced oneshot over TCP: %s: %s", coll_status_str(st), coll_get_last_error(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_oneshot_tcp)
{
    ck_assert_int_eq(harness_run(2, rank_oneshot_tcp, NULL, 30), 0);
}
END_TEST

/* Counts that differ between ranks: the root of a mailbox reduce reads a
 * shorter message than its count says and must fail naming the sender,
 * not combine the slot's stale bytes. The sender's part is done at its
 * write. */
static int rank_oneshot_mismatch(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    float x[8] = {0}, y[8];
    (void)arg;
    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_ALGO", "reduce:oneshot", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    coll_status_t st = coll_reduce(x, y, rank == 0 ? 8 : 4, COLL_FLOAT32, COLL_SUM, 0, comm);
    if (rank == 0)
        RANK_CHECK(st == COLL_ERR_SIZE_MISMATCH &&
                   strstr(coll_get_last_error(comm), "rank 1 sent a 16-byte mailbox message, "
                          "rank 0 expects 32"),
                   "root: %s: %s", coll_status_str(st), coll_get_last_error(comm));
    else
        RANK_CHECK(st == COLL_OK, "sender: %s: %s", coll_status_str(st),
                   coll_get_last_error(comm));
    if (rank == 1) /* stay until the root has failed: leaving first could be seen first */
        RANK_CHECK(coll_barrier(comm) != COLL_OK, "a barrier with the failed root succeeded");
    coll_comm_abort(comm);
    return 0;
}

START_TEST(test_oneshot_mismatch)
{
    ck_assert_int_eq(harness_run(2, rank_oneshot_mismatch, NULL, 30), 0);
}
END_TEST

/* The cost model learns whether a host runs more ranks than the CPUs
 * they may use together: 3 ranks all bound to one CPU are; 2 ranks bound
 * to two different CPUs are not (each allows one CPU, together two). */
static int rank_oversubscribed(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int crowded = *(const int *)arg;
    int cpu = nth_own_cpu(crowded ? 0 : rank);

    RANK_CHECK(harness_bind_cpu(cpu) == 0, "bind to CPU %d", cpu);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK((comm->crowd > 1) == crowded, "%g ranks per CPU, expected %s", comm->crowd,
               crowded ? "more than 1" : "at most 1");
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_oversubscribed)
{
    cpu_set_t all;
    int crowded = _i == 0;
    ck_assert(sched_getaffinity(0, sizeof(all), &all) == 0);
    if (!crowded && CPU_COUNT(&all) < 2) {
        printf("skipped: one CPU, so two ranks cannot run on CPUs of their own\n");
        return;
    }
    ck_assert_int_eq(harness_run(crowded ? 3 : 2, rank_oversubscribed, &crowded, 30), 0);
}
END_TEST

/* Small all-reduces until one fails (a peer killed while we poll its
 * mailbox); the failure is reported as harness_stream_ring does. */
static int rank_oneshot_loop(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    float x[16] = {0};
    coll_status_t st = COLL_OK;
    (void)arg;
    setenv("COLL_TRANSPORTS", "shm", 1);
    setenv("COLL_ALGO", "allreduce:oneshot", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (int i = 0; st == COLL_OK; i++) {
        st = coll_allreduce(x, x, 16, COLL_FLOAT32, COLL_MAX, comm);
        if (i == 0 && st == COLL_OK)
            RANK_CHECK(write(harness_ready_fd, "r", 1) == 1, "ready");
    }
    harness_report(comm, rank, st);
    coll_comm_abort(comm);
    return 0;
}

START_TEST(test_oneshot_killed)
{
    kill_one_of_four(2, rank_oneshot_loop, NULL);
}
END_TEST

/* ---- eager messages parked in the ring ------------------------------------------ */

/* Eager messages wait in the ring for their receive (SHM_PARK_MAX_NS):
 * more of them than a ring holds (24 x 64 KiB, the ring 512 KiB) must not
 * deadlock a program that sends before it receives. PARK_CYCLE2/3: each
 * rank blocks sending to the next, then receives from the one before;
 * PARK_WAITING: rank 1 waits for rank 2, which waits for rank 0's last
 * send, behind the 24 to rank 1; PARK_LEFT: rank 0 sends 4 and leaves
 * while rank 1 waits for rank 2, then rank 1 receives them. */
enum { PARK_CYCLE2, PARK_CYCLE3, PARK_WAITING, PARK_LEFT, NPARK };
static const char *park_names[] = {"2 ranks sending to each other", "3 ranks in a cycle",
                                   "a rank waiting for another", "a sender that left"};
#define PARK_MSGS 24
#define PARK_BYTES (64u << 10)

static int park_send_all(coll_comm_t comm, uint8_t *buf, int rank, int to)
{
    for (int k = 0; k < PARK_MSGS; k++) {
        harness_fill(buf, PARK_BYTES, rank, k);
        RANK_OK(coll_send(buf, PARK_BYTES, COLL_UINT8, to, k, comm));
    }
    return 0;
}

static int park_recv_all(coll_comm_t comm, uint8_t *buf, int from)
{
    for (int k = 0; k < PARK_MSGS; k++) {
        memset(buf, 0, PARK_BYTES);
        RANK_OK(coll_recv(buf, PARK_BYTES, COLL_UINT8, from, k, comm));
        harness_verify(buf, PARK_BYTES, from, k);
    }
    return 0;
}

static int rank_parked(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int mode = *(int *)arg, one = 1;
    uint8_t *buf = malloc(PARK_BYTES);

    setenv("COLL_TRANSPORTS", "shm", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(buf != NULL, "out of memory");
    if (mode == PARK_CYCLE2 || mode == PARK_CYCLE3) {
        park_send_all(comm, buf, rank, (rank + 1) % nranks);
        park_recv_all(comm, buf, (rank + nranks - 1) % nranks);
    } else if (mode == PARK_WAITING) {
        if (rank == 0) {
            park_send_all(comm, buf, rank, 1);
            RANK_OK(coll_send(&one, 1, COLL_INT32, 2, 100, comm));
        } else if (rank == 2) {
            RANK_OK(coll_recv(&one, 1, COLL_INT32, 0, 100, comm));
            RANK_OK(coll_send(&one, 1, COLL_INT32, 1, 101, comm));
        } else {
            RANK_OK(coll_recv(&one, 1, COLL_INT32, 2, 101, comm));
            park_recv_all(comm, buf, 0);
        }
    } else if (rank == 0) { /* PARK_LEFT: what fits in the ring, then goodbye */
        for (int k = 0; k < 4; k++) {
            harness_fill(buf, PARK_BYTES, rank, k);
            RANK_OK(coll_send(buf, PARK_BYTES, COLL_UINT8, 1, k, comm));
        }
    } else if (rank == 2) {
        usleep(300 * 1000); /* rank 0 has left by now */
        RANK_OK(coll_send(&one, 1, COLL_INT32, 1, 101, comm));
    } else { /* sees rank 0 go while it waits for rank 2 */
        RANK_OK(coll_recv(&one, 1, COLL_INT32, 2, 101, comm));
        for (int k = 0; k < 4; k++) {
            RANK_OK(coll_recv(buf, PARK_BYTES, COLL_UINT8, 0, k, comm));
            harness_verify(buf, PARK_BYTES, 0, k);
        }
    }
    free(buf);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_parked)
{
    int mode = _i, nranks = mode == PARK_CYCLE2 ? 2 : 3;
    double t0 = harness_now();
    ck_assert_msg(harness_run(nranks, rank_parked, &mode, 30) == 0, "%s", park_names[mode]);
    printf("parked eager messages, %s: %.2f s\n", park_names[mode], harness_now() - t0);
}
END_TEST

/* ---- memory from coll_mem_alloc (shm_map.c) ---------------------------------------- */

START_TEST(test_mem_alloc_api)
{
    void *p = NULL, *q = (void *)1;
    int on_stack;
    long page = sysconf(_SC_PAGESIZE);

    ck_assert_int_eq(coll_mem_alloc(NULL, 4096), COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "ptr is NULL"));
    ck_assert_int_eq(coll_mem_alloc(&q, 0), COLL_ERR_INVALID_ARG);
    ck_assert_msg(q == (void *)1, "a failed coll_mem_alloc set its output");
    ck_assert_int_eq(coll_mem_alloc(&q, SIZE_MAX), COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_mem_alloc(&p, 100), COLL_OK);
    ck_assert_msg(((uintptr_t)p & (uintptr_t)(page - 1)) == 0, "%p is not page aligned", p);
    for (long i = 0; i < page; i++) /* zeroed, and the whole page is ours */
        ck_assert_msg(((uint8_t *)p)[i] == 0, "byte %ld is not zero", i);
    memset(p, 0xab, (size_t)page);
    ck_assert_int_eq(coll_mem_free((uint8_t *)p + 64), COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "not at its start"));
    ck_assert_int_eq(coll_mem_free(&on_stack), COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "not allocated by coll_mem_alloc"));
    ck_assert_int_eq(coll_mem_free(NULL), COLL_OK);
    ck_assert_int_eq(coll_mem_free(p), COLL_OK);
    ck_assert_int_eq(coll_mem_free(p), COLL_ERR_INVALID_ARG);
}
END_TEST

/* How the receiver treats regions an RTS names: MAPS_ON maps them;
 * MAPS_OFF_RECV: rank 1 maps nothing (COLL_SHM_MAP=0), so below the
 * single-copy threshold the messages rank 0 names must come through the
 * ring; MAPS_OFF: neither rank names them. */
enum { MAPS_ON, MAPS_OFF_RECV, MAPS_OFF, NMAPS };
static const char *maps_names[] = {"mapped", "the receiver maps nothing (COLL_SHM_MAP=0)",
                                   "COLL_SHM_MAP=0 on both ranks"};
#define MAP_REGIONS (SHM_MAPS + 8)   /* more than a receiver keeps mapped */
#define MAP_REGION_BYTES (256u << 10)

/* Messages copied straight out of the peer's memory, from rank r's log
 * (-1: none logged). */
static long mapped_logged(int r)
{
    char cmd[512], out[64];
    long n = -1;

    snprintf(cmd, sizeof(cmd), "grep -o '[0-9]* messages from rank [0-9]* (pid [0-9]* on [^)]*) "
             "were copied straight' %s/rank%d.log | head -1", log_dir, r);
    harness_sh(cmd, out, sizeof(out));
    if (sscanf(out, "%ld", &n) != 1)
        n = -1;
    return n;
}

/* One message from rank 0 to rank 1, checked. */
static void send_or_check(coll_comm_t comm, int rank, uint8_t *buf, size_t n, int salt)
{
    if (rank == 0) {
        harness_fill(buf, n, 0, salt);
        RANK_OK(coll_send(buf, n, COLL_UINT8, 1, salt & 0xffff, comm));
    } else {
        memset(buf, 0, n);
        RANK_OK(coll_recv(buf, n, COLL_UINT8, 0, salt & 0xffff, comm));
        harness_verify(buf, n, 0, salt);
    }
}

/* Rank 0 sends from one region at every size, from more regions than a
 * receiver keeps, and from an address whose region was freed and reused
 * (by plain memory, then by another region); rank 1 receives into plain
 * memory and into a region. */
static int rank_mapped_p2p(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int mode = *(int *)arg, salt = 0;
    uint8_t *big = NULL, *plain = malloc(64u << 20), *reg[MAP_REGIONS];

    shm_only_logged(rank);
    if (mode == MAPS_OFF || (mode == MAPS_OFF_RECV && rank == 1))
        setenv("COLL_SHM_MAP", "0", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_CHECK(plain, "out of memory");
    RANK_OK(coll_mem_alloc((void **)&big, (64u << 20) + 4096));
    /* every size, from 1 byte into the region (an unaligned start) */
    for (size_t k = 0; k < NSIZES; k++, salt++)
        send_or_check(comm, rank, rank == 0 ? big + 1 : (k & 1) ? plain : big + 1, sizes[k],
                      salt);
    /* messages that arrive before their receive */
    if (rank == 0) {
        coll_request_t reqs[4];
        for (int j = 0; j < 4; j++) {
            harness_fill(big + (size_t)j * (1u << 20), 1u << 20, 0, 1000 + j);
            RANK_OK(coll_isend(big + (size_t)j * (1u << 20), 1u << 20, COLL_UINT8, 1, 1000 + j,
                               comm, &reqs[j]));
        }
        RANK_OK(coll_waitall(4, reqs));
    } else {
        usleep(100 * 1000);
        for (int j = 4; j-- > 0;) {
            RANK_OK(coll_recv(plain, 1u << 20, COLL_UINT8, 0, 1000 + j, comm));
            harness_verify(plain, 1u << 20, 0, 1000 + j);
        }
    }
    /* more regions than a receiver keeps mapped, twice round */
    for (int i = 0; i < MAP_REGIONS; i++)
        RANK_OK(coll_mem_alloc((void **)&reg[i], MAP_REGION_BYTES));
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < MAP_REGIONS; i++, salt++)
            send_or_check(comm, rank, rank == 0 ? reg[i] : plain, MAP_REGION_BYTES, salt);
    for (int i = 0; i < MAP_REGIONS; i++)
        RANK_OK(coll_mem_free(reg[i]));
    /* a region freed: its address taken by plain memory, then by a new
     * region; the receiver must see the new bytes each time */
    uint8_t *r1 = NULL, *r2 = NULL;
    RANK_OK(coll_mem_alloc((void **)&r1, 1u << 20));
    send_or_check(comm, rank, r1, 1u << 20, salt++);
    RANK_OK(coll_mem_free(r1));
    uint8_t *anon = mmap(r1, 1u << 20, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    RANK_CHECK(anon != MAP_FAILED, "mmap: %s", strerror(errno));
    send_or_check(comm, rank, anon, 1u << 20, salt++);
    munmap(anon, 1u << 20);
    RANK_OK(coll_mem_alloc((void **)&r2, 1u << 20));
    send_or_check(comm, rank, r2, 1u << 20, salt++);
    RANK_OK(coll_mem_free(r2));
    RANK_OK(coll_mem_free(big));
    free(plain);
    coll_comm_destroy(comm);
    return 0;
}

START_TEST(test_mapped_p2p)
{
    int mode = _i;
    /* sizes above the eager limit (a quarter of the 512 KiB ring), the 4
     * early messages, the regions twice round, the freed one and the new
     * one (not the plain memory at its address) */
    long expect = 4 + 2 * MAP_REGIONS + 2;

    for (size_t k = 0; k < NSIZES; k++)
        expect += sizes[k] > (128u << 10);
    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(2, rank_mapped_p2p, &mode, 120) == 0, "%s", maps_names[mode]);
    long got = mapped_logged(1);
    if (mode == MAPS_ON)
        ck_assert_msg(got == expect, "rank 1 copied %ld messages out of rank 0's regions, "
                      "expected %ld (logs in %s)", got, expect, log_dir);
    else
        ck_assert_msg(got == -1, "rank 1 copied %ld messages out of rank 0's regions (%s)",
                      got, maps_names[mode]);
    harness_tmpdir_remove(log_dir);
}
END_TEST

/* Collectives from and into memory from coll_mem_alloc, in and out of
 * place, checked element by element. */
static int rank_mapped_colls(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    const size_t block = 1u << 20, total = block * (size_t)nranks;
    int32_t *in = NULL, *out = NULL;

    (void)arg;
    shm_only_logged(rank);
    coll_comm_t comm = harness_init(rank, nranks, id);
    RANK_OK(coll_mem_alloc((void **)&in, total));
    RANK_OK(coll_mem_alloc((void **)&out, total));
    size_t nblk = block / sizeof(int32_t), nall = total / sizeof(int32_t);
    for (int inplace = 0; inplace < 2; inplace++) {
        /* all-gather: block r holds r * 1000003 + i */
        int32_t *src = inplace ? out + (size_t)rank * nblk : in;
        for (size_t i = 0; i < nblk; i++)
            src[i] = rank * 1000003 + (int32_t)i;
        RANK_OK(coll_allgather(src, out, nblk, COLL_INT32, comm));
        for (size_t i = 0; i < nall; i++)
            RANK_CHECK(out[i] == (int32_t)(i / nblk) * 1000003 + (int32_t)(i % nblk),
                       "all-gather (%s): element %zu is %d", inplace ? "in place" : "out of place",
                       i, out[i]);
        /* all-reduce: every rank adds rank + i % 1000 */
        int32_t *ar = inplace ? out : in;
        for (size_t i = 0; i < nall; i++)
            ar[i] = rank + (int32_t)(i % 1000);
        RANK_OK(coll_allreduce(ar, out, nall, COLL_INT32, COLL_SUM, comm));
        for (size_t i = 0; i < nall; i++)
            RANK_CHECK(out[i] == nranks * (nranks - 1) / 2 + nranks * (int32_t)(i % 1000),
                       "all-reduce (%s): element %zu is %d", inplace ? "in place" : "out of place",
                       i, out[i]);
        /* all-to-all: block d of rank r holds r * 7919 + d * 31 + i */
        int32_t *a2a = inplace ? out : in;
        for (size_t i = 0; i < nall; i++)
            a2a[i] = rank * 7919 + (int32_t)(i / nblk) * 31 + (int32_t)(i % nblk);
        RANK_OK(coll_alltoall(a2a, out, nblk, COLL_INT32, comm));
        for (size_t i = 0; i < nall; i++)
            RANK_CHECK(out[i] == (int32_t)(i / nblk) * 7919 + rank * 31 + (int32_t)(i % nblk),
                       "all-to-all (%s): element %zu is %d", inplace ? "in place" : "out of place",
                       i, out[i]);
        /* broadcast from the last rank */
        int32_t *bc = inplace ? out : in;
        if (rank == nranks - 1)
            for (size_t i = 0; i < nall; i++)
                bc[i] = (int32_t)(i * 3);
        RANK_OK(coll_broadcast(bc, out, nall, COLL_INT32, nranks - 1, comm));
        for (size_t i = 0; i < nall; i++)
            RANK_CHECK(out[i] == (int32_t)(i * 3), "broadcast (%s): element %zu is %d",
                       inplace ? "in place" : "out of place", i, out[i]);
    }
    RANK_OK(coll_mem_free(in));
    RANK_OK(coll_mem_free(out));
    coll_comm_destroy(comm);
    return 0;
}

START_TEST(test_mapped_colls)
{
    int nranks = _i == 0 ? 2 : 4;

    harness_tmpdir_make(log_dir, sizeof(log_dir), "coll-shm");
    ck_assert_msg(harness_run(nranks, rank_mapped_colls, NULL, 120) == 0,
                  "%d ranks, collectives in memory from coll_mem_alloc", nranks);
    for (int r = 0; r < nranks; r++)
        ck_assert_msg(mapped_logged(r) > 0, "rank %d copied nothing out of a peer's region "
                      "(logs in %s)", r, log_dir);
    harness_tmpdir_remove(log_dir);
}
END_TEST

static int rank_stream_mapped(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    (void)arg;
    setenv("COLL_TRANSPORTS", "shm", 1);
    coll_comm_t comm = harness_init(rank, nranks, id);
    harness_stream_ring_mem(comm, rank, nranks, 64u << 20, 1);
    coll_comm_abort(comm);
    return 0;
}

START_TEST(test_mapped_killed)
{
    kill_one_of_four(1 + _i, rank_stream_mapped, NULL);
}
END_TEST

static Suite *shm_suite(void)
{
    Suite *s = suite_create("shm");
    TCase *tc = tcase_create("p2p");
    tcase_set_timeout(tc, 150);
    tcase_add_loop_test(tc, test_p2p_paths, 0, NPATHS);
    tcase_add_loop_test(tc, test_cma_threshold, 0, NTHRESH);
    tcase_add_loop_test(tc, test_exchange_one_copy, 0, NEXCH);
    tcase_add_loop_test(tc, test_read_or_ring, 0, NWAYS_CASES);
    tcase_add_test(tc, test_busy_reads);
    tcase_add_loop_test(tc, test_crowd_reads, 0, NCROWD);
    tcase_add_loop_test(tc, test_huge_blocks, 0, NHUGE);
    tcase_add_loop_test(tc, test_shared_copy, 0, NSHARE);
    tcase_add_test(tc, test_shared_copy_sizes);
    tcase_add_test(tc, test_shared_copy_busy);
    tcase_add_loop_test(tc, test_copy_polled, 0, 4); /* 2 and 4 ranks, two algorithm sets */
    tcase_add_loop_test(tc, test_ring_auto, 0, NRING);
    tcase_add_loop_test(tc, test_parked, 0, NPARK);
    suite_add_tcase(s, tc);

    tc = tcase_create("mapped");
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, test_mem_alloc_api);
    tcase_add_loop_test(tc, test_mapped_p2p, 0, NMAPS);
    tcase_add_loop_test(tc, test_mapped_colls, 0, 2); /* 2, 4 ranks */
    tcase_add_loop_test(tc, test_mapped_killed, 0, 2); /* ranks 1, 2 of 4 */
    suite_add_tcase(s, tc);

    tc = tcase_create("fold");
    tcase_set_timeout(tc, 150);
    tcase_add_loop_test(tc, test_fold_paths, 0, NFOLD);
    tcase_add_loop_test(tc, test_reply, 0, NREPLY);
    suite_add_tcase(s, tc);

    tc = tcase_create("stream");
    tcase_set_timeout(tc, 150);
    tcase_add_loop_test(tc, test_stream_results, 0, 3); /* 2, 3, 4 ranks */
    suite_add_tcase(s, tc);

    tc = tcase_create("fault");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_sigkill_named, 0, 5); /* cma x 3 victims, ring, cma_all */
    tcase_add_loop_test(tc, test_shared_copy_killed, 0, 2); /* the sender, the receiver */
    tcase_add_loop_test(tc, test_no_leftovers, 0, 3);
    tcase_add_test(tc, test_ring_mismatch);
    tcase_add_test(tc, test_tiny_dev_shm);
    tcase_add_test(tc, test_dev_shm_per_host);
    tcase_add_test(tc, test_dev_shm_per_host_unknown);
    tcase_add_test(tc, test_oneshot_killed);
    suite_add_tcase(s, tc);

    tc = tcase_create("mailbox");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_oneshot, 0, 7); /* 2 .. 8 ranks */
    tcase_add_loop_test(tc, test_inline, 0, 2);  /* 2, 4 ranks */
    tcase_add_loop_test(tc, test_run_ahead, 0, 2); /* 2, 3 ranks */
    tcase_add_test(tc, test_oneshot_tcp);
    tcase_add_test(tc, test_oneshot_mismatch);
    tcase_add_loop_test(tc, test_oversubscribed, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(shm_suite());
}
