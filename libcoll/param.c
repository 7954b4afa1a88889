/*
 * param.c: the table of COLL_* variables (from param.h) and the parsers
 * for their values. Parsers reject anything they do not fully understand:
 * a typo in COLL_TIMEOUT must not silently become some other deadline.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "log.h"
#include "param.h"

static const coll_param_info_t param_table[COLL_PARAM_COUNT] = {
#define COLL_PARAM_ROW(id, type, def, help) [COLL_PARAM_##id] = {"COLL_" #id, type, def, help},
    COLL_PARAM_TABLE(COLL_PARAM_ROW)
#undef COLL_PARAM_ROW
};

const coll_param_info_t *coll_param_info(coll_param_id_t id)
{
    return ((unsigned)id < COLL_PARAM_COUNT) ? &param_table[id] : NULL;
}

const char *coll_param_raw(coll_param_id_t id)
{
    const char *v = getenv(param_table[id].name);
    return v ? v : param_table[id].default_value;
}

int coll_param_is_set(coll_param_id_t id)
{
    return getenv(param_table[id].name) != NULL;
}

int coll_parse_int(const char *text, int64_t *value_p)
{
    char *end;
    long long v;

    if (!text || !*text || isspace((unsigned char)*text))
        return -1;
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || *end != '\0')
        return -1;
    *value_p = v;
    return 0;
}

int coll_parse_bool(const char *text, int *value_p)
{
    static const char *yes[] = {"1", "y", "yes", "on", "true"};
    static const char *no[] = {"0", "n", "no", "off", "false"};
    for (size_t i = 0; i < COLL_ARRAY_LEN(yes); i++) {
        if (strcasecmp(text, yes[i]) == 0) {
            *value_p = 1;
            return 0;
        }
        if (strcasecmp(text, no[i]) == 0) {
            *value_p = 0;
            return 0;
        }
    }
    return -1;
}

/* Length of the leading "digits[.digits]"; 0 when text does not start
 * with a digit. strtod alone would also take "5.", "1e3", "0x1p4" and
 * leading blanks, which the documented grammar does not. */
static size_t decimal_len(const char *text)
{
    size_t n = strspn(text, "0123456789");
    if (n && text[n] == '.' && isdigit((unsigned char)text[n + 1]))
        n += 1 + strspn(text + n + 1, "0123456789");
    return n;
}

/* A non-negative decimal number with an optional fraction, then a suffix;
 * the number times the suffix's scale must fit in 63 bits. */
static int parse_scaled(const char *text, const char *const *suffixes,
                        const double *scales, size_t nsuffix, uint64_t *value_p)
{
    char *end;
    double v;
    size_t n = text ? decimal_len(text) : 0;

    if (n == 0)
        return -1;
    errno = 0;
    v = strtod(text, &end);
    if (errno || v < 0 || end != text + n)
        return -1;
    for (size_t i = 0; i < nsuffix; i++) {
        if (strcasecmp(end, suffixes[i]) == 0) {
            double scaled = v * scales[i];
            if (scaled >= 9.2e18)
                return -1;
            *value_p = (uint64_t)(scaled + 0.5);
            return 0;
        }
    }
    return -1;
}

int coll_parse_duration_ns(const char *text, uint64_t *value_p)
{
    static const char *const suffixes[] = {"", "s", "ms", "us", "m", "h"};
    static const double scales[] = {1e9, 1e9, 1e6, 1e3, 60e9, 3600e9};
    return parse_scaled(text, suffixes, scales, COLL_ARRAY_LEN(suffixes), value_p);
}

int coll_parse_size(const char *text, size_t *value_p)
{
    static const char *const suffixes[] = {"", "B", "K", "KB", "KiB", "M", "MB",
                                           "MiB", "G", "GB", "GiB"};
    static const double scales[] = {1, 1, 1024.0, 1024.0, 1024.0, 1048576.0,
                                    1048576.0, 1048576.0, 1073741824.0,
                                    1073741824.0, 1073741824.0};
    uint64_t v;
    if (parse_scaled(text, suffixes, scales, COLL_ARRAY_LEN(suffixes), &v) != 0)
        return -1;
    *value_p = (size_t)v;
    return 0;
}

static coll_status_t bad_value(coll_param_id_t id, const char *what)
{
    return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG,
                      "%s='%s' is not %s (default %s)", param_table[id].name,
                      coll_param_raw(id), what, param_table[id].default_value);
}

coll_status_t coll_param_int(coll_param_id_t id, int64_t *value_p)
{
    int64_t v;
    if (coll_parse_int(coll_param_raw(id), &v) != 0)
        return bad_value(id, "an integer");
    *value_p = v;
    return COLL_OK;
}

coll_status_t coll_param_int_range(coll_param_id_t id, int lo, int hi, int rank, int *value_p)
{
    int64_t v = 0;
    coll_status_t st = coll_param_int(id, &v);

    if (st != COLL_OK)
        return st;
    if (v < lo || v > hi)
        return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG,
                          "rank %d: %s=%lld is out of range (%d..%d)", rank,
                          param_table[id].name, (long long)v, lo, hi);
    *value_p = (int)v;
    return COLL_OK;
}

/* A size as the variables take it: 4K, 64M, 1G where exact, else bytes. */
static void format_size(size_t n, char *out, size_t cap)
{
    static const char suffix[] = "KMG";
    int k = -1;

    while (k < 2 && n >= 1024 && n % 1024 == 0) {
        n /= 1024;
        k++;
    }
    if (k < 0)
        snprintf(out, cap, "%zu", n);
    else
        snprintf(out, cap, "%zu%c", n, suffix[k]);
}

coll_status_t coll_param_size_range(coll_param_id_t id, size_t lo, size_t hi, int rank,
                                    size_t *value_p)
{
    char los[24], his[24];
    size_t v = 0;
    coll_status_t st = coll_param_size(id, &v);

    if (st != COLL_OK)
        return st;
    if (v < lo || v > hi) {
        format_size(lo, los, sizeof(los));
        format_size(hi, his, sizeof(his));
        return coll_error(COLL_SUBSYS_ENV, COLL_ERR_INVALID_ARG,
                          "rank %d: %s=%s (%zu bytes) is out of range (%s..%s)", rank,
                          param_table[id].name, coll_param_raw(id), v, los, his);
    }
    *value_p = v;
    return COLL_OK;
}

coll_status_t coll_param_bool(coll_param_id_t id, int *value_p)
{
    int v;
    if (coll_parse_bool(coll_param_raw(id), &v) != 0)
        return bad_value(id, "a boolean (1/0, yes/no, on/off, true/false)");
    *value_p = v;
    return COLL_OK;
}

coll_status_t coll_param_duration_ns(coll_param_id_t id, uint64_t *value_p)
{
    uint64_t v;
    if (coll_parse_duration_ns(coll_param_raw(id), &v) != 0)
        return bad_value(id, "a duration (e.g. 300, 300s, 1500ms, 5m)");
    *value_p = v;
    return COLL_OK;
}

coll_status_t coll_param_size(coll_param_id_t id, size_t *value_p)
{
    size_t v;
    if (coll_parse_size(coll_param_raw(id), &v) != 0)
        return bad_value(id, "a size (e.g. 65536, 64K, 4M)");
    *value_p = v;
    return COLL_OK;
}

coll_status_t coll_param_size_or_auto(coll_param_id_t id, int *is_auto_p, size_t *value_p)
{
    const char *text = coll_param_raw(id);
    size_t v = 0;

    if (strcasecmp(text, "auto") == 0) {
        *is_auto_p = 1;
        return COLL_OK;
    }
    if (coll_parse_size(text, &v) != 0)
        return bad_value(id, "auto or a size (e.g. 0, 64K, 4M)");
    *is_auto_p = 0;
    *value_p = v;
    return COLL_OK;
}
