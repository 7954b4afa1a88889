/*
 * blocks.c: large heap blocks kept for reuse (blocks.h).
 */
#include <stdlib.h>

#include "blocks.h"

void coll_blocks_init(coll_blocks_t *c, int nslots)
{
    *c = (coll_blocks_t){.nslots = nslots < COLL_BLOCKS_SLOTS_MAX ? nslots
                                                                   : COLL_BLOCKS_SLOTS_MAX};
}

void *coll_blocks_take(coll_blocks_t *c, size_t bytes, size_t *len_p)
{
    size_t len = bytes ? bytes : 1;
    int best = -1;
    void *p;

    for (int i = 0; c && len >= COLL_BLOCKS_MIN && i < c->nslots; i++)
        if (c->slot[i].p && c->slot[i].len >= len &&
            (best < 0 || c->slot[i].len < c->slot[best].len ||
             (c->slot[i].len == c->slot[best].len && c->slot[i].given > c->slot[best].given)))
            best = i;
    if (best >= 0) {
        p = c->slot[best].p;
        len = c->slot[best].len;
        c->slot[best].p = NULL;
    } else if (!(p = malloc(len))) {
        return NULL;
    }
    *len_p = len;
    return p;
}

void coll_blocks_give(coll_blocks_t *c, void *p, size_t len)
{
    int victim = 0;

    if (!c || c->nslots == 0 || len < COLL_BLOCKS_MIN) {
        free(p);
        return;
    }
    for (int i = 0; i < c->nslots; i++) {
        if (!c->slot[i].p) {
            victim = i;
            break;
        }
        if (c->slot[i].len < c->slot[victim].len)
            victim = i;
    }
    if (c->slot[victim].p && c->slot[victim].len >= len) {
        free(p);
        return;
    }
    free(c->slot[victim].p);
    c->slot[victim].p = p;
    c->slot[victim].len = len;
    c->slot[victim].given = ++c->gives;
}

void coll_blocks_release(coll_blocks_t *c)
{
    for (int i = 0; i < c->nslots; i++) {
        free(c->slot[i].p);
        c->slot[i].p = NULL;
    }
}
