/*
 * test_split.c: coll_comm_split. Each rank computes what its new
 * communicator must be (the members of its color ordered by key, then by
 * parent rank) and checks size, rank and, by an all-to-all of parent ranks,
 * that the new communicator reaches exactly those members in that order.
 * Also: opting out, bad colors, nested splits used at the same time as
 * their parents with the same tags, and many splits of one communicator.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define JOB_TIMEOUT_S 25
#define CASE_TIMEOUT_S 40
#define TAG 5

#define ARRAY_LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- what a split must produce ------------------------------------------------- */

/* One communicator as seen by one rank: its handle, the parent ranks of
 * its members in new-rank order, and this rank's position. */
typedef struct view {
    coll_comm_t comm;
    int members[HARNESS_MAX_RANKS];
    int size;
    int me;
} view_t;

/* The members of `color` among parent ranks 0..n-1, ordered by (key,
 * parent rank): parent rank `self`'s expected view of the new communicator. */
static void expect_view(int n, const int *colors, const int *keys, int self, view_t *v)
{
    v->size = 0;
    for (int p = 0; p < n; p++) {
        if (colors[p] != colors[self])
            continue;
        int i = v->size++;
        /* Insertion: p is the highest parent rank so far, so it goes after
         * every member with a key <= its own. */
        while (i > 0 && keys[v->members[i - 1]] > keys[p]) {
            v->members[i] = v->members[i - 1];
            i--;
        }
        v->members[i] = p;
    }
    v->me = -1;
    for (int i = 0; i < v->size; i++)
        if (v->members[i] == self)
            v->me = i;
}

/* The identity view of a communicator that is not a split. */
static void whole_view(coll_comm_t comm, int n, int self, view_t *v)
{
    v->comm = comm;
    v->size = n;
    v->me = self;
    for (int p = 0; p < n; p++)
        v->members[p] = p;
}

/* Post, on v's communicator, a receive from every member into in[] and a
 * send of *out to every member (itself included). */
static void post_all(const view_t *v, int tag, int32_t *in, const int32_t *out,
                     coll_request_t *reqs, int *nreqs)
{
    for (int q = 0; q < v->size; q++) {
        in[q] = -1;
        RANK_OK(coll_irecv(&in[q], 1, COLL_INT32, q, tag, v->comm, &reqs[(*nreqs)++]));
    }
    for (int q = 0; q < v->size; q++)
        RANK_OK(coll_isend(out, 1, COLL_INT32, q, tag, v->comm, &reqs[(*nreqs)++]));
}

/* in[q] must be base + the parent rank of member q. */
static void check_all(const view_t *v, const char *what, const int32_t *in, int32_t base)
{
    for (int q = 0; q < v->size; q++)
        RANK_CHECK(in[q] == base + v->members[q],
                   "%s: from new rank %d got %d, expected %d (parent rank %d)", what, q,
                   (int)in[q], (int)(base + v->members[q]), v->members[q]);
}

/* Size, rank, then every member sends its parent rank to every member:
 * the communicator talks to exactly its members, in the expected order. */
static void check_view(const view_t *v, int self, const char *what)
{
    int32_t in[HARNESS_MAX_RANKS], out = self;
    coll_request_t reqs[2 * HARNESS_MAX_RANKS];
    int n = 0, size = -1, rank = -1;

    RANK_OK(coll_comm_size(v->comm, &size));
    RANK_OK(coll_comm_rank(v->comm, &rank));
    RANK_CHECK(size == v->size && rank == v->me, "%s: parent rank %d is %d of %d, expected "
               "%d of %d", what, self, rank, size, v->me, v->size);
    post_all(v, TAG, in, &out, reqs, &n);
    RANK_OK(coll_waitall(n, reqs));
    check_all(v, what, in, 0);
    RANK_OK(coll_barrier(v->comm));
}

/* Split `parent` (seen as pv) with this rank's color and key, given every
 * rank's: checks the result and returns its view (comm NULL if opted out). */
static void split_and_check(const view_t *pv, const int *colors, const int *keys,
                            const char *what, view_t *out)
{
    coll_comm_t sub = (coll_comm_t)(void *)&out->size; /* any non-NULL value */
    int me = pv->me;

    RANK_OK(coll_comm_split(pv->comm, colors[me], keys[me], &sub));
    if (colors[me] == COLL_SPLIT_NOCOLOR) {
        RANK_CHECK(sub == NULL, "%s: opted out, yet got communicator %p", what, (void *)sub);
        out->comm = NULL;
        out->size = 0;
        out->me = -1;
        return;
    }
    RANK_CHECK(sub != NULL, "%s: no communicator for color %d", what, colors[me]);
    /* Expected members in pv's ranks, then mapped to pv's parent ranks. */
    expect_view(pv->size, colors, keys, me, out);
    for (int i = 0; i < out->size; i++)
        out->members[i] = pv->members[out->members[i]];
    out->comm = sub;
    check_view(out, pv->members[me], what);
}

/* ==== the split table ============================================================ */

enum scheme {
    MOD3_REVERSED, /* color r % 3, key -r */
    EQUAL_KEYS,    /* color r % 2, key 7: parent order */
    TIED_KEYS,     /* color r % 2, key -(r / 4): ties broken by parent rank */
    SOME_OPT_OUT,  /* every third rank opts out, the rest: one color, key n - r */
    ALL_OPT_OUT,
    ONE_COLOR,     /* color 0, key 0: a copy of the parent */
    OWN_COLOR,     /* color r: communicators of one rank */
    EXTREMES,      /* colors 0 and INT_MAX, keys INT_MIN, INT_MAX and 0 */
};

static const char *const scheme_names[] = {
    [MOD3_REVERSED] = "color r%3, key -r",   [EQUAL_KEYS] = "color r%2, equal keys",
    [TIED_KEYS] = "color r%2, tied keys",    [SOME_OPT_OUT] = "every third rank opts out",
    [ALL_OPT_OUT] = "all ranks opt out",     [ONE_COLOR] = "one color",
    [OWN_COLOR] = "a color per rank",        [EXTREMES] = "extreme colors and keys",
};

static void scheme_color_key(int scheme, int r, int n, int *color, int *key)
{
    switch (scheme) {
    case MOD3_REVERSED: *color = r % 3; *key = -r; break;
    case EQUAL_KEYS: *color = r % 2; *key = 7; break;
    case TIED_KEYS: *color = r % 2; *key = -(r / 4); break;
    case SOME_OPT_OUT: *color = r % 3 == 1 ? COLL_SPLIT_NOCOLOR : 4; *key = n - r; break;
    case ALL_OPT_OUT: *color = COLL_SPLIT_NOCOLOR; *key = r; break;
    case ONE_COLOR: *color = 0; *key = 0; break;
    case OWN_COLOR: *color = r; *key = -r; break;
    default: /* EXTREMES */
        *color = r % 2 ? INT_MAX : 0;
        *key = r % 3 == 0 ? INT_MIN : r % 3 == 1 ? INT_MAX : 0;
        break;
    }
}

static const struct {
    int nranks, scheme;
} splits[] = {
    {8, MOD3_REVERSED}, {8, EQUAL_KEYS},    {8, TIED_KEYS},     {8, SOME_OPT_OUT},
    {8, EXTREMES},      {8, OWN_COLOR},     {1, MOD3_REVERSED}, {1, ALL_OPT_OUT},
    {1, ONE_COLOR},     {2, MOD3_REVERSED}, {2, ONE_COLOR},     {2, OWN_COLOR},
    {2, SOME_OPT_OUT},  {5, MOD3_REVERSED}, {5, SOME_OPT_OUT},  {5, TIED_KEYS},
    {5, ALL_OPT_OUT},   {7, MOD3_REVERSED}, {7, EXTREMES},      {7, EQUAL_KEYS},
};

static int rank_split(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int row = *(const int *)arg, scheme = splits[row].scheme;
    int colors[HARNESS_MAX_RANKS], keys[HARNESS_MAX_RANKS];
    view_t parent, sub, again;

    whole_view(harness_init(rank, nranks, id), nranks, rank, &parent);
    for (int p = 0; p < nranks; p++)
        scheme_color_key(scheme, p, nranks, &colors[p], &keys[p]);
    split_and_check(&parent, colors, keys, scheme_names[scheme], &sub);

    /* Worked out by hand for color r % 3, key -r: sizes 3, 3, 2 at 8
     * ranks, and the order of the parent reversed. */
    if (scheme == MOD3_REVERSED) {
        int c = rank % 3, m = (nranks - c + 2) / 3, r = -1, n = -1;
        RANK_OK(coll_comm_size(sub.comm, &n));
        RANK_OK(coll_comm_rank(sub.comm, &r));
        RANK_CHECK(n == m && r == m - 1 - rank / 3, "parent rank %d: %d of %d, expected %d of %d",
                   rank, r, n, m - 1 - rank / 3, m);
        if (nranks == 8)
            RANK_CHECK(n == (c == 2 ? 2 : 3), "color %d has %d ranks at 8 ranks", c, n);
    }
    if (scheme == SOME_OPT_OUT || scheme == ALL_OPT_OUT)
        RANK_CHECK((sub.comm == NULL) == (colors[rank] == COLL_SPLIT_NOCOLOR),
                   "rank %d: opted out %d, got a communicator %d", rank,
                   colors[rank] == COLL_SPLIT_NOCOLOR, sub.comm != NULL);

    /* The parent still works, and splits again the same way on every rank
     * (also those that opted out the first time). */
    check_view(&parent, rank, "parent after the split");
    for (int p = 0; p < nranks; p++) {
        colors[p] = 1;
        keys[p] = p;
    }
    split_and_check(&parent, colors, keys, "second split", &again);
    if (sub.comm)
        RANK_OK(coll_comm_destroy(sub.comm));
    RANK_OK(coll_comm_destroy(again.comm));
    RANK_OK(coll_comm_destroy(parent.comm));
    return 0;
}

START_TEST(test_split_table)
{
    int row = _i;
    ck_assert_int_eq(harness_run(splits[row].nranks, rank_split, &row, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== bad colors ================================================================== */

static const int bad_colors[] = {-2, -100, INT_MIN};

/* Every rank passes the bad color, so no rank waits for another. */
static int rank_bad_color(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int color = *(const int *)arg;
    coll_comm_t comm = harness_init(rank, nranks, id);
    coll_comm_t sub = comm; /* must stay untouched */
    char prefix[32], number[32];
    const char *msg;
    int colors[HARNESS_MAX_RANKS], keys[HARNESS_MAX_RANKS];
    view_t parent, good;

    whole_view(comm, nranks, rank, &parent);
    RANK_CHECK(coll_comm_split(comm, color, rank, &sub) == COLL_ERR_INVALID_ARG,
               "color %d was accepted", color);
    RANK_CHECK(sub == comm, "a failed split wrote the new communicator");
    msg = coll_get_last_error(comm);
    snprintf(prefix, sizeof(prefix), "rank %d: ", rank);
    snprintf(number, sizeof(number), "%d", color);
    RANK_CHECK(strncmp(msg, prefix, strlen(prefix)) == 0 && strstr(msg, "color") &&
               strstr(msg, number), "message '%s' does not start with '%s' or does not "
               "name color %s", msg, prefix, number);
    RANK_CHECK(coll_comm_get_error(comm) == COLL_OK, "a bad color failed the communicator");

    /* No place for the result: an argument error, nothing collective
     * started (the thread's message; test_badinput checks which messages
     * communicators record). */
    RANK_CHECK(coll_comm_split(comm, 0, 0, NULL) == COLL_ERR_INVALID_ARG,
               "a NULL newcomm was accepted");
    RANK_CHECK(strstr(coll_get_last_error(NULL), "NULL") != NULL,
               "message '%s' does not mention NULL", coll_get_last_error(NULL));

    /* The failed splits left every rank in step: a real one works. */
    for (int p = 0; p < nranks; p++) {
        colors[p] = p % 2;
        keys[p] = -p;
    }
    split_and_check(&parent, colors, keys, "split after a bad color", &good);
    RANK_OK(coll_comm_destroy(good.comm));
    RANK_OK(coll_comm_destroy(comm));
    return 0;
}

START_TEST(test_bad_color)
{
    int color = bad_colors[_i];
    ck_assert_int_eq(harness_run(4, rank_bad_color, &color, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== nested splits used together ================================================= */

#define NESTED_RANKS 8
#define ROUNDS 3
#define MAX_LEVELS 4

/* Up to MAX_LEVELS communicators at once (parent, child and grandchild, or
 * siblings), all with the same tag: each
 * message must arrive on the communicator it was sent on, from the right
 * member. Receives and sends are posted in different communicator orders
 * and completed by one coll_waitall over all three. */
static void interleave(view_t *const *levels, int nlevels, int self, int round)
{
    int32_t in[MAX_LEVELS][HARNESS_MAX_RANKS], out[MAX_LEVELS];
    coll_request_t reqs[MAX_LEVELS * 2 * HARNESS_MAX_RANKS];
    int n = 0;

    RANK_CHECK(nlevels <= MAX_LEVELS, "%d communicators at once", nlevels);
    for (int l = 0; l < nlevels; l++)
        out[l] = (l + 1) * 100000 + round * 1000 + self;
    /* Receives deepest first, sends shallowest first. */
    for (int l = nlevels - 1; l >= 0; l--) {
        for (int q = 0; q < levels[l]->size; q++) {
            in[l][q] = -1;
            RANK_OK(coll_irecv(&in[l][q], 1, COLL_INT32, q, TAG, levels[l]->comm,
                               &reqs[n++]));
        }
    }
    for (int l = 0; l < nlevels; l++)
        for (int q = 0; q < levels[l]->size; q++)
            RANK_OK(coll_isend(&out[l], 1, COLL_INT32, q, TAG, levels[l]->comm, &reqs[n++]));
    RANK_OK(coll_waitall(n, reqs));
    for (int l = 0; l < nlevels; l++) {
        char what[32];
        snprintf(what, sizeof(what), "level %d round %d", l, round);
        check_all(levels[l], what, in[l], (l + 1) * 100000 + round * 1000);
    }
}

static int rank_nested(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int colors[HARNESS_MAX_RANKS], keys[HARNESS_MAX_RANKS];
    view_t parent, child, grandchild;
    view_t *all[3] = {&parent, &child, &grandchild};
    (void)arg;

    whole_view(harness_init(rank, nranks, id), nranks, rank, &parent);
    for (int p = 0; p < nranks; p++) {
        colors[p] = p % 2;
        keys[p] = p;
    }
    split_and_check(&parent, colors, keys, "child", &child);
    /* Split the child, in the child's ranks: halves, reversed. */
    for (int q = 0; q < child.size; q++) {
        colors[q] = q / 2;
        keys[q] = -q;
    }
    split_and_check(&child, colors, keys, "grandchild", &grandchild);
    RANK_CHECK(grandchild.size == 2 && grandchild.me == 1 - child.me % 2,
               "grandchild: %d of %d", grandchild.me, grandchild.size);

    for (int round = 0; round < ROUNDS; round++) {
        interleave(all, 3, rank, round);
        /* Collectives interleaved too, in the same order on every rank. */
        RANK_OK(coll_barrier(grandchild.comm));
        RANK_OK(coll_barrier(parent.comm));
        RANK_OK(coll_barrier(child.comm));
    }

    /* Each has its own connections: ending one leaves the others working. */
    RANK_OK(coll_comm_destroy(parent.comm));
    interleave(all + 1, 2, rank, ROUNDS);
    RANK_OK(coll_comm_destroy(grandchild.comm));
    check_view(&child, rank, "child after the others were destroyed");
    RANK_OK(coll_comm_destroy(child.comm));
    return 0;
}

START_TEST(test_nested)
{
    ck_assert_int_eq(harness_run(NESTED_RANKS, rank_nested, NULL, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== several splits of one communicator ========================================== */

#define REPEAT_RANKS 6
#define REPEATS 3

/* A different split each time: halves by parity, thirds reversed, and one
 * color with keys permuted (5 is coprime with 6). */
static void repeat_color_key(int i, int r, int n, int *color, int *key)
{
    switch (i % 3) {
    case 0: *color = r % 2; *key = r; break;
    case 1: *color = r % 3; *key = -r; break;
    default: *color = 0; *key = (r * 5) % n; break;
    }
}

static int rank_repeat(int rank, int nranks, const coll_unique_id_t *id, void *arg)
{
    int keep_alive = *(const int *)arg;
    int colors[HARNESS_MAX_RANKS], keys[HARNESS_MAX_RANKS];
    view_t parent, subs[REPEATS];
    view_t *all[1 + REPEATS];

    whole_view(harness_init(rank, nranks, id), nranks, rank, &parent);
    all[0] = &parent;
    for (int i = 0; i < REPEATS; i++) {
        char what[32];
        snprintf(what, sizeof(what), "split %d", i);
        for (int p = 0; p < nranks; p++)
            repeat_color_key(i, p, nranks, &colors[p], &keys[p]);
        split_and_check(&parent, colors, keys, what, &subs[i]);
        all[1 + i] = &subs[i];
        if (!keep_alive)
            RANK_OK(coll_comm_destroy(subs[i].comm));
    }
    if (keep_alive) {
        /* All of them at once, same tag, then each checked again. */
        for (int round = 0; round < 2; round++) {
            interleave(all, 1 + REPEATS, rank, round);
            interleave(all + 1, REPEATS, rank, round);
        }
        for (int i = 0; i < REPEATS; i++)
            check_view(&subs[i], rank, "split, again");
        for (int i = REPEATS - 1; i >= 0; i--)
            RANK_OK(coll_comm_destroy(subs[i].comm));
    }
    /* Destroyed handles are tombstones: later calls fail cleanly. */
    for (int i = 0; i < REPEATS; i++) {
        int r = -1;
        RANK_CHECK(coll_comm_rank(subs[i].comm, &r) == COLL_ERR_INVALID_COMM && r == -1,
                   "split %d: a destroyed communicator answered", i);
        RANK_CHECK(coll_comm_destroy(subs[i].comm) == COLL_ERR_INVALID_COMM,
                   "split %d: destroyed twice", i);
    }
    check_view(&parent, rank, "parent after its splits were destroyed");
    RANK_OK(coll_comm_destroy(parent.comm));
    return 0;
}

START_TEST(test_repeat)
{
    int keep_alive = _i;
    ck_assert_int_eq(harness_run(REPEAT_RANKS, rank_repeat, &keep_alive, JOB_TIMEOUT_S), 0);
}
END_TEST

/* ==== suite ========================================================================== */

static Suite *split_suite(void)
{
    Suite *s = suite_create("split");
    TCase *tc;

    tc = tcase_create("colors and keys");
    tcase_set_timeout(tc, CASE_TIMEOUT_S);
    tcase_add_loop_test(tc, test_split_table, 0, ARRAY_LEN(splits));
    tcase_add_loop_test(tc, test_bad_color, 0, ARRAY_LEN(bad_colors));
    suite_add_tcase(s, tc);

    tc = tcase_create("nested and repeated");
    tcase_set_timeout(tc, CASE_TIMEOUT_S);
    tcase_add_test(tc, test_nested);
    tcase_add_loop_test(tc, test_repeat, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(split_suite());
}
