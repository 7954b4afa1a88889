/*
 * log.c: the logging backend. Each message is formatted into one buffer
 * and written with a single write(2), so lines from several threads or
 * processes sharing stderr do not interleave.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "param.h"

int coll_log_level_cur = -1;
unsigned coll_log_subsys_cur = COLL_SUBSYS_ALL;

static int log_fd = STDERR_FILENO;
static char log_host[64] = "?";
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static const struct {
    const char *name;
    unsigned bit;
} subsys_names[] = {
    {"INIT", COLL_SUBSYS_INIT}, {"BOOT", COLL_SUBSYS_BOOT},
    {"NET", COLL_SUBSYS_NET},   {"P2P", COLL_SUBSYS_P2P},
    {"ALGO", COLL_SUBSYS_ALGO}, {"COLL", COLL_SUBSYS_COLL},
    {"ENV", COLL_SUBSYS_ENV},   {"ALL", COLL_SUBSYS_ALL},
};

static const char *subsys_name(unsigned subsys)
{
    for (size_t i = 0; i < COLL_ARRAY_LEN(subsys_names) - 1; i++)
        if (subsys & subsys_names[i].bit)
            return subsys_names[i].name;
    return "ALL";
}

unsigned coll_log_parse_subsys(const char *spec)
{
    int exclude = (spec[0] == '^');
    unsigned mask = 0;
    char buf[256];

    snprintf(buf, sizeof(buf), "%s", spec + exclude);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        for (size_t i = 0; i < COLL_ARRAY_LEN(subsys_names); i++)
            if (strcasecmp(tok, subsys_names[i].name) == 0)
                mask |= subsys_names[i].bit;
    }
    return exclude ? ~mask : mask;
}

void coll_log_expand_path(const char *pattern, int rank, char *out, size_t outlen)
{
    size_t n = 0;
    for (const char *p = pattern; *p && n + 1 < outlen; p++) {
        int w = -1;
        if (p[0] == '%' && p[1] == 'h')
            w = snprintf(out + n, outlen - n, "%s", log_host);
        else if (p[0] == '%' && p[1] == 'p')
            w = snprintf(out + n, outlen - n, "%d", (int)getpid());
        else if (p[0] == '%' && p[1] == 'r' && rank >= 0)
            w = snprintf(out + n, outlen - n, "%d", rank);
        if (w < 0) {
            out[n++] = *p;
            continue;
        }
        n += (size_t)w < outlen - n ? (size_t)w : outlen - n - 1;
        p++;
    }
    out[n < outlen ? n : outlen - 1] = '\0';
}

static int parse_level(const char *s, int *version_p)
{
    *version_p = 0;
    if (strcasecmp(s, "WARN") != 0 && strcasecmp(s, "NONE") != 0 && strcasecmp(s, "VERSION") != 0 &&
        strcasecmp(s, "INFO") != 0 && strcasecmp(s, "TRACE") != 0)
        dprintf(STDERR_FILENO, "libcoll: COLL_DEBUG='%s' is not a level (NONE, WARN, INFO, "
                "TRACE, VERSION); using WARN\n", s);
    if (strcasecmp(s, "NONE") == 0)
        return COLL_LOG_NONE;
    if (strcasecmp(s, "VERSION") == 0) {
        *version_p = 1;
        return COLL_LOG_WARN;
    }
    if (strcasecmp(s, "INFO") == 0)
        return COLL_LOG_INFO;
    if (strcasecmp(s, "TRACE") == 0)
        return COLL_LOG_TRACE;
    return COLL_LOG_WARN;
}

static void log_init_once(void)
{
    int version = 0;
    const char *level = coll_param_raw(COLL_PARAM_DEBUG);
    const char *file = coll_param_raw(COLL_PARAM_DEBUG_FILE);

    gethostname(log_host, sizeof(log_host) - 1);
    log_host[strcspn(log_host, ".")] = '\0';
    coll_log_subsys_cur = coll_log_parse_subsys(coll_param_raw(COLL_PARAM_DEBUG_SUBSYS));
    if (file[0] != '\0') {
        char path[512];
        coll_log_expand_path(file, -1, path, sizeof(path));
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0)
            log_fd = fd;
        else
            dprintf(STDERR_FILENO, "libcoll: cannot open COLL_DEBUG_FILE %s: %s\n",
                    path, strerror(errno));
    }
    __atomic_store_n(&coll_log_level_cur, parse_level(level, &version), __ATOMIC_RELEASE);
    if (version)
        dprintf(log_fd, "libcoll version %d.%d.%d\n", COLL_VERSION_MAJOR,
                COLL_VERSION_MINOR, COLL_VERSION_PATCH);
}

void coll_log_init(void)
{
    pthread_once(&log_once, log_init_once);
}

void coll_log_emit(coll_log_level_t level, unsigned subsys, const char *file,
                   int line, const char *fmt, ...)
{
    static const char *level_names[] = {"NONE", "WARN", "INFO", "TRACE"};
    char buf[1024];
    int saved_errno = errno;
    int n = snprintf(buf, sizeof(buf), "%s:%d:%ld libcoll %s %s ", log_host,
                     (int)getpid(), (long)syscall(SYS_gettid), level_names[level],
                     subsys_name(subsys));
    va_list ap;

    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    if (level == COLL_LOG_TRACE)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, " (%s:%d)", file, line);
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    ssize_t w = write(log_fd, buf, (size_t)n);
    (void)w;
    errno = saved_errno;
}
