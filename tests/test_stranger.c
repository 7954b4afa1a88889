/*
 * test_stranger.c: connections that are not part of the job, aimed at the
 * bootstrap root while 8 ranks initialize: one that stays silent, one that
 * sends an HTTP request, one that sends 1 MiB of random bytes, and a
 * libcoll client holding another job's secret (a stale unique id). Each is
 * dropped quickly and logged once; the job forms and works.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "bootstrap.h"
#include "harness.h"

enum { SILENT, HTTP, RANDOM, NKINDS };

typedef struct stranger {
    int kind;
    coll_addr_t root;
    double dropped_after; /* seconds until the root closed on us, -1 if never */
    pthread_t thread;
} stranger_t;

static void *stranger_main(void *arg)
{
    stranger_t *s = arg;
    int fd = socket(s->root.ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {5, 0};
    char buf[4096];
    double t0 = harness_now();

    s->dropped_after = -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&s->root.ss, s->root.len) != 0)
        goto out;
    if (s->kind == HTTP) {
        static const char req[] = "GET / HTTP/1.1\r\nHost: root\r\nAccept: */*\r\n\r\n";
        send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL);
    } else if (s->kind == RANDOM) {
        char *junk = malloc(1 << 20);
        int rnd = open("/dev/urandom", O_RDONLY);
        ssize_t r = read(rnd, junk, 1 << 20);
        (void)r;
        close(rnd);
        for (size_t off = 0; off < (1u << 20);) { /* stops when the root hangs up */
            ssize_t n = send(fd, junk + off, (1u << 20) - off, MSG_NOSIGNAL);
            if (n <= 0)
                break;
            off += (size_t)n;
        }
        free(junk);
    }
    while (recv(fd, buf, sizeof(buf), 0) > 0) /* the greeting, then EOF */
        ;
    s->dropped_after = harness_now() - t0;
out:
    close(fd);
    return NULL;
}

/* A process that joins with the right address but another job's secret. */
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
        coll_status_t st = coll_comm_init_rank(&comm, 8, forged, 3);
        _exit(st == COLL_ERR_AUTH ? 0 : 1);
    }
    return pid;
}

typedef struct hook_ctx {
    stranger_t strangers[NKINDS];
    pid_t stale;
} hook_ctx_t;

static void start_strangers(const coll_unique_id_t *id, void *arg)
{
    hook_ctx_t *ctx = arg;
    coll_uid_t uid;
    ck_assert_int_eq(coll_uid_decode(id, &uid), COLL_OK);
    for (int k = 0; k < NKINDS; k++) {
        ctx->strangers[k].kind = k;
        ctx->strangers[k].root = uid.root;
        ck_assert_int_eq(pthread_create(&ctx->strangers[k].thread, NULL, stranger_main,
                                        &ctx->strangers[k]), 0);
    }
    ctx->stale = spawn_stale_client(id);
}

static int rank_exchange(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    coll_comm_t comm = harness_init(rank, nranks, id);
    int32_t in[8], out = rank;
    coll_request_t reqs[16];
    (void)arg;
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
    hook_ctx_t ctx;
    pid_t pids[8];
    int statuses[8], st;
    int fd = mkstemp(logpath);

    ck_assert_int_ge(fd, 0);
    close(fd);
    setenv("COLL_DEBUG_FILE", logpath, 1); /* the root runs in this process */
    harness_spawn_hook(8, rank_exchange, NULL, pids, start_strangers, &ctx);
    ck_assert_int_eq(harness_wait(8, pids, 60, statuses), 0);
    for (int k = 0; k < NKINDS; k++)
        pthread_join(ctx.strangers[k].thread, NULL);
    ck_assert_int_eq(waitpid(ctx.stale, &st, 0), ctx.stale);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the stale-id client did not get "
                  "COLL_ERR_AUTH");
    for (int k = 0; k < NKINDS; k++)
        ck_assert_msg(ctx.strangers[k].dropped_after >= 0 && ctx.strangers[k].dropped_after < 1.2,
                      "stranger %d dropped after %.2f s", k, ctx.strangers[k].dropped_after);
    /* One line per dropped connection: 3 strangers and the stale client. */
    int dropped = harness_count_lines(logpath, "dropped connection from");
    if (dropped != NKINDS + 1)
        dump_file(logpath);
    ck_assert_int_eq(dropped, NKINDS + 1);
    unlink(logpath);
}
END_TEST

static Suite *stranger_suite(void)
{
    Suite *s = suite_create("stranger");
    TCase *tc = tcase_create("bootstrap root");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_strangers_during_init);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(stranger_suite());
}
