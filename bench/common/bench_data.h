/*
 * bench_data.h: datatype and operation names as nccl-tests spells them,
 * and the data that makes a benchmark's check exact.
 *
 * As in nccl-tests (and tests/test_collectives.c), the inputs of a
 * reduction are chosen so that the exact result is the same in any
 * reduction order and in every datatype, float16 and bfloat16 included:
 * small integers for sums and averages, +-1 and one 2 per element for
 * products, integers in [-127, 127] for min and max. The check then
 * compares bit for bit, with no tolerance. Non-reducing collectives move
 * a pattern that depends on the source rank and the element index, so a
 * block delivered to the wrong place or from the wrong rank is caught.
 *
 * Exactness limits: sums stay exact in bfloat16 up to 256 ranks and in
 * float16 up to 2048 (values in [-5, 5] up to 51 ranks, in [-1, 1] above).
 */
#ifndef BENCH_DATA_H
#define BENCH_DATA_H

#include <stddef.h>

#include "coll.h"

/* "int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
 * "float", "double", "bfloat16" (the names nccl-tests prints). */
const char *bench_datatype_name(coll_datatype_t dt);
/* Those names and the aliases float16, float32, float64, fp16, fp32,
 * fp64, bf16, int, char; 0 and *dt, or -1. */
int bench_parse_datatype(const char *name, coll_datatype_t *dt);

/* "sum", "prod", "min", "max", "avg". */
const char *bench_op_name(coll_op_t op);
int bench_parse_op(const char *name, coll_op_t *op);

/* Whether libcoll reduces dt with op (avg: floating types only). */
int bench_op_supported(coll_datatype_t dt, coll_op_t op);

/* Rank `rank`'s input to a reduction with op over nranks: elements
 * base .. base+count-1 of its vector, written to buf[0 .. count-1]. */
void bench_fill_reduce_input(void *buf, coll_datatype_t dt, coll_op_t op, int nranks, int rank,
                             size_t base, size_t count);
/* The exact result of that reduction for the same elements. */
void bench_fill_reduce_expected(void *buf, coll_datatype_t dt, coll_op_t op, int nranks,
                                size_t base, size_t count);

/* Elements base .. base+count-1 of the data rank `rank` owns in a
 * non-reducing collective. */
void bench_fill_copy(void *buf, coll_datatype_t dt, int rank, size_t base, size_t count);

/* Elements of got that differ from want, bit for bit (es bytes each). */
size_t bench_count_wrong(const void *got, const void *want, size_t count, size_t es);

/* dst = the bitwise complement of src: a receive buffer prepared this way
 * cannot hold the expected value anywhere the call did not write. */
void bench_complement(void *dst, const void *src, size_t bytes);

#endif /* BENCH_DATA_H */
