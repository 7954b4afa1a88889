/*
 * comm_split.c: coll_comm_split. Every rank learns every rank's (color,
 * key) over the parent; the lowest parent rank of each color becomes the
 * new communicator's root, sends its members a fresh unique id (new secret,
 * root bound on the parent's interface), and all members init from it.
 * coll_comm_abort on the parent interrupts the split in either part.
 * The new communicator has its own connections, so its traffic can never
 * meet the parent's or a sibling's.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"

typedef struct split_member {
    int color, key, rank;
} split_member_t;

static int member_cmp(const void *a, const void *b)
{
    const split_member_t *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank - y->rank;
}

/* Every rank's (color, key), by a direct all-to-all of 8-byte messages. */
static coll_status_t gather_colors(struct coll_comm *comm, uint32_t seq, int color, int key,
                                   uint8_t *all /* [nranks][8] */)
{
    int n = comm->nranks;
    uint8_t mine[8];
    struct coll_request **reqs = calloc((size_t)(2 * n), sizeof(*reqs));
    uint64_t tag = coll_tag_make(COLL_TAG_INTERNAL, seq, 0);
    coll_status_t st = COLL_OK;

    if (!reqs)
        return coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "split: out of memory");
    coll_store_u32(mine, (uint32_t)color);
    coll_store_u32(mine + 4, (uint32_t)key);
    for (int p = 0; p < n && st == COLL_OK; p++) {
        st = coll_p2p_irecv(comm, all + 8 * p, 8, p, tag, &reqs[2 * p]);
        if (st == COLL_OK)
            st = coll_p2p_isend(comm, mine, 8, p, tag, &reqs[2 * p + 1]);
    }
    coll_status_t wst = coll_p2p_waitall(comm, 2 * n, reqs, "coll_comm_split (colors)");
    free(reqs);
    return st != COLL_OK ? st : wst;
}

/* The members of `color`, ordered by (key, parent rank). */
static int list_members(struct coll_comm *comm, const uint8_t *all, int color,
                        split_member_t *members)
{
    int m = 0;
    for (int p = 0; p < comm->nranks; p++) {
        int c = (int)coll_load_u32(all + 8 * p);
        if (c == color) {
            members[m].color = c;
            members[m].key = (int)coll_load_u32(all + 8 * p + 4);
            members[m].rank = p;
            m++;
        }
    }
    qsort(members, (size_t)m, sizeof(*members), member_cmp);
    return m;
}

static int same_host(const struct coll_comm *comm, int rank)
{
    return comm->peers[rank].info.host_hash == comm->peers[comm->rank].info.host_hash;
}

/* The leader starts a root and sends the id; the others receive it. */
static coll_status_t share_id(struct coll_comm *comm, uint32_t seq, const split_member_t *members,
                              int m, coll_uid_t *uid, struct coll_root **root_p)
{
    uint64_t tag = coll_tag_make(COLL_TAG_INTERNAL, seq, 1);
    coll_unique_id_t id;
    coll_status_t st = COLL_OK;

    if (members[0].rank != comm->rank) {
        struct coll_request *req = NULL;
        COLL_CHECK(coll_p2p_irecv(comm, &id, sizeof(id), members[0].rank, tag, &req));
        COLL_CHECK(coll_p2p_waitall(comm, 1, &req, "coll_comm_split (id)"));
        return coll_uid_decode(&id, uid);
    }
    struct coll_request **reqs = calloc((size_t)m, sizeof(*reqs));
    if (!reqs)
        return coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "split: out of memory");
    if (coll_random_bytes(uid->secret, COLL_SECRET_BYTES) != 0)
        st = coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "split: getrandom failed");
    if (st == COLL_OK)
        st = coll_root_start(&comm->local_addr, uid->secret, 0,
                             coll_time_ns() + comm->timeout_ns, root_p, &uid->root);
    if (st == COLL_OK)
        coll_uid_encode(uid, &id);
    for (int i = 1; i < m && st == COLL_OK; i++)
        st = coll_p2p_isend(comm, &id, sizeof(id), members[i].rank, tag, &reqs[i]);
    coll_status_t wst = coll_p2p_waitall(comm, m, reqs, "coll_comm_split (id)");
    free(reqs);
    return st != COLL_OK ? st : wst;
}

coll_status_t coll_comm_split(coll_comm_t comm, int color, int key, coll_comm_t *newcomm)
{
    coll_config_t config = COLL_CONFIG_INITIALIZER;
    coll_init_args_t args = {.how = "split", .config = &config,
                             .parent_abort = comm ? &comm->abort_requested : NULL};
    split_member_t *members = NULL;
    uint8_t *all = NULL;
    coll_status_t st;
    int m = 0;

    COLL_CHECK(coll_comm_enter(comm, "coll_comm_split", 0));
    if (!newcomm) {
        st = coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                             "coll_comm_split: newcomm is NULL");
        coll_comm_exit(comm);
        return st;
    }
    if (color < 0 && color != COLL_SPLIT_NOCOLOR) {
        st = coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG, "coll_comm_split: color %d is negative "
                             "(use COLL_SPLIT_NOCOLOR to opt out)", color);
        goto out;
    }
    uint32_t seq = comm->split_seq++;
    config.timeout_ms = (int64_t)(comm->timeout_ns / 1000000u); /* the parent's deadline */
    all = malloc((size_t)comm->nranks * 8);
    members = malloc((size_t)comm->nranks * sizeof(*members));
    if (!all || !members) {
        st = coll_comm_error(comm, COLL_SUBSYS_INIT, COLL_ERR_NO_MEMORY, "split: out of memory");
        goto out;
    }
    COLL_CHECK_GOTO(gather_colors(comm, seq, color, key, all), st, out);
    if (color == COLL_SPLIT_NOCOLOR)
        goto out;
    m = list_members(comm, all, color, members);
    for (int i = 0; i < m; i++) {
        if (members[i].rank == comm->rank)
            args.rank = i;
        args.local_size += same_host(comm, members[i].rank);
    }
    args.nranks = m;
    COLL_CHECK_GOTO(share_id(comm, seq, members, m, &args.uid, &args.root), st, out);
out:
    coll_comm_exit(comm);
    free(all);
    free(members);
    if (st != COLL_OK || color == COLL_SPLIT_NOCOLOR) {
        if (args.root)
            coll_root_release(args.root, COLL_ROOT_CANCEL);
        if (st == COLL_OK)
            *newcomm = NULL;
        return st;
    }
    return coll_comm_init_internal(&args, newcomm);
}
