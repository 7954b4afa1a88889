/*
 * fuzz_params.c: the parsers of COLL_* values (param.c): integers,
 * booleans, durations and sizes. Selector byte, then the value text.
 *
 * Invariants: a refused value leaves the output untouched; an accepted
 * value is what its documented grammar says (param.h): an integer prints
 * back to the same number, a boolean is one of the listed words, a
 * duration or size is a plain decimal number (with an optional fraction)
 * and a known suffix, fits in 63 bits, and a suffix-free whole number
 * means exactly that many seconds / bytes.
 */
#include <ctype.h>
#include <inttypes.h>
#include <strings.h>

#include "fuzz.h"
#include "param.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

/* Length of the leading decimal number: digits, then optionally '.' and
 * digits; 0 when it does not start with one. */
static size_t decimal_span(const char *t)
{
    size_t n = strspn(t, "0123456789");
    if (n && t[n] == '.' && isdigit((unsigned char)t[n + 1]))
        n += 1 + strspn(t + n + 1, "0123456789");
    return n;
}

static int in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(s, list[i]) == 0)
            return 1;
    return 0;
}

static void fuzz_int(const char *text)
{
    int64_t v = 0x5a5a5a5a, again;
    char back[32];

    if (coll_parse_int(text, &v) != 0) {
        FUZZ_CHECK(v == 0x5a5a5a5a, "written on error");
        return;
    }
    size_t skip = text[0] == '+' || text[0] == '-';
    FUZZ_CHECK(text[skip] && strspn(text + skip, "0123456789") == strlen(text + skip),
               "accepted '%s', which is not a decimal integer", text);
    snprintf(back, sizeof(back), "%" PRId64, v);
    FUZZ_CHECK(coll_parse_int(back, &again) == 0 && again == v, "'%s' does not round trip",
               back);
}

static void fuzz_bool(const char *text)
{
    static const char *const words[] = {"1", "y", "yes", "on", "true",
                                        "0", "n", "no", "off", "false"};
    int v = 7;

    if (coll_parse_bool(text, &v) != 0) {
        FUZZ_CHECK(v == 7 && !in_list(text, words, COLL_ARRAY_LEN(words)),
                   "refused '%s' or wrote on error", text);
        return;
    }
    FUZZ_CHECK(in_list(text, words, COLL_ARRAY_LEN(words)) && (v == 0 || v == 1),
               "accepted '%s' as %d", text, v);
    FUZZ_CHECK(v == in_list(text, words, 5), "'%s' read as %d", text, v);
}

static void fuzz_duration(const char *text)
{
    static const char *const suffixes[] = {"", "s", "ms", "us", "m", "h"};
    uint64_t v = 77, again;
    char back[32];

    if (coll_parse_duration_ns(text, &v) != 0) {
        FUZZ_CHECK(v == 77, "written on error");
        return;
    }
    size_t n = decimal_span(text);
    FUZZ_CHECK(n && in_list(text + n, suffixes, COLL_ARRAY_LEN(suffixes)),
               "accepted duration '%s' outside the grammar", text);
    FUZZ_CHECK(v < 9200000000000000000ull, "duration %" PRIu64 " ns overflows", v);
    if (v % 1000000000ull == 0) {
        snprintf(back, sizeof(back), "%" PRIu64 "s", (uint64_t)(v / 1000000000ull));
        FUZZ_CHECK(coll_parse_duration_ns(back, &again) == 0 && again == v,
                   "'%s' does not round trip", back);
    }
}

static void fuzz_size(const char *text)
{
    static const char *const suffixes[] = {"", "B", "K", "KB", "KiB", "M", "MB",
                                           "MiB", "G", "GB", "GiB"};
    size_t v = 77, again;
    char back[32];

    if (coll_parse_size(text, &v) != 0) {
        FUZZ_CHECK(v == 77, "written on error");
        return;
    }
    size_t n = decimal_span(text);
    FUZZ_CHECK(n && in_list(text + n, suffixes, COLL_ARRAY_LEN(suffixes)),
               "accepted size '%s' outside the grammar", text);
    FUZZ_CHECK(v < 9200000000000000000ull, "size %zu overflows", v);
    if (v < (1ull << 53)) {
        snprintf(back, sizeof(back), "%zu", v);
        FUZZ_CHECK(coll_parse_size(back, &again) == 0 && again == v,
                   "'%s' does not round trip", back);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *text = fuzz_cstr(data + 1, size - 1);
    switch (data[0] % 4) {
    case 0: fuzz_int(text); break;
    case 1: fuzz_bool(text); break;
    case 2: fuzz_duration(text); break;
    default: fuzz_size(text); break;
    }
    free(text);
    return 0;
}
