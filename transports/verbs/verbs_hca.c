/*
 * verbs_hca.c: COLL_IB_HCA and COLL_IB_GID_INDEX, parsed as NCCL users
 * write NCCL_IB_HCA and NCCL_IB_GID_INDEX, and the automatic GID choice.
 * Pure functions: the device walk that uses them is in verbs_dev.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "verbs_cfg.h"

static int hca_name_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '-' || ch == '.';
}

static coll_status_t hca_bad(const char *text, const char *why, int at)
{
    return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                      "COLL_IB_HCA='%s': %s at character %d (expected e.g. mlx5_0:1,mlx5_1 or "
                      "^mlx5_2 or =mlx5_0)", text, why, at + 1);
}

/* ":port" after a name: 1..255. */
static coll_status_t hca_parse_port(const char *text, const char *p, size_t len, int *port_p)
{
    int port = 0;
    if (len == 0)
        return hca_bad(text, "empty port after ':'", (int)(p - text));
    for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9')
            return hca_bad(text, "port is not a number", (int)(p + i - text));
        port = port * 10 + (p[i] - '0');
        if (port > 255)
            return hca_bad(text, "port above 255", (int)(p - text));
    }
    if (port == 0)
        return hca_bad(text, "port 0 (ports count from 1)", (int)(p - text));
    *port_p = port;
    return COLL_OK;
}

/* One comma-separated entry: name[:port]. */
static coll_status_t hca_parse_entry(const char *text, const char *p, size_t len,
                                     verbs_hca_entry_t *e)
{
    const char *colon = memchr(p, ':', len);
    size_t nlen = colon ? (size_t)(colon - p) : len;

    if (nlen == 0)
        return hca_bad(text, "empty device name", (int)(p - text));
    if (nlen >= VERBS_HCA_NAME_MAX)
        return hca_bad(text, "device name too long", (int)(p - text));
    for (size_t i = 0; i < nlen; i++)
        if (!hca_name_char(p[i]))
            return hca_bad(text, "character not allowed in a device name", (int)(p + i - text));
    memcpy(e->name, p, nlen);
    e->name[nlen] = '\0';
    e->port = 0;
    if (colon)
        COLL_CHECK(hca_parse_port(text, colon + 1, len - nlen - 1, &e->port));
    return COLL_OK;
}

coll_status_t verbs_hca_parse(const char *text, verbs_hca_spec_t *spec_p)
{
    verbs_hca_spec_t s;
    const char *p = text;

    memset(&s, 0, sizeof(s));
    if (*p == '^') {
        s.exclude = 1;
        p++;
    }
    if (*p == '=') {
        s.exact = 1;
        p++;
    }
    if (*p == '\0' && p != text)
        return hca_bad(text, "no device after the prefix", (int)(p - text));
    while (*p) {
        size_t len = strcspn(p, ",");
        if (s.n == VERBS_HCA_MAX)
            return hca_bad(text, "more than 32 entries", (int)(p - text));
        COLL_CHECK(hca_parse_entry(text, p, len, &s.e[s.n]));
        s.n++;
        p += len;
        if (*p == ',' && *++p == '\0')
            return hca_bad(text, "trailing ','", (int)(p - text - 1));
    }
    *spec_p = s;
    return COLL_OK;
}

static int hca_entry_match(const verbs_hca_spec_t *s, const verbs_hca_entry_t *e,
                           const char *dev, int port)
{
    int name_ok = s->exact ? strcmp(dev, e->name) == 0
                           : strncmp(dev, e->name, strlen(e->name)) == 0;
    return name_ok && (e->port == 0 || e->port == port);
}

int verbs_hca_match(const verbs_hca_spec_t *spec, const char *dev, int port)
{
    int found = 0;
    if (spec->n == 0)
        return 1;
    for (int i = 0; i < spec->n && !found; i++)
        found = hca_entry_match(spec, &spec->e[i], dev, port);
    return spec->exclude ? !found : found;
}

coll_status_t verbs_gid_index_parse(const char *text, int *index_p)
{
    char *end;
    long v;

    if (text[0] == '\0' || strcmp(text, "auto") == 0 || strcmp(text, "-1") == 0) {
        *index_p = -1;
        return COLL_OK;
    }
    errno = 0;
    v = strtol(text, &end, 10); /* a leading digit: strtol would skip blanks and a sign */
    if (text[0] < '0' || text[0] > '9' || errno || *end != '\0' || v > 255)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "COLL_IB_GID_INDEX='%s': expected auto or an index 0..255", text);
    *index_p = (int)v;
    return COLL_OK;
}

static int gid_zero(const uint8_t *g)
{
    for (int i = 0; i < 16; i++)
        if (g[i])
            return 0;
    return 1;
}

/* ::ffff:a.b.c.d */
static int gid_ipv4(const uint8_t *g)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return memcmp(g, prefix, sizeof(prefix)) == 0;
}

static int gid_link_local(const uint8_t *g)
{
    return g[0] == 0xfe && (g[1] & 0xc0) == 0x80;
}

/* Higher is better; 0: unusable. */
static int gid_rank(const verbs_gid_entry_t *e)
{
    if (gid_zero(e->raw))
        return 0;
    if (e->type != VERBS_GID_ROCE_V2)
        return 1;
    if (gid_ipv4(e->raw))
        return 4;
    return gid_link_local(e->raw) ? 2 : 3;
}

int verbs_gid_pick(const verbs_gid_entry_t *tbl, int n, int is_ib)
{
    int best = -1, best_rank = 0;
    if (is_ib)
        return n > 0 ? 0 : -1;
    for (int i = 0; i < n; i++) {
        int r = gid_rank(&tbl[i]);
        if (r > best_rank) {
            best = i;
            best_rank = r;
        }
    }
    return best;
}
