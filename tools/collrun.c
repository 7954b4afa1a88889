/*
 * collrun.c: the local launcher of libcoll jobs.
 *
 *   collrun -n N [options] [--] prog [args...]
 *
 * starts N ranks of prog on this host, each with the COLL_* variables that
 * coll_comm_init_env() reads (rank, size, local rank and size, where rank 0
 * hosts the bootstrap, the job secret), and runs the job to its end:
 *
 *   - the first rank that fails ends the job: the others get SIGTERM, then
 *     SIGKILL after --kill-grace seconds, and collrun exits with the failed
 *     rank's status, so a scheduler sees one clear culprit;
 *   - signals sent to collrun (INT, TERM, HUP, QUIT, USR1, USR2) are
 *     forwarded to every rank;
 *   - with --tag-output every line a rank writes is prefixed by "[rank] ";
 *   - ranks never outlive collrun (PR_SET_PDEATHSIG);
 *   - with --bind-to core each rank is bound to one CPU of those collrun
 *     may use, local rank i to the i-th (round robin when there are more
 *     ranks than CPUs), as mpirun binds to cores. The default (auto) binds
 *     so only when there are 2 to (CPUs) local ranks, as Open MPI's mpirun
 *     binds 2 ranks to cores by default. Unbound, 2 ranks that wait by
 *     yielding often start on one CPU and stay there, presumably because
 *     each hands the CPU to the other so often that the kernel sees both
 *     as cache-hot and moves neither to the idle CPU (2-rank 16-byte
 *     all-reduce 1.5-1.7 us in 8 of 10 unbound launches, 0.21-0.23
 *     bound). With more ranks than CPUs it leaves placement to the
 *     kernel: on the 2-core development machine binding 4 ranks took a
 *     1 MiB all-reduce over TCP from 530-582 to 815-836 us (3 alternating
 *     launches each). One rank has no peer to share a CPU with, and
 *     separate collruns on one machine (emulated hosts) would all put
 *     their first rank on the same CPU, so -n 1 stays unbound.
 *
 * A job over several hosts runs one collrun per host with the same
 * --nnodes, -n, --master-addr and --master-port and its own --node-rank;
 * global rank = node_rank * N + local rank.
 *
 * One thread and one poll() loop. Signal handlers only write the signal's
 * number into a self-pipe; forwarding, reaping and the kill timer all run
 * in the loop. Each rank leads its own process group so that a signal
 * reaches the whole rank (a shell script and its children), and so that a
 * Ctrl-C at the terminal reaches the ranks once, through collrun.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "coll.h"
#include "sha256.h"
#include "wire.h"

#define NP_MAX 4096
#define KILL_GRACE_DEFAULT_S 5
#define KILL_GRACE_MAX_S 3600
#define SECRET_HEX_MIN 32         /* what coll_comm_init_env accepts */
#define SECRET_HEX_MAX 512
/* A line longer than this is written in pieces of this size, each tagged
 * and ended by a newline, so that no rank can hold back the others'
 * output or make collrun buffer without bound. */
#define PIECE_MAX (64 * 1024)
/* Once every rank is reaped, how long to wait for EOF on output pipes that
 * a rank's leftover child may still hold open: the rank's own output is
 * already in the pipe, so this only bounds waiting for strays. */
#define DRAIN_LINGER_NS (1000ull * 1000 * 1000)
#define BLAME_DELAY_NS (100 * 1000000ull) /* see job_reap */

#define EXIT_USAGE 2
#define EXIT_NOEXEC 127

/* The signals collrun forwards to its ranks; SIGCHLD wakes the loop to reap. */
static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED ((int)COLL_ARRAY_LEN(forwarded_signals))

/* Write end of the self-pipe: the only state the signal handler touches. */
static int sig_pipe_wr = -1;

enum { BIND_AUTO, BIND_CORE, BIND_NONE };

typedef struct opts {
    int np, nnodes, node_rank;
    int tag_output;
    int bind;                 /* --bind-to: BIND_AUTO, BIND_CORE or BIND_NONE */
    const char *master_addr;  /* NULL: 127.0.0.1 on one host */
    int master_port;          /* 0: pick a free one (one host only) */
    const char *secret;       /* NULL: COLL_SECRET, random or derived */
    int kill_grace_s;
    char **xvars;             /* -x VAR=VAL, in command-line order */
    int nx;
    char **prog_argv;         /* the program and its arguments */
} opts_t;

/* One output pipe of one rank, with the start of a line not yet written. */
typedef struct stream {
    int fd;                   /* read end; -1 when closed */
    int dest;                 /* 1 or 2: collrun's stdout or stderr */
    char tag[24];             /* "[rank] " */
    char *buf;                /* PIECE_MAX bytes, allocated on first use */
    size_t len;               /* bytes pending in buf, always < PIECE_MAX */
} stream_t;

typedef struct rank {
    pid_t pid;                /* 0 before start and once reaped */
    int global;
    stream_t out, err;
} rank_t;

/* Signal dispositions and mask as collrun found them, for the ranks. */
typedef struct sig_saved {
    struct sigaction old[NFORWARDED + 2];  /* forwarded, SIGCHLD, SIGPIPE */
    sigset_t mask;
} sig_saved_t;

typedef struct job {
    const opts_t *o;
    pid_t self;                   /* collrun's pid, checked by each child */
    char master_addr[256];
    char master_port[8];
    char secret[SECRET_HEX_MAX + 1];
    sig_saved_t sig;
    int sig_rd;                   /* read end of the self-pipe */
    struct rlimit nofile;         /* the limit the ranks get back */
    rank_t *ranks;                /* o->np entries */
    int *cpus;                    /* the CPUs collrun may use, in order; NULL: no binding */
    int ncpus;
    struct pollfd *pfds;          /* 1 + 2 * np: self-pipe, then streams */
    stream_t **pstreams;          /* the stream behind each pfds entry */
    int running;                  /* started and not yet reaped */
    int ending;                   /* SIGTERM sent: later exits are not culprits */
    const struct rank *suspect;   /* the failed rank to blame, once blame_at_ns comes */
    pid_t suspect_pid;
    int suspect_st;
    uint64_t blame_at_ns;
    int killed;                   /* SIGKILL sent */
    uint64_t kill_at_ns;          /* end of the grace period */
    uint64_t linger_until_ns;     /* set when the last rank is reaped */
    int nended, nkilled;          /* ranks collrun terminated / SIGKILLed */
    int status;                   /* collrun's exit status */
} job_t;

/* ---- usage ------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: collrun -n N [options] [--] prog [args...]\n"
            "Start N ranks of prog on this host with the COLL_* variables of\n"
            "coll_comm_init_env(); the first rank that fails ends the job.\n"
            "\n"
            "  -n, --np N            ranks on this host (1..%d), required\n"
            "  -t, --tag-output      prefix each output line with \"[rank] \"\n"
            "  -x VAR=VAL            set VAR for every rank (repeatable)\n"
            "      --nnodes M        hosts in the job (default 1)\n"
            "      --node-rank K     index of this host, 0..M-1 (default 0)\n"
            "      --master-addr A   host of rank 0 (required when M > 1)\n"
            "      --master-port P   bootstrap port on that host (required when M > 1)\n"
            "      --secret HEX      job secret, %d to %d hex digits\n"
            "      --kill-grace S    seconds from SIGTERM to SIGKILL (default %d)\n"
            "      --bind-to auto|core|none  core: local rank i runs on the i-th CPU\n"
            "                        collrun may use (round robin); none: unbound; auto\n"
            "                        (default): core when 2 <= N <= those CPUs, else none\n"
            "  -h, --help            this help\n"
            "      --version         print the version\n"
            "\n"
            "Exit status: 0 when every rank exits 0; else the status of the first rank\n"
            "that failed (128 + signal if it was killed); 127 when prog cannot be\n"
            "started; 2 on a usage error.\n",
            NP_MAX, SECRET_HEX_MIN, SECRET_HEX_MAX, KILL_GRACE_DEFAULT_S);
}

/* Every usage error is one line naming the problem, then a hint. */
static int usage_error(const char *fmt, ...) COLL_PRINTF(1, 2);
static int usage_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "collrun: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'collrun --help' for more information.\n");
    va_end(ap);
    return -1;
}

/* ---- option parsing ------------------------------------------------------ */

/* A decimal integer in [lo, hi], the whole string. */
static int parse_int(const char *text, long lo, long hi, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

/* 32 to 512 hex digits, an even number (whole bytes): what libcoll reads. */
static int secret_valid(const char *s)
{
    size_t len = strlen(s);

    if (len < SECRET_HEX_MIN || len > SECRET_HEX_MAX || len % 2)
        return 0;
    return strspn(s, "0123456789abcdefABCDEF") == len;
}

/* Long options get codes of their own, even where a letter means the same,
 * so that an error can tell "--help=x" from "-h". */
enum {
    OPT_NP = 256,
    OPT_TAG_OUTPUT,
    OPT_HELP,
    OPT_NNODES,
    OPT_NODE_RANK,
    OPT_MASTER_ADDR,
    OPT_MASTER_PORT,
    OPT_SECRET,
    OPT_KILL_GRACE,
    OPT_BIND_TO,
    OPT_VERSION,
};

static const struct option long_opts[] = {
    {"np", required_argument, NULL, OPT_NP},
    {"tag-output", no_argument, NULL, OPT_TAG_OUTPUT},
    {"nnodes", required_argument, NULL, OPT_NNODES},
    {"node-rank", required_argument, NULL, OPT_NODE_RANK},
    {"master-addr", required_argument, NULL, OPT_MASTER_ADDR},
    {"master-port", required_argument, NULL, OPT_MASTER_PORT},
    {"secret", required_argument, NULL, OPT_SECRET},
    {"kill-grace", required_argument, NULL, OPT_KILL_GRACE},
    {"bind-to", required_argument, NULL, OPT_BIND_TO},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* Options whose value is an integer: where it goes and its range. */
static int opt_int(int c, const char *arg, opts_t *o)
{
    switch (c) {
    case 'n':
    case OPT_NP:
        if (parse_int(arg, 1, NP_MAX, &o->np))
            return usage_error("-n '%s': not a rank count in 1..%d", arg, NP_MAX);
        return 0;
    case OPT_NNODES:
        if (parse_int(arg, 1, COLL_WIRE_NRANKS_MAX, &o->nnodes))
            return usage_error("--nnodes '%s': not a host count of at least 1", arg);
        return 0;
    case OPT_NODE_RANK:
        if (parse_int(arg, 0, COLL_WIRE_NRANKS_MAX - 1, &o->node_rank))
            return usage_error("--node-rank '%s': not a host index", arg);
        return 0;
    case OPT_MASTER_PORT:
        if (parse_int(arg, 1, 65535, &o->master_port))
            return usage_error("--master-port '%s': not a port in 1..65535", arg);
        return 0;
    default: /* OPT_KILL_GRACE */
        if (parse_int(arg, 0, KILL_GRACE_MAX_S, &o->kill_grace_s))
            return usage_error("--kill-grace '%s': not a number of seconds in 0..%d", arg,
                               KILL_GRACE_MAX_S);
        return 0;
    }
}

/* One option; 1 when it asks to exit 0 at once (--help, --version). */
static int opt_one(int c, char **argv, opts_t *o)
{
    switch (c) {
    case 't':
    case OPT_TAG_OUTPUT:
        o->tag_output = 1;
        return 0;
    case 'x':
        if (!strchr(optarg, '=') || optarg[0] == '=')
            return usage_error("-x '%s': expected VAR=VAL", optarg);
        o->xvars[o->nx++] = optarg;
        return 0;
    case OPT_MASTER_ADDR:
        if (!optarg[0] || strlen(optarg) >= 256)
            return usage_error("--master-addr '%s': not a host name or address", optarg);
        o->master_addr = optarg;
        return 0;
    case OPT_SECRET:
        if (!secret_valid(optarg))
            return usage_error("--secret: need %d to %d hex digits, an even number",
                               SECRET_HEX_MIN, SECRET_HEX_MAX);
        o->secret = optarg;
        return 0;
    case OPT_BIND_TO:
        if (!strcmp(optarg, "auto"))
            o->bind = BIND_AUTO;
        else if (!strcmp(optarg, "core"))
            o->bind = BIND_CORE;
        else if (!strcmp(optarg, "none"))
            o->bind = BIND_NONE;
        else
            return usage_error("--bind-to '%s': expected auto, core or none", optarg);
        return 0;
    case 'h':
    case OPT_HELP:
        usage(stdout);
        return 1;
    case OPT_VERSION:
        printf("collrun (libcoll) %d.%d.%d\n", COLL_VERSION_MAJOR, COLL_VERSION_MINOR,
               COLL_VERSION_PATCH);
        return 1;
    case ':':
        return usage_error("option '%s' needs a value", argv[optind - 1]);
    case '?':
        /* optopt: the bad letter of a short option; 0 for an unknown long
         * one; the code of a long one that got a value it takes none. */
        if (optopt >= OPT_NP)
            return usage_error("option '%s' takes no value", argv[optind - 1]);
        if (optopt)
            return usage_error("unknown option '-%c'", optopt);
        return usage_error("unknown option '%s'", argv[optind - 1]);
    default:
        return opt_int(c, optarg, o);
    }
}

/* The checks that need every option. */
static int opts_check(opts_t *o)
{
    const char *env_secret = getenv("COLL_SECRET");

    if (!o->np)
        return usage_error("-n N (ranks on this host) is required");
    if (o->node_rank >= o->nnodes)
        return usage_error("--node-rank %d must be less than --nnodes %d", o->node_rank,
                           o->nnodes);
    if ((long)o->nnodes * o->np > COLL_WIRE_NRANKS_MAX)
        return usage_error("--nnodes %d times -n %d is more ranks than libcoll supports (%d)",
                           o->nnodes, o->np, COLL_WIRE_NRANKS_MAX);
    if (o->nnodes > 1 && !o->master_addr)
        return usage_error("--master-addr (host of rank 0) is required when --nnodes > 1");
    if (o->nnodes > 1 && !o->master_port)
        return usage_error("--master-port (the same on every host) is required when "
                           "--nnodes > 1");
    if (!o->secret && env_secret && env_secret[0] && !secret_valid(env_secret))
        return usage_error("COLL_SECRET in the environment: need %d to %d hex digits, an "
                           "even number (or pass --secret)", SECRET_HEX_MIN, SECRET_HEX_MAX);
    if (!o->prog_argv[0])
        return usage_error("no program to run");
    return 0;
}

/* 0 to run, 1 to exit 0 (help, version), -1 on a usage error. */
static int opts_parse(opts_t *o, int argc, char **argv)
{
    int c, rc;

    memset(o, 0, sizeof(*o));
    o->nnodes = 1;
    o->kill_grace_s = KILL_GRACE_DEFAULT_S;
    /* Every -x takes at least one argv entry, so argc entries suffice. */
    o->xvars = calloc((size_t)argc, sizeof(*o->xvars));
    if (!o->xvars) {
        perror("collrun");
        return -1;
    }
    opterr = 0; /* our own one-line errors */
    /* '+': stop at the program, whose options are its own. */
    while ((c = getopt_long(argc, argv, "+:n:tx:h", long_opts, NULL)) != -1)
        if ((rc = opt_one(c, argv, o)) != 0)
            return rc;
    o->prog_argv = argv + optind;
    return opts_check(o);
}

/* ---- job identity: master address, port, secret --------------------------- */

static void hex_encode(const uint8_t *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Is `port` free on the wildcard address of `family`? Rank 0 binds the
 * wildcard, so that is what we test: a port free only on 127.0.0.1 may be
 * held on another address (e.g. by a connection in TIME_WAIT). port 0
 * asks the kernel for one; the port found is returned, or -1. */
static int try_port(int family, int port)
{
    struct sockaddr_storage ss = {0}; /* in6addr_any and INADDR_ANY are zeros */
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
    struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
    socklen_t len = sizeof(ss);
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0), found = -1;

    ss.ss_family = (sa_family_t)family;
    if (family == AF_INET6)
        sin6->sin6_port = htons((uint16_t)port);
    else
        sin->sin_port = htons((uint16_t)port);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&ss, len) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        found = ntohs(family == AF_INET6 ? sin6->sin6_port : sin->sin_port);
    if (fd >= 0)
        close(fd);
    return found;
}

/* A free port for the bootstrap root, preferably in 20000-31999: below
 * Linux's default ephemeral range, so that no outgoing connection takes
 * it before rank 0 binds it. Another process may still take it; on one
 * host that window is short, and --master-port avoids it. */
static int pick_free_port(const char *master_addr)
{
    struct in6_addr probe;
    uint16_t r[32];
    int family = inet_pton(AF_INET6, master_addr, &probe) == 1 ? AF_INET6 : AF_INET, port;

    if (coll_random_bytes(r, sizeof(r)) == 0)
        for (size_t i = 0; i < COLL_ARRAY_LEN(r); i++)
            if ((port = try_port(family, 20000 + r[i] % 12000)) > 0)
                return port;
    if ((port = try_port(family, 0)) > 0)
        return port;
    fprintf(stderr, "collrun: cannot find a free port: %s\n", strerror(errno));
    return -1;
}

/* --secret, else COLL_SECRET, else a random one (one host), else one that
 * every host derives alike from the job's shape. The derived one keeps
 * concurrent jobs apart but anyone can compute it: --secret is better. */
static int job_secret(job_t *job)
{
    const opts_t *o = job->o;
    const char *env = getenv("COLL_SECRET");
    uint8_t bytes[COLL_SHA256_BYTES];
    char ident[512];

    if (o->secret || (env && env[0])) { /* both checked by opts_check */
        snprintf(job->secret, sizeof(job->secret), "%s", o->secret ? o->secret : env);
        return 0;
    }
    if (o->nnodes == 1) {
        if (coll_random_bytes(bytes, sizeof(bytes)) != 0) {
            fprintf(stderr, "collrun: cannot read random bytes for the job secret\n");
            return -1;
        }
    } else {
        snprintf(ident, sizeof(ident), "collrun|%s|%s|%d|%d", job->master_addr,
                 job->master_port, o->nnodes, o->np);
        coll_sha256(ident, strlen(ident), bytes);
    }
    hex_encode(bytes, sizeof(bytes), job->secret);
    return 0;
}

static int job_identity(job_t *job)
{
    const opts_t *o = job->o;
    int port = o->master_port;

    snprintf(job->master_addr, sizeof(job->master_addr), "%s",
             o->master_addr ? o->master_addr : "127.0.0.1");
    if (!port && (port = pick_free_port(job->master_addr)) < 0)
        return -1;
    snprintf(job->master_port, sizeof(job->master_port), "%d", port);
    return job_secret(job);
}

/* ---- signals ----------------------------------------------------------------- */

/* Async-signal-safe: one write(); a full pipe already holds a wake-up. */
static void on_signal(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t n = write(sig_pipe_wr, &b, 1);

    (void)n;
    errno = saved;
}

static int signals_install(job_t *job)
{
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    struct sigaction ign = {.sa_handler = SIG_IGN};
    int fds[2];

    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "collrun: pipe: %s\n", strerror(errno));
        return -1;
    }
    job->sig_rd = fds[0];
    sig_pipe_wr = fds[1];
    sigfillset(&sa.sa_mask);
    sigprocmask(SIG_SETMASK, NULL, &job->sig.mask);
    for (int i = 0; i < NFORWARDED; i++)
        sigaction(forwarded_signals[i], &sa, &job->sig.old[i]);
    sa.sa_flags |= SA_NOCLDSTOP; /* a stopped rank is not an ended rank */
    sigaction(SIGCHLD, &sa, &job->sig.old[NFORWARDED]);
    /* A reader of our output going away must not kill the launcher (and
     * with it every rank); the lost output is dropped instead. */
    sigaction(SIGPIPE, &ign, &job->sig.old[NFORWARDED + 1]);
    return 0;
}

/* In a child: the dispositions and mask collrun was started with. */
static void signals_restore(const sig_saved_t *s)
{
    for (int i = 0; i < NFORWARDED; i++)
        sigaction(forwarded_signals[i], &s->old[i], NULL);
    sigaction(SIGCHLD, &s->old[NFORWARDED], NULL);
    sigaction(SIGPIPE, &s->old[NFORWARDED + 1], NULL);
    sigprocmask(SIG_SETMASK, &s->mask, NULL);
}

/* The whole rank: its process group (see the header comment). */
static void rank_signal(const rank_t *r, int sig)
{
    if (kill(-r->pid, sig) != 0)
        kill(r->pid, sig);
}

/* ---- tagged output ------------------------------------------------------------- */

/* Write all of iov to fd, or give up on an error: output that cannot be
 * written is dropped, the job goes on. */
static void write_iov(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t n = writev(fd, iov, cnt);
        if (n < 0) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN && poll(&p, 1, -1) >= 0)
                continue;
            return;
        }
        while (cnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
}

/* One tagged line: the pending bytes, then data[0..n), then a newline;
 * one writev so that the line is never split by another rank's. */
static void stream_emit(stream_t *s, const char *data, size_t n)
{
    struct iovec iov[4] = {
        {s->tag, strlen(s->tag)},
        {s->buf, s->len},
        {(void *)data, n},
        {"\n", 1},
    };

    write_iov(s->dest, iov, 4);
    s->len = 0;
}

/* Hold the start of a line until its end arrives. */
static void stream_keep(stream_t *s, const char *data, size_t n)
{
    if (!s->buf && !(s->buf = malloc(PIECE_MAX))) {
        stream_emit(s, data, n); /* no memory: write it as a piece now */
        return;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
}

/* Write the complete lines of data, keep the unfinished one; pieces of
 * PIECE_MAX bytes of a longer line are written as they fill. */
static void stream_feed(stream_t *s, const char *data, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t line = nl ? (size_t)(nl - data) : n;
        size_t room = PIECE_MAX - s->len;

        if (nl && line <= room) {
            stream_emit(s, data, line);
            data += line + 1;
            n -= line + 1;
        } else if (!nl && line < room) {
            stream_keep(s, data, n);
            return;
        } else {
            stream_emit(s, data, room);
            data += room;
            n -= room;
        }
    }
}

/* At EOF: the last line even without its newline, then the pipe. */
static void stream_close(stream_t *s)
{
    if (s->len > 0)
        stream_emit(s, NULL, 0);
    free(s->buf);
    s->buf = NULL;
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

/* One read per wake-up, so that a chatty rank cannot starve the others. */
static void stream_read(stream_t *s)
{
    char chunk[PIECE_MAX];
    ssize_t n = read(s->fd, chunk, sizeof(chunk));

    if (n > 0)
        stream_feed(s, chunk, (size_t)n);
    else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        stream_close(s);
}

/* Give up on a pipe that a stray holds open, but first write out what is
 * in it: everything the dead rank wrote. A pipe holds at most 1 MiB (the
 * default pipe-max-size), so a bounded number of reads empties it even if
 * the stray keeps writing. */
static void stream_drain(stream_t *s)
{
    for (int i = 0; i < 16 && s->fd >= 0; i++)
        stream_read(s);
    stream_close(s);
}

/* ---- starting ranks -------------------------------------------------------------- */

static int set_env_int(const char *name, long v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%ld", v);
    return setenv(name, buf, 1);
}

/* The contract with coll_comm_init_env. -x comes last so that it can
 * override anything, as with mpirun -x. A COLL_UNIQUE_ID inherited from
 * collrun's caller would win over the master address: drop it. */
static int rank_env(const job_t *job, int local)
{
    const opts_t *o = job->o;

    if (unsetenv("COLL_UNIQUE_ID") || set_env_int("COLL_RANK", job->ranks[local].global) ||
        set_env_int("COLL_NRANKS", (long)o->nnodes * o->np) ||
        set_env_int("COLL_LOCAL_RANK", local) || set_env_int("COLL_LOCAL_SIZE", o->np) ||
        setenv("COLL_MASTER_ADDR", job->master_addr, 1) ||
        setenv("COLL_MASTER_PORT", job->master_port, 1) ||
        setenv("COLL_SECRET", job->secret, 1))
        return -1;
    for (int i = 0; i < o->nx; i++)
        if (putenv(o->xvars[i]))
            return -1;
    return 0;
}

/* The CPUs this process may use (its affinity mask, which a cgroup or
 * taskset may have narrowed), lowest first, for binding the ranks. None
 * with --bind-to none, with auto outside 2..CPUs local ranks, or when the
 * mask cannot be read: the ranks then run unbound. */
static void job_cpus(job_t *job)
{
    const opts_t *o = job->o;
    cpu_set_t set;

    if (o->bind == BIND_NONE || sched_getaffinity(0, sizeof(set), &set) != 0 ||
        (o->bind == BIND_AUTO && (o->np < 2 || o->np > CPU_COUNT(&set))) ||
        !(job->cpus = calloc(CPU_SETSIZE, sizeof(*job->cpus))))
        return;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            job->cpus[job->ncpus++] = c;
}

/* Placement is for speed, not correctness: a rank that cannot be bound
 * runs unbound. */
static void rank_bind(const job_t *job, int local)
{
    cpu_set_t set;

    if (job->ncpus == 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(job->cpus[local % job->ncpus], &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
}

/* In the child between fork and exec; never returns. Failures go to the
 * parent as an errno through the close-on-exec pipe `report`: EOF there
 * means exec succeeded. */
static void rank_exec(const job_t *job, int local, int report, int out, int err)
{
    ssize_t w;
    int e;

    /* Its own group, so that signals reach the rank's children too. */
    setpgid(0, 0);
    /* Die with collrun; if collrun already died before prctl, the parent
     * is someone else now and nobody would kill us later. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        goto fail;
    if (getppid() != job->self)
        _exit(EXIT_NOEXEC);
    signals_restore(&job->sig);
    setrlimit(RLIMIT_NOFILE, &job->nofile);
    if ((out >= 0 && dup2(out, STDOUT_FILENO) < 0) || (err >= 0 && dup2(err, STDERR_FILENO) < 0))
        goto fail;
    if (rank_env(job, local) != 0)
        goto fail;
    rank_bind(job, local);
    execvp(job->o->prog_argv[0], job->o->prog_argv);
fail:
    e = errno;
    w = write(report, &e, sizeof(e)); /* nothing left to do if it fails */
    (void)w;
    _exit(EXIT_NOEXEC);
}

static void stream_open(stream_t *s, int fd, int dest, int global)
{
    s->fd = fd;
    s->dest = dest;
    snprintf(s->tag, sizeof(s->tag), "[%d] ", global);
    if (fd >= 0)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* errno from the child, 0 when its exec succeeded. */
static int wait_exec(int report)
{
    int e = 0;
    ssize_t n;

    do
        n = read(report, &e, sizeof(e));
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)sizeof(e) ? e : 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Start one rank; 0 on success, else the exit status collrun should end
 * with (after a message). Waits until the rank's exec succeeded or failed,
 * so a bad program is reported once, for rank 0, before any rank runs it. */
static int rank_start(job_t *job, int local)
{
    rank_t *r = &job->ranks[local];
    int report[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    sigset_t all, old;
    int e = 0;

    if (pipe2(report, O_CLOEXEC) != 0 ||
        (job->o->tag_output && (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0))) {
        e = errno;
        fprintf(stderr, "collrun: cannot start rank %d: pipe: %s\n", r->global, strerror(e));
        goto out;
    }
    /* Our handlers must not run in the child: they would write into the
     * self-pipe it shares with us. The child unblocks after restoring. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    r->pid = fork();
    if (r->pid == 0)
        rank_exec(job, local, report[1], out[1], err[1]);
    e = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (r->pid < 0) {
        r->pid = 0;
        fprintf(stderr, "collrun: cannot start rank %d: fork: %s\n", r->global, strerror(e));
        goto out;
    }
    job->running++;
    close_fd(&report[1]);
    stream_open(&r->out, out[0], STDOUT_FILENO, r->global);
    stream_open(&r->err, err[0], STDERR_FILENO, r->global);
    out[0] = err[0] = -1; /* the streams own them now */
    e = wait_exec(report[0]);
    if (e)
        fprintf(stderr, "collrun: cannot start rank %d: %s: %s\n", r->global,
                job->o->prog_argv[0], strerror(e));
out:
    for (int i = 0; i < 2; i++) {
        close_fd(&report[i]);
        close_fd(&out[i]);
        close_fd(&err[i]);
    }
    if (!e)
        return 0;
    return r->pid > 0 ? EXIT_NOEXEC : EXIT_FAILURE;
}

/* ---- running the job ---------------------------------------------------------------- */

/* End the job: SIGTERM now, SIGKILL when the grace period is over. */
static void job_end(job_t *job, int status, const rank_t *culprit)
{
    job->ending = 1;
    job->status = status;
    job->kill_at_ns = coll_time_ns() + (uint64_t)job->o->kill_grace_s * 1000000000ull;
    for (int i = 0; i < job->o->np; i++) {
        rank_t *r = &job->ranks[i];
        if (r->pid > 0 && r != culprit) {
            rank_signal(r, SIGTERM);
            job->nended++;
        }
    }
}

static void job_kill(job_t *job)
{
    job->killed = 1;
    for (int i = 0; i < job->o->np; i++)
        if (job->ranks[i].pid > 0) {
            rank_signal(&job->ranks[i], SIGKILL);
            job->nkilled++;
        }
}

/* A rank was reaped; returns 1 when it failed while the job was running
 * (a candidate culprit). */
static int rank_ended(job_t *job, rank_t *r, int st)
{
    r->pid = 0;
    if (--job->running == 0)
        job->linger_until_ns = coll_time_ns() + DRAIN_LINGER_NS;
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0) && !job->ending;
}

/* Name the culprit once and end the job. */
static void blame(job_t *job, const rank_t *r, pid_t pid, int st)
{
    if (WIFEXITED(st)) {
        fprintf(stderr, "collrun: rank %d (pid %d) exited with status %d\n", r->global, (int)pid,
                WEXITSTATUS(st));
        job_end(job, WEXITSTATUS(st), r);
    } else {
        fprintf(stderr, "collrun: rank %d (pid %d) was killed by signal %d (%s)\n", r->global,
                (int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
        job_end(job, 128 + WTERMSIG(st), r);
    }
}

/* Reap every rank that ended. The first failure is not blamed at once:
 * a dying process's sockets close before its parent hears of it, so a
 * survivor that exits on libcoll's error can be reaped first. Within
 * BLAME_DELAY_NS, a rank killed by a signal is preferred to one that
 * exited with an error. */
static void job_reap(job_t *job)
{
    pid_t pid;
    int st;

    while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        for (int i = 0; i < job->o->np; i++) {
            rank_t *r = &job->ranks[i];
            if (r->pid != pid)
                continue;
            if (rank_ended(job, r, st) &&
                (!job->suspect || (WIFSIGNALED(st) && !WIFSIGNALED(job->suspect_st)))) {
                if (!job->suspect)
                    job->blame_at_ns = coll_time_ns() + BLAME_DELAY_NS;
                job->suspect = r;
                job->suspect_pid = pid;
                job->suspect_st = st;
            }
            break;
        }
}

static void job_blame_due(job_t *job)
{
    if (job->suspect && !job->ending && coll_time_ns() >= job->blame_at_ns)
        blame(job, job->suspect, job->suspect_pid, job->suspect_st);
}

static void job_forward(job_t *job, int sig)
{
    for (int i = 0; i < job->o->np; i++)
        if (job->ranks[i].pid > 0)
            rank_signal(&job->ranks[i], sig);
}

/* Act on the signals the handler queued, in arrival order. */
static void job_signals(job_t *job)
{
    unsigned char b[64];
    ssize_t n;
    int reap = 0;

    while ((n = read(job->sig_rd, b, sizeof(b))) > 0)
        for (ssize_t i = 0; i < n; i++) {
            if (b[i] == SIGCHLD)
                reap = 1;
            else
                job_forward(job, b[i]);
        }
    if (reap)
        job_reap(job);
}

/* Fill pfds: the self-pipe, then every open stream; returns the count. */
static int job_pollset(job_t *job)
{
    int n = 1;

    job->pfds[0] = (struct pollfd){.fd = job->sig_rd, .events = POLLIN};
    for (int i = 0; i < job->o->np; i++) {
        stream_t *ss[2] = {&job->ranks[i].out, &job->ranks[i].err};
        for (int k = 0; k < 2; k++)
            if (ss[k]->fd >= 0) {
                job->pstreams[n] = ss[k];
                job->pfds[n++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
            }
    }
    return n;
}

/* Milliseconds until the next timer: the SIGKILL, or giving up on pipes
 * that strays hold open; -1 (wait for an event) when none is set. */
static int job_timeout(const job_t *job)
{
    int ms = -1;

    if (job->ending && !job->killed)
        ms = coll_ms_until(job->kill_at_ns, INT_MAX);
    if (job->suspect && !job->ending) {
        int blame = coll_ms_until(job->blame_at_ns, INT_MAX);
        ms = ms < 0 ? blame : COLL_MIN(ms, blame);
    }
    if (job->running == 0) {
        int linger = coll_ms_until(job->linger_until_ns, INT_MAX);
        ms = ms < 0 ? linger : COLL_MIN(ms, linger);
    }
    return ms;
}

static void job_timers(job_t *job)
{
    uint64_t now = coll_time_ns();

    job_blame_due(job);
    if (job->ending && !job->killed && now >= job->kill_at_ns)
        job_kill(job);
    if (job->running == 0 && now >= job->linger_until_ns)
        for (int i = 0; i < job->o->np; i++) {
            stream_drain(&job->ranks[i].out);
            stream_drain(&job->ranks[i].err);
        }
}

/* Until every rank is reaped and its output drained. */
static void job_loop(job_t *job)
{
    for (;;) {
        int n = job_pollset(job);

        if (job->running == 0 && n == 1) {
            job->blame_at_ns = 0; /* nothing left to wait for */
            job_blame_due(job);
            break;
        }
        if (poll(job->pfds, (nfds_t)n, job_timeout(job)) < 0 && errno != EINTR) {
            fprintf(stderr, "collrun: poll: %s\n", strerror(errno));
            job_kill(job); /* cannot watch the job any more: end it hard */
            job->status = EXIT_FAILURE;
            break;
        }
        if (job->pfds[0].revents)
            job_signals(job);
        for (int i = 1; i < n; i++)
            if (job->pfds[i].revents && job->pstreams[i]->fd >= 0)
                stream_read(job->pstreams[i]);
        job_timers(job);
    }
}

/* Reap what is left after the loop was left early; blocking is fine now. */
static void job_reap_all(job_t *job)
{
    int st;

    for (int i = 0; job->ranks && i < job->o->np; i++)
        if (job->ranks[i].pid > 0) {
            while (waitpid(job->ranks[i].pid, &st, 0) < 0 && errno == EINTR)
                ;
            job->ranks[i].pid = 0;
        }
}

/* Enough file descriptors for two pipes per rank; the ranks get the
 * original limit back. */
static void job_nofile(job_t *job)
{
    struct rlimit want;
    rlim_t need = (rlim_t)job->o->np * 2 + 64;

    getrlimit(RLIMIT_NOFILE, &job->nofile);
    want = job->nofile;
    if (job->o->tag_output && want.rlim_cur != RLIM_INFINITY && want.rlim_cur < need) {
        want.rlim_cur = want.rlim_max == RLIM_INFINITY ? need : COLL_MIN(need, want.rlim_max);
        setrlimit(RLIMIT_NOFILE, &want);
    }
}

static int job_setup(job_t *job, const opts_t *o)
{
    size_t np = (size_t)o->np;

    memset(job, 0, sizeof(*job));
    job->o = o;
    job->self = getpid();
    job->sig_rd = -1;
    job->status = EXIT_FAILURE; /* until the job has run */
    job->ranks = calloc(np, sizeof(*job->ranks));
    job->pfds = calloc(1 + 2 * np, sizeof(*job->pfds));
    job->pstreams = calloc(1 + 2 * np, sizeof(*job->pstreams));
    if (!job->ranks || !job->pfds || !job->pstreams) {
        fprintf(stderr, "collrun: out of memory for %d ranks\n", o->np);
        return -1;
    }
    for (int i = 0; i < o->np; i++) {
        job->ranks[i].global = o->node_rank * o->np + i;
        job->ranks[i].out.fd = job->ranks[i].err.fd = -1;
    }
    if (job_identity(job) != 0)
        return -1;
    job_cpus(job);
    job_nofile(job);
    return signals_install(job);
}

static void job_start(job_t *job)
{
    job->status = 0;
    for (int i = 0; i < job->o->np; i++) {
        int st = rank_start(job, i);
        if (st) {
            job_end(job, st, &job->ranks[i]);
            return;
        }
    }
}

/* The one exit path: reap, summarize, free. */
static int job_finish(job_t *job)
{
    job_reap_all(job);
    for (int i = 0; job->ranks && i < job->o->np; i++) {
        stream_close(&job->ranks[i].out);
        stream_close(&job->ranks[i].err);
    }
    if (job->nended > 0)
        fprintf(stderr, "collrun: ended %d other rank%s%s\n", job->nended,
                job->nended == 1 ? "" : "s",
                job->nkilled > 0 ? " (some needed SIGKILL after the grace period)" : "");
    if (job->sig_rd >= 0)
        close(job->sig_rd);
    free(job->ranks);
    free(job->pfds);
    free(job->cpus);
    free(job->pstreams);
    return job->status;
}

/* With fd 0, 1 or 2 closed, a pipe could land there and a rank's output
 * be dup2'ed onto the wrong stream: fill the gaps with /dev/null. */
static void std_fds_open(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
            return;
}

int main(int argc, char **argv)
{
    opts_t o;
    job_t job;
    int rc;

    std_fds_open();
    rc = opts_parse(&o, argc, argv);
    if (rc != 0) {
        free(o.xvars);
        return rc < 0 ? EXIT_USAGE : EXIT_SUCCESS;
    }
    if (job_setup(&job, &o) == 0) {
        job_start(&job);
        job_loop(&job);
    }
    rc = job_finish(&job);
    free(o.xvars);
    return rc;
}
