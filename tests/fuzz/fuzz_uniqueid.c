/*
 * fuzz_uniqueid.c: the unique id, the one thing users pass around by hand
 * (COLL_UNIQUE_ID, files, command lines): coll_unique_id_from_str on text
 * (mode byte even) and coll_uid_decode on the 128-byte binary form (odd).
 *
 * Invariants: errors leave the output untouched and have a message; an
 * accepted text prints back (to_str) as the same hex, lower-cased; an
 * accepted binary id decodes to the same content after encode.
 */
#include <ctype.h>

#include "bootstrap.h"
#include "coll.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static void fuzz_text(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size), back[COLL_UNIQUE_ID_STR_LEN];
    coll_unique_id_t id, sentinel;
    coll_uid_t uid;

    memset(&sentinel, 0x5a, sizeof(sentinel));
    id = sentinel;
    fuzz_clear_errmsg();
    if (coll_unique_id_from_str(text, &id) != COLL_OK) {
        fuzz_check_errmsg("coll_unique_id_from_str");
        FUZZ_CHECK(memcmp(&id, &sentinel, sizeof(id)) == 0, "id written on error");
        free(text);
        return;
    }
    FUZZ_CHECK(coll_unique_id_to_str(&id, back) == COLL_OK, "to_str failed");
    FUZZ_CHECK(strlen(text) == strlen(back), "length changed");
    for (size_t i = 0; text[i]; i++)
        FUZZ_CHECK(tolower((unsigned char)text[i]) == back[i], "digit %zu changed", i);
    FUZZ_CHECK(coll_uid_decode(&id, &uid) == COLL_OK, "accepted text holds no valid id");
    free(text);
}

static void fuzz_binary(const uint8_t *data, size_t size)
{
    coll_unique_id_t id, again;
    coll_uid_t uid, sentinel, uid2;
    char text[COLL_UNIQUE_ID_STR_LEN];

    memset(&id, 0, sizeof(id));
    memcpy(&id, data, COLL_MIN(size, sizeof(id)));
    memset(&sentinel, 0x5a, sizeof(sentinel));
    uid = sentinel;
    fuzz_clear_errmsg();
    if (coll_uid_decode(&id, &uid) != COLL_OK) {
        fuzz_check_errmsg("coll_uid_decode");
        FUZZ_CHECK(memcmp(&uid, &sentinel, sizeof(uid)) == 0, "uid written on error");
        return;
    }
    coll_uid_encode(&uid, &again);
    FUZZ_CHECK(coll_uid_decode(&again, &uid2) == COLL_OK, "re-encoded id refused");
    FUZZ_CHECK(memcmp(&uid.root.ss, &uid2.root.ss, uid.root.len) == 0 &&
               uid.root.len == uid2.root.len && memcmp(uid.secret, uid2.secret,
                                                       sizeof(uid.secret)) == 0,
               "decode(encode(decode(x))) != decode(x)");
    /* The text form carries an accepted id unchanged. */
    FUZZ_CHECK(coll_unique_id_to_str(&id, text) == COLL_OK &&
               coll_unique_id_from_str(text, &again) == COLL_OK &&
               memcmp(&again, &id, sizeof(id)) == 0, "text round trip failed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1)
        fuzz_binary(data + 1, size - 1);
    else
        fuzz_text(data + 1, size - 1);
    return 0;
}
