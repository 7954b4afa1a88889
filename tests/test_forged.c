/*
 * test_forged.c: a peer that knows the job secret but sends frames whose
 * length is 2^31-1 or negative (issue 6, item 5). Every frame that carries
 * a length is refused at its header, before anything is allocated from
 * that length, and the job fails with a clear error naming the forger:
 *   - bootstrap, rank -> root: a RANKINFO header of a forged rank;
 *   - bootstrap, root -> rank: a TABLE or ERROR header of a forged root;
 *   - TCP transport data frames: EAGER, DATA and ABORT headers injected by
 *     a rank of the job on its own authenticated socket (an eager one of
 *     an allowed length but beyond the receiver's window too), and CREDIT
 *     frames with a length or giving back more eager credit than was
 *     given.
 * Every process of a job runs under an address-space limit of its size
 * plus 512 MiB, so an allocation of 2 GiB (or more) from a forged length
 * would fail and show as COLL_ERR_NO_MEMORY (or a sanitizer report)
 * instead of the expected COLL_ERR_PROTOCOL.
 *
 * A stale unique id (another job's secret), at the root and at a TCP
 * port, is in test_stranger: refused, the job unaffected.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "bootstrap.h"
#include "comm.h"
#include "handshake.h"
#include "harness.h"
#include "tcp/tcp.h"

#define NRANKS 4
#define LEN_MAX31 0x7fffffffull

/* Address space: what this process maps now plus 512 MiB. */
static void limit_address_space(void)
{
    char line[256];
    long kb = 0;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    ck_assert_int_gt(kb, 0);
    struct rlimit rl = {(rlim_t)kb * 1024 + (512ull << 20), (rlim_t)kb * 1024 + (512ull << 20)};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &rl), 0);
}

/* Does msg contain the decimal number v? */
static int has_number(const char *msg, unsigned long long v)
{
    char num[32];
    snprintf(num, sizeof(num), "%llu", v);
    return strstr(msg, num) != NULL;
}

/* Drive a handshake on a blocking-free socket to its end. */
static coll_status_t handshake(coll_hs_t *hs, int fd)
{
    coll_status_t st;
    while ((st = coll_hs_progress(hs)) == COLL_INPROGRESS) {
        struct pollfd p = {fd, (short)(coll_hs_events(hs) == EPOLLIN ? POLLIN : POLLOUT), 0};
        poll(&p, 1, 100);
    }
    return st;
}

static int write_all(int fd, const void *buf, size_t len)
{
    for (size_t off = 0; off < len;) {
        ssize_t n = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN) {
            struct pollfd p = {fd, POLLOUT, 0};
            poll(&p, 1, 100);
            continue;
        }
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    return 0;
}

static void drain_until_eof(int fd)
{
    char buf[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 5000) <= 0)
            return;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            return;
    }
}

/* ---- bootstrap, rank -> root ------------------------------------------------- */

static const uint32_t rankinfo_lens[] = {(uint32_t)LEN_MAX31, 0xffffffffu};

/* Rank 3 is forged: it proves the secret to the root as rank 3, then
 * announces a RANKINFO of a forged length. The real ranks' init fails
 * with the root's report naming it. */
static int rank_vs_root(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    uint32_t len = rankinfo_lens[*(const int *)arg];
    coll_comm_t comm;

    if (rank == NRANKS - 1) {
        coll_uid_t uid;
        coll_hello_t fields = {0};
        coll_hs_t hs;
        uint8_t hdr[COLL_BOOT_HDR_BYTES];
        int fd;
        RANK_OK(coll_uid_decode(id, &uid));
        RANK_OK(coll_sock_connect_start(&uid.root, &fd));
        while (coll_sock_connect_result(fd) == EINPROGRESS)
            usleep(1000);
        fields.prefix.kind = COLL_CONN_BOOT;
        fields.src_rank = (uint32_t)rank;
        fields.dst_rank = UINT32_MAX;
        fields.nranks = (uint32_t)nranks;
        coll_hs_client_start(&hs, fd, &uid.root, &fields, uid.secret,
                             coll_time_ns() + 5000000000ull);
        RANK_CHECK(handshake(&hs, fd) == COLL_OK, "forged rank's handshake: %s", hs.errmsg);
        coll_store_u32(hdr, COLL_BOOT_RANKINFO);
        coll_store_u32(hdr + 4, len);
        RANK_CHECK(write_all(fd, hdr, sizeof(hdr)) == 0, "forged header not sent");
        drain_until_eof(fd); /* the root's error frame, then EOF */
        close(fd);
        return 0;
    }
    coll_status_t st = coll_comm_init_rank(&comm, nranks, *id, rank);
    const char *msg = coll_get_last_error(NULL);
    RANK_CHECK(st == COLL_ERR_PROTOCOL, "init returned %s: %s", coll_status_str(st), msg);
    RANK_CHECK(strstr(msg, "rank 3 (") && has_number(msg, len) && strstr(msg, "at most"),
               "the message does not name rank 3, the length %u and the cap: %s", len, msg);
    if (rank == 0) {
        printf("forged RANKINFO of %u bytes: %s\n", len, msg);
        fflush(stdout);
    }
    return 0;
}

START_TEST(test_forged_rankinfo)
{
    int kase = _i;
    limit_address_space();
    ck_assert_int_eq(harness_run(NRANKS, rank_vs_root, &kase, 30), 0);
}
END_TEST

/* ---- bootstrap, root -> rank -------------------------------------------------- */

static const struct {
    uint32_t type, len;
} reply_frames[] = {
    {COLL_BOOT_TABLE, (uint32_t)LEN_MAX31},
    {COLL_BOOT_TABLE, 0xffffffffu},
    {COLL_BOOT_ERROR, (uint32_t)LEN_MAX31},
};

/* The extra process (rank NRANKS) plays the root of a job whose id it
 * makes itself and hands to the real ranks through a pipe: it proves the
 * secret, takes each rank's info, and answers with a forged header. */
static int id_pipe[2];

static void fake_root(int kase)
{
    coll_uid_t uid;
    coll_unique_id_t id;
    coll_addr_t any;
    int lfd;

    memset(&uid, 0, sizeof(uid));
    RANK_OK(coll_iface_select(NULL, &any, (char[32]){0}));
    RANK_OK(coll_sock_listen(&any, 1, &lfd, &uid.root));
    RANK_CHECK(coll_random_bytes(uid.secret, sizeof(uid.secret)) == 0, "getrandom");
    coll_uid_encode(&uid, &id);
    for (int r = 0; r < NRANKS; r++) /* 128 bytes: each write is atomic */
        RANK_CHECK(write(id_pipe[1], &id, sizeof(id)) == (ssize_t)sizeof(id), "id");
    for (int served = 0; served < NRANKS;) {
        coll_addr_t peer;
        coll_hs_t hs;
        uint8_t hdr[COLL_BOOT_HDR_BYTES], info[COLL_WIRE_PEERINFO_MAX];
        int fd = coll_sock_accept(lfd, &peer);
        if (fd < 0) {
            struct pollfd p = {lfd, POLLIN, 0};
            poll(&p, 1, 100);
            continue;
        }
        coll_hs_server_start(&hs, fd, &peer, COLL_CONN_BOOT, uid.secret,
                             coll_time_ns() + 5000000000ull, NULL, NULL);
        RANK_CHECK(handshake(&hs, fd) == COLL_OK, "fake root's handshake: %s", hs.errmsg);
        RANK_CHECK(coll_sock_io_deadline(fd, hdr, sizeof(hdr), 0, coll_time_ns() + 5000000000ull,
                                         NULL) == COLL_OK, "no RANKINFO header");
        uint32_t len = coll_boot_rankinfo_len(hdr);
        RANK_CHECK(len > 0 && coll_sock_io_deadline(fd, info, len, 0, coll_time_ns() +
                                                    5000000000ull, NULL) == COLL_OK,
                   "no RANKINFO");
        coll_store_u32(hdr, reply_frames[kase].type);
        coll_store_u32(hdr + 4, reply_frames[kase].len);
        RANK_CHECK(write_all(fd, hdr, sizeof(hdr)) == 0, "forged header not sent");
        drain_until_eof(fd);
        close(fd);
        served++;
    }
    close(lfd);
}

static int rank_vs_fake_root(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int kase = *(const int *)arg;
    coll_unique_id_t fake;
    coll_comm_t comm;
    (void)id;
    (void)nranks;

    if (rank == NRANKS) {
        fake_root(kase);
        return 0;
    }
    RANK_CHECK(read(id_pipe[0], &fake, sizeof(fake)) == (ssize_t)sizeof(fake), "no id");
    coll_status_t st = coll_comm_init_rank(&comm, NRANKS, fake, rank);
    const char *msg = coll_get_last_error(NULL);
    RANK_CHECK(st == COLL_ERR_PROTOCOL, "init returned %s: %s", coll_status_str(st), msg);
    RANK_CHECK(strstr(msg, "bad frame") && has_number(msg, reply_frames[kase].len),
               "the message does not name the bad frame and its length %u: %s",
               reply_frames[kase].len, msg);
    if (rank == 0) {
        printf("forged reply of %u bytes from the root: %s\n", reply_frames[kase].len, msg);
        fflush(stdout);
    }
    return 0;
}

START_TEST(test_forged_reply)
{
    int kase = _i;
    limit_address_space();
    ck_assert_int_eq(pipe(id_pipe), 0);
    ck_assert_int_eq(harness_run(NRANKS + 1, rank_vs_fake_root, &kase, 30), 0);
    close(id_pipe[0]);
    close(id_pipe[1]);
}
END_TEST

/* ---- TCP transport data frames -------------------------------------------------- */

/* aux: a CREDIT frame's byte count (the message must name it, else the
 * length). */
static const struct {
    uint8_t type;
    uint64_t len;
    uint64_t aux;
} data_frames[] = {
    {TCP_EAGER, LEN_MAX31, 0},
    {TCP_EAGER, UINT64_MAX, 0}, /* -1 */
    {TCP_EAGER, TCP_EAGER_MAX, 0}, /* allowed, but beyond the job's 1 MiB window */
    {TCP_DATA, LEN_MAX31, 0},
    {TCP_DATA, UINT64_MAX, 0},
    {TCP_ABORT, LEN_MAX31, 0},
    {TCP_ABORT, UINT64_MAX, 0},
    {TCP_CREDIT, LEN_MAX31, 0},
    {TCP_CREDIT, 0, LEN_MAX31}, /* more credit than rank 0 ever gave */
    {TCP_CREDIT, 0, UINT64_MAX},
};

/* Rank 1 writes a forged header straight onto its (idle, authenticated)
 * socket to rank 0, at a frame boundary, once every rank is past the
 * barrier (a pipe says so). Rank 0, waiting for a message from rank 1,
 * fails naming rank 1 and the length; the others, waiting for rank 0,
 * learn it through its abort notice (rank 1 too: it is told why). */
static int sync_pipe[2];

static int rank_forged_frame(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int kase = *(const int *)arg;
    coll_comm_t comm = harness_init(rank, nranks, id);
    uint8_t hdr[TCP_HDR_BYTES];
    int32_t x;
    char c = 's';

    RANK_OK(coll_barrier(comm)); /* every socket idle after it */
    if (rank != 1) {
        RANK_CHECK(write(sync_pipe[1], &c, 1) == 1, "sync");
    } else {
        tcp_ep_t *ep = (tcp_ep_t *)comm->peers[0].ep;
        tcp_hdr_t h = {.type = data_frames[kase].type, .tag = 7, .len = data_frames[kase].len,
                       .aux = data_frames[kase].aux};
        for (int k = 0; k < nranks - 1; k++)
            RANK_CHECK(read(sync_pipe[0], &c, 1) == 1, "sync");
        RANK_CHECK(strcmp(comm->peers[0].ops->name, "tcp") == 0, "not over tcp");
        tcp_hdr_encode(&h, hdr);
        RANK_CHECK(write_all(ep->conn[0].fd, hdr, sizeof(hdr)) == 0, "forged header not sent");
    }
    uint64_t named = data_frames[kase].aux ? data_frames[kase].aux : data_frames[kase].len;
    coll_status_t st = coll_recv(&x, 1, COLL_INT32, rank == 0 ? 1 : 0, 99, comm);
    const char *msg = coll_get_last_error(comm);
    RANK_CHECK(st != COLL_OK, "rank %d: the receive after the forged frame succeeded", rank);
    if (rank == 0) {
        RANK_CHECK(st == COLL_ERR_PROTOCOL, "rank 0 got %s: %s", coll_status_str(st), msg);
        printf("forged tcp frame type %u, length %" PRIu64 ": %s\n", data_frames[kase].type,
               data_frames[kase].len, msg);
        fflush(stdout);
    }
    RANK_CHECK(strstr(msg, "rank 1 (") && has_number(msg, named),
               "rank %d's message does not name rank 1 and the length %" PRIu64 ": %s", rank,
               named, msg);
    coll_comm_abort(comm);
    return 0;
}

START_TEST(test_forged_tcp_frame)
{
    int kase = _i;
    limit_address_space();
    setenv("COLL_TRANSPORTS", "tcp", 1);
    setenv("COLL_TCP_EAGER_WINDOW_LOCAL", "1M", 1);
    ck_assert_int_eq(pipe(sync_pipe), 0);
    ck_assert_int_eq(harness_run(NRANKS, rank_forged_frame, &kase, 30), 0);
    unsetenv("COLL_TRANSPORTS");
    unsetenv("COLL_TCP_EAGER_WINDOW_LOCAL");
    close(sync_pipe[0]);
    close(sync_pipe[1]);
}
END_TEST

static Suite *forged_suite(void)
{
    Suite *s = suite_create("forged");
    TCase *tc = tcase_create("forged frames");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_forged_rankinfo, 0, COLL_ARRAY_LEN(rankinfo_lens));
    tcase_add_loop_test(tc, test_forged_reply, 0, COLL_ARRAY_LEN(reply_frames));
    tcase_add_loop_test(tc, test_forged_tcp_frame, 0, COLL_ARRAY_LEN(data_frames));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(forged_suite());
}
