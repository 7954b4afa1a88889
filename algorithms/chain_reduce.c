/*
 * chain_reduce.c: a building block of the deterministic forms. Every
 * rank's `src` is reduced along the chain 0 -> 1 -> ... -> p-1 in pipelined
 * chunks, so that each element is ((x0 op x1) op x2) ... op x(p-1), the
 * rank-order result; it lands in `result` on rank p-1.
 *
 * Cost: (p - 1 + chunks - 1) alpha + n beta + n gamma, where n is the
 * bytes of `count` elements.
 */
#include "algorithms.h"

coll_vid_t coll_chain_reduce(coll_sched_t *s, const void *src, void *result, size_t count,
                             uint32_t tag_base)
{
    const coll_args_t *a = coll_sched_args(s);
    int p = coll_sched_size(s), r = coll_sched_rank(s);
    size_t es = a->esize, ch = coll_chunk_elems(a), nch = (count + ch - 1) / ch;
    coll_vid_t all = -1, reader[2] = {-1, -1};
    void *tmp[2] = {NULL, NULL};
    /* middle ranks add their part to a partial they then pass on */
    char *partial = r > 0 && r < p - 1 ? coll_sched_scratch(s, count * es) : NULL;

    if (p == 1)
        return coll_sched_copy(s, result, src, count * es, COLL_NODEPS);
    if (r > 0) {
        tmp[0] = coll_sched_scratch(s, ch * es);
        tmp[1] = coll_sched_scratch(s, ch * es);
    }
    for (size_t j = 0; j < nch; j++) {
        size_t off = j * ch, cnt = count - off < ch ? count - off : ch;
        const void *mine = COLL_PTR(src, off, es);
        uint32_t tag = tag_base + (uint32_t)j;
        coll_vid_t v;
        if (r == 0) {
            v = coll_sched_send(s, mine, cnt * es, 1, tag, COLL_NODEPS);
        } else {
            void *out = r == p - 1 ? COLL_PTR(result, off, es) : COLL_PTR(partial, off, es);
            v = reader[j % 2] = coll_sched_recv_reduce(s, out, mine, tmp[j % 2], cnt, r - 1, tag,
                                                       COLL_INCOMING_FIRST,
                                                       COLL_DEPS(reader[j % 2]));
            if (r < p - 1)
                v = coll_sched_send(s, out, cnt * es, r + 1, tag, COLL_DEPS(v));
        }
        all = coll_sched_join(s, COLL_DEPS(all, v));
    }
    return all;
}
