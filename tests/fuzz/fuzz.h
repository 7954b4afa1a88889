/*
 * fuzz.h: what every libFuzzer target here shares. A target checks
 * invariants, not only the absence of crashes: a broken invariant aborts
 * with a message, which libFuzzer reports as a crash with its input.
 */
#ifndef COLL_FUZZ_H
#define COLL_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

#define FUZZ_CHECK(cond, ...)                                                          \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "invariant broken at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            abort();                                                                   \
        }                                                                              \
    } while (0)

/* Errors are raised through coll_error, which logs at WARN: silence the
 * log so that libFuzzer's own output stays readable and fast. */
static inline void fuzz_quiet(void)
{
    setenv("COLL_DEBUG", "NONE", 1);
}

/* The input as a NUL-terminated string (free it); embedded NULs cut it,
 * as they would cut an environment variable. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

static inline void fuzz_clear_errmsg(void)
{
    coll_error_set_thread("");
}

/* A raised error leaves a non-empty message for coll_get_last_error. */
static inline void fuzz_check_errmsg(const char *what)
{
    const char *msg = coll_error_thread();
    FUZZ_CHECK(msg && msg[0], "%s failed without a message", what);
}

/* A byte sequence the target consumes from the front. */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t len;
} fuzz_in_t;

static inline uint8_t fuzz_byte(fuzz_in_t *in)
{
    if (!in->len)
        return 0;
    in->len--;
    return *in->p++;
}

#endif /* COLL_FUZZ_H */
