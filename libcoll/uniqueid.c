/*
 * uniqueid.c: the unique id: its 128-byte layout (magic, version, root
 * address, secret), its hex form, and coll_get_unique_id, which starts the
 * root that the id points at.
 */
#include <string.h>

#include "bootstrap.h"
#include "error.h"
#include "log.h"
#include "param.h"

/* Layout: u32 magic, u16 version, u16 zero, 20-byte wire address,
 * 32-byte secret, zero padding to COLL_UNIQUE_ID_BYTES. */
#define UID_ADDR_OFF 8
#define UID_SECRET_OFF (UID_ADDR_OFF + COLL_WIRE_ADDR_BYTES)

void coll_uid_encode(const coll_uid_t *uid, coll_unique_id_t *id)
{
    uint8_t *p = (uint8_t *)id->internal;
    memset(id, 0, sizeof(*id));
    coll_store_u32(p, COLL_UID_MAGIC);
    p[4] = COLL_UID_VERSION;
    coll_addr_to_wire(&uid->root, p + UID_ADDR_OFF);
    memcpy(p + UID_SECRET_OFF, uid->secret, COLL_SECRET_BYTES);
}

coll_status_t coll_uid_decode(const coll_unique_id_t *id, coll_uid_t *uid)
{
    const uint8_t *p = (const uint8_t *)id->internal;
    coll_uid_t out;

    if (coll_load_u32(p) != COLL_UID_MAGIC)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "not a libcoll unique id (bad magic): pass the id that "
                          "coll_get_unique_id produced, unchanged");
    if (p[4] != COLL_UID_VERSION || p[5] != 0)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_VERSION_MISMATCH,
                          "unique id has format version %u, this libcoll reads version %u",
                          p[4] | p[5] << 8, COLL_UID_VERSION);
    if (coll_addr_from_wire(p + UID_ADDR_OFF, &out.root) != 0)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "unique id holds no valid root address");
    memcpy(out.secret, p + UID_SECRET_OFF, COLL_SECRET_BYTES);
    *uid = out;
    return COLL_OK;
}

coll_status_t coll_unique_id_to_str(const coll_unique_id_t *id, char str[COLL_UNIQUE_ID_STR_LEN])
{
    static const char hex[] = "0123456789abcdef";
    if (!id || !str)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "coll_unique_id_to_str: NULL argument");
    for (int i = 0; i < COLL_UNIQUE_ID_BYTES; i++) {
        uint8_t b = (uint8_t)id->internal[i];
        str[2 * i] = hex[b >> 4];
        str[2 * i + 1] = hex[b & 15];
    }
    str[2 * COLL_UNIQUE_ID_BYTES] = '\0';
    return COLL_OK;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

coll_status_t coll_unique_id_from_str(const char *str, coll_unique_id_t *id)
{
    coll_unique_id_t out;
    coll_uid_t check;

    if (!str || !id)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "coll_unique_id_from_str: NULL argument");
    if (strlen(str) != 2 * COLL_UNIQUE_ID_BYTES)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "unique id text has %zu characters, expected %d hex digits",
                          strlen(str), 2 * COLL_UNIQUE_ID_BYTES);
    for (int i = 0; i < COLL_UNIQUE_ID_BYTES; i++) {
        int hi = hexval(str[2 * i]), lo = hexval(str[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                              "unique id text has a non-hex character at position %d",
                              hi < 0 ? 2 * i : 2 * i + 1);
        out.internal[i] = (char)(hi << 4 | lo);
    }
    COLL_CHECK(coll_uid_decode(&out, &check));
    *id = out;
    return COLL_OK;
}

coll_status_t coll_get_unique_id(coll_unique_id_t *id)
{
    coll_uid_t uid;
    coll_addr_t bind_addr;
    char ifname[32], str[COLL_ADDRSTR_LEN];
    coll_root_t *root;
    uint64_t timeout_ns;

    if (!id)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "coll_get_unique_id: id is NULL");
    COLL_CHECK(coll_param_duration_ns(COLL_PARAM_TIMEOUT, &timeout_ns));
    COLL_CHECK(coll_iface_select(NULL, &bind_addr, ifname));
    if (coll_random_bytes(uid.secret, sizeof(uid.secret)) != 0)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_SYSTEM, "getrandom failed");
    COLL_CHECK(coll_root_start(&bind_addr, uid.secret, 0, coll_time_ns() + timeout_ns, &root,
                               &uid.root));
    coll_root_release(root, COLL_ROOT_DETACH);
    coll_uid_encode(&uid, id);
    COLL_INFO(COLL_SUBSYS_BOOT, "unique id: bootstrap root listening on %s (%s)",
              coll_addr_str(&uid.root, str), ifname);
    return COLL_OK;
}
