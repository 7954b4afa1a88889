/*
 * reduce.c: local reduction kernels (dst = a OP b), the portable scalar
 * implementation, float16/bfloat16 conversions and the run-time choice of
 * implementation.
 *
 * Every kernel exists in scalar form here; reduce_avx2.c adds vector forms
 * of most of them. The vector kernels handle a prefix of whole vectors and
 * the scalar kernel finishes the tail, so the two must agree bit for bit:
 * that is why every rule below is spelled out (canonical NaNs, ordered
 * min/max on signed zeros, one rounding per step) rather than left to what
 * one instruction happens to do. See reduce.h for the semantics.
 *
 * The implementation is chosen once per process (pthread_once): AVX2+F16C
 * where the CPU has both, else scalar. The scalar loops touch memory only
 * through memcpy, so that a pointer that is not aligned to its element size
 * is still defined behaviour.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "copy.h"
#include "error.h"
#include "log.h"
#include "reduce.h"

#define F16_QNAN 0x7e00u
#define BF16_QNAN 0x7fc0u
#define F32_QNAN 0x7fc00000u
#define F64_QNAN 0x7ff8000000000000ull

/* ---- bit casts ---------------------------------------------------------- */

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline uint64_t f64_bits(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline double f64_from_bits(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* ---- conversions -------------------------------------------------------- */

float coll_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;

    if (exp == 0x1f) /* inf, or NaN made quiet (as F16C does) */
        return f32_from_bits(sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp != 0)
        return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0)
        return f32_from_bits(sign);
    /* Subnormal: mant * 2^-24. Shift the leading 1 up to the implicit bit
     * position (bit 10); each shift lowers the exponent from 2^-14. */
    int e = -14;
    while (!(mant & 0x400u)) {
        mant <<= 1;
        e--;
    }
    return f32_from_bits(sign | ((uint32_t)(e + 127) << 23) | ((mant & 0x3ffu) << 13));
}

uint16_t coll_float_to_half(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp;

    u &= 0x7fffffffu;
    if (u >= 0x7f800000u) { /* inf, or NaN: keep the leading payload, set quiet */
        if (u == 0x7f800000u)
            return sign | 0x7c00u;
        return (uint16_t)(sign | 0x7c00u | 0x200u | ((u >> 13) & 0x3ffu));
    }
    /* 65520 is halfway between 65504 (largest half, odd significand) and
     * 65536: the tie goes to the even one, which overflows to inf. */
    if (u >= 0x477ff000u)
        return sign | 0x7c00u;
    exp = u >> 23;
    if (exp >= 113) {
        /* Normal half. Rebias the exponent in place (127 -> 15) and round
         * the 13 dropped bits to nearest even; a carry out of the
         * significand correctly bumps the exponent. */
        uint32_t v = u - (112u << 23);
        v += 0xfffu + ((v >> 13) & 1u);
        return (uint16_t)(sign | (v >> 13));
    }
    if (exp < 102) /* below 2^-25 (half of the smallest subnormal): zero */
        return sign;
    /* Subnormal half, in units of 2^-24: the 24-bit significand m is worth
     * m * 2^(exp - 150), i.e. m >> (126 - exp) units, rounded. A result of
     * 0x400 is the smallest normal, which is also the right encoding. */
    uint32_t m = (u & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp; /* 14 .. 24 */
    uint32_t r = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u)))
        r++;
    return (uint16_t)(sign | r);
}

float coll_bf16_to_float(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

/* Round the upper half of a float that is not a NaN, to nearest even. Kept
 * separate because the kernels (after canonicalizing NaNs) use exactly this
 * formula, as does the vector code. */
static inline uint16_t bf16_round(uint32_t u)
{
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

uint16_t coll_float_to_bf16(float f)
{
    uint32_t u = f32_bits(f);

    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: truncate, keep it quiet */
        return (uint16_t)((u >> 16) | 0x40u);
    return bf16_round(u);
}

/* ---- element operations -------------------------------------------------- */

/* Integers: sum and prod in the unsigned type of the same width, which
 * wraps with the same bits for the signed type. */
static inline uint8_t u8_sum(uint8_t a, uint8_t b) { return (uint8_t)(a + b); }
static inline uint8_t u8_prod(uint8_t a, uint8_t b) { return (uint8_t)(a * b); }
static inline uint32_t u32_sum(uint32_t a, uint32_t b) { return a + b; }
static inline uint32_t u32_prod(uint32_t a, uint32_t b) { return a * b; }
static inline uint64_t u64_sum(uint64_t a, uint64_t b) { return a + b; }
static inline uint64_t u64_prod(uint64_t a, uint64_t b) { return a * b; }

#define MINMAX_FNS(T, name)                                                   \
    static inline T name##_min(T a, T b) { return b < a ? b : a; }            \
    static inline T name##_max(T a, T b) { return b > a ? b : a; }
MINMAX_FNS(int8_t, i8)
MINMAX_FNS(uint8_t, u8)
MINMAX_FNS(int32_t, i32)
MINMAX_FNS(uint32_t, u32)
MINMAX_FNS(int64_t, i64)
MINMAX_FNS(uint64_t, u64)

/* Floats: NaN results become the canonical quiet NaN. min/max order the
 * signed zeros (-0 < +0) through the bits: two equal values have equal
 * bits unless they are zeros, and OR of the bits then gives -0, AND +0. */
static inline float f32_canon(float r)
{
    return r != r ? f32_from_bits(F32_QNAN) : r;
}

static inline float f32_sum(float a, float b) { return f32_canon(a + b); }
static inline float f32_prod(float a, float b) { return f32_canon(a * b); }

static inline float f32_min(float a, float b)
{
    if (a != a || b != b)
        return f32_from_bits(F32_QNAN);
    if (a < b)
        return a;
    if (b < a)
        return b;
    return f32_from_bits(f32_bits(a) | f32_bits(b));
}

static inline float f32_max(float a, float b)
{
    if (a != a || b != b)
        return f32_from_bits(F32_QNAN);
    if (a > b)
        return a;
    if (b > a)
        return b;
    return f32_from_bits(f32_bits(a) & f32_bits(b));
}

static inline double f64_canon(double r)
{
    return r != r ? f64_from_bits(F64_QNAN) : r;
}

static inline double f64_sum(double a, double b) { return f64_canon(a + b); }
static inline double f64_prod(double a, double b) { return f64_canon(a * b); }

static inline double f64_min(double a, double b)
{
    if (a != a || b != b)
        return f64_from_bits(F64_QNAN);
    if (a < b)
        return a;
    if (b < a)
        return b;
    return f64_from_bits(f64_bits(a) | f64_bits(b));
}

static inline double f64_max(double a, double b)
{
    if (a != a || b != b)
        return f64_from_bits(F64_QNAN);
    if (a > b)
        return a;
    if (b > a)
        return b;
    return f64_from_bits(f64_bits(a) & f64_bits(b));
}

/* float16 and bfloat16: widen both (exact), combine in float32 (whose NaN
 * result is already canonical), round once. */
#define F16_FN(op)                                                                  \
    static inline uint16_t h16_##op(uint16_t a, uint16_t b)                         \
    {                                                                               \
        return coll_float_to_half(f32_##op(coll_half_to_float(a), coll_half_to_float(b))); \
    }                                                                               \
    static inline uint16_t bf16_##op(uint16_t a, uint16_t b)                        \
    {                                                                               \
        return bf16_round(f32_bits(f32_##op(coll_bf16_to_float(a), coll_bf16_to_float(b)))); \
    }
F16_FN(sum)
F16_FN(prod)
F16_FN(min)
F16_FN(max)

/* ---- scalar kernels ------------------------------------------------------ */

/* Blocks of SCALAR_BLOCK bytes are copied into local arrays first: the
 * compiler then knows that nothing aliases and that the trip count is
 * fixed, so even at -O2 it vectorizes the simple operations with the base
 * instruction set (SSE2, NEON); what is left goes element by element. */
#define SCALAR_BLOCK 128

#define SCALAR_KERNEL(name, T, FN)                                                \
    static size_t name(void *dst, const void *a, const void *b, size_t count)     \
    {                                                                             \
        enum { N = SCALAR_BLOCK / sizeof(T) };                                    \
        unsigned char *d = dst;                                                   \
        const unsigned char *x = a, *y = b;                                       \
        size_t i = 0;                                                             \
        for (; i + N <= count; i += N) {                                          \
            T p[N], q[N], r[N];                                                   \
            memcpy(p, x + i * sizeof(T), sizeof(p));                              \
            memcpy(q, y + i * sizeof(T), sizeof(q));                              \
            for (size_t j = 0; j < N; j++)                                        \
                r[j] = FN(p[j], q[j]);                                            \
            memcpy(d + i * sizeof(T), r, sizeof(r));                              \
        }                                                                         \
        for (; i < count; i++) {                                                  \
            T p, q, r;                                                            \
            memcpy(&p, x + i * sizeof(T), sizeof(T));                             \
            memcpy(&q, y + i * sizeof(T), sizeof(T));                             \
            r = FN(p, q);                                                         \
            memcpy(d + i * sizeof(T), &r, sizeof(T));                             \
        }                                                                         \
        return count;                                                             \
    }

SCALAR_KERNEL(s_u8_sum, uint8_t, u8_sum)
SCALAR_KERNEL(s_u8_prod, uint8_t, u8_prod)
SCALAR_KERNEL(s_i8_min, int8_t, i8_min)
SCALAR_KERNEL(s_i8_max, int8_t, i8_max)
SCALAR_KERNEL(s_u8_min, uint8_t, u8_min)
SCALAR_KERNEL(s_u8_max, uint8_t, u8_max)
SCALAR_KERNEL(s_u32_sum, uint32_t, u32_sum)
SCALAR_KERNEL(s_u32_prod, uint32_t, u32_prod)
SCALAR_KERNEL(s_i32_min, int32_t, i32_min)
SCALAR_KERNEL(s_i32_max, int32_t, i32_max)
SCALAR_KERNEL(s_u32_min, uint32_t, u32_min)
SCALAR_KERNEL(s_u32_max, uint32_t, u32_max)
SCALAR_KERNEL(s_u64_sum, uint64_t, u64_sum)
SCALAR_KERNEL(s_u64_prod, uint64_t, u64_prod)
SCALAR_KERNEL(s_i64_min, int64_t, i64_min)
SCALAR_KERNEL(s_i64_max, int64_t, i64_max)
SCALAR_KERNEL(s_u64_min, uint64_t, u64_min)
SCALAR_KERNEL(s_u64_max, uint64_t, u64_max)
SCALAR_KERNEL(s_f32_sum, float, f32_sum)
SCALAR_KERNEL(s_f32_prod, float, f32_prod)
SCALAR_KERNEL(s_f32_min, float, f32_min)
SCALAR_KERNEL(s_f32_max, float, f32_max)
SCALAR_KERNEL(s_f64_sum, double, f64_sum)
SCALAR_KERNEL(s_f64_prod, double, f64_prod)
SCALAR_KERNEL(s_f64_min, double, f64_min)
SCALAR_KERNEL(s_f64_max, double, f64_max)
SCALAR_KERNEL(s_h16_sum, uint16_t, h16_sum)
SCALAR_KERNEL(s_h16_prod, uint16_t, h16_prod)
SCALAR_KERNEL(s_h16_min, uint16_t, h16_min)
SCALAR_KERNEL(s_h16_max, uint16_t, h16_max)
SCALAR_KERNEL(s_bf16_sum, uint16_t, bf16_sum)
SCALAR_KERNEL(s_bf16_prod, uint16_t, bf16_prod)
SCALAR_KERNEL(s_bf16_min, uint16_t, bf16_min)
SCALAR_KERNEL(s_bf16_max, uint16_t, bf16_max)

/* AVG's division, x / n rounded once to the type (float16 and bfloat16
 * divide in float32). */
#define SCALAR_AVG_KERNEL(name, T, FN)                                            \
    static size_t name(void *buf, size_t count, int n)                            \
    {                                                                             \
        unsigned char *p = buf;                                                   \
        for (size_t i = 0; i < count; i++) {                                      \
            T v;                                                                  \
            memcpy(&v, p + i * sizeof(T), sizeof(T));                             \
            v = FN(v, n);                                                         \
            memcpy(p + i * sizeof(T), &v, sizeof(T));                             \
        }                                                                         \
        return count;                                                             \
    }

static inline float f32_div(float v, int n) { return f32_canon(v / (float)n); }
static inline double f64_div(double v, int n) { return f64_canon(v / (double)n); }
static inline uint16_t h16_div(uint16_t v, int n)
{
    return coll_float_to_half(f32_div(coll_half_to_float(v), n));
}
static inline uint16_t bf16_div(uint16_t v, int n)
{
    return bf16_round(f32_bits(f32_div(coll_bf16_to_float(v), n)));
}

SCALAR_AVG_KERNEL(s_f32_avg, float, f32_div)
SCALAR_AVG_KERNEL(s_f64_avg, double, f64_div)
SCALAR_AVG_KERNEL(s_h16_avg, uint16_t, h16_div)
SCALAR_AVG_KERNEL(s_bf16_avg, uint16_t, bf16_div)

/* The scalar table is complete: a NULL entry means "not supported". AVG
 * reduces with the sum kernel. */
#define OPS4(sum, prod, min, max) {[COLL_SUM] = sum, [COLL_PROD] = prod, [COLL_MIN] = min, [COLL_MAX] = max}
#define OPS5(sum, prod, min, max) \
    {[COLL_SUM] = sum, [COLL_PROD] = prod, [COLL_MIN] = min, [COLL_MAX] = max, [COLL_AVG] = sum}

static const coll_reduce_impl_table_t scalar_table = {
    .name = "scalar",
    .binary = {
        [COLL_INT8] = OPS4(s_u8_sum, s_u8_prod, s_i8_min, s_i8_max),
        [COLL_UINT8] = OPS4(s_u8_sum, s_u8_prod, s_u8_min, s_u8_max),
        [COLL_INT32] = OPS4(s_u32_sum, s_u32_prod, s_i32_min, s_i32_max),
        [COLL_UINT32] = OPS4(s_u32_sum, s_u32_prod, s_u32_min, s_u32_max),
        [COLL_INT64] = OPS4(s_u64_sum, s_u64_prod, s_i64_min, s_i64_max),
        [COLL_UINT64] = OPS4(s_u64_sum, s_u64_prod, s_u64_min, s_u64_max),
        [COLL_FLOAT16] = OPS5(s_h16_sum, s_h16_prod, s_h16_min, s_h16_max),
        [COLL_BFLOAT16] = OPS5(s_bf16_sum, s_bf16_prod, s_bf16_min, s_bf16_max),
        [COLL_FLOAT32] = OPS5(s_f32_sum, s_f32_prod, s_f32_min, s_f32_max),
        [COLL_FLOAT64] = OPS5(s_f64_sum, s_f64_prod, s_f64_min, s_f64_max),
    },
    .avg = {
        [COLL_FLOAT16] = s_h16_avg,
        [COLL_BFLOAT16] = s_bf16_avg,
        [COLL_FLOAT32] = s_f32_avg,
        [COLL_FLOAT64] = s_f64_avg,
    },
};

/* ---- choosing the implementation ----------------------------------------- */

static pthread_once_t impl_once = PTHREAD_ONCE_INIT;
static const coll_reduce_impl_table_t *best_table = &scalar_table;
static int force_scalar;
static size_t copy_nt_min = SIZE_MAX;

/* Without the kernel's figure, a CPUID figure above this is taken for a
 * whole socket's L3 that a hypervisor passed through: no core complex has
 * more than 96 MiB of L3 today. */
#define LLC_PLAUSIBLE_BYTES (128ul << 20)
#define LLC_DEFAULT_BYTES (32ul << 20)

size_t coll_llc_choose(size_t sysfs_kib, long cpuid_bytes, int *guessed)
{
    int guess = 0;
    size_t bytes;

    if (sysfs_kib > 0)
        bytes = sysfs_kib * 1024;
    else if (cpuid_bytes > 0 && (size_t)cpuid_bytes <= LLC_PLAUSIBLE_BYTES)
        bytes = (size_t)cpuid_bytes;
    else {
        bytes = LLC_DEFAULT_BYTES;
        guess = 1;
    }
    if (guessed)
        *guessed = guess;
    return bytes;
}

/* The last-level cache, from sysfs: in VMs CPUID (which sysconf reads)
 * may report the host socket's whole L3: 384 MiB on the development VM of
 * 2026-11 (which had sysfs), 508 MiB on that of 2026-12 (which has no
 * /sys/devices/system/cpu/cpu0/cache), whose cores share 32 MiB. */
size_t coll_llc_bytes(int *guessed)
{
    size_t kib = 0;
    char unit = 0;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cache/index3/size", "re");

    if (f) {
        if (fscanf(f, "%zu%c", &kib, &unit) != 2 || unit != 'K')
            kib = 0;
        fclose(f);
    }
    return coll_llc_choose(kib, kib ? 0 : sysconf(_SC_LEVEL3_CACHE_SIZE), guessed);
}

#if defined(__x86_64__)
static coll_reduce_impl_table_t vector_table;

/* __builtin_cpu_supports("avx2") also checks that the OS saves the YMM
 * registers. F16C is asked of CPUID directly (leaf 1, ECX bit 29) because
 * clang's builtin does not know the name "f16c". */
static int cpu_has_avx2_f16c(void)
{
    unsigned eax, ebx, ecx, edx;

    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2"))
        return 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
        return 0;
    return (ecx >> 29) & 1u;
}
#endif

static void impl_select(void)
{
#if defined(__x86_64__)
    if (cpu_has_avx2_f16c()) {
        size_t llc = coll_llc_bytes(NULL);
        /* A reduction streams its output once the two inputs and the
         * output no longer fit in the L3 (half the L3 of output: 1.5 x L3
         * in all); below that the result is better left in cache for
         * whoever reads it next (the send of the next ring step). Measured
         * on the development machine (32 MiB L3; bench/reduce_bench.c),
         * streaming c = a + b was 10-15% faster from 16 MiB of output up
         * and 10% slower at 1 to 4 MiB.
         * A copy streams from an eighth of the L3, because a collective's
         * copies run on every rank of the host at once, next to the
         * transport's own copies: all-gather and all-to-all out of place,
         * 2 and 4 ranks, 2 to 64 MiB, alternating runs on that machine:
         * copies of 4 MiB and more were 10-40% faster streamed, of 2 MiB
         * level to 15% slower, of 512 KiB 25% slower. */
        size_t nt = llc / 2;
        copy_nt_min = llc / 8;
        vector_table.name = "avx2+f16c";
        coll_reduce_avx2_fill(&vector_table, nt);
        best_table = &vector_table;
        COLL_INFO(COLL_SUBSYS_ALGO,
                  "reduction kernels: %s, non-temporal stores from %zu KiB (copies from %zu KiB)",
                  best_table->name, nt / 1024, copy_nt_min / 1024);
        return;
    }
#endif
    COLL_INFO(COLL_SUBSYS_ALGO, "reduction kernels: %s", best_table->name);
}

static const coll_reduce_impl_table_t *impl_get(void)
{
    pthread_once(&impl_once, impl_select);
    if (__atomic_load_n(&force_scalar, __ATOMIC_RELAXED))
        return &scalar_table;
    return best_table;
}

/* A copy with non-temporal stores from `nt_min` bytes up, memcpy below. */
static void copy_nt_from(void *dst, const void *src, size_t len, size_t nt_min)
{
    const coll_reduce_impl_table_t *t = impl_get();
    size_t done = 0;

    if (len >= nt_min && t->copy_nt)
        done = t->copy_nt(dst, src, len);
    coll_copy((char *)dst + done, (const char *)src + done, len - done);
}

void coll_reduce_force_scalar(int on)
{
    __atomic_store_n(&force_scalar, on != 0, __ATOMIC_RELAXED);
}

const char *coll_reduce_impl(void)
{
    return impl_get()->name;
}

/* ---- API ----------------------------------------------------------------- */

const char *coll_reduce_datatype_name(coll_datatype_t dt)
{
    static const char *const names[COLL_NUM_DATATYPES] = {
        [COLL_INT8] = "int8",       [COLL_UINT8] = "uint8",       [COLL_INT32] = "int32",
        [COLL_UINT32] = "uint32",   [COLL_INT64] = "int64",       [COLL_UINT64] = "uint64",
        [COLL_FLOAT16] = "float16", [COLL_BFLOAT16] = "bfloat16", [COLL_FLOAT32] = "float32",
        [COLL_FLOAT64] = "float64",
    };
    return (unsigned)dt < COLL_NUM_DATATYPES ? names[dt] : "unknown";
}

const char *coll_reduce_op_name(coll_op_t op)
{
    static const char *const names[COLL_NUM_OPS] = {
        [COLL_SUM] = "sum", [COLL_PROD] = "prod", [COLL_MIN] = "min",
        [COLL_MAX] = "max", [COLL_AVG] = "avg",
    };
    return (unsigned)op < COLL_NUM_OPS ? names[op] : "unknown";
}

int coll_reduce_supported(coll_datatype_t dt, coll_op_t op)
{
    if ((unsigned)dt >= COLL_NUM_DATATYPES || (unsigned)op >= COLL_NUM_OPS)
        return 0;
    return scalar_table.binary[dt][op] != NULL;
}

/* The checks shared by both entry points; *esize_p gets the element size. */
static coll_status_t reduce_check(const char *fn, coll_datatype_t dt, coll_op_t op,
                                  size_t count, size_t *esize_p)
{
    size_t esize = coll_datatype_size(dt);

    if (esize == 0)
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                          "%s: unknown datatype %d (op %s)", fn, (int)dt, coll_reduce_op_name(op));
    if ((unsigned)op >= COLL_NUM_OPS)
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG, "%s: unknown op %d (datatype %s)",
                          fn, (int)op, coll_reduce_datatype_name(dt));
    if (!coll_reduce_supported(dt, op))
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_UNSUPPORTED,
                          "%s: op %s is not defined for datatype %s (avg is for float16, "
                          "bfloat16, float32 and float64 only)",
                          fn, coll_reduce_op_name(op), coll_reduce_datatype_name(dt));
    if (count > SIZE_MAX / esize)
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                          "%s: count %zu of %s is too large", fn, count,
                          coll_reduce_datatype_name(dt));
    *esize_p = esize;
    return COLL_OK;
}

coll_status_t coll_reduce_local(void *dst, const void *a, const void *b, size_t count,
                                coll_datatype_t dt, coll_op_t op)
{
    const coll_reduce_impl_table_t *t;
    coll_reduce_kernel_t vec;
    size_t esize, done = 0;

    COLL_CHECK(reduce_check("coll_reduce_local", dt, op, count, &esize));
    if (count == 0)
        return COLL_OK;
    if (!dst || !a || !b)
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                          "coll_reduce_local: NULL buffer with count %zu (%s %s)", count,
                          coll_reduce_datatype_name(dt), coll_reduce_op_name(op));
    t = impl_get();
    vec = t->binary[dt][op];
    if (vec && t != &scalar_table)
        done = vec(dst, a, b, count);
    if (done < count)
        scalar_table.binary[dt][op]((char *)dst + done * esize, (const char *)a + done * esize,
                                    (const char *)b + done * esize, count - done);
    return COLL_OK;
}

void coll_copy_local(void *dst, const void *src, size_t len)
{
    copy_nt_from(dst, src, len, copy_nt_min);
}

void coll_copy_local_part(void *dst, const void *src, size_t len, size_t whole)
{
    copy_nt_from(dst, src, len, whole >= copy_nt_min ? 0 : SIZE_MAX);
}

void coll_copy_stream(void *dst, const void *src, size_t len)
{
    copy_nt_from(dst, src, len, 0);
}

coll_status_t coll_reduce_finish_avg(void *buf, size_t count, coll_datatype_t dt, int n)
{
    const coll_reduce_impl_table_t *t;
    size_t esize, done = 0;

    COLL_CHECK(reduce_check("coll_reduce_finish_avg", dt, COLL_AVG, count, &esize));
    if (n < 1)
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                          "coll_reduce_finish_avg: divisor %d of %s is not positive", n,
                          coll_reduce_datatype_name(dt));
    if (count == 0)
        return COLL_OK;
    if (!buf)
        return coll_error(COLL_SUBSYS_ALGO, COLL_ERR_INVALID_ARG,
                          "coll_reduce_finish_avg: NULL buffer with count %zu (%s)", count,
                          coll_reduce_datatype_name(dt));
    t = impl_get();
    if (t->avg[dt] && t != &scalar_table)
        done = t->avg[dt](buf, count, n);
    if (done < count)
        scalar_table.avg[dt]((char *)buf + done * esize, count - done, n);
    return COLL_OK;
}
