/*
 * collinfo: what this libcoll build is and how it is configured here:
 * version, transports compiled in, the network interface a job would use,
 * and every COLL_* variable with its default, current value and meaning.
 *
 *   collinfo            summary
 *   collinfo --params   every COLL_* variable (name, type, default, value, help)
 *   collinfo --markdown the same as a Markdown table (docs/env.md)
 *   collinfo --algos    every collective algorithm, for COLL_ALGO
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms.h"
#include "coll.h"
#include "net.h"
#include "param.h"
#include "transport.h"

static const char *type_name(coll_param_type_t t)
{
    switch (t) {
    case COLL_PARAM_INT: return "integer";
    case COLL_PARAM_BOOL: return "boolean";
    case COLL_PARAM_DURATION: return "duration";
    case COLL_PARAM_SIZE: return "size";
    default: return "string";
    }
}

static void print_params(int markdown)
{
    if (markdown)
        printf("| Variable | Type | Default | Meaning |\n|---|---|---|---|\n");
    for (int i = 0; i < COLL_PARAM_COUNT; i++) {
        const coll_param_info_t *p = coll_param_info((coll_param_id_t)i);
        const char *v = getenv(p->name);
        if (markdown)
            printf("| `%s` | %s | `%s` | %s |\n", p->name, type_name(p->type),
                   p->default_value[0] ? p->default_value : "(empty)", p->help);
        else
            printf("%-24s %-9s default %-8s%s%s%s\n    %s\n", p->name, type_name(p->type),
                   p->default_value[0] ? p->default_value : "\"\"", v ? " set to " : "",
                   v ? v : "", "", p->help);
    }
}

static void print_algo(const coll_algo_t *al, void *arg)
{
    coll_coll_t *last = arg;
    if (*last != al->coll)
        printf("%s%s:", *last == COLL_NUM_COLLS ? "" : "\n", coll_coll_name(al->coll));
    printf(" %s", al->name);
    *last = al->coll;
}

/* One line per collective: the names COLL_ALGO accepts. */
static void print_algos(void)
{
    coll_coll_t last = COLL_NUM_COLLS;
    coll_algo_foreach(COLL_NUM_COLLS, print_algo, &last);
    printf("\nforce one with COLL_ALGO=collective:algorithm[,...], e.g. "
           "COLL_ALGO=allreduce:ring,broadcast:binomial\n");
}

static void print_summary(void)
{
    int major, minor, patch, count;
    const coll_tp_ops_t *const *reg = coll_tp_registry(&count);
    coll_addr_t addr;
    char ifname[32], str[COLL_ADDRSTR_LEN];

    coll_get_version(&major, &minor, &patch);
    printf("libcoll %d.%d.%d\n", major, minor, patch);
    printf("transports:");
    for (int i = 0; i < count; i++)
        printf(" %s", reg[i]->name);
    printf(" (and self, for a rank's messages to itself)\n");
    if (coll_iface_select(NULL, &addr, ifname) == COLL_OK) {
        coll_addr_host(&addr, str);
        printf("interface: %s %s (COLL_SOCKET_IFNAME='%s')\n", ifname, str,
               coll_param_raw(COLL_PARAM_SOCKET_IFNAME));
    } else {
        printf("interface: none usable: %s\n", coll_get_last_error(NULL));
    }
    printf("%d COLL_* variables: run 'collinfo --params' for each one; 'collinfo --algos' "
           "lists the collective algorithms\n", COLL_PARAM_COUNT);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--params") == 0)
        print_params(0);
    else if (argc > 1 && strcmp(argv[1], "--markdown") == 0)
        print_params(1);
    else if (argc > 1 && strcmp(argv[1], "--algos") == 0)
        print_algos();
    else if (argc > 1) {
        fprintf(stderr, "usage: collinfo [--params | --markdown | --algos]\n");
        return 2;
    } else
        print_summary();
    return 0;
}
