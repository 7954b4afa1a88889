/*
 * status.c: names of status codes, the version query and datatype sizes:
 * the library-level functions of coll.h that need no communicator.
 */
#include "error.h"
#include "log.h"

const char *coll_status_str(coll_status_t status)
{
    switch (status) {
    case COLL_OK: return "COLL_OK: success";
    case COLL_INPROGRESS: return "COLL_INPROGRESS: operation in progress";
    case COLL_ERR_INVALID_ARG: return "COLL_ERR_INVALID_ARG: invalid argument";
    case COLL_ERR_INVALID_USAGE: return "COLL_ERR_INVALID_USAGE: invalid usage";
    case COLL_ERR_INVALID_COMM: return "COLL_ERR_INVALID_COMM: invalid or destroyed communicator";
    case COLL_ERR_NO_MEMORY: return "COLL_ERR_NO_MEMORY: out of memory";
    case COLL_ERR_SYSTEM: return "COLL_ERR_SYSTEM: system call failed";
    case COLL_ERR_TIMEOUT: return "COLL_ERR_TIMEOUT: timed out";
    case COLL_ERR_PEER_FAILED: return "COLL_ERR_PEER_FAILED: a peer failed";
    case COLL_ERR_ABORTED: return "COLL_ERR_ABORTED: communicator aborted";
    case COLL_ERR_UNSUPPORTED: return "COLL_ERR_UNSUPPORTED: not supported";
    case COLL_ERR_PROTOCOL: return "COLL_ERR_PROTOCOL: protocol violation";
    case COLL_ERR_VERSION_MISMATCH: return "COLL_ERR_VERSION_MISMATCH: wire protocol versions differ";
    case COLL_ERR_AUTH: return "COLL_ERR_AUTH: authentication failed";
    case COLL_ERR_UNREACHABLE: return "COLL_ERR_UNREACHABLE: address unreachable";
    case COLL_ERR_SIZE_MISMATCH: return "COLL_ERR_SIZE_MISMATCH: message size mismatch";
    case COLL_ERR_INTERNAL: return "COLL_ERR_INTERNAL: internal error";
    case COLL_ERR_DATA_CORRUPTION: return "COLL_ERR_DATA_CORRUPTION: data corruption";
    }
    return "COLL_ERR_UNKNOWN: unknown status code";
}

coll_status_t coll_get_version(int *major, int *minor, int *patch)
{
    if (!major || !minor || !patch)
        return coll_error(COLL_SUBSYS_INIT, COLL_ERR_INVALID_ARG,
                          "coll_get_version: an output argument is NULL");
    *major = COLL_VERSION_MAJOR;
    *minor = COLL_VERSION_MINOR;
    *patch = COLL_VERSION_PATCH;
    return COLL_OK;
}

size_t coll_datatype_size(coll_datatype_t datatype)
{
    static const unsigned char sizes[COLL_NUM_DATATYPES] = {
        [COLL_INT8] = 1,    [COLL_UINT8] = 1,   [COLL_INT32] = 4,
        [COLL_UINT32] = 4,  [COLL_INT64] = 8,   [COLL_UINT64] = 8,
        [COLL_FLOAT16] = 2, [COLL_BFLOAT16] = 2, [COLL_FLOAT32] = 4,
        [COLL_FLOAT64] = 8,
    };
    if ((unsigned)datatype >= COLL_NUM_DATATYPES)
        return 0;
    return sizes[datatype];
}
