/*
 * test_install.c: what a user of an installed libcoll gets. `make install`
 * into a temporary prefix; a program that includes only <coll.h> builds
 * with `pkg-config --cflags --libs libcoll` against the shared library and
 * against the static one, runs as a 3-rank job under the installed
 * collrun; and the shared library exports nothing but the coll_* API.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char program[] =
    "#include <coll.h>\n"
    "#include <stdio.h>\n"
    "int main(void) {\n"
    "    coll_comm_t c; int r, n, v, got;\n"
    "    if (coll_comm_init_env(&c, NULL) != COLL_OK) { puts(coll_get_last_error(NULL)); return 1; }\n"
    "    coll_comm_rank(c, &r); coll_comm_size(c, &n); v = r;\n"
    "    if (coll_sendrecv(&v, 1, COLL_INT32, (r + 1) % n, 0, &got, 1, COLL_INT32,\n"
    "                      (r + n - 1) % n, 0, c) != COLL_OK || got != (r + n - 1) % n) return 1;\n"
    "    if (coll_barrier(c) != COLL_OK || coll_comm_destroy(c) != COLL_OK) return 1;\n"
    "    printf(\"installed ok %d\\n\", r);\n"
    "    return 0;\n"
    "}\n";

START_TEST(test_install_and_link)
{
    char dir[] = "/tmp/libcoll_install_XXXXXX", cmd[2048], out[8192];
    const char *b = harness_build_dir();

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(cmd, sizeof(cmd), "make -s install BUILD=%s PREFIX=%s/prefix 2>&1", b, dir);
    ck_assert_msg(harness_sh(cmd, out, sizeof(out)) == 0, "make install failed:\n%s", out);

    snprintf(cmd, sizeof(cmd), "%s/prog.c", dir);
    FILE *f = fopen(cmd, "w");
    ck_assert_ptr_nonnull(f);
    fputs(program, f);
    fclose(f);

    /* shared, through pkg-config */
    snprintf(cmd, sizeof(cmd),
             "cd %s && PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig cc -Wall -Werror prog.c -o prog "
             "$(PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig pkg-config --cflags --libs libcoll) 2>&1",
             dir, dir, dir);
    ck_assert_msg(harness_sh(cmd, out, sizeof(out)) == 0, "shared build failed:\n%s", out);
    snprintf(cmd, sizeof(cmd), "cd %s && LD_LIBRARY_PATH=%s/prefix/lib ldd prog | grep -c "
             "'libcoll.so.0 => %s/prefix/lib'", dir, dir, dir);
    ck_assert_msg(harness_sh(cmd, out, sizeof(out)) == 0, "prog does not use the installed libcoll.so");
    snprintf(cmd, sizeof(cmd), "cd %s && LD_LIBRARY_PATH=%s/prefix/lib %s/prefix/bin/collrun -n 3 "
             "./prog 2>&1", dir, dir, dir);
    ck_assert_msg(harness_sh(cmd, out, sizeof(out)) == 0, "shared run failed:\n%s", out);
    for (int r = 0; r < 3; r++) {
        char want[32];
        snprintf(want, sizeof(want), "installed ok %d", r);
        ck_assert_msg(strstr(out, want), "no '%s' in:\n%s", want, out);
    }

    /* static: libcoll.a and what it needs (Libs.private: -pthread, and -libverbs
     * and -lfabric where those transports are built) */
    snprintf(cmd, sizeof(cmd), "cd %s && cc prog.c -o prog_static -I%s/prefix/include "
             "%s/prefix/lib/libcoll.a $(PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig pkg-config "
             "--static --libs libcoll | sed 's/-L[^ ]* //; s/-lcoll //') 2>&1 && "
             "%s/prefix/bin/collrun -n 2 ./prog_static 2>&1", dir, dir, dir, dir, dir);
    ck_assert_msg(harness_sh(cmd, out, sizeof(out)) == 0, "static build or run failed:\n%s", out);

    /* only the public API is exported */
    snprintf(cmd, sizeof(cmd), "nm -D --defined-only %s/prefix/lib/libcoll.so | awk '{print $3}' "
             "| grep -v '^coll_'", dir);
    ck_assert_msg(harness_sh(cmd, out, sizeof(out)) != 0, "libcoll.so exports internal symbols:\n%s", out);

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    harness_sh(cmd, NULL, 0);
}
END_TEST

static Suite *install_suite(void)
{
    Suite *s = suite_create("install");
    TCase *tc = tcase_create("install");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_install_and_link);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(install_suite());
}
