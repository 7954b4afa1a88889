/*
 * log.h: leveled, subsystem-filtered logging to stderr or COLL_DEBUG_FILE.
 *
 * The level and subsystem are checked before any argument is formatted, so
 * a disabled COLL_TRACE costs one load and one branch. Messages are
 * lowercase, name ranks and peers, and are emitted once where an error
 * starts (see coll_error_set in error.h).
 */
#ifndef COLL_LOG_H
#define COLL_LOG_H

#include "util.h"

typedef enum coll_log_level {
    COLL_LOG_NONE = 0,
    COLL_LOG_WARN = 1,
    COLL_LOG_INFO = 2,
    COLL_LOG_TRACE = 3,
} coll_log_level_t;

/* Subsystems, as a bit mask (COLL_DEBUG_SUBSYS=INIT,NET,...). */
enum {
    COLL_SUBSYS_INIT = 1u << 0,  /* communicator creation and teardown */
    COLL_SUBSYS_BOOT = 1u << 1,  /* bootstrap root and handshakes */
    COLL_SUBSYS_NET = 1u << 2,   /* transports and sockets */
    COLL_SUBSYS_P2P = 1u << 3,   /* point-to-point requests */
    COLL_SUBSYS_ALGO = 1u << 4,  /* algorithm choice and cost tables */
    COLL_SUBSYS_COLL = 1u << 5,  /* collective calls */
    COLL_SUBSYS_ENV = 1u << 6,   /* environment and parameters */
    COLL_SUBSYS_ALL = 0xffffffffu,
};

extern int coll_log_level_cur;       /* -1 until the first check */
extern unsigned coll_log_subsys_cur;

void coll_log_init(void);
/* A path pattern with %h (host), %p (pid) and, when rank >= 0, %r (rank)
 * expanded; other characters are kept. */
void coll_log_expand_path(const char *pattern, int rank, char *out, size_t outlen);
void coll_log_emit(coll_log_level_t level, unsigned subsys,
                               const char *file, int line, const char *fmt, ...)
    COLL_PRINTF(5, 6);
/* Parse a subsystem list such as "INIT,NET" or "^P2P" into a mask. */
unsigned coll_log_parse_subsys(const char *spec);

static inline int coll_log_enabled(coll_log_level_t level, unsigned subsys)
{
    if (COLL_UNLIKELY(coll_log_level_cur < 0))
        coll_log_init();
    return (int)level <= coll_log_level_cur && (subsys & coll_log_subsys_cur);
}

#define COLL_LOG(level, subsys, ...)                                        \
    do {                                                                    \
        if (coll_log_enabled((level), (subsys)))                            \
            coll_log_emit((level), (subsys), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define COLL_WARN(subsys, ...)  COLL_LOG(COLL_LOG_WARN, subsys, __VA_ARGS__)
#define COLL_INFO(subsys, ...)  COLL_LOG(COLL_LOG_INFO, subsys, __VA_ARGS__)
#define COLL_TRACE(subsys, ...) COLL_LOG(COLL_LOG_TRACE, subsys, __VA_ARGS__)

#endif /* COLL_LOG_H */
