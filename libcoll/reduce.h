/*
 * reduce.h: local reduction kernels, dst = a OP b element by element, used
 * by all-reduce, reduce and reduce-scatter to combine a received chunk with
 * a local one.
 *
 * Results are defined bit for bit so that ranks running different
 * implementations (scalar, AVX2) or different reduction orders agree, which
 * a deterministic mode relies on:
 *   - integers: sum and prod wrap modulo 2^bits; min and max as usual.
 *   - float32 and float64: sum and prod in the type itself.
 *   - float16 and bfloat16: each step converts both inputs to float32,
 *     combines in float32 and rounds the result back once (to nearest,
 *     ties to even).
 *   - any floating result that is a NaN is the canonical quiet NaN, positive
 *     with only the quiet bit set (0x7e00, 0x7fc0, 0x7fc00000,
 *     0x7ff8000000000000), whatever the NaN inputs were: x86 and other
 *     architectures propagate different NaN payloads and signs, and x86's
 *     choice depends on the operand order.
 *   - min and max are commutative and associative: a NaN input gives NaN,
 *     min(-0, +0) = -0 and max(-0, +0) = +0 in either order.
 *   - AVG is the sum step here; the caller divides once at the end with
 *     coll_reduce_finish_avg.
 */
#ifndef COLL_REDUCE_H
#define COLL_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* dst[i] = a[i] OP b[i] for i < count. dst may be the same pointer as a or
 * b (exactly), never a partial overlap. For COLL_AVG this is the SUM step;
 * the caller divides once at the end with coll_reduce_finish_avg. Any
 * alignment is fine. Errors: COLL_ERR_INVALID_ARG for an unknown datatype
 * or op, a NULL pointer with count > 0 or a count whose byte size overflows;
 * COLL_ERR_UNSUPPORTED for a pair that coll_reduce_supported rejects. */
coll_status_t coll_reduce_local(void *dst, const void *a, const void *b, size_t count,
                                coll_datatype_t dt, coll_op_t op);

/* buf[i] = buf[i] / n (AVG's last step), rounded once to the datatype:
 * float16, bfloat16 and float32 divide in float32 by (float)n, float64 in
 * float64; x / n, never x * (1 / n). n must be >= 1. */
coll_status_t coll_reduce_finish_avg(void *buf, size_t count, coll_datatype_t dt, int n);

/* Is op defined for dt? AVG is supported for the four floating types only
 * (an integer mean would silently overflow in the sum and truncate).
 * Unknown values give 0. */
int coll_reduce_supported(coll_datatype_t dt, coll_op_t op);

/* memcpy(dst, src, len) for the copy steps of collectives: large copies
 * (an eighth of the L3 and more, reduce.c says why) use non-temporal
 * stores on the vector path. dst and src must not overlap. */
void coll_copy_local(void *dst, const void *src, size_t len);
/* len bytes of such a copy of `whole` bytes, with its stores. */
void coll_copy_local_part(void *dst, const void *src, size_t len, size_t whole);

/* Bytes of the last-level cache a CPU of this host shares (sysfs, else
 * sysconf where that is plausible, else 32 MiB); *guessed (may be NULL)
 * is 1 in the last case. */
size_t coll_llc_bytes(int *guessed);
/* coll_llc_bytes' rule, for tests: the kernel's figure (KiB, 0: none),
 * else CPUID's (bytes, <= 0: none) where it is one complex's, else 32
 * MiB, a guess. */
size_t coll_llc_choose(size_t sysfs_kib, long cpuid_bytes, int *guessed);

/* Name of the implementation in use ("avx2+f16c" or "scalar"), for logs. */
const char *coll_reduce_impl(void);

/* Names for messages: "float32", "sum"; "unknown" when out of range. */
const char *coll_reduce_datatype_name(coll_datatype_t dt);
const char *coll_reduce_op_name(coll_op_t op);

/* Conversions, exposed for tests: round to nearest, ties to even; a NaN
 * stays a NaN (quiet, sign and leading payload bits kept), inf stays inf,
 * subnormals are handled exactly. */
float coll_half_to_float(uint16_t h);
uint16_t coll_float_to_half(float f);
float coll_bf16_to_float(uint16_t b);
uint16_t coll_float_to_bf16(float f);

/* For tests and benchmarks: on != 0 forces the portable scalar path in this
 * process, 0 returns to the best path the CPU supports. */
void coll_reduce_force_scalar(int on);

/* ---- internal: between reduce.c and the vector implementations ---------- */

/* A binary kernel handles a prefix of the arrays (the scalar ones all of
 * it) and returns how many elements it did; the caller finishes the rest
 * with the scalar kernel, whose results are identical. */
typedef size_t (*coll_reduce_kernel_t)(void *dst, const void *a, const void *b, size_t count);
/* The same for AVG's division: buf[i] /= n on a prefix. */
typedef size_t (*coll_reduce_avg_kernel_t)(void *buf, size_t count, int n);

typedef struct coll_reduce_impl_table {
    const char *name;
    /* NULL where the implementation has no kernel: the scalar one runs. */
    coll_reduce_kernel_t binary[COLL_NUM_DATATYPES][COLL_NUM_OPS];
    coll_reduce_avg_kernel_t avg[COLL_NUM_DATATYPES];
    /* A copy with non-temporal stores of a prefix of len bytes; returns
     * how many it did (NULL: none, memcpy does it all). */
    size_t (*copy_nt)(void *dst, const void *src, size_t len);
} coll_reduce_impl_table_t;

#if defined(__x86_64__)
/* Fill `t` with the AVX2/F16C kernels (reduce_avx2.c). Call only when the
 * CPU has AVX2 and F16C. `nt_threshold` is the output size in bytes from
 * which a kernel whose destination is not a source uses non-temporal
 * stores (SIZE_MAX: never). */
void coll_reduce_avx2_fill(coll_reduce_impl_table_t *t, size_t nt_threshold);
#endif

#endif /* COLL_REDUCE_H */
