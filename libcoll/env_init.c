/*
 * env_init.c: coll_comm_init_env, for programs started by a launcher.
 * Each launcher style says who we are (rank, size, local rank) and, where
 * it can, where rank 0 is; rank 0 then hosts the bootstrap root on the
 * master port. Styles are tried in this order, the first whose rank and
 * size variables are both set wins:
 *
 *   COLL_*     COLL_RANK, COLL_NRANKS (+ COLL_UNIQUE_ID, or COLL_MASTER_*) - collrun
 *   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
 *   Slurm      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, first host of the node list
 *   Open MPI   OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
 *   MPICH      PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
 *
 * COLL_MASTER_ADDR, COLL_MASTER_PORT and COLL_SECRET override what a style
 * provides. Without a master address, a job whose ranks all run on one
 * host uses 127.0.0.1; without a port, one is derived from the job id
 * (Slurm, Open MPI) or the launcher's process (MPICH on one host).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "env.h"
#include "log.h"
#include "param.h"

/* Derived ports stay below Linux's default ephemeral range (32768-60999),
 * where outgoing connections could already hold them. */
#define DERIVED_PORT_BASE 20000
#define DERIVED_PORT_SPAN 12000

typedef struct env_job {
    const char *style;
    int rank, nranks, local_rank, local_size;
    char master[256];
    const char *master_from;  /* variable the master address came from */
    int port;
    const char *port_from;
    char jobid[128];          /* mixed into the derived secret and port */
} env_job_t;

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

/* An integer variable in [lo, hi]; absent variables leave *out alone. */
static coll_status_t env_int(const char *name, int64_t lo, int64_t hi, int *out)
{
    const char *v = env(name);
    int64_t x;

    if (!v)
        return COLL_OK;
    if (coll_parse_int(v, &x) != 0)
        return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG, "%s='%s' is not an integer",
                          name, v);
    if (x < lo || x > hi)
        return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG,
                          "%s=%lld is out of range (%lld..%lld)", name, (long long)x,
                          (long long)lo, (long long)hi);
    *out = (int)x;
    return COLL_OK;
}

static coll_status_t read_rank_size(env_job_t *job, const char *rank_var, const char *size_var)
{
    COLL_CHECK(env_int(size_var, 1, COLL_WIRE_NRANKS_MAX, &job->nranks));
    COLL_CHECK(env_int(rank_var, 0, job->nranks - 1, &job->rank));
    return COLL_OK;
}

/* First host of a Slurm host list: "node[01-04,7],gpu3" -> "node01",
 * "rack[1-2]n[3-4]" -> "rack1n3". Returns 0 on success, -1 for a list it
 * cannot read (a bracket without a leading number or without its close)
 * or a first host that does not fit in outlen: a cut name would point
 * every rank at the wrong host. */
int coll_slurm_first_host(const char *list, char *out, size_t outlen)
{
    size_t n = 0;

    for (const char *p = list; *p && *p != ','; p++) {
        size_t digits = 1;
        const char *from = p;
        if (*p == ']')
            return -1;
        if (*p == '[') {
            /* Keep the first number of the range, with its zero padding. */
            from = p + 1;
            digits = strspn(from, "0123456789");
            p = strchr(from, ']');
            if (!digits || !p)
                return -1;
        }
        if (n + digits >= outlen)
            return -1;
        memcpy(out + n, from, digits);
        n += digits;
    }
    if (n == 0 || outlen == 0)
        return -1;
    out[n] = '\0';
    return 0;
}

/* One item of a tasks-per-node list, "4" or "4(x16)", at *pp: its count,
 * or -1 when it cannot be read. Moves *pp past it. */
static long slurm_tasks_item(const char **pp)
{
    const char *p = *pp;
    char *end;
    long n;

    if (*p < '0' || *p > '9')
        return -1;
    n = strtol(p, &end, 10);
    if (*end == '(') {
        if (end[1] != 'x' || end[2] < '0' || end[2] > '9' || strtol(end + 2, &end, 10) < 1 ||
            *end++ != ')')
            return -1;
    }
    *pp = end;
    return n >= 1 && n <= INT32_MAX ? n : -1;
}

int coll_slurm_uniform_tasks(const char *spec)
{
    long common = 0;
    int same = 1;

    for (const char *p = spec;; p++) {
        long n = slurm_tasks_item(&p);
        if (n < 0)
            return -1;
        same &= common == 0 || n == common;
        common = n;
        if (*p == '\0')
            return same ? (int)common : 0;
        if (*p != ',')
            return -1;
    }
}

static void derive_port(env_job_t *job, const char *from)
{
    uint8_t digest[COLL_SHA256_BYTES];
    coll_sha256(job->jobid, strlen(job->jobid), digest);
    job->port = DERIVED_PORT_BASE + (int)(coll_load_u32(digest) % DERIVED_PORT_SPAN);
    job->port_from = from;
}

static void set_master(env_job_t *job, const char *host, const char *from)
{
    snprintf(job->master, sizeof(job->master), "%s", host);
    job->master_from = from;
}

/* When every rank runs on this host (the local size is the job size),
 * rank 0 is here too. */
static void master_if_single_host(env_job_t *job, const char *local_size_var)
{
    if (job->local_size == job->nranks)
        set_master(job, "127.0.0.1", local_size_var);
}

static coll_status_t detect_torchrun(env_job_t *job)
{
    job->style = "torchrun";
    COLL_CHECK(read_rank_size(job, "RANK", "WORLD_SIZE"));
    COLL_CHECK(env_int("LOCAL_RANK", 0, job->nranks - 1, &job->local_rank));
    COLL_CHECK(env_int("LOCAL_WORLD_SIZE", 1, job->nranks, &job->local_size));
    master_if_single_host(job, "LOCAL_WORLD_SIZE");
    if (env("MASTER_ADDR"))
        set_master(job, env("MASTER_ADDR"), "MASTER_ADDR");
    snprintf(job->jobid, sizeof(job->jobid), "torchrun:%s",
             env("TORCHELASTIC_RUN_ID") ? env("TORCHELASTIC_RUN_ID") : "");
    return COLL_OK;
}

static coll_status_t detect_slurm(env_job_t *job)
{
    static const char *lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
    char host[256];

    job->style = "Slurm";
    COLL_CHECK(read_rank_size(job, "SLURM_PROCID", env("SLURM_NTASKS") ? "SLURM_NTASKS"
                                                                        : "SLURM_NPROCS"));
    COLL_CHECK(env_int("SLURM_LOCALID", 0, job->nranks - 1, &job->local_rank));
    /* Without our node's index in the step's list, only a count that every
     * node shares is ours (srun --ntasks-per-node, or -N n -n k*n). */
    if (env("SLURM_STEP_TASKS_PER_NODE")) {
        int per_node = coll_slurm_uniform_tasks(env("SLURM_STEP_TASKS_PER_NODE"));
        if (per_node >= 1 && per_node <= job->nranks)
            job->local_size = per_node;
    }
    /* the node list matters only when nothing names the master */
    for (size_t i = 0; i < COLL_ARRAY_LEN(lists) && !job->master[0] && !env("COLL_MASTER_ADDR") &&
                       !env("MASTER_ADDR"); i++) {
        const char *v = env(lists[i]);
        if (v && coll_slurm_first_host(v, host, sizeof(host)) == 0)
            set_master(job, host, lists[i]);
        else if (v)
            return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG,
                              "%s='%s' is not a host list I can read; set COLL_MASTER_ADDR",
                              lists[i], v);
    }
    snprintf(job->jobid, sizeof(job->jobid), "slurm:%s.%s",
             env("SLURM_JOB_ID") ? env("SLURM_JOB_ID") : "",
             env("SLURM_STEP_ID") ? env("SLURM_STEP_ID") : "");
    if (env("SLURM_JOB_ID"))
        derive_port(job, "SLURM_JOB_ID");
    return COLL_OK;
}

static coll_status_t detect_openmpi(env_job_t *job)
{
    job->style = "Open MPI";
    COLL_CHECK(read_rank_size(job, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"));
    COLL_CHECK(env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, job->nranks - 1, &job->local_rank));
    COLL_CHECK(env_int("OMPI_COMM_WORLD_LOCAL_SIZE", 1, job->nranks, &job->local_size));
    master_if_single_host(job, "OMPI_COMM_WORLD_LOCAL_SIZE");
    snprintf(job->jobid, sizeof(job->jobid), "ompi:%s",
             env("OMPI_MCA_ess_base_jobid") ? env("OMPI_MCA_ess_base_jobid") : "");
    if (env("OMPI_MCA_ess_base_jobid"))
        derive_port(job, "OMPI_MCA_ess_base_jobid");
    return COLL_OK;
}

static coll_status_t detect_mpich(env_job_t *job)
{
    job->style = "MPICH";
    COLL_CHECK(read_rank_size(job, "PMI_RANK", "PMI_SIZE"));
    COLL_CHECK(env_int("MPI_LOCALRANKID", 0, job->nranks - 1, &job->local_rank));
    COLL_CHECK(env_int("MPI_LOCALNRANKS", 1, job->nranks, &job->local_size));
    master_if_single_host(job, "MPI_LOCALNRANKS");
    /* Hydra exports no job id; on one host its proxy is our common parent. */
    snprintf(job->jobid, sizeof(job->jobid), "mpich:%d", (int)getppid());
    if (job->local_size == job->nranks)
        derive_port(job, "the launcher's process id");
    return COLL_OK;
}

static coll_status_t detect_coll(env_job_t *job)
{
    job->style = "COLL_* variables";
    COLL_CHECK(read_rank_size(job, "COLL_RANK", "COLL_NRANKS"));
    COLL_CHECK(env_int("COLL_LOCAL_RANK", 0, job->nranks - 1, &job->local_rank));
    COLL_CHECK(env_int("COLL_LOCAL_SIZE", 1, job->nranks, &job->local_size));
    master_if_single_host(job, "COLL_LOCAL_SIZE");
    if (env("MASTER_ADDR"))
        set_master(job, env("MASTER_ADDR"), "MASTER_ADDR");
    snprintf(job->jobid, sizeof(job->jobid), "coll");
    return COLL_OK;
}

static coll_status_t detect(env_job_t *job)
{
    static const struct {
        const char *rank, *size;
        coll_status_t (*fn)(env_job_t *);
    } styles[] = {
        {"COLL_RANK", "COLL_NRANKS", detect_coll},
        {"RANK", "WORLD_SIZE", detect_torchrun},
        {"SLURM_PROCID", "SLURM_NTASKS", detect_slurm},
        {"SLURM_PROCID", "SLURM_NPROCS", detect_slurm},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", detect_openmpi},
        {"PMI_RANK", "PMI_SIZE", detect_mpich},
    };

    memset(job, 0, sizeof(*job));
    job->nranks = 0;
    job->local_size = 0;
    for (size_t i = 0; i < COLL_ARRAY_LEN(styles); i++)
        if (env(styles[i].rank) && env(styles[i].size))
            return styles[i].fn(job);
    return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_USAGE,
                      "coll_comm_init_env: no launcher variables found (looked for COLL_RANK/"
                      "COLL_NRANKS, RANK/WORLD_SIZE (torchrun), SLURM_PROCID/SLURM_NTASKS, "
                      "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE, PMI_RANK/PMI_SIZE); start "
                      "the program with collrun, torchrun, srun or mpirun");
}

/* Overrides, then the checks that a master address and port exist. */
static coll_status_t finish_master(env_job_t *job)
{
    int port = job->port;
    const char *pv = env("COLL_MASTER_PORT") ? "COLL_MASTER_PORT"
                     : env("MASTER_PORT")    ? "MASTER_PORT" : NULL;

    if (env("COLL_MASTER_ADDR"))
        set_master(job, env("COLL_MASTER_ADDR"), "COLL_MASTER_ADDR");
    if (pv) {
        COLL_CHECK(env_int(pv, 1, 65535, &port));
        job->port = port;
        job->port_from = pv;
    }
    if (!job->master[0])
        return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_USAGE,
                          "coll_comm_init_env (%s): nothing says where rank 0 runs (the local "
                          "size does not show that all %d ranks share this host); set "
                          "COLL_MASTER_ADDR to its host (e.g. mpirun -x COLL_MASTER_ADDR=host)",
                          job->style, job->nranks);
    if (!job->port)
        return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_USAGE,
                          "coll_comm_init_env (%s): no bootstrap port; set COLL_MASTER_PORT "
                          "(or MASTER_PORT) to a free port, the same on every rank", job->style);
    return COLL_OK;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* The job secret: SHA-256 of COLL_SECRET's bytes, or of the job identity. */
static coll_status_t job_secret(const env_job_t *job, uint8_t secret[COLL_SECRET_BYTES])
{
    const char *s = env("COLL_SECRET");
    char ident[512];

    if (s) {
        uint8_t bytes[256];
        size_t len = strlen(s), n = 0;
        if (len < 32 || len % 2 || len > 2 * sizeof(bytes))
            return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG,
                              "COLL_SECRET must be 32 to 512 hex digits (got %zu characters)",
                              len);
        for (size_t i = 0; i < len; i += 2) {
            int hi = hexval(s[i]), lo = hexval(s[i + 1]);
            if (hi < 0 || lo < 0)
                return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG,
                                  "COLL_SECRET has a non-hex character at position %zu",
                                  hi < 0 ? i : i + 1);
            bytes[n++] = (uint8_t)(hi << 4 | lo);
        }
        coll_sha256(bytes, n, secret);
        return COLL_OK;
    }
    snprintf(ident, sizeof(ident), "libcoll-env-secret-v1|%s|%s|%d|%d|%s", job->style,
             job->master, job->port, job->nranks, job->jobid);
    coll_sha256(ident, strlen(ident), secret);
    COLL_INFO(COLL_SUBSYS_ENV, "no COLL_SECRET: the job secret is derived from the job's "
              "identity (keeps jobs apart, but is not secret)");
    return COLL_OK;
}

/* The root binds the wildcard address of the master's family. */
static coll_status_t start_root(const env_job_t *job, const coll_init_args_t *a,
                                uint64_t timeout_ns, struct coll_root **root_p)
{
    coll_addr_t any = a->uid.root, bound;
    if (any.ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&any.ss)->sin_addr.s_addr = htonl(INADDR_ANY);
    else
        ((struct sockaddr_in6 *)&any.ss)->sin6_addr = in6addr_any;
    COLL_INFO(COLL_SUBSYS_ENV, "rank 0 hosts the bootstrap root on port %d (%s)", job->port,
              job->port_from);
    return coll_root_start(&any, a->uid.secret, a->round, coll_time_ns() + timeout_ns, root_p,
                           &bound);
}

coll_status_t coll_comm_init_env(coll_comm_t *comm_p, const coll_config_t *config)
{
    static uint32_t rounds; /* init_env calls so far in this process */
    coll_init_args_t a = {.config = config};
    uint64_t timeout_ns;
    env_job_t job;
    char what[64];

    if (!comm_p)
        return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG, "coll_comm_init_env: comm is NULL");
    COLL_CHECK(detect(&job));
    a.rank = job.rank;
    a.nranks = job.nranks;
    a.local_size = job.local_size;
    a.how = job.style;
    if (env("COLL_UNIQUE_ID")) {
        coll_unique_id_t id;
        COLL_CHECK(coll_unique_id_from_str(env("COLL_UNIQUE_ID"), &id));
        COLL_CHECK(coll_uid_decode(&id, &a.uid));
        return coll_comm_init_internal(&a, comm_p);
    }
    COLL_CHECK(finish_master(&job));
    snprintf(what, sizeof(what), "%s (master address)", job.master_from);
    COLL_CHECK(coll_addr_resolve(job.master, job.port, what, &a.uid.root));
    COLL_CHECK(job_secret(&job, a.uid.secret));
    COLL_CHECK(coll_param_duration_ns(COLL_PARAM_TIMEOUT, &timeout_ns));
    if (config && config->size == sizeof(*config) && config->timeout_ms > 0)
        timeout_ns = (uint64_t)config->timeout_ms * 1000000ull;
    a.round = __atomic_fetch_add(&rounds, 1, __ATOMIC_RELAXED);
    COLL_INFO(COLL_SUBSYS_ENV, "init from %s: rank %d of %d (local %d), master %s:%d (%s)",
              job.style, job.rank, job.nranks, job.local_rank, job.master, job.port,
              job.master_from);
    if (job.rank == 0)
        COLL_CHECK(start_root(&job, &a, timeout_ns, &a.root));
    return coll_comm_init_internal(&a, comm_p);
}
