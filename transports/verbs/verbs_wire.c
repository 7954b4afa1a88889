/*
 * verbs_wire.c: the verbs transport's two records (verbs_cfg.h): the
 * address blob every rank publishes through the bootstrap and the
 * connection record each side of a queue pair sends the other. Decoders
 * are strict (they read data from other processes, tests/fuzz) and write
 * their output only when the whole record is valid.
 */
#include <string.h>

#include "verbs_cfg.h"

void verbs_addr_encode(const verbs_addr_t *a, coll_wbuf_t *w)
{
    coll_put_uint(w, VERBS_WIRE_VERSION, 1);
    coll_put_uint(w, a->flags, 1);
    coll_put_uint(w, a->link, 1);
    coll_put_uint(w, a->tcp_len, 1);
    coll_put_bytes(w, a->tcp, a->tcp_len);
}

static int link_valid(unsigned link)
{
    return link == VERBS_LINK_IB || link == VERBS_LINK_ETH;
}

coll_status_t verbs_addr_decode(coll_rbuf_t *r, verbs_addr_t *a)
{
    verbs_addr_t out;
    unsigned version = (unsigned)coll_get_uint(r, 1);

    memset(&out, 0, sizeof(out));
    out.flags = (uint8_t)coll_get_uint(r, 1);
    out.link = (uint8_t)coll_get_uint(r, 1);
    out.tcp_len = (uint8_t)coll_get_uint(r, 1);
    if (r->underflow)
        return COLL_ERR_PROTOCOL;
    if (version != VERBS_WIRE_VERSION)
        return COLL_ERR_VERSION_MISMATCH;
    if ((out.flags & ~VERBS_ADDR_HAS_DEVICE) || out.tcp_len > VERBS_ADDR_TCP_MAX ||
        ((out.flags & VERBS_ADDR_HAS_DEVICE) ? !link_valid(out.link) : out.link != 0))
        return COLL_ERR_PROTOCOL;
    coll_get_bytes(r, out.tcp, out.tcp_len);
    if (r->underflow)
        return COLL_ERR_PROTOCOL;
    *a = out;
    return COLL_OK;
}

void verbs_conn_encode(const verbs_conn_t *c, coll_wbuf_t *w)
{
    coll_put_uint(w, VERBS_WIRE_VERSION, 1);
    coll_put_uint(w, c->link, 1);
    coll_put_uint(w, c->port, 1);
    coll_put_uint(w, c->mtu, 1);
    coll_put_uint(w, c->lid, 2);
    coll_put_uint(w, 0, 2);
    coll_put_bytes(w, c->gid, sizeof(c->gid));
    coll_put_uint(w, c->qpn, 4);
    coll_put_uint(w, c->psn, 4);
    coll_put_uint(w, c->credits, 4);
    coll_put_uint(w, c->slot_bytes, 4);
}

static int conn_valid(const verbs_conn_t *c)
{
    return link_valid(c->link) && c->port >= 1 && c->mtu >= 1 && c->mtu <= 5 &&
           c->qpn <= 0xffffff && c->psn <= 0xffffff && c->credits >= 1 &&
           c->credits <= VERBS_CREDITS_MAX && c->slot_bytes >= VERBS_SLOT_MIN &&
           c->slot_bytes <= VERBS_SLOT_MAX;
}

coll_status_t verbs_conn_decode(coll_rbuf_t *r, verbs_conn_t *c)
{
    verbs_conn_t out;
    unsigned version = (unsigned)coll_get_uint(r, 1);
    unsigned zero;

    memset(&out, 0, sizeof(out));
    out.link = (uint8_t)coll_get_uint(r, 1);
    out.port = (uint8_t)coll_get_uint(r, 1);
    out.mtu = (uint8_t)coll_get_uint(r, 1);
    out.lid = (uint16_t)coll_get_uint(r, 2);
    zero = (unsigned)coll_get_uint(r, 2);
    coll_get_bytes(r, out.gid, sizeof(out.gid));
    out.qpn = (uint32_t)coll_get_uint(r, 4);
    out.psn = (uint32_t)coll_get_uint(r, 4);
    out.credits = (uint32_t)coll_get_uint(r, 4);
    out.slot_bytes = (uint32_t)coll_get_uint(r, 4);
    if (r->underflow)
        return COLL_ERR_PROTOCOL;
    if (version != VERBS_WIRE_VERSION)
        return COLL_ERR_VERSION_MISMATCH;
    if (zero != 0 || !conn_valid(&out))
        return COLL_ERR_PROTOCOL;
    *c = out;
    return COLL_OK;
}
