/*
 * fuzz_env.c: the parsers of structured environment variables:
 *   mode 0  COLL_ALGO          coll_algo_parse_forced ("allreduce:ring,bcast:chain")
 *   mode 1  COLL_ALGO_FALLBACK coll_algo_parse_fallback
 *   mode 2  Slurm node lists   coll_slurm_first_host ("node[01-04],gpu3"); the
 *                              next byte picks the output buffer's size
 *   mode 3  COLL_SOCKET_IFNAME coll_ifname_match (spec NUL interface name)
 *   mode 4  Slurm tasks per node coll_slurm_uniform_tasks ("2(x3),1")
 *
 * Invariants: refusals leave outputs untouched and have a message; an
 * accepted COLL_ALGO forces only algorithms of the collective they are
 * named for and reads back the same from its canonical form; the first
 * Slurm host is exactly what a simple model of the grammar gives, or a
 * refusal when it does not fit (never a cut name); interface matching
 * agrees with a model of the NCCL_SOCKET_IFNAME rules; the tasks per node
 * agree with a model that compares the counts as text.
 */
#include <strings.h>

#include "algorithms.h"
#include "env.h"
#include "fuzz.h"
#include "net.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static void fuzz_algo(const char *spec)
{
    static const coll_algo_t dummy;
    const coll_algo_t *forced[COLL_NUM_COLLS], *again[COLL_NUM_COLLS];
    char canon[1024];
    size_t used = 0;

    for (int c = 0; c < COLL_NUM_COLLS; c++)
        forced[c] = &dummy;
    fuzz_clear_errmsg();
    if (coll_algo_parse_forced(spec, forced) != COLL_OK) {
        fuzz_check_errmsg("coll_algo_parse_forced");
        for (int c = 0; c < COLL_NUM_COLLS; c++)
            FUZZ_CHECK(forced[c] == &dummy, "forced[%d] written on error", c);
        return;
    }
    canon[0] = '\0';
    for (int c = 0; c < COLL_NUM_COLLS; c++) {
        if (!forced[c])
            continue;
        FUZZ_CHECK(forced[c]->coll == (coll_coll_t)c, "%s forced for %s", forced[c]->name,
                   coll_coll_name((coll_coll_t)c));
        used += (size_t)snprintf(canon + used, sizeof(canon) - used, "%s%s:%s",
                                 used ? "," : "", coll_coll_name((coll_coll_t)c),
                                 forced[c]->name);
    }
    /* Every item of an accepted spec was understood, to its end: it
     * names an existing algorithm (a later item may override it). */
    const char *item = spec;
    for (size_t n; *item; item += n + (item[n] == ',')) {
        char algo[128];
        n = strcspn(item, ",");
        const char *colon = memchr(item, ':', n);
        if (!n)
            continue;
        FUZZ_CHECK(colon != NULL, "accepted item '%.*s' without a colon", (int)n, item);
        snprintf(algo, sizeof(algo), "%.*s", (int)(n - (size_t)(colon + 1 - item)), colon + 1);
        FUZZ_CHECK(coll_algo_find(COLL_NUM_COLLS, algo) != NULL,
                   "accepted item '%.*s' names no algorithm", (int)n, item);
    }
    FUZZ_CHECK(coll_algo_parse_forced(canon, again) == COLL_OK &&
               memcmp(again, forced, sizeof(again)) == 0, "'%s' reads back differently",
               canon);
}

static void fuzz_fallback(const char *spec)
{
    static const char *const names[] = {"error", "warn", "silent"};
    int mode = 99;

    fuzz_clear_errmsg();
    if (coll_algo_parse_fallback(spec, &mode) != COLL_OK) {
        fuzz_check_errmsg("coll_algo_parse_fallback");
        FUZZ_CHECK(mode == 99, "written on error");
        return;
    }
    FUZZ_CHECK(mode >= 0 && mode < 3 && strcasecmp(spec, names[mode]) == 0,
               "'%s' read as mode %d", spec, mode);
}

/* The model: up to the first ',' outside brackets; each "[digits...]"
 * group becomes its first number (zero padding kept). */
static int slurm_model(const char *list, char *out, size_t outlen)
{
    size_t n = 0;

    for (const char *p = list; *p && *p != ','; p++) {
        if (*p == ']')
            return -1;
        if (*p != '[') {
            if (n + 1 >= outlen)
                return -1;
            out[n++] = *p;
            continue;
        }
        size_t digits = strspn(p + 1, "0123456789");
        const char *close = strchr(p + 1, ']');
        if (!digits || !close)
            return -1;
        if (n + digits >= outlen)
            return -1;
        memcpy(out + n, p + 1, digits);
        n += digits;
        p = close;
    }
    out[n] = '\0';
    return n > 0 ? 0 : -1;
}

static void fuzz_slurm(const char *list, size_t outlen)
{
    char want[4096 + 1], *out = malloc(outlen);
    int rc_want = slurm_model(list, want, outlen);

    memset(out, 'Z', outlen);
    int rc = coll_slurm_first_host(list, out, outlen);
    FUZZ_CHECK(rc == rc_want, "'%s' (%zu bytes): %d, model says %d", list, outlen, rc,
               rc_want);
    if (rc == 0)
        FUZZ_CHECK(strcmp(out, want) == 0, "'%s': got '%s', want '%s'", list, out, want);
    free(out);
}

/* NCCL_SOCKET_IFNAME: optional '^' (exclude), optional '=' (exact), then
 * comma-separated names (exact) or prefixes; empty entries are ignored. */
static int ifname_model(const char *spec, const char *name)
{
    int exclude = 0, exact = 0, hit = 0;

    if (*spec == '^')
        exclude = 1, spec++;
    if (*spec == '=')
        exact = 1, spec++;
    for (const char *tok = spec; *tok; tok++) {
        size_t n = strcspn(tok, ",");
        if (n && (exact ? strlen(name) == n && strncmp(name, tok, n) == 0
                        : strncmp(name, tok, n) == 0))
            hit = 1;
        tok += n;
        if (!*tok)
            break;
    }
    return exclude ? !hit : hit;
}

static void fuzz_ifname(const uint8_t *data, size_t size)
{
    char *spec = fuzz_cstr(data, size);
    size_t slen = strlen(spec);
    const char *name = slen < size ? spec + slen + 1 : "eth0";

    int got = coll_ifname_match(spec, name), want = ifname_model(spec, name);
    FUZZ_CHECK(got == want, "spec '%s', name '%s': %d, model says %d", spec, name, got, want);
    free(spec);
}

/* A count as text, digits only: without its leading zeros, or NULL when
 * it is 0 or above INT32_MAX. */
static const char *count_text(const char *d, size_t n, size_t *len_p)
{
    while (n > 0 && *d == '0')
        d++, n--;
    if (n == 0 || n > 10 || (n == 10 && strncmp(d, "2147483647", 10) > 0))
        return NULL;
    *len_p = n;
    return d;
}

/* The model: pieces between commas, each digits with an optional
 * "(x" digits ")" whose repeat is not 0; counts compared as text. */
static int tasks_model(const char *spec)
{
    const char *first = NULL, *p = spec;
    size_t first_len = 0;
    int same = 1;

    for (;;) {
        size_t digits = strspn(p, "0123456789"), len;
        const char *count = count_text(p, digits, &len);
        if (!digits || !count)
            return -1;
        p += digits;
        if (*p == '(') {
            size_t rd = p[1] == 'x' ? strspn(p + 2, "0123456789") : 0;
            if (!rd || strspn(p + 2, "0") == rd || p[2 + rd] != ')')
                return -1;
            p += 3 + rd;
        }
        if (first && (len != first_len || strncmp(count, first, len) != 0))
            same = 0;
        if (!first)
            first = count, first_len = len;
        if (*p == '\0')
            break;
        if (*p++ != ',')
            return -1;
    }
    return same ? (int)strtol(first, NULL, 10) : 0;
}

static void fuzz_tasks(const char *spec)
{
    int got = coll_slurm_uniform_tasks(spec), want = tasks_model(spec);
    FUZZ_CHECK(got == want, "'%s': %d, model says %d", spec, got, want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint8_t mode = fuzz_byte(&in);
    char *text;

    if (mode % 5 == 3) {
        fuzz_ifname(in.p, in.len);
        return 0;
    }
    if (mode % 5 == 4) {
        text = fuzz_cstr(in.p, in.len);
        fuzz_tasks(text);
    } else if (mode % 5 == 2) {
        size_t outlen = 1 + fuzz_byte(&in);
        text = fuzz_cstr(in.p, in.len);
        fuzz_slurm(text, outlen);
    } else {
        text = fuzz_cstr(in.p, in.len);
        if (mode % 5 == 0)
            fuzz_algo(text);
        else
            fuzz_fallback(text);
    }
    free(text);
    return 0;
}
