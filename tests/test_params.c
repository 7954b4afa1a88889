/*
 * test_params.c: the COLL_* variables and logging. Parsers accept exactly
 * the documented forms; every variable is listed in docs/env.md and every
 * status code of coll.h has its section in docs/errors.md; the log
 * honours its level, subsystem filter and file; SHA-256 and HMAC match
 * published vectors (the bootstrap's security rests on them).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "algorithms.h"
#include "harness.h"
#include "log.h"
#include "net.h"
#include "param.h"
#include "sha256.h"

START_TEST(test_parse_duration)
{
    static const struct {
        const char *text;
        uint64_t ns;
    } ok[] = {
        {"300", 300000000000ull}, {"300s", 300000000000ull}, {"1500ms", 1500000000ull},
        {"20us", 20000ull},       {"5m", 300000000000ull},   {"1h", 3600000000000ull},
        {"0.5s", 500000000ull},   {"0", 0},
    };
    /* "5.", "1e3" and hex floats are strtod's, not the documented grammar
     * (found by fuzz_params). */
    static const char *bad[] = {"", "abc", "-5s", "10 s", "5x", "s", "1e400", " 5",
                                "5.", "5.s", "1e3", "0x10", "0x1p3s", ".5"};
    uint64_t v;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        ck_assert_msg(coll_parse_duration_ns(ok[i].text, &v) == 0, "rejected '%s'", ok[i].text);
        ck_assert_msg(v == ok[i].ns, "'%s' -> %llu", ok[i].text, (unsigned long long)v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(coll_parse_duration_ns(bad[i], &v) != 0, "accepted '%s'", bad[i]);
}
END_TEST

START_TEST(test_parse_size_int_bool)
{
    size_t sz;
    int64_t i;
    int b;
    ck_assert(coll_parse_size("64K", &sz) == 0 && sz == 65536);
    ck_assert(coll_parse_size("4MiB", &sz) == 0 && sz == 4u << 20);
    ck_assert(coll_parse_size("1G", &sz) == 0 && sz == 1u << 30);
    ck_assert(coll_parse_size("100", &sz) == 0 && sz == 100);
    ck_assert(coll_parse_size("12Q", &sz) != 0);
    ck_assert(coll_parse_size("-1", &sz) != 0);
    ck_assert(coll_parse_int("-42", &i) == 0 && i == -42);
    ck_assert(coll_parse_int("42x", &i) != 0);
    ck_assert(coll_parse_int("", &i) != 0);
    ck_assert(coll_parse_int("99999999999999999999", &i) != 0);
    ck_assert(coll_parse_bool("yes", &b) == 0 && b == 1);
    ck_assert(coll_parse_bool("OFF", &b) == 0 && b == 0);
    ck_assert(coll_parse_bool("maybe", &b) != 0);
}
END_TEST

/* A malformed value is an error that names the variable and its default. */
START_TEST(test_param_errors)
{
    uint64_t ns;
    setenv("COLL_TIMEOUT", "soon", 1);
    ck_assert_int_eq(coll_param_duration_ns(COLL_PARAM_TIMEOUT, &ns), COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "COLL_TIMEOUT='soon'"));
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "default 300s"));
    unsetenv("COLL_TIMEOUT");
    ck_assert_int_eq(coll_param_duration_ns(COLL_PARAM_TIMEOUT, &ns), COLL_OK);
    ck_assert(ns == 300000000000ull);

    /* auto or a size: auto leaves the value to the caller */
    size_t v = 7;
    int is_auto = -1;
    ck_assert_int_eq(coll_param_size_or_auto(COLL_PARAM_STREAM_MIN, &is_auto, &v), COLL_OK);
    ck_assert(is_auto == 1 && v == 7);
    setenv("COLL_STREAM_MIN", "4M", 1);
    ck_assert_int_eq(coll_param_size_or_auto(COLL_PARAM_STREAM_MIN, &is_auto, &v), COLL_OK);
    ck_assert(is_auto == 0 && v == 4u << 20);
    setenv("COLL_STREAM_MIN", "half", 1);
    ck_assert_int_eq(coll_param_size_or_auto(COLL_PARAM_STREAM_MIN, &is_auto, &v),
                     COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "COLL_STREAM_MIN='half'"));
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "default auto"));
    unsetenv("COLL_STREAM_MIN");
}
END_TEST

/* A size out of its range names the variable, its value, the range (with
 * suffixes where exact) and the rank; one inside is taken as it is. */
START_TEST(test_param_size_range)
{
    size_t v = 7;
    setenv("COLL_TCP_CHUNK", "1K", 1);
    ck_assert_int_eq(coll_param_size_range(COLL_PARAM_TCP_CHUNK, 4096, 64u << 20, 3, &v),
                     COLL_ERR_INVALID_ARG);
    ck_assert_msg(strstr(coll_get_last_error(NULL),
                         "rank 3: COLL_TCP_CHUNK=1K (1024 bytes) is out of range (4K..64M)"),
                  "got: %s", coll_get_last_error(NULL));
    ck_assert(v == 7); /* untouched on error */
    setenv("COLL_TCP_CHUNK", "100000", 1);
    ck_assert_int_eq(coll_param_size_range(COLL_PARAM_TCP_CHUNK, 4096, 65000, 0, &v),
                     COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "out of range (4K..65000)"));
    ck_assert_int_eq(coll_param_size_range(COLL_PARAM_TCP_CHUNK, 4096, 1u << 30, 0, &v), COLL_OK);
    ck_assert(v == 100000);
    unsetenv("COLL_TCP_CHUNK");
}
END_TEST

/* The text of a file of the source tree, NUL-terminated (static buffer). */
static const char *read_doc(const char *path)
{
    static char doc[1 << 18];
    FILE *f = fopen(path, "r");
    size_t n;
    ck_assert_msg(f != NULL, "%s is missing (run the tests from the repository root)", path);
    n = fread(doc, 1, sizeof(doc) - 1, f);
    fclose(f);
    ck_assert_msg(n < sizeof(doc) - 1, "%s is larger than this test reads", path);
    doc[n] = '\0';
    return doc;
}

/* Every variable of the table appears in docs/env.md with its default. */
START_TEST(test_env_doc_complete)
{
    const char *doc = read_doc("docs/env.md");
    for (int i = 0; i < COLL_PARAM_COUNT; i++) {
        const coll_param_info_t *p = coll_param_info((coll_param_id_t)i);
        char row[128];
        snprintf(row, sizeof(row), "`%s` |", p->name);
        ck_assert_msg(strstr(doc, row), "docs/env.md does not list %s (run make docs-env)", p->name);
        snprintf(row, sizeof(row), "`%s`", p->default_value[0] ? p->default_value : "(empty)");
        ck_assert_msg(strstr(strstr(doc, p->name), row), "docs/env.md has the wrong default for "
                      "%s (expected %s)", p->name, row);
    }
}
END_TEST

/* Every status code declared in coll.h (read from the header itself, so a
 * new code cannot be forgotten) has in docs/errors.md a section "## NAME"
 * that gives its value ("**-N."), a link in the contents, and a name from
 * coll_status_str. */
START_TEST(test_errors_doc_complete)
{
    char hdr[1 << 16];
    const char *p;
    int codes = 0;

    snprintf(hdr, sizeof(hdr), "%s", read_doc("libcoll/coll.h"));
    const char *doc = read_doc("docs/errors.md");
    ck_assert_ptr_nonnull(p = strstr(hdr, "typedef enum coll_status"));
    for (const char *end = strstr(p, "} coll_status_t;"); (p = strstr(p, "    COLL_")) && p < end;
         p++) {
        char name[64], want[96], anchor[96];
        int value;
        if (sscanf(p, " %63[A-Z_] = %d", name, &value) != 2)
            continue;
        codes++;
        ck_assert_msg(strncmp(coll_status_str((coll_status_t)value), name, strlen(name)) == 0,
                      "coll_status_str(%d) is '%s', not %s", value,
                      coll_status_str((coll_status_t)value), name);
        if (value >= 0) { /* COLL_OK and COLL_INPROGRESS share a section */
            snprintf(want, sizeof(want), "`%s` (%d)", name, value);
            ck_assert_msg(strstr(doc, want), "docs/errors.md does not explain %s (%s)", name,
                          want);
            continue;
        }
        snprintf(want, sizeof(want), "\n## %s\n", name);
        const char *sec = strstr(doc, want);
        ck_assert_msg(sec, "docs/errors.md has no section '## %s'", name);
        snprintf(want, sizeof(want), "**%d.", value);
        const char *num = strstr(sec + 1, want), *next = strstr(sec + 1, "\n## ");
        ck_assert_msg(num && (!next || num < next), "docs/errors.md: section %s does not "
                      "start with its value %s", name, want);
        ck_assert_msg(strstr(sec, "What to do") && (!next || strstr(sec, "What to do") < next),
                      "docs/errors.md: section %s does not say what to do", name);
        size_t k = 0;
        anchor[k++] = '(';
        anchor[k++] = '#';
        for (size_t i = 0; name[i]; i++)
            anchor[k++] = (char)tolower((unsigned char)name[i]);
        anchor[k++] = ')';
        anchor[k] = '\0';
        ck_assert_msg(strstr(doc, anchor), "docs/errors.md: no link %s in the contents", anchor);
    }
    ck_assert_msg(codes >= 18, "read only %d status codes from coll.h", codes);
}
END_TEST

/* ---- logging ------------------------------------------------------------- */

/* Logging is configured once per process: each case runs in a child. */
static int log_child(const char *level, const char *subsys, const char *file)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("COLL_DEBUG", level, 1);
        setenv("COLL_DEBUG_SUBSYS", subsys, 1);
        setenv("COLL_DEBUG_FILE", file, 1);
        COLL_WARN(COLL_SUBSYS_NET, "net warning %d", 1);
        COLL_INFO(COLL_SUBSYS_NET, "net info %d", 2);
        COLL_INFO(COLL_SUBSYS_BOOT, "boot info %d", 3);
        COLL_TRACE(COLL_SUBSYS_BOOT, "boot trace %d", 4);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

START_TEST(test_log_filters)
{
    char dir[] = "/tmp/libcoll_log_XXXXXX", path[256], pattern[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(pattern, sizeof(pattern), "%s/log.%%p", dir);

    /* INFO, all subsystems: warning and both infos, no trace */
    ck_assert(log_child("INFO", "ALL", pattern));
    FILE *ls = NULL;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "ls %s/log.*", dir);
    ls = popen(cmd, "r");
    ck_assert_ptr_nonnull(fgets(path, sizeof(path), ls)); /* %p became the pid */
    pclose(ls);
    path[strcspn(path, "\n")] = '\0';
    ck_assert_int_eq(harness_count_lines(path, "net warning 1"), 1);
    ck_assert_int_eq(harness_count_lines(path, "net info 2"), 1);
    ck_assert_int_eq(harness_count_lines(path, "boot info 3"), 1);
    ck_assert_int_eq(harness_count_lines(path, "boot trace 4"), 0);
    ck_assert_int_eq(harness_count_lines(path, "libcoll INFO BOOT"), 1);
    unlink(path);

    /* only BOOT, at TRACE: the trace line carries its source location */
    snprintf(path, sizeof(path), "%s/boot.log", dir);
    ck_assert(log_child("TRACE", "BOOT", path));
    ck_assert_int_eq(harness_count_lines(path, "net "), 0);
    ck_assert_int_eq(harness_count_lines(path, "boot trace 4 (tests/test_params.c:"), 1);
    unlink(path);

    /* ^NET excludes NET; NONE silences everything */
    snprintf(path, sizeof(path), "%s/nonet.log", dir);
    ck_assert(log_child("INFO", "^NET", path));
    ck_assert_int_eq(harness_count_lines(path, "net "), 0);
    ck_assert_int_eq(harness_count_lines(path, "boot info 3"), 1);
    unlink(path);
    snprintf(path, sizeof(path), "%s/none.log", dir);
    ck_assert(log_child("NONE", "ALL", path));
    ck_assert_int_eq(harness_count_lines(path, "net warning"), 0);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ---- SHA-256 / HMAC ----------------------------------------------------------- */

static void hex(const uint8_t *d, char *out)
{
    for (int i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

START_TEST(test_sha256_vectors)
{
    uint8_t d[32], key[20];
    char h[65];
    static char million[1000000];

    coll_sha256("abc", 3, d);
    hex(d, h);
    ck_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    coll_sha256("", 0, d);
    hex(d, h);
    ck_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    memset(million, 'a', sizeof(million));
    coll_sha256(million, sizeof(million), d);
    hex(d, h);
    ck_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* RFC 4231 test case 1 */
    memset(key, 0x0b, sizeof(key));
    const void *parts[] = {"Hi ", "There"};
    size_t lens[] = {3, 5};
    coll_hmac_sha256(key, sizeof(key), parts, lens, 2, d);
    hex(d, h);
    ck_assert_str_eq(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    /* RFC 4231 test case 2: key "Jefe" */
    const void *p2[] = {"what do ya want for nothing?"};
    size_t l2[] = {28};
    coll_hmac_sha256("Jefe", 4, p2, l2, 1, d);
    hex(d, h);
    ck_assert_str_eq(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}
END_TEST

/* Found by fuzz_env: long specs were cut to a fixed buffer, so that their
 * tail was ignored (an interface never matched, a bad COLL_ALGO item was
 * accepted), and a refused COLL_ALGO had already overwritten the table. */
START_TEST(test_long_specs)
{
    char spec[1024];
    const coll_algo_t *forced[COLL_NUM_COLLS];

    memset(spec, 'a', 300);
    snprintf(spec + 300, sizeof(spec) - 300, ",eth0");
    ck_assert_int_eq(coll_ifname_match(spec, "eth0"), 1);
    ck_assert_int_eq(coll_ifname_match("=eth,ib", "eth0"), 0);
    ck_assert_int_eq(coll_ifname_match("=eth,,ib0", "ib0"), 1);
    ck_assert_int_eq(coll_ifname_match("^lo,docker", "lo"), 0);

    spec[0] = '\0';
    for (int i = 0; i < 40; i++)
        strcat(spec, "allreduce:ring,");
    strcat(spec, "bcast:nosuch");
    for (int c = 0; c < COLL_NUM_COLLS; c++)
        forced[c] = NULL;
    ck_assert_int_eq(coll_algo_parse_forced(spec, forced), COLL_ERR_INVALID_ARG);
    ck_assert_ptr_null(forced[COLL_ALLREDUCE]);
    ck_assert_int_eq(coll_algo_parse_forced("allreduce:ring,bcast:nosuch", forced),
                     COLL_ERR_INVALID_ARG);
    ck_assert_ptr_null(forced[COLL_ALLREDUCE]);
}
END_TEST

static Suite *params_suite(void)
{
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("params");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_parse_duration);
    tcase_add_test(tc, test_parse_size_int_bool);
    tcase_add_test(tc, test_param_errors);
    tcase_add_test(tc, test_param_size_range);
    tcase_add_test(tc, test_env_doc_complete);
    tcase_add_test(tc, test_errors_doc_complete);
    tcase_add_test(tc, test_log_filters);
    tcase_add_test(tc, test_sha256_vectors);
    tcase_add_test(tc, test_long_specs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(params_suite());
}
