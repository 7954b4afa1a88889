/*
 * test_stranger.c: connections that are not part of the job (issue 6,
 * item 4). While 8 ranks initialize, every listening port of the job, the
 * bootstrap root's and each waiting rank's TCP transport port, gets one
 * connection that stays silent, one that sends an HTTP request and one
 * that sends 1 MiB of random bytes; the root also gets a libcoll client
 * holding another job's secret (a stale unique id), and one TCP port gets
 * a libcoll handshake with that secret. Each is dropped within 1 s and
 * logged once, the memory of every listening process grows by less than
 * 1 MiB, and the job forms and works.
 *
 * Rank 7 starts its init only once the strangers are done, so that the
 * other ranks are inside init (waiting at the bootstrap, their transport
 * ports open and published) the whole time.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "bootstrap.h"
#include "handshake.h"
#include "harness.h"

#define NRANKS 8
#define LATE_RANK (NRANKS - 1)
#define JUNK_BYTES (1u << 20)
#define MEM_GROWTH_MAX_KB 1024
#define DROP_MAX_S 1.0

enum { SILENT, HTTP, RANDOM, STALE, NKINDS };
static const char *const kind_names[NKINDS] = {"silent", "http", "1 MiB random", "stale id"};

typedef struct stranger {
    int kind;
    coll_addr_t target;
    int target_rank;       /* -1: the bootstrap root */
    double dropped_after;  /* seconds until the port closed on us, -1 if never */
    pthread_t thread;
} stranger_t;

/* Written before the strangers start: no allocation during the test. */
static uint8_t junk[JUNK_BYTES];
static pthread_barrier_t start_line;

static int stranger_connect(const stranger_t *s)
{
    int fd = socket(s->target.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {5, 0};

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (const struct sockaddr *)&s->target.ss, s->target.len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A libcoll client with another job's secret, asking the TCP port's rank
 * for a data connection: it must be refused (wrong secret). */
static void stale_handshake(stranger_t *s, int fd)
{
    uint8_t secret[COLL_SECRET_BYTES];
    coll_hello_t fields = {0};
    coll_hs_t hs;
    coll_status_t st;

    memset(secret, 0x5a, sizeof(secret));
    fields.prefix.kind = COLL_CONN_TCP;
    fields.src_rank = LATE_RANK; /* the rank it has not met yet */
    fields.dst_rank = (uint32_t)s->target_rank;
    fields.nranks = NRANKS;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    coll_hs_client_start(&hs, fd, &s->target, &fields, secret, coll_time_ns() + 5000000000ull);
    while ((st = coll_hs_progress(&hs)) == COLL_INPROGRESS) {
        struct pollfd p = {fd, (short)(coll_hs_events(&hs) == EPOLLIN ? POLLIN : POLLOUT), 0};
        poll(&p, 1, 100);
    }
    if (st != COLL_ERR_AUTH)
        s->dropped_after = -2; /* accepted, or refused for another reason: fails the test */
}

static void *stranger_main(void *arg)
{
    stranger_t *s = arg;
    char buf[4096];
    double t0;
    int fd;

    memset(buf, 0, sizeof(buf)); /* stack pages touched before the baseline */
    s->dropped_after = -1;
    pthread_barrier_wait(&start_line);
    t0 = harness_now();
    if ((fd = stranger_connect(s)) < 0)
        return NULL;
    if (s->kind == HTTP) {
        static const char req[] = "GET / HTTP/1.1\r\nHost: root\r\nAccept: */*\r\n\r\n";
        send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
    } else if (s->kind == RANDOM) {
        for (size_t off = 0; off < JUNK_BYTES;) { /* stops when the port hangs up */
            ssize_t n = send(fd, junk + off, JUNK_BYTES - off, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            off += (size_t)n;
        }
    } else if (s->kind == STALE) {
        stale_handshake(s, fd);
    }
    if (s->dropped_after == -1) {
        while (recv(fd, buf, sizeof(buf), 0) > 0) /* the greeting, then EOF */
            ;
        s->dropped_after = harness_now() - t0;
    }
    close(fd);
    return NULL;
}

/* A process that joins through the root with another job's secret. */
static pid_t spawn_stale_client(const coll_unique_id_t *real)
{
    pid_t pid = fork();
    if (pid == 0) {
        coll_uid_t uid;
        coll_unique_id_t forged;
        coll_comm_t comm;
        coll_uid_decode(real, &uid);
        memset(uid.secret, 0x5a, sizeof(uid.secret));
        coll_uid_encode(&uid, &forged);
        coll_status_t st = coll_comm_init_rank(&comm, NRANKS, forged, 3);
        _exit(st == COLL_ERR_AUTH ? 0 : 1);
    }
    return pid;
}

static int go_fd = -1; /* rank 7 reads its go-ahead here */

static int rank_exchange(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int32_t in[NRANKS], out = rank;
    coll_request_t reqs[2 * NRANKS];
    char c;
    (void)arg;

    if (rank == LATE_RANK)
        RANK_CHECK(read(go_fd, &c, 1) == 1, "no go-ahead");
    coll_comm_t comm = harness_init(rank, nranks, id);
    for (int p = 0; p < nranks; p++) {
        RANK_OK(coll_irecv(&in[p], 1, COLL_INT32, p, 0, comm, &reqs[2 * p]));
        RANK_OK(coll_isend(&out, 1, COLL_INT32, p, 0, comm, &reqs[2 * p + 1]));
    }
    RANK_OK(coll_waitall(2 * nranks, reqs));
    for (int p = 0; p < nranks; p++)
        RANK_CHECK(in[p] == p, "got %d from rank %d", in[p], p);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

/* ---- what the listening processes look like from outside -------------------- */

/* Resident memory of a process in KiB (0 if unreadable). */
static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* Does process pid hold the socket with this inode? */
static int holds_socket(pid_t pid, unsigned long inode)
{
    char dir[64], path[320], link[64], want[48];
    struct dirent *e;
    int found = 0;

    snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    DIR *d = opendir(dir);
    while (d && !found && (e = readdir(d))) {
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n > 0) {
            link[n] = '\0';
            found = strcmp(link, want) == 0;
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* The port pid listens on over TCP (its transport's), or 0. */
static int listening_port(pid_t pid)
{
    static const char *const tables[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    char line[512];
    int port = 0;

    for (int t = 0; t < 2 && !port; t++) {
        FILE *f = fopen(tables[t], "r");
        while (f && !port && fgets(line, sizeof(line), f)) {
            char local[64];
            unsigned p, st;
            unsigned long inode;
            if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*d %*d %lu", local, &p,
                       &st, &inode) == 4 && st == 0x0a && holds_socket(pid, inode))
                port = (int)p;
        }
        if (f)
            fclose(f);
    }
    return port;
}

/* ---- the test ------------------------------------------------------------------ */

#define NSTRANGERS (3 * NRANKS + 2) /* 3 at the root and at each of 7 ports, 2 stale */

static void start_strangers(stranger_t *st, const coll_addr_t *root, const int *ports)
{
    int n = 0;
    for (int r = -1; r < LATE_RANK; r++)
        for (int k = SILENT; k <= RANDOM; k++) {
            st[n].kind = k;
            st[n].target_rank = r;
            st[n].target = *root;
            if (r >= 0)
                coll_addr_set_port(&st[n].target, ports[r]);
            n++;
        }
    /* the stale libcoll handshake, at rank 3's TCP port */
    st[n] = (stranger_t){.kind = STALE, .target = *root, .target_rank = 3};
    coll_addr_set_port(&st[n].target, ports[3]);
    n++;
    ck_assert_int_eq(n, NSTRANGERS - 1); /* the stale root client is a process */
    ck_assert_int_eq(pthread_barrier_init(&start_line, NULL, (unsigned)n + 1), 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&st[i].thread, NULL, stranger_main, &st[i]), 0);
}

static void keep_id(const coll_unique_id_t *id, void *ctx)
{
    *(coll_unique_id_t *)ctx = *id;
}

static void dump_file(const char *path)
{
    char line[2048];
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        fputs(line, stderr);
    if (f)
        fclose(f);
}

START_TEST(test_strangers_during_init)
{
    char logpath[] = "/tmp/libcoll_stranger_XXXXXX";
    stranger_t st[NSTRANGERS];
    pid_t pids[NRANKS], stale;
    long before[NRANKS + 1], after[NRANKS + 1];
    int statuses[NRANKS], ports[NRANKS] = {0}, go[2], wst;
    coll_unique_id_t id;
    coll_uid_t uid;
    int fd = mkstemp(logpath);

    ck_assert_int_ge(fd, 0);
    close(fd);
    int rnd = open("/dev/urandom", O_RDONLY);
    ck_assert_int_eq(read(rnd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    close(rnd);
    setenv("COLL_DEBUG_FILE", logpath, 1); /* the root (here) and the ranks append */
    ck_assert_int_eq(pipe(go), 0);
    go_fd = go[0];
    harness_spawn_hook(NRANKS, rank_exchange, NULL, pids, keep_id, &id);
    close(go[0]);

    /* the transport ports: from /proc, as an outsider would scan them */
    double t0 = harness_now();
    for (int r = 0; r < LATE_RANK; r++)
        while (!(ports[r] = listening_port(pids[r])) && harness_now() - t0 < 20)
            usleep(20 * 1000);
    for (int r = 0; r < LATE_RANK; r++)
        ck_assert_msg(ports[r] > 0, "rank %d never listened", r);
    ck_assert_int_eq(coll_uid_decode(&id, &uid), COLL_OK);
    usleep(300 * 1000); /* the 7 ranks sit in the bootstrap, waiting for rank 7 */

    start_strangers(st, &uid.root, ports);
    for (int r = 0; r < LATE_RANK; r++)
        before[r] = rss_kb(pids[r]);
    before[NRANKS] = rss_kb(getpid());
    pthread_barrier_wait(&start_line);
    stale = spawn_stale_client(&id);
    for (int i = 0; i < NSTRANGERS - 1; i++)
        pthread_join(st[i].thread, NULL);
    ck_assert_int_eq(waitpid(stale, &wst, 0), stale);
    usleep(100 * 1000); /* the last drops are logged and freed */
    for (int r = 0; r < LATE_RANK; r++)
        after[r] = rss_kb(pids[r]);
    after[NRANKS] = rss_kb(getpid());
    ck_assert_int_eq(write(go[1], "g", 1), 1); /* rank 7 may come now */
    close(go[1]);
    ck_assert_int_eq(harness_wait(NRANKS, pids, 60, statuses), 0);
    unsetenv("COLL_DEBUG_FILE");

    ck_assert_msg(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "the stale-id client did not get "
                  "COLL_ERR_AUTH");
    double slowest = 0;
    for (int i = 0; i < NSTRANGERS - 1; i++) {
        ck_assert_msg(st[i].dropped_after >= 0 && st[i].dropped_after < DROP_MAX_S,
                      "%s stranger at %s%d dropped after %.2f s", kind_names[st[i].kind],
                      st[i].target_rank < 0 ? "the root" : "rank ", st[i].target_rank,
                      st[i].dropped_after);
        slowest = st[i].dropped_after > slowest ? st[i].dropped_after : slowest;
    }
    long worst = 0;
    for (int r = 0; r <= NRANKS; r++) {
        if (r == LATE_RANK)
            continue;
        long grew = after[r] - before[r];
        ck_assert_msg(grew < MEM_GROWTH_MAX_KB, "%s%d grew by %ld KiB during the strangers",
                      r == NRANKS ? "the root's process" : "rank ", r == NRANKS ? -1 : r, grew);
        worst = grew > worst ? grew : worst;
    }
    /* one line per dropped connection: the strangers and the stale client */
    int dropped = harness_count_lines(logpath, "dropped connection from");
    if (dropped != NSTRANGERS)
        dump_file(logpath);
    ck_assert_int_eq(dropped, NSTRANGERS);
    printf("%d strangers at the root and 7 ranks' TCP ports during init: the slowest dropped "
           "after %.0f ms, memory grew by at most %ld KiB\n", NSTRANGERS, slowest * 1e3, worst);
    unlink(logpath);
}
END_TEST

static Suite *stranger_suite(void)
{
    Suite *s = suite_create("stranger");
    TCase *tc = tcase_create("listening ports");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_strangers_during_init);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(stranger_suite());
}
