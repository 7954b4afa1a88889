/*
 * reduce_avx2.c: AVX2 and F16C forms of the local reduction kernels.
 *
 * Compiled for any x86-64 (no -march): each function carries
 * target("avx2,f16c") and reduce.c calls coll_reduce_avx2_fill only after
 * __builtin_cpu_supports said yes to both. A kernel handles the whole
 * 32-byte vectors of its arrays and returns how many elements that was;
 * reduce.c finishes the tail with the scalar kernel, which gives the same
 * bits (reduce.h lists the rules both follow). Loops do four vectors per
 * iteration so that loads of the next ones overlap the latency of the
 * current ones.
 *
 * What plain AVX2 instructions would get wrong and is fixed up here:
 *   - minps/maxps return the second operand when either is a NaN or both
 *     are zeros, so min(a, b) != min(b, a). We compute both orders and
 *     combine them (OR for min, AND for max: equal values have equal bits
 *     except -0/+0), then put the canonical NaN where either input is one.
 *   - addps & co. propagate the first NaN operand's payload, and x86's
 *     default NaN is negative: every NaN result is replaced by the
 *     canonical quiet NaN.
 *   - bfloat16 has no conversion instruction in AVX2: widen by
 *     interleaving with zeros, narrow with the same integer round-to-nearest-even as the
 *     scalar code (NaNs are canonical by then, so the formula is exact).
 *
 * Non-temporal stores are used when the output is larger than the
 * threshold reduce.c passes (half the last-level cache) and dst is not one of
 * the sources; the first vector is stored normally and the streaming loop
 * starts at the first 32-byte aligned byte of dst, recomputing a few
 * elements, which is harmless because dst does not alias the inputs.
 */
#include "reduce.h"

#if defined(__x86_64__)

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,f16c")))
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,f16c")))

static size_t nt_min_bytes = SIZE_MAX;

/* ---- float32 / float64 element rules ------------------------------------- */

AVX2_INLINE __m256 ps_qnan(void)
{
    return _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
}

AVX2_INLINE __m256d pd_qnan(void)
{
    return _mm256_castsi256_pd(_mm256_set1_epi64x(0x7ff8000000000000ll));
}

AVX2_INLINE __m256 ps_canon(__m256 r)
{
    return _mm256_blendv_ps(r, ps_qnan(), _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
}

AVX2_INLINE __m256d pd_canon(__m256d r)
{
    return _mm256_blendv_pd(r, pd_qnan(), _mm256_cmp_pd(r, r, _CMP_UNORD_Q));
}

AVX2_INLINE __m256 ps_sum(__m256 a, __m256 b) { return ps_canon(_mm256_add_ps(a, b)); }
AVX2_INLINE __m256 ps_prod(__m256 a, __m256 b) { return ps_canon(_mm256_mul_ps(a, b)); }

AVX2_INLINE __m256 ps_min(__m256 a, __m256 b)
{
    __m256 m = _mm256_or_ps(_mm256_min_ps(a, b), _mm256_min_ps(b, a));
    return _mm256_blendv_ps(m, ps_qnan(), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

AVX2_INLINE __m256 ps_max(__m256 a, __m256 b)
{
    __m256 m = _mm256_and_ps(_mm256_max_ps(a, b), _mm256_max_ps(b, a));
    return _mm256_blendv_ps(m, ps_qnan(), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

AVX2_INLINE __m256d pd_sum(__m256d a, __m256d b) { return pd_canon(_mm256_add_pd(a, b)); }
AVX2_INLINE __m256d pd_prod(__m256d a, __m256d b) { return pd_canon(_mm256_mul_pd(a, b)); }

AVX2_INLINE __m256d pd_min(__m256d a, __m256d b)
{
    __m256d m = _mm256_or_pd(_mm256_min_pd(a, b), _mm256_min_pd(b, a));
    return _mm256_blendv_pd(m, pd_qnan(), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
}

AVX2_INLINE __m256d pd_max(__m256d a, __m256d b)
{
    __m256d m = _mm256_and_pd(_mm256_max_pd(a, b), _mm256_max_pd(b, a));
    return _mm256_blendv_pd(m, pd_qnan(), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
}

/* ---- 32-byte chunks: load 32 bytes of a and b, return 32 bytes of dst ---- */

AVX2_INLINE __m256i ld(const char *p)
{
    return _mm256_loadu_si256((const __m256i *)p);
}

AVX2_INLINE __m128i ld128(const char *p)
{
    return _mm_loadu_si128((const __m128i *)p);
}

#define CHUNK_PS(name, OP)                                                              \
    AVX2_INLINE __m256i name(const char *x, const char *y)                             \
    {                                                                                   \
        return _mm256_castps_si256(OP(_mm256_loadu_ps((const float *)x),               \
                                      _mm256_loadu_ps((const float *)y)));             \
    }
CHUNK_PS(c_f32_sum, ps_sum)
CHUNK_PS(c_f32_prod, ps_prod)
CHUNK_PS(c_f32_min, ps_min)
CHUNK_PS(c_f32_max, ps_max)

#define CHUNK_PD(name, OP)                                                              \
    AVX2_INLINE __m256i name(const char *x, const char *y)                             \
    {                                                                                   \
        return _mm256_castpd_si256(OP(_mm256_loadu_pd((const double *)x),              \
                                      _mm256_loadu_pd((const double *)y)));            \
    }
CHUNK_PD(c_f64_sum, pd_sum)
CHUNK_PD(c_f64_prod, pd_prod)
CHUNK_PD(c_f64_min, pd_min)
CHUNK_PD(c_f64_max, pd_max)

/* float16: 16 halves per chunk, widened 8 at a time by F16C, combined in
 * float32, narrowed with round-to-nearest-even (immediate 0, not MXCSR). */
#define CHUNK_H16(name, OP)                                                             \
    AVX2_INLINE __m256i name(const char *x, const char *y)                             \
    {                                                                                   \
        __m256 a0 = _mm256_cvtph_ps(ld128(x)), a1 = _mm256_cvtph_ps(ld128(x + 16));    \
        __m256 b0 = _mm256_cvtph_ps(ld128(y)), b1 = _mm256_cvtph_ps(ld128(y + 16));    \
        __m128i r0 = _mm256_cvtps_ph(OP(a0, b0), _MM_FROUND_TO_NEAREST_INT);           \
        __m128i r1 = _mm256_cvtps_ph(OP(a1, b1), _MM_FROUND_TO_NEAREST_INT);           \
        return _mm256_set_m128i(r1, r0);                                               \
    }
CHUNK_H16(c_h16_sum, ps_sum)
CHUNK_H16(c_h16_prod, ps_prod)
CHUNK_H16(c_h16_min, ps_min)
CHUNK_H16(c_h16_max, ps_max)

/* bfloat16 <-> float32, 16 values per 256-bit vector. Widening interleaves
 * zeros below each value (a bfloat16 is the upper half of a float32):
 * within each 128-bit lane, unpacklo takes values 0-3 and unpackhi 4-7.
 * packus after the narrowing undoes exactly that interleaving, so the
 * order comes back without a cross-lane permute. bf_round expects no NaN
 * other than the canonical one (which it maps to 0x7fc0) and leaves each
 * result in the low 16 bits of its 32-bit lane, so packus (unsigned
 * saturation) never saturates. */
AVX2_INLINE __m256 bf_lo(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
}

AVX2_INLINE __m256 bf_hi(__m256i v)
{
    return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
}

AVX2_INLINE __m256i bf_round(__m256 f)
{
    __m256i u = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    u = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    return _mm256_srli_epi32(u, 16);
}

AVX2_INLINE __m256i bf_pack(__m256 lo, __m256 hi)
{
    return _mm256_packus_epi32(bf_round(lo), bf_round(hi));
}

#define CHUNK_BF16(name, OP)                                                            \
    AVX2_INLINE __m256i name(const char *x, const char *y)                             \
    {                                                                                   \
        __m256i a = ld(x), b = ld(y);                                                   \
        return bf_pack(OP(bf_lo(a), bf_lo(b)), OP(bf_hi(a), bf_hi(b)));                 \
    }
CHUNK_BF16(c_bf16_sum, ps_sum)
CHUNK_BF16(c_bf16_prod, ps_prod)
CHUNK_BF16(c_bf16_min, ps_min)
CHUNK_BF16(c_bf16_max, ps_max)

#define CHUNK_INT(name, INSN)                                                           \
    AVX2_INLINE __m256i name(const char *x, const char *y) { return INSN(ld(x), ld(y)); }
CHUNK_INT(c_u8_sum, _mm256_add_epi8)
CHUNK_INT(c_i8_min, _mm256_min_epi8)
CHUNK_INT(c_i8_max, _mm256_max_epi8)
CHUNK_INT(c_u8_min, _mm256_min_epu8)
CHUNK_INT(c_u8_max, _mm256_max_epu8)
CHUNK_INT(c_u32_sum, _mm256_add_epi32)
CHUNK_INT(c_u32_prod, _mm256_mullo_epi32)
CHUNK_INT(c_i32_min, _mm256_min_epi32)
CHUNK_INT(c_i32_max, _mm256_max_epi32)
CHUNK_INT(c_u32_min, _mm256_min_epu32)
CHUNK_INT(c_u32_max, _mm256_max_epu32)
CHUNK_INT(c_u64_sum, _mm256_add_epi64)

/* 8-bit products: there is no byte multiply. A 16-bit multiply gives the
 * right low byte for the even bytes (the low byte of a product depends
 * only on the low bytes); shifting the odd bytes down does the same for
 * them. */
AVX2_INLINE __m256i c_u8_prod(const char *x, const char *y)
{
    __m256i a = ld(x), b = ld(y);
    __m256i even = _mm256_mullo_epi16(a, b);
    __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00ff)),
                           _mm256_slli_epi16(odd, 8));
}

/* 64-bit product modulo 2^64 from 32x32->64 multiplies:
 * a*b = alo*blo + ((alo*bhi + ahi*blo) << 32); ahi*bhi vanishes. */
AVX2_INLINE __m256i c_u64_prod(const char *x, const char *y)
{
    __m256i a = ld(x), b = ld(y);
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)),
                                     _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b));
    return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

/* 64-bit min/max: AVX2 only has a signed greater-than; unsigned compares
 * flip the sign bits first. */
AVX2_INLINE __m256i gt_u64(__m256i a, __m256i b)
{
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    return _mm256_cmpgt_epi64(_mm256_xor_si256(a, sign), _mm256_xor_si256(b, sign));
}

AVX2_INLINE __m256i c_i64_min(const char *x, const char *y)
{
    __m256i a = ld(x), b = ld(y);
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}

AVX2_INLINE __m256i c_i64_max(const char *x, const char *y)
{
    __m256i a = ld(x), b = ld(y);
    return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b));
}

AVX2_INLINE __m256i c_u64_min(const char *x, const char *y)
{
    __m256i a = ld(x), b = ld(y);
    return _mm256_blendv_epi8(a, b, gt_u64(a, b));
}

AVX2_INLINE __m256i c_u64_max(const char *x, const char *y)
{
    __m256i a = ld(x), b = ld(y);
    return _mm256_blendv_epi8(b, a, gt_u64(a, b));
}

/* ---- loops ----------------------------------------------------------------- */

/* Stream the output when it is large, not aliased, and element-aligned
 * relative to a 32-byte boundary (so that the aligned loop starts on an
 * element). */
static inline int use_nt(const char *d, const char *x, const char *y, size_t bytes,
                         size_t esize)
{
    return bytes >= nt_min_bytes && bytes >= 64 && d != x && d != y &&
           ((-(uintptr_t)d) & 31) % esize == 0;
}

#define UNROLL4(STORE, d, x, y, i, CHUNK)                                               \
    do {                                                                                \
        __m256i r0_ = CHUNK(x + i, y + i);                                             \
        __m256i r1_ = CHUNK(x + i + 32, y + i + 32);                                   \
        __m256i r2_ = CHUNK(x + i + 64, y + i + 64);                                   \
        __m256i r3_ = CHUNK(x + i + 96, y + i + 96);                                   \
        STORE((__m256i *)(d + i), r0_);                                                \
        STORE((__m256i *)(d + i + 32), r1_);                                           \
        STORE((__m256i *)(d + i + 64), r2_);                                           \
        STORE((__m256i *)(d + i + 96), r3_);                                           \
    } while (0)

#define BINARY_KERNEL(name, ESIZE, CHUNK)                                               \
    static AVX2 size_t name(void *dst, const void *a, const void *b, size_t count)     \
    {                                                                                   \
        char *d = dst;                                                                  \
        const char *x = a, *y = b;                                                      \
        size_t bytes = count * (ESIZE), i = 0;                                          \
                                                                                        \
        if (use_nt(d, x, y, bytes, ESIZE)) {                                            \
            _mm256_storeu_si256((__m256i *)d, CHUNK(x, y));                            \
            for (i = (size_t)(-(uintptr_t)d & 31); i + 128 <= bytes; i += 128)         \
                UNROLL4(_mm256_stream_si256, d, x, y, i, CHUNK);                       \
            _mm_sfence();                                                               \
        }                                                                               \
        for (; i + 128 <= bytes; i += 128)                                              \
            UNROLL4(_mm256_storeu_si256, d, x, y, i, CHUNK);                           \
        for (; i + 32 <= bytes; i += 32)                                                \
            _mm256_storeu_si256((__m256i *)(d + i), CHUNK(x + i, y + i));              \
        return i / (ESIZE);                                                             \
    }

BINARY_KERNEL(k_u8_sum, 1, c_u8_sum)
BINARY_KERNEL(k_u8_prod, 1, c_u8_prod)
BINARY_KERNEL(k_i8_min, 1, c_i8_min)
BINARY_KERNEL(k_i8_max, 1, c_i8_max)
BINARY_KERNEL(k_u8_min, 1, c_u8_min)
BINARY_KERNEL(k_u8_max, 1, c_u8_max)
BINARY_KERNEL(k_u32_sum, 4, c_u32_sum)
BINARY_KERNEL(k_u32_prod, 4, c_u32_prod)
BINARY_KERNEL(k_i32_min, 4, c_i32_min)
BINARY_KERNEL(k_i32_max, 4, c_i32_max)
BINARY_KERNEL(k_u32_min, 4, c_u32_min)
BINARY_KERNEL(k_u32_max, 4, c_u32_max)
BINARY_KERNEL(k_u64_sum, 8, c_u64_sum)
BINARY_KERNEL(k_u64_prod, 8, c_u64_prod)
BINARY_KERNEL(k_i64_min, 8, c_i64_min)
BINARY_KERNEL(k_i64_max, 8, c_i64_max)
BINARY_KERNEL(k_u64_min, 8, c_u64_min)
BINARY_KERNEL(k_u64_max, 8, c_u64_max)
BINARY_KERNEL(k_f32_sum, 4, c_f32_sum)
BINARY_KERNEL(k_f32_prod, 4, c_f32_prod)
BINARY_KERNEL(k_f32_min, 4, c_f32_min)
BINARY_KERNEL(k_f32_max, 4, c_f32_max)
BINARY_KERNEL(k_f64_sum, 8, c_f64_sum)
BINARY_KERNEL(k_f64_prod, 8, c_f64_prod)
BINARY_KERNEL(k_f64_min, 8, c_f64_min)
BINARY_KERNEL(k_f64_max, 8, c_f64_max)
BINARY_KERNEL(k_h16_sum, 2, c_h16_sum)
BINARY_KERNEL(k_h16_prod, 2, c_h16_prod)
BINARY_KERNEL(k_h16_min, 2, c_h16_min)
BINARY_KERNEL(k_h16_max, 2, c_h16_max)
BINARY_KERNEL(k_bf16_sum, 2, c_bf16_sum)
BINARY_KERNEL(k_bf16_prod, 2, c_bf16_prod)
BINARY_KERNEL(k_bf16_min, 2, c_bf16_min)
BINARY_KERNEL(k_bf16_max, 2, c_bf16_max)

/* A "chunk" of a copy: the first operand, as it is. */
AVX2_INLINE __m256i c_copy(const char *x, const char *y)
{
    (void)y;
    return _mm256_loadu_si256((const __m256i *)x);
}

/* memcpy with streaming stores, from the first 32-byte aligned byte of
 * dst (the bytes before it are stored normally; the tail is the
 * caller's). */
static AVX2 size_t copy_nt(void *dst, const void *src, size_t len)
{
    char *d = dst;
    const char *x = src;
    size_t i;

    if (len < 64)
        return 0;
    _mm256_storeu_si256((__m256i *)d, c_copy(x, x));
    for (i = (size_t)(-(uintptr_t)d & 31); i + 128 <= len; i += 128)
        UNROLL4(_mm256_stream_si256, d, x, x, i, c_copy);
    _mm_sfence();
    return i;
}

/* ---- AVG's division: x / n, one rounding ------------------------------------ */

static AVX2 size_t avg_f32(void *buf, size_t count, int n)
{
    float *p = buf;
    const __m256 dv = _mm256_set1_ps((float)n);
    size_t i = 0;
    for (; i + 8 <= count; i += 8)
        _mm256_storeu_ps(p + i, ps_canon(_mm256_div_ps(_mm256_loadu_ps(p + i), dv)));
    return i;
}

static AVX2 size_t avg_f64(void *buf, size_t count, int n)
{
    double *p = buf;
    const __m256d dv = _mm256_set1_pd((double)n);
    size_t i = 0;
    for (; i + 4 <= count; i += 4)
        _mm256_storeu_pd(p + i, pd_canon(_mm256_div_pd(_mm256_loadu_pd(p + i), dv)));
    return i;
}

static AVX2 size_t avg_h16(void *buf, size_t count, int n)
{
    char *p = buf;
    const __m256 dv = _mm256_set1_ps((float)n);
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        __m256 v = ps_canon(_mm256_div_ps(_mm256_cvtph_ps(ld128(p + 2 * i)), dv));
        _mm_storeu_si128((__m128i *)(p + 2 * i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    }
    return i;
}

static AVX2 size_t avg_bf16(void *buf, size_t count, int n)
{
    char *p = buf;
    const __m256 dv = _mm256_set1_ps((float)n);
    size_t i = 0;
    for (; i + 16 <= count; i += 16) {
        __m256i v = ld(p + 2 * i);
        __m256 lo = ps_canon(_mm256_div_ps(bf_lo(v), dv));
        __m256 hi = ps_canon(_mm256_div_ps(bf_hi(v), dv));
        _mm256_storeu_si256((__m256i *)(p + 2 * i), bf_pack(lo, hi));
    }
    return i;
}

/* ---- the table ------------------------------------------------------------ */

static void set4(coll_reduce_impl_table_t *t, coll_datatype_t dt, coll_reduce_kernel_t sum,
                 coll_reduce_kernel_t prod, coll_reduce_kernel_t min, coll_reduce_kernel_t max)
{
    t->binary[dt][COLL_SUM] = sum;
    t->binary[dt][COLL_PROD] = prod;
    t->binary[dt][COLL_MIN] = min;
    t->binary[dt][COLL_MAX] = max;
}

void coll_reduce_avx2_fill(coll_reduce_impl_table_t *t, size_t nt_threshold)
{
    nt_min_bytes = nt_threshold;
    t->copy_nt = copy_nt;
    set4(t, COLL_INT8, k_u8_sum, k_u8_prod, k_i8_min, k_i8_max);
    set4(t, COLL_UINT8, k_u8_sum, k_u8_prod, k_u8_min, k_u8_max);
    set4(t, COLL_INT32, k_u32_sum, k_u32_prod, k_i32_min, k_i32_max);
    set4(t, COLL_UINT32, k_u32_sum, k_u32_prod, k_u32_min, k_u32_max);
    set4(t, COLL_INT64, k_u64_sum, k_u64_prod, k_i64_min, k_i64_max);
    set4(t, COLL_UINT64, k_u64_sum, k_u64_prod, k_u64_min, k_u64_max);
    set4(t, COLL_FLOAT16, k_h16_sum, k_h16_prod, k_h16_min, k_h16_max);
    set4(t, COLL_BFLOAT16, k_bf16_sum, k_bf16_prod, k_bf16_min, k_bf16_max);
    set4(t, COLL_FLOAT32, k_f32_sum, k_f32_prod, k_f32_min, k_f32_max);
    set4(t, COLL_FLOAT64, k_f64_sum, k_f64_prod, k_f64_min, k_f64_max);
    /* AVG reduces with the sum kernel; the division is separate. */
    t->binary[COLL_FLOAT16][COLL_AVG] = k_h16_sum;
    t->binary[COLL_BFLOAT16][COLL_AVG] = k_bf16_sum;
    t->binary[COLL_FLOAT32][COLL_AVG] = k_f32_sum;
    t->binary[COLL_FLOAT64][COLL_AVG] = k_f64_sum;
    t->avg[COLL_FLOAT16] = avg_h16;
    t->avg[COLL_BFLOAT16] = avg_bf16;
    t->avg[COLL_FLOAT32] = avg_f32;
    t->avg[COLL_FLOAT64] = avg_f64;
}

#endif /* __x86_64__ */
