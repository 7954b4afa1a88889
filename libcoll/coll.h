/*
 * coll.h: the public interface of libcoll, a collective communication
 * library for moving tensors between processes and hosts.
 *
 * The shape follows NCCL (a unique id from one rank, then init on every
 * rank) with MPI-style tagged point-to-point and explicit requests.
 * Every function returns a coll_status_t: COLL_OK (0) on success, a
 * negative code on error. The detailed message of the last error is
 * available from coll_get_last_error(). Output arguments are written only
 * on success.
 *
 * Threads: every function may be called from any thread. Point-to-point
 * calls on one communicator from several threads at once are safe; calls
 * that are collective over a communicator (barrier, split, destroy) must
 * be made in the same order on every rank, so do not make them on one
 * communicator from several threads at once. coll_comm_abort() may be
 * called from any thread at any time, including while another thread is
 * blocked inside a call on the same communicator. See docs/api.md.
 */
#ifndef COLL_H
#define COLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define COLL_API __attribute__((visibility("default")))
#else
#define COLL_API
#endif

#define COLL_VERSION_MAJOR 0
#define COLL_VERSION_MINOR 1
#define COLL_VERSION_PATCH 0
/* One integer, comparable: 0.1.0 -> 100. */
#define COLL_VERSION_CODE \
    (COLL_VERSION_MAJOR * 10000 + COLL_VERSION_MINOR * 100 + COLL_VERSION_PATCH)

/* Status codes. Non-negative values are not errors. */
typedef enum coll_status {
    COLL_OK = 0,
    COLL_INPROGRESS = 1,            /* non-blocking operation not done yet */
    COLL_ERR_INVALID_ARG = -1,      /* a bad argument: NULL, out of range */
    COLL_ERR_INVALID_USAGE = -2,    /* a valid argument used wrongly */
    COLL_ERR_INVALID_COMM = -3,     /* NULL, destroyed or unknown communicator */
    COLL_ERR_NO_MEMORY = -4,
    COLL_ERR_SYSTEM = -5,           /* a system call failed; message has errno */
    COLL_ERR_TIMEOUT = -6,          /* no progress within the deadline */
    COLL_ERR_PEER_FAILED = -7,      /* a peer died, closed or aborted */
    COLL_ERR_ABORTED = -8,          /* this communicator was aborted */
    COLL_ERR_UNSUPPORTED = -9,
    COLL_ERR_PROTOCOL = -10,        /* malformed or unexpected wire data */
    COLL_ERR_VERSION_MISMATCH = -11,/* peers speak different wire versions */
    COLL_ERR_AUTH = -12,            /* the job secret did not match */
    COLL_ERR_UNREACHABLE = -13,     /* an address could not be reached */
    COLL_ERR_SIZE_MISMATCH = -14,   /* message size differs from the receive */
    COLL_ERR_INTERNAL = -15,        /* a bug in libcoll: please report */
    COLL_ERR_DATA_CORRUPTION = -16, /* a payload failed its checksum */
} coll_status_t;

/* Element types. Sizes: 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 bytes. */
typedef enum coll_datatype {
    COLL_INT8 = 0,
    COLL_UINT8,
    COLL_INT32,
    COLL_UINT32,
    COLL_INT64,
    COLL_UINT64,
    COLL_FLOAT16,
    COLL_BFLOAT16,
    COLL_FLOAT32,
    COLL_FLOAT64,
    COLL_NUM_DATATYPES
} coll_datatype_t;

/* Reduction operations, used by the collectives. */
typedef enum coll_op {
    COLL_SUM = 0,
    COLL_PROD,
    COLL_MIN,
    COLL_MAX,
    COLL_AVG,
    COLL_NUM_OPS
} coll_op_t;

typedef struct coll_comm *coll_comm_t;
typedef struct coll_request *coll_request_t;

/* Opaque bootstrap handle: the root's address and a random job secret.
 * Created once by one process and passed to every rank by any means
 * (MPI_Bcast, a file, an environment variable via coll_unique_id_to_str).
 * It carries a secret: treat it like a password. */
#define COLL_UNIQUE_ID_BYTES 128
typedef struct coll_unique_id {
    char internal[COLL_UNIQUE_ID_BYTES];
} coll_unique_id_t;

/* Hex text form of a unique id: 2 * COLL_UNIQUE_ID_BYTES chars + NUL. */
#define COLL_UNIQUE_ID_STR_LEN (2 * COLL_UNIQUE_ID_BYTES + 1)

/* Per-communicator settings. Initialize with COLL_CONFIG_INITIALIZER,
 * then set the fields you need; unset fields take their COLL_* defaults. */
typedef struct coll_config {
    size_t size;          /* sizeof(coll_config_t), set by the initializer */
    int64_t timeout_ms;   /* deadline for any wait; -1: COLL_TIMEOUT */
} coll_config_t;

#define COLL_CONFIG_INITIALIZER { sizeof(coll_config_t), -1 }

/* Color for coll_comm_split() meaning "no new communicator for me". */
#define COLL_SPLIT_NOCOLOR (-1)

/* Largest user tag. Tags are 0 .. COLL_TAG_MAX. */
#define COLL_TAG_MAX 0x7fffffff

/* ---- library ---------------------------------------------------------- */

/* Name of a status code, e.g. "COLL_ERR_TIMEOUT: timed out". Never NULL. */
COLL_API const char *coll_status_str(coll_status_t status);

/* Version of the library actually linked (may differ from the header). */
COLL_API coll_status_t coll_get_version(int *major, int *minor, int *patch);

/* Detailed message of the last error on `comm`, or when comm is NULL of the
 * last error raised in the calling thread (e.g. by a failed init). Returns
 * "" when there is none. The string stays valid, and unchanged, until the
 * next call that fails on the same communicator (or, for NULL, thread). */
COLL_API const char *coll_get_last_error(coll_comm_t comm);

/* Size in bytes of one element of `datatype`, 0 if it is unknown. */
COLL_API size_t coll_datatype_size(coll_datatype_t datatype);

/* ---- memory ----------------------------------------------------------- */

/* Host memory that ranks on the same host read directly (as ncclMemAlloc
 * or MPI_Alloc_mem): a large message sent from it crosses in one plain
 * copy by its receiver, with no copy through the shared rings and no
 * cross-memory attach. Usable as any buffer, with every transport and
 * communicator. `bytes` is rounded up to whole pages; the memory is zeroed
 * and page aligned. Free with coll_mem_free, never with free(). */
COLL_API coll_status_t coll_mem_alloc(void **ptr, size_t bytes);
/* Free memory from coll_mem_alloc; NULL is a no-op. A pointer that did
 * not come from coll_mem_alloc (or was freed already) is
 * COLL_ERR_INVALID_ARG. No transfer from or into it may be in flight. */
COLL_API coll_status_t coll_mem_free(void *ptr);

/* ---- communicators ---------------------------------------------------- */

/* Create a unique id; this process serves as the bootstrap root until all
 * ranks of the job have joined (or COLL_TIMEOUT passes). */
COLL_API coll_status_t coll_get_unique_id(coll_unique_id_t *id);

/* Convert a unique id to and from hex text (for environment variables). */
COLL_API coll_status_t coll_unique_id_to_str(const coll_unique_id_t *id,
                                             char str[COLL_UNIQUE_ID_STR_LEN]);
COLL_API coll_status_t coll_unique_id_from_str(const char *str,
                                               coll_unique_id_t *id);

/* Join the job described by `id` as `rank` of `nranks`. Collective: every
 * rank calls it; it returns when all ranks are connected. */
COLL_API coll_status_t coll_comm_init_rank(coll_comm_t *comm, int nranks,
                                           coll_unique_id_t id, int rank);
COLL_API coll_status_t coll_comm_init_rank_config(coll_comm_t *comm, int nranks,
                                                  const coll_unique_id_t *id,
                                                  int rank,
                                                  const coll_config_t *config);

/* Join the job described by the environment a launcher set: collrun
 * (COLL_RANK, COLL_NRANKS, ...), torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT), Slurm (SLURM_PROCID, SLURM_NTASKS, node list), Open MPI
 * (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE) or MPICH (PMI_RANK,
 * PMI_SIZE). `config` may be NULL. See docs/api.md for the precedence. */
COLL_API coll_status_t coll_comm_init_env(coll_comm_t *comm,
                                          const coll_config_t *config);

/* Collective over `comm`: ranks passing the same color form a new
 * communicator, ordered by (key, rank in comm). A rank passing
 * COLL_SPLIT_NOCOLOR gets *newcomm = NULL. */
COLL_API coll_status_t coll_comm_split(coll_comm_t comm, int color, int key,
                                       coll_comm_t *newcomm);

/* Tear down the communicator: tells peers it is leaving and waits (at most
 * 10 s, or the deadline if shorter) until the data of this rank's completed
 * sends has reached them; requests still pending fail with
 * COLL_ERR_INVALID_USAGE. Returns COLL_ERR_ABORTED if coll_comm_abort
 * interrupted it. The handle must not be used afterwards (doing so returns
 * COLL_ERR_INVALID_COMM rather than crashing). */
COLL_API coll_status_t coll_comm_destroy(coll_comm_t comm);

/* Tear down at once from any thread: calls blocked on `comm` return
 * COLL_ERR_ABORTED, peers are told (best effort) and see
 * COLL_ERR_PEER_FAILED naming this rank. Never blocks for long. The handle
 * must not be used afterwards. */
COLL_API coll_status_t coll_comm_abort(coll_comm_t comm);

COLL_API coll_status_t coll_comm_rank(coll_comm_t comm, int *rank);
COLL_API coll_status_t coll_comm_size(coll_comm_t comm, int *size);

/* The error that broke the communicator (COLL_OK if none). Once a
 * communicator has failed (peer death, timeout, abort) every later call on
 * it returns that error at once. */
COLL_API coll_status_t coll_comm_get_error(coll_comm_t comm);

/* Change the deadline of later waits on `comm` (milliseconds, > 0). */
COLL_API coll_status_t coll_comm_set_timeout(coll_comm_t comm, int64_t timeout_ms);

/* ---- point-to-point --------------------------------------------------- */

/* Messages between a pair of ranks with equal tags arrive in the order
 * they were sent; a receive must name the exact element count the sender
 * sent (else COLL_ERR_SIZE_MISMATCH on the receiving side). Sending to
 * oneself is allowed. A blocking send of a large message may wait until
 * the receiver posts its receive: use coll_sendrecv or isend/irecv for
 * exchanges. */
COLL_API coll_status_t coll_send(const void *buf, size_t count,
                                 coll_datatype_t datatype, int peer, int tag,
                                 coll_comm_t comm);
COLL_API coll_status_t coll_recv(void *buf, size_t count,
                                 coll_datatype_t datatype, int peer, int tag,
                                 coll_comm_t comm);
COLL_API coll_status_t coll_sendrecv(const void *sendbuf, size_t sendcount,
                                     coll_datatype_t sendtype, int dest,
                                     int sendtag, void *recvbuf,
                                     size_t recvcount, coll_datatype_t recvtype,
                                     int source, int recvtag, coll_comm_t comm);

/* Non-blocking: the buffer must stay untouched until the request completes.
 * *request is set on success and must be completed by coll_wait,
 * coll_waitall or a coll_test that reports done; that frees it and sets
 * the handle to NULL. */
COLL_API coll_status_t coll_isend(const void *buf, size_t count,
                                  coll_datatype_t datatype, int peer, int tag,
                                  coll_comm_t comm, coll_request_t *request);
COLL_API coll_status_t coll_irecv(void *buf, size_t count,
                                  coll_datatype_t datatype, int peer, int tag,
                                  coll_comm_t comm, coll_request_t *request);

/* Wait for one request; returns its outcome. NULL handles are skipped. */
COLL_API coll_status_t coll_wait(coll_request_t *request);
/* *done = 1 and the request's outcome once it completed; else *done = 0
 * and COLL_OK. */
COLL_API coll_status_t coll_test(coll_request_t *request, int *done);
/* Wait for all; returns the first error in array order (all requests are
 * completed and freed either way). Requests of several communicators are
 * progressed together. An entry that is not a request: COLL_ERR_INVALID_ARG
 * before anything is waited for. */
COLL_API coll_status_t coll_waitall(int count, coll_request_t requests[]);

/* ---- collectives ------------------------------------------------------ */

/* Collective calls must be made in the same order on every rank of the
 * communicator. Counts are in elements of `datatype`. Buffers may be the
 * same (in place, where the call defines how) or disjoint; any other
 * overlap is COLL_ERR_INVALID_ARG. Each blocking call has a non-blocking
 * twin (coll_i...) that returns a request to complete with coll_wait,
 * coll_test or coll_waitall; several may be in flight on one communicator.
 * COLL_ALGO chooses an algorithm per collective, COLL_DETERMINISTIC=1 makes
 * every reduction give the bits of reducing in rank order (docs/api.md). */

COLL_API coll_status_t coll_barrier(coll_comm_t comm);
COLL_API coll_status_t coll_ibarrier(coll_comm_t comm, coll_request_t *request);

/* recvbuf = sendbuf of every rank combined with op; in place when equal. */
COLL_API coll_status_t coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_datatype_t datatype, coll_op_t op,
                                      coll_comm_t comm);
COLL_API coll_status_t coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                       coll_datatype_t datatype, coll_op_t op,
                                       coll_comm_t comm, coll_request_t *request);

/* recvbuf on every rank = sendbuf of root (sendbuf is read on root only;
 * in place on root when equal). */
COLL_API coll_status_t coll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_datatype_t datatype, int root, coll_comm_t comm);
COLL_API coll_status_t coll_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
                                       coll_datatype_t datatype, int root, coll_comm_t comm,
                                       coll_request_t *request);

/* recvbuf on root = sendbuf of every rank combined with op (recvbuf is
 * written on root only; in place on root when equal). */
COLL_API coll_status_t coll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                   coll_datatype_t datatype, coll_op_t op, int root,
                                   coll_comm_t comm);
COLL_API coll_status_t coll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_datatype_t datatype, coll_op_t op, int root,
                                    coll_comm_t comm, coll_request_t *request);

/* recvbuf (nranks * sendcount) = the sendbufs in rank order; in place when
 * sendbuf == recvbuf + rank * sendcount elements. */
COLL_API coll_status_t coll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                      coll_datatype_t datatype, coll_comm_t comm);
COLL_API coll_status_t coll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                       coll_datatype_t datatype, coll_comm_t comm,
                                       coll_request_t *request);

/* recvbuf (recvcount) = block `rank` of the combination of every rank's
 * sendbuf (nranks * recvcount); in place when recvbuf == sendbuf + rank *
 * recvcount elements. */
COLL_API coll_status_t coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                           coll_datatype_t datatype, coll_op_t op,
                                           coll_comm_t comm);
COLL_API coll_status_t coll_ireduce_scatter(const void *sendbuf, void *recvbuf,
                                            size_t recvcount, coll_datatype_t datatype,
                                            coll_op_t op, coll_comm_t comm,
                                            coll_request_t *request);

/* Block j of sendbuf goes to rank j, landing as block `rank` of its recvbuf;
 * blocks are `count` elements; in place when sendbuf == recvbuf. */
COLL_API coll_status_t coll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                     coll_datatype_t datatype, coll_comm_t comm);
COLL_API coll_status_t coll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_datatype_t datatype, coll_comm_t comm,
                                      coll_request_t *request);

/* As alltoall with per-peer counts and displacements (elements). The
 * arrays have nranks entries; sendcounts[j] here must equal recvcounts[me]
 * on rank j. Not in place. */
COLL_API coll_status_t coll_alltoallv(const void *sendbuf, const size_t *sendcounts,
                                      const size_t *sdispls, void *recvbuf,
                                      const size_t *recvcounts, const size_t *rdispls,
                                      coll_datatype_t datatype, coll_comm_t comm);
COLL_API coll_status_t coll_ialltoallv(const void *sendbuf, const size_t *sendcounts,
                                       const size_t *sdispls, void *recvbuf,
                                       const size_t *recvcounts, const size_t *rdispls,
                                       coll_datatype_t datatype, coll_comm_t comm,
                                       coll_request_t *request);

/* Block j (count elements) of root's sendbuf lands in rank j's recvbuf;
 * sendbuf is read on root only; in place on root when recvbuf == sendbuf +
 * root * count elements. */
COLL_API coll_status_t coll_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_datatype_t datatype, int root, coll_comm_t comm);
COLL_API coll_status_t coll_iscatter(const void *sendbuf, void *recvbuf, size_t count,
                                     coll_datatype_t datatype, int root, coll_comm_t comm,
                                     coll_request_t *request);

/* Rank j's sendbuf (count elements) lands as block j of root's recvbuf;
 * recvbuf is written on root only; in place on root when sendbuf ==
 * recvbuf + root * count elements. */
COLL_API coll_status_t coll_gather(const void *sendbuf, void *recvbuf, size_t count,
                                   coll_datatype_t datatype, int root, coll_comm_t comm);
COLL_API coll_status_t coll_igather(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_datatype_t datatype, int root, coll_comm_t comm,
                                    coll_request_t *request);

#ifdef __cplusplus
}
#endif

#endif /* COLL_H */
