/*
 * error.c: the calling thread's last error message, for failures that
 * happen before (or without) a communicator.
 */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "log.h"

static __thread char thread_errmsg[COLL_ERRMSG_LEN];

coll_status_t coll_verror(unsigned subsys, coll_status_t status, const char *fmt,
                          va_list ap)
{
    vsnprintf(thread_errmsg, sizeof(thread_errmsg), fmt, ap);
    COLL_WARN(subsys, "%s (%s)", thread_errmsg, coll_status_str(status));
    return status;
}

coll_status_t coll_error(unsigned subsys, coll_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    coll_verror(subsys, status, fmt, ap);
    va_end(ap);
    return status;
}

void coll_error_set_thread(const char *msg)
{
    snprintf(thread_errmsg, sizeof(thread_errmsg), "%s", msg);
}

const char *coll_error_thread(void)
{
    return thread_errmsg;
}
