/*
 * error.h: raising errors. The function that first detects a failure calls
 * coll_error(); it formats the message once, stores it as the calling
 * thread's last error, logs it at WARN and returns the status so that the
 * caller can `return coll_error(...)`. Callers up the stack only propagate
 * the status (COLL_CHECK). Communicator errors go through coll_comm_fail()
 * (comm.h), which also records the message on the communicator.
 */
#ifndef COLL_ERROR_H
#define COLL_ERROR_H

#include <stdarg.h>

#include "util.h"

#define COLL_ERRMSG_LEN 512

coll_status_t coll_error(unsigned subsys, coll_status_t status,
                                     const char *fmt, ...) COLL_PRINTF(3, 4);
coll_status_t coll_verror(unsigned subsys, coll_status_t status,
                                      const char *fmt, va_list ap) COLL_PRINTF(3, 0);
/* Store a message as the thread's last error without logging it (used
 * when the message was already logged where it started). */
void coll_error_set_thread(const char *msg);
const char *coll_error_thread(void);

#endif /* COLL_ERROR_H */
