/*
 * helper_rank.c: a rank program for launcher tests (collrun, mpirun,
 * mpiexec, emulated torchrun/Slurm). It joins through
 * coll_comm_init_env and then:
 *   exchange        every rank sends its rank to every rank and checks;
 *                   prints "ok rank R of N"
 *   kill RANK       ranks stream 64 MiB around a ring; RANK SIGKILLs itself
 *                   mid-transfer; survivors print the error they got
 *   hold SECONDS    init, barrier, sleep, barrier (for signal tests)
 * Exit status 0 on success, 1 on a failed check, 2 on usage errors.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"

#define CHECK(call)                                                                 \
    do {                                                                            \
        coll_status_t st_ = (call);                                                 \
        if (st_ != COLL_OK) {                                                       \
            fprintf(stderr, "helper_rank: %s failed: %s: %s\n", #call,              \
                    coll_status_str(st_), coll_get_last_error(NULL));               \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static int exchange(coll_comm_t comm, int rank, int n)
{
    int32_t *in = calloc((size_t)n, sizeof(*in)), out = rank;
    coll_request_t *reqs = calloc((size_t)(2 * n), sizeof(*reqs));
    for (int p = 0; p < n; p++) {
        CHECK(coll_irecv(&in[p], 1, COLL_INT32, p, 3, comm, &reqs[2 * p]));
        CHECK(coll_isend(&out, 1, COLL_INT32, p, 3, comm, &reqs[2 * p + 1]));
    }
    CHECK(coll_waitall(2 * n, reqs));
    for (int p = 0; p < n; p++)
        if (in[p] != p) {
            fprintf(stderr, "helper_rank: rank %d got %d from rank %d\n", rank, in[p], p);
            return 1;
        }
    CHECK(coll_barrier(comm));
    printf("ok rank %d of %d\n", rank, n);
    free(in);
    free(reqs);
    return 0;
}

/* Stream 64 MiB messages around the ring until an error; the victim kills
 * itself after its first transfer has started. */
static int kill_mid_transfer(coll_comm_t comm, int rank, int n, int victim)
{
    size_t bytes = 64u << 20;
    char *out = malloc(bytes), *in = malloc(bytes);
    memset(out, rank, bytes);
    CHECK(coll_barrier(comm));
    for (int i = 0; i < 1000; i++) {
        coll_request_t reqs[2];
        CHECK(coll_irecv(in, bytes, COLL_UINT8, (rank + n - 1) % n, i, comm, &reqs[0]));
        CHECK(coll_isend(out, bytes, COLL_UINT8, (rank + 1) % n, i, comm, &reqs[1]));
        if (rank == victim && i == 1) {
            usleep(20000); /* let bytes flow, then die mid-message */
            raise(SIGKILL);
        }
        coll_status_t st = coll_waitall(2, reqs);
        if (st != COLL_OK) {
            printf("rank %d error: %s: %s\n", rank, coll_status_str(st),
                   coll_get_last_error(comm));
            fflush(stdout);
            coll_comm_abort(comm);
            return 3;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    coll_comm_t comm;
    int rank, n, rc = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: helper_rank exchange|kill RANK|hold SECONDS\n");
        return 2;
    }
    CHECK(coll_comm_init_env(&comm, NULL));
    CHECK(coll_comm_rank(comm, &rank));
    CHECK(coll_comm_size(comm, &n));
    if (strcmp(argv[1], "exchange") == 0) {
        rc = exchange(comm, rank, n);
    } else if (strcmp(argv[1], "kill") == 0 && argc > 2) {
        rc = kill_mid_transfer(comm, rank, n, atoi(argv[2]));
        if (rc == 3)
            return 3;
    } else if (strcmp(argv[1], "hold") == 0 && argc > 2) {
        CHECK(coll_barrier(comm));
        sleep((unsigned)atoi(argv[2]));
        CHECK(coll_barrier(comm));
    } else {
        fprintf(stderr, "helper_rank: unknown mode %s\n", argv[1]);
        return 2;
    }
    CHECK(coll_comm_destroy(comm));
    return rc;
}
