/*
 * test_bootstrap.c: communicators form at every rank count, from a unique
 * id and from each launcher's environment style, and two jobs on one host
 * never cross.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "env.h"
#include "harness.h"

static const int rank_counts[] = {1, 2, 3, 4, 5, 7, 8};

/* Every rank sends its rank to every rank (itself included) and checks
 * what it got: proves each pair is connected to the right process. */
static void exchange_ranks(coll_comm_t comm, int rank, int nranks)
{
    int32_t in[64], out = rank * 1000;
    coll_request_t reqs[128];
    for (int p = 0; p < nranks; p++) {
        RANK_OK(coll_irecv(&in[p], 1, COLL_INT32, p, 7, comm, &reqs[2 * p]));
        RANK_OK(coll_isend(&out, 1, COLL_INT32, p, 7, comm, &reqs[2 * p + 1]));
    }
    RANK_OK(coll_waitall(2 * nranks, reqs));
    for (int p = 0; p < nranks; p++)
        RANK_CHECK(in[p] == p * 1000, "from rank %d got %d", p, in[p]);
}

static int rank_basic(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int r = -1, n = -1;
    coll_comm_t comm = harness_init(rank, nranks, id);
    (void)arg;
    RANK_OK(coll_comm_rank(comm, &r));
    RANK_OK(coll_comm_size(comm, &n));
    RANK_CHECK(r == rank && n == nranks, "rank %d/%d reported %d/%d", rank, nranks, r, n);
    exchange_ranks(comm, rank, nranks);
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_init_counts)
{
    int nranks = rank_counts[_i];
    ck_assert_int_eq(harness_run(nranks, rank_basic, NULL, 60), 0);
}
END_TEST

/* ---- init from the environment ------------------------------------------- */

/* A free TCP port below the ephemeral range (32768+), where the job's own
 * outgoing connections cannot take it between now and rank 0's bind. */
static int free_port(void)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        int port = 20000 + (int)((unsigned)(getpid() * 7919 + attempt * 104729) % 12000);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM, 0), ok;
        ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(fd);
        if (ok)
            return port;
    }
    ck_abort_msg("no free port in 20000..31999");
    return -1;
}

typedef struct env_style {
    const char *name;
    /* Set this rank's variables (in the forked rank, before init). */
    void (*set)(int rank, int nranks, int port);
} env_style_t;

static void setf(const char *name, int v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

static void set_torchrun(int rank, int nranks, int port)
{
    setf("RANK", rank);
    setf("WORLD_SIZE", nranks);
    setf("LOCAL_RANK", rank);
    setf("LOCAL_WORLD_SIZE", nranks);
    setenv("MASTER_ADDR", "localhost", 1);
    setf("MASTER_PORT", port);
}

static void set_slurm(int rank, int nranks, int port)
{
    setf("SLURM_PROCID", rank);
    setf("SLURM_NTASKS", nranks);
    setf("SLURM_LOCALID", rank);
    setenv("SLURM_JOB_NODELIST", "localhost", 1);
    setf("SLURM_JOB_ID", port); /* differs per test run, like a real job id */
    setenv("SLURM_STEP_ID", "0", 1);
    setf("SLURM_STEP_TASKS_PER_NODE", nranks);
    setf("COLL_MASTER_PORT", port); /* the derived port could be taken here */
}

static void set_openmpi(int rank, int nranks, int port)
{
    setf("OMPI_COMM_WORLD_RANK", rank);
    setf("OMPI_COMM_WORLD_SIZE", nranks);
    setf("OMPI_COMM_WORLD_LOCAL_RANK", rank);
    setf("OMPI_COMM_WORLD_LOCAL_SIZE", nranks);
    setf("OMPI_MCA_ess_base_jobid", port);
    setf("COLL_MASTER_PORT", port);
}

static void set_mpich(int rank, int nranks, int port)
{
    setf("PMI_RANK", rank);
    setf("PMI_SIZE", nranks);
    setf("MPI_LOCALRANKID", rank);
    setf("MPI_LOCALNRANKS", nranks);
    setf("COLL_MASTER_PORT", port);
}

static void set_coll(int rank, int nranks, int port)
{
    setf("COLL_RANK", rank);
    setf("COLL_NRANKS", nranks);
    setenv("COLL_MASTER_ADDR", "127.0.0.1", 1);
    setf("COLL_MASTER_PORT", port);
    setenv("COLL_SECRET", "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 1);
}

static const env_style_t env_styles[] = {
    {"torchrun", set_torchrun}, {"Slurm", set_slurm}, {"Open MPI", set_openmpi},
    {"MPICH", set_mpich},       {"COLL_*", set_coll},
};

typedef struct env_arg {
    const env_style_t *style;
    int port;
} env_arg_t;

/* The unique id the harness passes is ignored: the environment decides. */
static int rank_env(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    env_arg_t *a = arg;
    coll_comm_t comm;
    int r, n;
    (void)id;
    a->style->set(rank, nranks, a->port);
    RANK_OK(coll_comm_init_env(&comm, NULL));
    RANK_OK(coll_comm_rank(comm, &r));
    RANK_OK(coll_comm_size(comm, &n));
    RANK_CHECK(r == rank && n == nranks, "%s: rank %d/%d got %d/%d", a->style->name, rank,
               nranks, r, n);
    exchange_ranks(comm, rank, nranks);
    RANK_OK(coll_comm_destroy(comm));
    /* A second init from the same environment forms a second job. */
    RANK_OK(coll_comm_init_env(&comm, NULL));
    exchange_ranks(comm, rank, nranks);
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_env_styles)
{
    env_arg_t a = {&env_styles[_i], free_port()};
    ck_assert_msg(harness_run(4, rank_env, &a, 60) == 0, "style %s failed", a.style->name);
}
END_TEST

/* Real launchers start the helper program; each rank prints "ok rank". */
static void run_launcher(const char *launcher, int nranks)
{
    char cmd[1024], out[8192] = "";
    const char *b = harness_build_dir();

    snprintf(cmd, sizeof(cmd), "%s -n %d %s/tests/helper_rank exchange 2>&1", launcher, nranks, b);
    int st = harness_sh(cmd, out, sizeof(out));
    ck_assert_msg(st == 0, "%s exited %d:\n%s", cmd, st, out);
    for (int r = 0; r < nranks; r++) {
        char want[64];
        snprintf(want, sizeof(want), "ok rank %d of %d", r, nranks);
        ck_assert_msg(strstr(out, want), "%s: no '%s' in:\n%s", cmd, want, out);
    }
}

START_TEST(test_collrun)
{
    char collrun[512];
    snprintf(collrun, sizeof(collrun), "%s/bin/collrun", harness_build_dir());
    run_launcher(collrun, 5);
}
END_TEST

START_TEST(test_mpirun_openmpi)
{
    if (system("command -v mpirun.openmpi >/dev/null 2>&1") != 0) {
        printf("skipped: mpirun.openmpi is not installed\n");
        return;
    }
    run_launcher("mpirun.openmpi --allow-run-as-root --oversubscribe", 4);
}
END_TEST

START_TEST(test_mpiexec_mpich)
{
    if (system("command -v mpiexec.mpich >/dev/null 2>&1") != 0) {
        printf("skipped: mpiexec.mpich is not installed\n");
        return;
    }
    run_launcher("mpiexec.mpich", 3);
}
END_TEST

START_TEST(test_no_launcher)
{
    coll_comm_t comm;
    coll_status_t st;
    static const char *vars[] = {"COLL_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                 "PMI_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    st = coll_comm_init_env(&comm, NULL);
    ck_assert_int_eq(st, COLL_ERR_INVALID_USAGE);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "no launcher variables"));
    setenv("RANK", "x1", 1);
    setenv("WORLD_SIZE", "4", 1);
    ck_assert_int_eq(coll_comm_init_env(&comm, NULL), COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "RANK='x1'"));
    setenv("RANK", "4", 1);
    ck_assert_int_eq(coll_comm_init_env(&comm, NULL), COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "RANK=4 is out of range"));
    /* Open MPI across hosts gives no master address */
    unsetenv("RANK");
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    ck_assert_int_eq(coll_comm_init_env(&comm, NULL), COLL_ERR_INVALID_USAGE);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "COLL_MASTER_ADDR"));
}
END_TEST

/* ---- addresses ------------------------------------------------------------------- */

START_TEST(test_unreachable_named)
{
    coll_comm_t comm;
    char port[16];
    double t0;

    setenv("COLL_RANK", "1", 1);
    setenv("COLL_NRANKS", "2", 1);
    setenv("COLL_MASTER_ADDR", "127.0.0.1", 1);
    snprintf(port, sizeof(port), "%d", free_port()); /* nobody listens there */
    setenv("COLL_MASTER_PORT", port, 1);
    setenv("COLL_TIMEOUT", "1s", 1);
    t0 = harness_now();
    ck_assert_int_eq(coll_comm_init_env(&comm, NULL), COLL_ERR_UNREACHABLE);
    ck_assert_msg(harness_now() - t0 < 3, "gave up after %.1f s", harness_now() - t0);
    ck_assert_msg(strstr(coll_get_last_error(NULL), port), "message does not name the "
                  "address: %s", coll_get_last_error(NULL));
    setenv("COLL_MASTER_ADDR", "no-such-host.invalid", 1);
    ck_assert_int_eq(coll_comm_init_env(&comm, NULL), COLL_ERR_UNREACHABLE);
    ck_assert_msg(strstr(coll_get_last_error(NULL), "no-such-host.invalid") &&
                  strstr(coll_get_last_error(NULL), "COLL_MASTER_ADDR"),
                  "message does not name the host and variable: %s", coll_get_last_error(NULL));
}
END_TEST

START_TEST(test_ifname)
{
    coll_comm_t comm;
    setenv("COLL_SOCKET_IFNAME", "nosuchif", 1);
    ck_assert_int_eq(coll_comm_init_rank(&comm, 1, (coll_unique_id_t){{0}}, 0),
                     COLL_ERR_INVALID_ARG); /* a zero id is rejected before the interface */
    coll_unique_id_t id;
    ck_assert_int_eq(coll_get_unique_id(&id), COLL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(coll_get_last_error(NULL), "COLL_SOCKET_IFNAME='nosuchif'"), "%s",
                  coll_get_last_error(NULL));
    /* Forcing loopback works for a whole job. */
    setenv("COLL_SOCKET_IFNAME", "lo", 1);
    ck_assert_int_eq(harness_run(3, rank_basic, NULL, 30), 0);
}
END_TEST

START_TEST(test_slurm_hostlist)
{
    static const char *cases[][2] = {
        {"node01", "node01"},           {"node[01-04]", "node01"},
        {"node[7,9-12],gpu3", "node7"}, {"a-b-c[001-003]", "a-b-c001"},
        {"rack[1-2]n[3-4]", "rack1n3"}, {"host1,host2", "host1"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ck_assert_int_eq(coll_slurm_first_host(cases[i][0], out, sizeof(out)), 0);
        ck_assert_str_eq(out, cases[i][1]);
    }
    ck_assert_int_eq(coll_slurm_first_host("node[01-04", out, sizeof(out)), -1);
    ck_assert_int_eq(coll_slurm_first_host("", out, sizeof(out)), -1);
    /* Found by fuzz_env: a host that does not fit was cut ("node"), and
     * brackets without a number were dropped. */
    ck_assert_int_eq(coll_slurm_first_host("node[01-04]", out, 6), -1);
    ck_assert_int_eq(coll_slurm_first_host("node[01-04]", out, 7), 0);
    ck_assert_str_eq(out, "node01");
    ck_assert_int_eq(coll_slurm_first_host("node[],gpu1", out, sizeof(out)), -1);
    ck_assert_int_eq(coll_slurm_first_host("node]", out, sizeof(out)), -1);
}
END_TEST

/* SLURM_STEP_TASKS_PER_NODE: the local size where every node agrees. */
START_TEST(test_slurm_tasks_per_node)
{
    static const struct {
        const char *spec;
        int want;
    } cases[] = {
        {"4", 4},       {"8(x16)", 8},    {"2(x3),2", 2},  {"2,2,2(x2)", 2}, {"2(x3),1", 0},
        {"1,2", 0},     {"", -1},         {"0", -1},       {"4,", -1},       {",4", -1},
        {"4(x)", -1},   {"4(x0)", -1},    {"4(3)", -1},    {"4(x3", -1},     {" 4", -1},
        {"+4", -1},     {"4x", -1},       {"99999999999", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        ck_assert_msg(coll_slurm_uniform_tasks(cases[i].spec) == cases[i].want,
                      "'%s': %d, want %d", cases[i].spec,
                      coll_slurm_uniform_tasks(cases[i].spec), cases[i].want);
}
END_TEST

/* ---- two jobs at once ------------------------------------------------------------ */

/* Every rank sends a job-specific value to every rank of its job; a
 * message from the other job would show up as a wrong value. */
static int rank_job(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int job = *(int *)arg;
    coll_comm_t comm = harness_init(rank, nranks, id);
    int32_t in[8], out = job * 100 + rank;
    for (int round = 0; round < 50; round++) {
        coll_request_t reqs[16];
        for (int p = 0; p < nranks; p++) {
            RANK_OK(coll_irecv(&in[p], 1, COLL_INT32, p, round, comm, &reqs[2 * p]));
            RANK_OK(coll_isend(&out, 1, COLL_INT32, p, round, comm, &reqs[2 * p + 1]));
        }
        RANK_OK(coll_waitall(2 * nranks, reqs));
        for (int p = 0; p < nranks; p++)
            RANK_CHECK(in[p] == job * 100 + p, "job %d rank %d got %d from rank %d", job, rank,
                       in[p], p);
    }
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

/* Each job gets its own parent process, forked before any thread exists:
 * forking the second job's ranks while the first job's root thread runs
 * could copy a lock that thread holds (AddressSanitizer's allocator has
 * no fork handlers, and a rank hung in calloc under make test-sanitize). */
static int run_job(int job)
{
    pid_t pids[8];
    int st[8];
    harness_spawn(4, rank_job, &job, pids);
    return harness_wait(4, pids, 60, st);
}

START_TEST(test_two_jobs)
{
    pid_t job_pid[2];
    int status;

    fflush(NULL);
    for (int j = 0; j < 2; j++) {
        job_pid[j] = fork();
        ck_assert_int_ge(job_pid[j], 0);
        if (job_pid[j] == 0)
            _exit(run_job(j + 1) == 0 ? 0 : 1);
    }
    for (int j = 0; j < 2; j++) {
        ck_assert_int_eq(waitpid(job_pid[j], &status, 0), job_pid[j]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "job %d: a rank failed (status %#x)", j + 1, status);
    }
}
END_TEST

static Suite *bootstrap_suite(void)
{
    Suite *s = suite_create("bootstrap");
    TCase *tc = tcase_create("unique id");
    tcase_set_timeout(tc, 90);
    tcase_add_loop_test(tc, test_init_counts, 0, (int)(sizeof(rank_counts) / sizeof(rank_counts[0])));
    tcase_add_test(tc, test_two_jobs);
    suite_add_tcase(s, tc);

    tc = tcase_create("environment");
    tcase_set_timeout(tc, 90);
    tcase_add_loop_test(tc, test_env_styles, 0, (int)(sizeof(env_styles) / sizeof(env_styles[0])));
    tcase_add_test(tc, test_collrun);
    tcase_add_test(tc, test_mpirun_openmpi);
    tcase_add_test(tc, test_mpiexec_mpich);
    tcase_add_test(tc, test_no_launcher);
    tcase_add_test(tc, test_slurm_hostlist);
    tcase_add_test(tc, test_slurm_tasks_per_node);
    suite_add_tcase(s, tc);

    tc = tcase_create("addresses");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_unreachable_named);
    tcase_add_test(tc, test_ifname);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(bootstrap_suite());
}
