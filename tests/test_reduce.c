/*
 * test_reduce.c: the local reduction kernels (libcoll/reduce.c and
 * reduce_avx2.c) against a reference written here, independently:
 *   - every datatype x op x count x pointer offset x aliasing, on random
 *     inputs mixed with special values, on the vector and the scalar path,
 *     with guard bytes around the output;
 *   - the two paths give identical bytes, including at a size where the
 *     vector path streams its stores and on every float16/bfloat16 value;
 *   - float16/bfloat16 conversions: exhaustive round trips, rounding at and
 *     around every tie against a nearest-value search (and against GCC's
 *     _Float16 where it exists);
 *   - min/max are commutative and associative bit for bit, on triples of
 *     NaNs, signed zeros, infinities and subnormals;
 *   - unsupported pairs and bad enums give the documented codes;
 *   - the L3 size the copy thresholds derive from (coll_llc_choose).
 * The reference implements the rules stated in reduce.h: wrapping integer
 * sum/prod, canonical NaNs, ordered signed zeros in min/max, float16 and
 * bfloat16 combined in float32 and rounded once.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "harness.h"
#include "reduce.h"

#define TIMEOUT_S 60
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Check's ck_assert* records the location of every assertion that passes
 * (a write to its pipe): far too slow for millions of elements. These only
 * act on failure. */
#define REQUIRE(cond, ...)                                                         \
    do {                                                                           \
        if (!(cond))                                                               \
            ck_abort_msg(__VA_ARGS__);                                             \
    } while (0)

#define CALL_OK(call)                                                              \
    do {                                                                           \
        coll_status_t call_ok_st_ = (call);                                        \
        REQUIRE(call_ok_st_ == COLL_OK, "%s -> %s: %s", #call,                     \
                coll_status_str(call_ok_st_), coll_get_last_error(NULL));          \
    } while (0)

static const coll_datatype_t all_dts[] = {
    COLL_INT8,    COLL_UINT8,    COLL_INT32,   COLL_UINT32,  COLL_INT64,
    COLL_UINT64,  COLL_FLOAT16,  COLL_BFLOAT16, COLL_FLOAT32, COLL_FLOAT64,
};
static const coll_datatype_t float_dts[] = {COLL_FLOAT16, COLL_BFLOAT16, COLL_FLOAT32,
                                            COLL_FLOAT64};
static const coll_op_t all_ops[] = {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX, COLL_AVG};
static const size_t counts[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 63, 100, 1000, 4099};
#define MAX_COUNT 4099

static int is_float_dt(coll_datatype_t dt)
{
    return dt == COLL_FLOAT16 || dt == COLL_BFLOAT16 || dt == COLL_FLOAT32 || dt == COLL_FLOAT64;
}

/* 64-byte aligned memory (aligned_alloc wants a multiple of the alignment). */
static void *alloc64(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* ---- random numbers (xorshift64*, fixed seeds: failures reproduce) ------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* ---- bits ------------------------------------------------------------------ */

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float ffrom(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t dbits(double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    return u;
}

static double dfrom(uint64_t u)
{
    double f;
    memcpy(&f, &u, 8);
    return f;
}

static int half_is_nan(uint16_t h)
{
    return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

static int bf16_is_nan(uint16_t b)
{
    return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
}

/* ---- reference conversions, computed differently from the library --------- */

/* float16 -> float by arithmetic: value = significand * 2^exponent. */
static float ref_h2f(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v;
    if (e == 0x1f)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexpf((float)m, -24);
    else
        v = ldexpf((float)(1024 + m), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Values of the non-negative finite halves 0x0000..0x7bff, in order, and
 * 65536 for 0x7c00 (where rounding up past the largest half goes). */
static double half_value[0x7c01];

static void half_table_init(void)
{
    for (int h = 0; h < 0x7c00; h++)
        half_value[h] = (double)ref_h2f((uint16_t)h);
    half_value[0x7c00] = 65536.0;
}

/* float -> float16, round to nearest even, by searching the two halves
 * that bracket |f| and comparing distances. Not for NaN. */
static uint16_t ref_f2h(float f)
{
    double a = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    int lo = 0, hi = 0x7c00;

    if (half_value[0x7c00] == 0)
        half_table_init();
    if (a >= 65520.0) /* past 65504 + half an ulp (a tie goes to even 0x7c00) */
        return sign | 0x7c00;
    while (hi - lo > 1) { /* invariant: half_value[lo] <= a < half_value[hi] */
        int mid = (lo + hi) / 2;
        if (half_value[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    double dlo = a - half_value[lo], dhi = half_value[hi] - a;
    if (dlo < dhi || (dlo == dhi && (lo & 1) == 0))
        return sign | (uint16_t)lo;
    return sign | (uint16_t)hi;
}

static float ref_bf2f(uint16_t b)
{
    int e = (b >> 7) & 0xff, m = b & 0x7f;
    float v;
    if (e == 0xff)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexpf((float)m, -133);
    else
        v = ldexpf((float)(128 + m), e - 134);
    return (b & 0x8000) ? -v : v;
}

/* float -> bfloat16: the two candidates are the truncation and the next
 * value up in magnitude; compare distances in double (exact). Not for NaN. */
static uint16_t ref_f2bf(float f)
{
    uint32_t u = fbits(f);
    uint16_t sign = (uint16_t)(u >> 16) & 0x8000;
    uint16_t lo = (uint16_t)((u >> 16) & 0x7fff), hi = (uint16_t)(lo + 1);
    double a = fabs((double)f);
    double vlo = (double)ref_bf2f(lo);
    double vhi = hi == 0x7f80 ? ldexp(1.0, 128) : (double)ref_bf2f(hi);

    if (isinf(f))
        return sign | 0x7f80;
    double dlo = a - vlo, dhi = vhi - a;
    if (dlo < dhi || (dlo == dhi && (lo & 1) == 0))
        return sign | lo;
    return sign | hi;
}

/* ---- reference reduction ------------------------------------------------- */

static const uint32_t QNAN32 = 0x7fc00000u;
static const uint64_t QNAN64 = 0x7ff8000000000000ull;

static uint64_t ref_int(coll_op_t op, uint64_t ua, uint64_t ub, int bits, int is_signed)
{
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    int64_t sa, sb;
    int a_lt_b;

    if (op == COLL_SUM)
        return (ua + ub) & mask;
    if (op == COLL_PROD)
        return (ua * ub) & mask;
    if (is_signed) {
        /* Sign-extend by subtracting 2^bits from negative values. */
        if (bits == 64) {
            memcpy(&sa, &ua, 8);
            memcpy(&sb, &ub, 8);
        } else {
            sa = (int64_t)ua - ((ua >> (bits - 1)) & 1 ? (int64_t)1 << bits : 0);
            sb = (int64_t)ub - ((ub >> (bits - 1)) & 1 ? (int64_t)1 << bits : 0);
        }
        a_lt_b = sa < sb;
    } else {
        a_lt_b = ua < ub;
    }
    if (op == COLL_MIN)
        return a_lt_b ? ua : ub;
    return a_lt_b ? ub : ua;
}

static float ref_f32(coll_op_t op, float a, float b)
{
    float r;
    switch (op) {
    case COLL_SUM:
    case COLL_AVG:
        r = a + b;
        break;
    case COLL_PROD:
        r = a * b;
        break;
    default:
        if (isnan(a) || isnan(b))
            return ffrom(QNAN32);
        if (a == b && a == 0) { /* -0 < +0 */
            int neg = op == COLL_MIN ? (signbit(a) || signbit(b)) : (signbit(a) && signbit(b));
            return neg ? -0.0f : 0.0f;
        }
        if (op == COLL_MIN)
            r = a < b ? a : b;
        else
            r = a > b ? a : b;
        break;
    }
    return isnan(r) ? ffrom(QNAN32) : r;
}

static double ref_f64(coll_op_t op, double a, double b)
{
    double r;
    switch (op) {
    case COLL_SUM:
    case COLL_AVG:
        r = a + b;
        break;
    case COLL_PROD:
        r = a * b;
        break;
    default:
        if (isnan(a) || isnan(b))
            return dfrom(QNAN64);
        if (a == b && a == 0) {
            int neg = op == COLL_MIN ? (signbit(a) || signbit(b)) : (signbit(a) && signbit(b));
            return neg ? -0.0 : 0.0;
        }
        if (op == COLL_MIN)
            r = a < b ? a : b;
        else
            r = a > b ? a : b;
        break;
    }
    return isnan(r) ? dfrom(QNAN64) : r;
}

static uint16_t ref_h16(coll_op_t op, uint16_t a, uint16_t b)
{
    float r = ref_f32(op, ref_h2f(a), ref_h2f(b));
    return isnan(r) ? 0x7e00 : ref_f2h(r);
}

static uint16_t ref_bf16(coll_op_t op, uint16_t a, uint16_t b)
{
    float r = ref_f32(op, ref_bf2f(a), ref_bf2f(b));
    return isnan(r) ? 0x7fc0 : ref_f2bf(r);
}

/* One element: r = a OP b, all three pointers to one element of dt. */
static void ref_elem(coll_datatype_t dt, coll_op_t op, const void *pa, const void *pb, void *pr)
{
    size_t es = coll_datatype_size(dt);
    uint64_t ua = 0, ub = 0, ur;
    uint8_t u8a, u8b, u8r;
    uint16_t ha, hb, hr;
    uint32_t u32a, u32b, u32r;
    float fa, fb, fr;
    double da, db, dr;

    switch (dt) {
    case COLL_INT8:
    case COLL_UINT8:
        memcpy(&u8a, pa, 1);
        memcpy(&u8b, pb, 1);
        u8r = (uint8_t)ref_int(op, u8a, u8b, 8, dt == COLL_INT8);
        memcpy(pr, &u8r, 1);
        return;
    case COLL_INT32:
    case COLL_UINT32:
        memcpy(&u32a, pa, 4);
        memcpy(&u32b, pb, 4);
        u32r = (uint32_t)ref_int(op, u32a, u32b, 32, dt == COLL_INT32);
        memcpy(pr, &u32r, 4);
        return;
    case COLL_INT64:
    case COLL_UINT64:
        memcpy(&ua, pa, 8);
        memcpy(&ub, pb, 8);
        ur = ref_int(op, ua, ub, 64, dt == COLL_INT64);
        memcpy(pr, &ur, 8);
        return;
    case COLL_FLOAT16:
    case COLL_BFLOAT16:
        memcpy(&ha, pa, 2);
        memcpy(&hb, pb, 2);
        hr = dt == COLL_FLOAT16 ? ref_h16(op, ha, hb) : ref_bf16(op, ha, hb);
        memcpy(pr, &hr, 2);
        return;
    case COLL_FLOAT32:
        memcpy(&fa, pa, 4);
        memcpy(&fb, pb, 4);
        fr = ref_f32(op, fa, fb);
        memcpy(pr, &fr, 4);
        return;
    case COLL_FLOAT64:
        memcpy(&da, pa, 8);
        memcpy(&db, pb, 8);
        dr = ref_f64(op, da, db);
        memcpy(pr, &dr, 8);
        return;
    default:
        ck_abort_msg("bad dt %d (size %zu)", (int)dt, es);
    }
}

static void ref_avg_elem(coll_datatype_t dt, void *p, int n)
{
    uint16_t h;
    float f;
    double d;

    switch (dt) {
    case COLL_FLOAT16:
        memcpy(&h, p, 2);
        f = ref_h2f(h) / (float)n;
        h = isnan(f) ? 0x7e00 : ref_f2h(f);
        memcpy(p, &h, 2);
        return;
    case COLL_BFLOAT16:
        memcpy(&h, p, 2);
        f = ref_bf2f(h) / (float)n;
        h = isnan(f) ? 0x7fc0 : ref_f2bf(f);
        memcpy(p, &h, 2);
        return;
    case COLL_FLOAT32:
        memcpy(&f, p, 4);
        f = f / (float)n;
        if (isnan(f))
            f = ffrom(QNAN32);
        memcpy(p, &f, 4);
        return;
    case COLL_FLOAT64:
        memcpy(&d, p, 8);
        d = d / (double)n;
        if (isnan(d))
            d = dfrom(QNAN64);
        memcpy(p, &d, 8);
        return;
    default:
        ck_abort_msg("bad dt %d", (int)dt);
    }
}

/* ---- inputs ------------------------------------------------------------------ */

/* Special values per type, as bit patterns. */
static const uint64_t sp_i8[] = {0, 1, 0xff, 0x7f, 0x80, 0x02, 0xfe};
static const uint64_t sp_i32[] = {0, 1, 0xffffffff, 0x7fffffff, 0x80000000, 2, 0xfffffffe, 0x10000};
static const uint64_t sp_i64[] = {0, 1, ~0ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
                                  2, 0xffffffffull, 0x100000000ull};
static const uint64_t sp_h16[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe01,
                                  0x7fff, 0x0001, 0x83ff, 0x03ff, 0x0400, 0x7bff, 0xfbff,
                                  0x3c00, 0xbc00, 0x3c01};
static const uint64_t sp_bf16[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xffc1,
                                   0x7fff, 0x0001, 0x807f, 0x0080, 0x7f7f, 0xff7f, 0x3f80,
                                   0xbf80, 0x3f81};
static const uint64_t sp_f32[] = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
                                  0xffc00000, 0x7f800001, 0x7fc12345, 0xff812345, 0x00000001,
                                  0x807fffff, 0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000,
                                  0xbf800000, 0x33800000};
static const uint64_t sp_f64[] = {
    0x0000000000000000ull, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
    0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull, 0x7ff8123456789abcull,
    0xfff0000000012345ull, 0x0000000000000001ull, 0x800fffffffffffffull, 0x0010000000000000ull,
    0x7fefffffffffffffull, 0xffefffffffffffffull, 0x3ff0000000000000ull, 0xbff0000000000000ull,
    0x3ca0000000000000ull};

static void specials(coll_datatype_t dt, const uint64_t **list, size_t *n)
{
    switch (dt) {
    case COLL_INT8:
    case COLL_UINT8:
        *list = sp_i8, *n = ARRAY_LEN(sp_i8);
        break;
    case COLL_INT32:
    case COLL_UINT32:
        *list = sp_i32, *n = ARRAY_LEN(sp_i32);
        break;
    case COLL_INT64:
    case COLL_UINT64:
        *list = sp_i64, *n = ARRAY_LEN(sp_i64);
        break;
    case COLL_FLOAT16:
        *list = sp_h16, *n = ARRAY_LEN(sp_h16);
        break;
    case COLL_BFLOAT16:
        *list = sp_bf16, *n = ARRAY_LEN(sp_bf16);
        break;
    case COLL_FLOAT32:
        *list = sp_f32, *n = ARRAY_LEN(sp_f32);
        break;
    default:
        *list = sp_f64, *n = ARRAY_LEN(sp_f64);
        break;
    }
}

static void put_bits(void *p, coll_datatype_t dt, uint64_t v)
{
    uint8_t u8 = (uint8_t)v;
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;
    switch (coll_datatype_size(dt)) {
    case 1:
        memcpy(p, &u8, 1);
        break;
    case 2:
        memcpy(p, &u16, 2);
        break;
    case 4:
        memcpy(p, &u32, 4);
        break;
    default:
        memcpy(p, &v, 8);
        break;
    }
}

/* A moderate number: sign * (1 + m) * 2^e for small e, so that sums and
 * products of two of them round in interesting ways. */
static float moderate(void)
{
    uint64_t r = rnd();
    float v = ldexpf(1.0f + (float)(r & 0xffffff) / 16777216.0f, (int)((r >> 24) % 16) - 8);
    return (r >> 40) & 1 ? -v : v;
}

/* One element: 1/4 specials, 1/4 random bits, 1/2 moderate numbers (for
 * floats; random bits again for integers). */
static void gen_elem(void *p, coll_datatype_t dt)
{
    const uint64_t *sp;
    size_t nsp;
    unsigned k = (unsigned)(rnd() % 8);

    specials(dt, &sp, &nsp);
    if (k < 2) {
        put_bits(p, dt, sp[rnd() % nsp]);
    } else if (k < 4 || !is_float_dt(dt)) {
        put_bits(p, dt, rnd());
    } else {
        float f = moderate();
        double d = (double)f * (1.0 + (double)(rnd() & 0xffff) * 0x1p-40);
        switch (dt) {
        case COLL_FLOAT16:
            put_bits(p, dt, ref_f2h(f));
            break;
        case COLL_BFLOAT16:
            put_bits(p, dt, ref_f2bf(f));
            break;
        case COLL_FLOAT32:
            memcpy(p, &f, 4);
            break;
        default:
            memcpy(p, &d, 8);
            break;
        }
    }
}

static void gen(void *buf, coll_datatype_t dt, size_t count)
{
    size_t es = coll_datatype_size(dt);
    for (size_t i = 0; i < count; i++)
        gen_elem((char *)buf + i * es, dt);
}

static void ref_run(coll_datatype_t dt, coll_op_t op, const void *a, const void *b, void *r,
                    size_t count)
{
    size_t es = coll_datatype_size(dt);
    for (size_t i = 0; i < count; i++)
        ref_elem(dt, op, (const char *)a + i * es, (const char *)b + i * es, (char *)r + i * es);
}

/* First differing element, or count. */
static size_t first_diff(const void *x, const void *y, size_t count, size_t es)
{
    for (size_t i = 0; i < count; i++)
        if (memcmp((const char *)x + i * es, (const char *)y + i * es, es) != 0)
            return i;
    return count;
}

static uint64_t elem_bits(const void *p, size_t i, size_t es)
{
    uint64_t v = 0;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    switch (es) {
    case 1:
        memcpy(&u8, (const char *)p + i, 1);
        return u8;
    case 2:
        memcpy(&u16, (const char *)p + 2 * i, 2);
        return u16;
    case 4:
        memcpy(&u32, (const char *)p + 4 * i, 4);
        return u32;
    default:
        memcpy(&v, (const char *)p + 8 * i, 8);
        return v;
    }
}

/* Run coll_reduce_local on the vector (scalar = 0) or scalar path. */
static coll_status_t reduce_on(int scalar, void *d, const void *a, const void *b, size_t count,
                               coll_datatype_t dt, coll_op_t op)
{
    coll_reduce_force_scalar(scalar);
    coll_status_t st = coll_reduce_local(d, a, b, count, dt, op);
    coll_reduce_force_scalar(0);
    return st;
}

static coll_status_t avg_on(int scalar, void *buf, size_t count, coll_datatype_t dt, int n)
{
    coll_reduce_force_scalar(scalar);
    coll_status_t st = coll_reduce_finish_avg(buf, count, dt, n);
    coll_reduce_force_scalar(0);
    return st;
}

static const char *path_name(int scalar)
{
    return scalar ? "scalar" : "vector";
}

/* ---- every dt x op x count x offset x aliasing against the reference --- */

#define GUARD 64
#define GUARD_BYTE 0xa5

/* Offsets in elements of (dst, a, b) from a 64-byte aligned base. */
static const int offsets[][3] = {{0, 0, 0}, {1, 2, 3}, {3, 1, 2}, {2, 3, 1}};

START_TEST(test_matrix)
{
    coll_datatype_t dt = all_dts[_i];
    size_t es = coll_datatype_size(dt);
    size_t span = GUARD + (MAX_COUNT + 4) * es + GUARD;
    char *a0 = malloc(MAX_COUNT * es), *b0 = malloc(MAX_COUNT * es);
    char *expect = malloc(MAX_COUNT * es);
    char *abuf = alloc64(span), *bbuf = alloc64(span);
    char *dbuf = alloc64(span);
    ck_assert(a0 && b0 && expect && abuf && bbuf && dbuf);

    rng_state = 0x1234567 + (uint64_t)dt;
    for (size_t oi = 0; oi < ARRAY_LEN(all_ops); oi++) {
        coll_op_t op = all_ops[oi];
        if (!coll_reduce_supported(dt, op))
            continue;
        for (size_t ci = 0; ci < ARRAY_LEN(counts); ci++) {
            size_t count = counts[ci], bytes = count * es;
            gen(a0, dt, count);
            gen(b0, dt, count);
            ref_run(dt, op, a0, b0, expect, count);
            for (int scalar = 0; scalar < 2; scalar++)
                for (size_t off = 0; off < ARRAY_LEN(offsets); off++)
                    for (int alias = 0; alias < 3; alias++) {
                        /* alias 0: separate; 1: dst == a; 2: dst == b. */
                        char *d, *a, *b;
                        memset(abuf, GUARD_BYTE, span);
                        memset(bbuf, GUARD_BYTE, span);
                        memset(dbuf, GUARD_BYTE, span);
                        d = dbuf + GUARD + (size_t)offsets[off][0] * es;
                        a = abuf + GUARD + (size_t)offsets[off][1] * es;
                        b = bbuf + GUARD + (size_t)offsets[off][2] * es;
                        if (alias == 1)
                            a = d;
                        if (alias == 2)
                            b = d;
                        memcpy(a, a0, bytes);
                        memcpy(b, b0, bytes);
                        CALL_OK(reduce_on(scalar, d, a, b, count, dt, op));
                        size_t i = first_diff(d, expect, count, es);
                        REQUIRE(i == count,
                                      "%s %s %s count %zu offsets %d/%d/%d alias %d: element %zu "
                                      "a %#llx b %#llx got %#llx expected %#llx",
                                      path_name(scalar), coll_reduce_datatype_name(dt),
                                      coll_reduce_op_name(op), count, offsets[off][0],
                                      offsets[off][1], offsets[off][2], alias, i,
                                      (unsigned long long)elem_bits(a0, i, es),
                                      (unsigned long long)elem_bits(b0, i, es),
                                      (unsigned long long)elem_bits(d, i, es),
                                      (unsigned long long)elem_bits(expect, i, es));
                        /* Nothing outside dst was written; the sources are intact. */
                        for (char *p = dbuf; p < d + bytes + GUARD; p++)
                            if (p < d || p >= d + bytes)
                                REQUIRE((unsigned char)*p == GUARD_BYTE,
                                              "%s %s %s count %zu alias %d: byte %td of dst "
                                              "written outside the output",
                                              path_name(scalar), coll_reduce_datatype_name(dt),
                                              coll_reduce_op_name(op), count, alias, p - d);
                        REQUIRE(alias == 1 || memcmp(a, a0, bytes) == 0, "a was modified");
                        REQUIRE(alias == 2 || memcmp(b, b0, bytes) == 0, "b was modified");
                    }
        }
    }
    free(a0), free(b0), free(expect), free(abuf), free(bbuf), free(dbuf);
}
END_TEST

/* Pointers not aligned to their element size (odd byte addresses). */
START_TEST(test_byte_misaligned)
{
    coll_datatype_t dt = all_dts[_i];
    size_t es = coll_datatype_size(dt), count = 1000, bytes = count * es;
    char *a0 = malloc(bytes), *b0 = malloc(bytes), *expect = malloc(bytes);
    char *abuf = alloc64(bytes + 128), *bbuf = alloc64(bytes + 128);
    char *dbuf = alloc64(bytes + 128);
    ck_assert(a0 && b0 && expect && abuf && bbuf && dbuf);

    rng_state = 0x7777 + (uint64_t)dt;
    gen(a0, dt, count);
    gen(b0, dt, count);
    for (size_t oi = 0; oi < ARRAY_LEN(all_ops); oi++) {
        coll_op_t op = all_ops[oi];
        if (!coll_reduce_supported(dt, op))
            continue;
        ref_run(dt, op, a0, b0, expect, count);
        for (int scalar = 0; scalar < 2; scalar++) {
            char *d = dbuf + 5, *a = abuf + 1, *b = bbuf + 3;
            memcpy(a, a0, bytes);
            memcpy(b, b0, bytes);
            CALL_OK(reduce_on(scalar, d, a, b, count, dt, op));
            REQUIRE(memcmp(d, expect, bytes) == 0, "%s %s %s: mismatch at %zu",
                          path_name(scalar), coll_reduce_datatype_name(dt),
                          coll_reduce_op_name(op), first_diff(d, expect, count, es));
        }
    }
    free(a0), free(b0), free(expect), free(abuf), free(bbuf), free(dbuf);
}
END_TEST

/* ---- vector and scalar paths agree byte for byte ----------------------------- */

static void paths_agree(coll_datatype_t dt, coll_op_t op, const void *a, const void *b,
                        size_t count, size_t doff_bytes, const char *what)
{
    size_t es = coll_datatype_size(dt), bytes = count * es;
    char *dv = alloc64(bytes + 64), *ds = alloc64(bytes + 64);
    ck_assert(dv && ds);
    CALL_OK(reduce_on(0, dv + doff_bytes, a, b, count, dt, op));
    CALL_OK(reduce_on(1, ds + doff_bytes, a, b, count, dt, op));
    size_t i = first_diff(dv + doff_bytes, ds + doff_bytes, count, es);
    REQUIRE(i == count, "%s: %s %s count %zu: element %zu vector %#llx scalar %#llx", what,
                  coll_reduce_datatype_name(dt), coll_reduce_op_name(op), count, i,
                  (unsigned long long)elem_bits(dv + doff_bytes, i, es),
                  (unsigned long long)elem_bits(ds + doff_bytes, i, es));
    free(dv);
    free(ds);
}

START_TEST(test_paths_identical)
{
    coll_datatype_t dt = all_dts[_i];
    size_t es = coll_datatype_size(dt), count = 100003;
    char *a = malloc(count * es), *b = malloc(count * es);
    ck_assert(a && b);

    rng_state = 0xabcdef + (uint64_t)dt;
    gen(a, dt, count);
    gen(b, dt, count);
    for (size_t oi = 0; oi < ARRAY_LEN(all_ops); oi++)
        if (coll_reduce_supported(dt, all_ops[oi]))
            paths_agree(dt, all_ops[oi], a, b, count, es, "random");
    if (is_float_dt(dt)) {
        static const int ns[] = {1, 2, 3, 7, 1000, INT_MAX};
        char *v = malloc(count * es), *s = malloc(count * es);
        ck_assert(v && s);
        for (size_t k = 0; k < ARRAY_LEN(ns); k++) {
            memcpy(v, a, count * es);
            memcpy(s, a, count * es);
            CALL_OK(avg_on(0, v, count, dt, ns[k]));
            CALL_OK(avg_on(1, s, count, dt, ns[k]));
            REQUIRE(memcmp(v, s, count * es) == 0, "avg %s / %d: paths differ at %zu",
                          coll_reduce_datatype_name(dt), ns[k], first_diff(v, s, count, es));
        }
        free(v);
        free(s);
    }
    free(a);
    free(b);
}
END_TEST

/* Outputs large enough for the vector path's non-temporal stores (from
 * half the L3 on), with dst 32-byte aligned, element-aligned but not
 * 32-byte aligned, and not element-aligned. */
START_TEST(test_paths_identical_large)
{
    static const coll_datatype_t dts[] = {COLL_FLOAT32, COLL_FLOAT16, COLL_BFLOAT16, COLL_INT64};

    for (size_t k = 0; k < ARRAY_LEN(dts); k++) {
        coll_datatype_t dt = dts[k];
        size_t es = coll_datatype_size(dt), n = (40u << 20) / es + 37;
        char *a = malloc(n * es), *b = malloc(n * es);
        ck_assert(a && b);
        rng_state = 0x5151 + (uint64_t)k;
        gen(a, dt, n);
        gen(b, dt, n);
        paths_agree(dt, COLL_SUM, a, b, n, 0, "large, aligned dst");
        paths_agree(dt, COLL_SUM, a, b, n, es, "large, dst one element off");
        if (es > 1)
            paths_agree(dt, COLL_SUM, a, b, n, 1, "large, dst one byte off");
        free(a);
        free(b);
    }
}
END_TEST

/* coll_copy_local against the bytes it was given, from tiny copies to ones
 * far past the size from which it streams (an eighth of the L3), with dst
 * and src at offsets of every kind from 32-byte alignment; the 64 bytes on
 * either side of dst must stay untouched. Both paths; and coll_copy_stream,
 * which streams at every size. */
START_TEST(test_copy_local)
{
    static const size_t lens[] = {0, 1, 31, 63, 64, 65, 127, 128, 129, 4099,
                                  (5u << 20) + 13, (40u << 20) + 37};
    static const size_t offs[][2] = {{0, 0}, {1, 0}, {32, 3}, {33, 7}}; /* dst, src */
    size_t most = (40u << 20) + 37 + 128;
    unsigned char *src = alloc64(most), *dst = alloc64(most + 128);
    ck_assert(src && dst);

    for (size_t i = 0; i < most; i++)
        src[i] = (unsigned char)(i * 131 + (i >> 13));
    for (int path = 0; path < 4; path++) {
        int scalar = path & 1;
        void (*copy)(void *, const void *, size_t) = path < 2 ? coll_copy_local
                                                              : coll_copy_stream;
        const char *name = path < 2 ? "coll_copy_local" : "coll_copy_stream";
        coll_reduce_force_scalar(scalar);
        for (size_t li = 0; li < ARRAY_LEN(lens); li++)
            for (size_t oi = 0; oi < ARRAY_LEN(offs); oi++) {
                size_t len = lens[li], doff = 64 + offs[oi][0];
                const unsigned char *from = src + offs[oi][1];
                memset(dst, 0xee, len + doff + 64);
                copy(dst + doff, from, len);
                size_t bad = len;
                if (memcmp(dst + doff, from, len) != 0)
                    for (bad = 0; dst[doff + bad] == from[bad];)
                        bad++;
                REQUIRE(bad == len, "%s, %s, %zu bytes, dst +%zu src +%zu: byte %zu differs",
                        name, path_name(scalar), len, offs[oi][0], offs[oi][1], bad);
                for (size_t i = 0; i < 64; i++)
                    REQUIRE(dst[doff - 64 + i] == 0xee && dst[doff + len + i] == 0xee,
                            "%s, %s, %zu bytes, dst +%zu: wrote outside dst", name,
                            path_name(scalar), len, offs[oi][0]);
            }
    }
    coll_reduce_force_scalar(0);
    free(src);
    free(dst);
}
END_TEST

/* coll_copy (copy.h) with dst 0-63 bytes after src modulo the page,
 * where 1-31 take its own loop between COLL_COPY_LOOP_MIN and _MAX, at
 * lengths around those bounds and around the loop's 64-byte rounds; and
 * coll_copy_loop itself at every length up to 200. The 64 bytes on either
 * side of dst must stay untouched. */
static void check_copy(void (*copy)(void *, const void *, size_t), const char *name,
                       unsigned char *dst, const unsigned char *src, size_t len)
{
    size_t bad = len;

    memset(dst - 64, 0xee, len + 128);
    copy(dst, src, len);
    if (memcmp(dst, src, len) != 0)
        for (bad = 0; dst[bad] == src[bad];)
            bad++;
    REQUIRE(bad == len, "%s of %zu bytes, dst %zu bytes after src in the page: byte %zu differs",
            name, len, ((size_t)(dst - src)) & 4095, bad);
    for (size_t i = 0; i < 64; i++)
        REQUIRE(dst[i - 64] == 0xee && dst[len + i] == 0xee,
                "%s of %zu bytes: wrote outside dst", name, len);
}

START_TEST(test_copy_distances)
{
    static const size_t lens[] = {0, 1, 64, COLL_COPY_LOOP_MIN, COLL_COPY_LOOP_MIN + 1,
                                  COLL_COPY_LOOP_MIN + 63, 4096, 4096 + 65, 128u << 10,
                                  (128u << 10) + 17, COLL_COPY_LOOP_MAX - 1, COLL_COPY_LOOP_MAX};
    size_t most = COLL_COPY_LOOP_MAX + 8192;
    /* page-aligned, so that dst + 64 + d lies d bytes after src + 64 */
    unsigned char *src = aligned_alloc(4096, most), *dst = aligned_alloc(4096, most + 4096);
    ck_assert(src && dst);

    for (size_t i = 0; i < most; i++)
        src[i] = (unsigned char)(i * 131 + (i >> 13));
    for (size_t li = 0; li < ARRAY_LEN(lens); li++)
        for (size_t d = 0; d < 64; d++)
            check_copy(coll_copy, "coll_copy", dst + 64 + d, src + 64, lens[li]);
    for (size_t len = 0; len <= 200; len++)
        check_copy(coll_copy_loop, "coll_copy_loop", dst + 64 + 16, src + 3, len);
    free(src);
    free(dst);
}
END_TEST

/* All 65536 float16 / bfloat16 values as a, against fixed b values, every
 * op on both paths and the reference; then AVG's division of all of them. */
START_TEST(test_16bit_exhaustive)
{
    coll_datatype_t dt = _i == 0 ? COLL_FLOAT16 : COLL_BFLOAT16;
    const uint64_t *sp;
    size_t nsp, n = 65536;
    uint16_t *a = malloc(n * 2), *b = malloc(n * 2), *r = malloc(n * 2), *e = malloc(n * 2);
    ck_assert(a && b && r && e);

    specials(dt, &sp, &nsp);
    rng_state = 0x16;
    for (size_t i = 0; i < n; i++)
        a[i] = (uint16_t)i;
    for (size_t k = 0; k < nsp + 8; k++) {
        uint16_t bv;
        if (k < nsp)
            bv = (uint16_t)sp[k];
        else
            gen_elem(&bv, dt);
        for (size_t i = 0; i < n; i++)
            b[i] = bv;
        for (size_t oi = 0; oi < ARRAY_LEN(all_ops); oi++) {
            coll_op_t op = all_ops[oi];
            ref_run(dt, op, a, b, e, n);
            for (int scalar = 0; scalar < 2; scalar++) {
                CALL_OK(reduce_on(scalar, r, a, b, n, dt, op));
                size_t i = first_diff(r, e, n, 2);
                REQUIRE(i == n, "%s %s %s: a %#x b %#x got %#x expected %#x",
                              path_name(scalar), coll_reduce_datatype_name(dt),
                              coll_reduce_op_name(op), i < n ? a[i] : 0, bv, i < n ? r[i] : 0,
                              i < n ? e[i] : 0);
            }
        }
    }
    static const int ns[] = {1, 2, 3, 7, 10, 1000, 65537};
    for (size_t k = 0; k < ARRAY_LEN(ns); k++) {
        for (size_t i = 0; i < n; i++) {
            e[i] = (uint16_t)i;
            ref_avg_elem(dt, &e[i], ns[k]);
        }
        for (int scalar = 0; scalar < 2; scalar++) {
            memcpy(r, a, n * 2);
            CALL_OK(avg_on(scalar, r, n, dt, ns[k]));
            size_t i = first_diff(r, e, n, 2);
            REQUIRE(i == n, "%s avg %s / %d: %#zx gave %#x expected %#x", path_name(scalar),
                          coll_reduce_datatype_name(dt), ns[k], i, i < n ? r[i] : 0,
                          i < n ? e[i] : 0);
        }
    }
    free(a), free(b), free(r), free(e);
}
END_TEST

/* ---- AVG's division against the reference, all counts and offsets ----------- */

START_TEST(test_finish_avg)
{
    static const int ns[] = {1, 2, 3, 7, 1000, INT_MAX};
    coll_datatype_t dt = float_dts[_i];
    size_t es = coll_datatype_size(dt);
    char *a0 = malloc(MAX_COUNT * es), *expect = malloc(MAX_COUNT * es);
    char *buf = alloc64(GUARD + (MAX_COUNT + 4) * es + GUARD);
    ck_assert(a0 && expect && buf);

    rng_state = 0xa5a5 + (uint64_t)dt;
    for (size_t ci = 0; ci < ARRAY_LEN(counts); ci++) {
        size_t count = counts[ci], bytes = count * es;
        gen(a0, dt, count);
        for (size_t k = 0; k < ARRAY_LEN(ns); k++) {
            memcpy(expect, a0, bytes);
            for (size_t i = 0; i < count; i++)
                ref_avg_elem(dt, expect + i * es, ns[k]);
            for (int scalar = 0; scalar < 2; scalar++)
                for (size_t off = 0; off < 4; off++) {
                    char *p = buf + GUARD + off * es;
                    memcpy(p, a0, bytes);
                    CALL_OK(avg_on(scalar, p, count, dt, ns[k]));
                    size_t i = first_diff(p, expect, count, es);
                    REQUIRE(i == count,
                                  "%s avg %s / %d count %zu offset %zu: element %zu in %#llx got "
                                  "%#llx expected %#llx",
                                  path_name(scalar), coll_reduce_datatype_name(dt), ns[k], count,
                                  off, i, (unsigned long long)elem_bits(a0, i, es),
                                  (unsigned long long)elem_bits(p, i, es),
                                  (unsigned long long)elem_bits(expect, i, es));
                }
        }
    }
    free(a0), free(expect), free(buf);
}
END_TEST

/* ---- conversions ------------------------------------------------------------ */

START_TEST(test_half_roundtrip)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = coll_half_to_float(h);
        uint16_t back = coll_float_to_half(f);
        if (half_is_nan(h)) {
            REQUIRE(isnan(f), "half %#x -> %#x is not a NaN", h, fbits(f));
            REQUIRE(half_is_nan(back) && (back & 0x200) && (back & 0x8000) == (h & 0x8000),
                          "half NaN %#x came back as %#x", h, back);
            continue;
        }
        REQUIRE(fbits(f) == fbits(ref_h2f(h)), "half %#x -> %#x, expected %#x", h, fbits(f),
                      fbits(ref_h2f(h)));
        REQUIRE(back == h, "half %#x -> float -> %#x", h, back);
#ifdef __FLT16_MAX__
        _Float16 x;
        memcpy(&x, &h, 2);
        REQUIRE(fbits((float)x) == fbits(f), "half %#x: _Float16 says %#x, we say %#x", h,
                      fbits((float)x), fbits(f));
#endif
    }
}
END_TEST

static void check_f2h(float f)
{
    uint16_t got = coll_float_to_half(f);
    if (isnan(f)) {
        REQUIRE(half_is_nan(got) && (got & 0x200), "NaN %#x -> half %#x", fbits(f), got);
        return;
    }
    uint16_t want = ref_f2h(f);
    REQUIRE(got == want, "float %#x (%a) -> half %#x, expected %#x", fbits(f), (double)f, got,
                  want);
#ifdef __FLT16_MAX__
    _Float16 x = (_Float16)f;
    uint16_t gcc;
    memcpy(&gcc, &x, 2);
    REQUIRE(got == gcc, "float %#x (%a) -> half %#x, _Float16 gives %#x", fbits(f), (double)f,
                  got, gcc);
#endif
}

/* Every tie between neighbouring halves, one float ulp either side of it,
 * the halves themselves, plus random floats of every kind. */
START_TEST(test_half_rounding)
{
    half_table_init();
    for (int h = 0; h < 0x7c00; h++) {
        float lo = (float)half_value[h];
        float mid = (float)((half_value[h] + half_value[h + 1]) / 2); /* exact in float */
        const float cand[] = {lo, mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        for (size_t k = 0; k < ARRAY_LEN(cand); k++) {
            check_f2h(cand[k]);
            check_f2h(-cand[k]);
        }
    }
    rng_state = 0xf16;
    for (int i = 0; i < 1000000; i++) {
        check_f2h(ffrom((uint32_t)rnd()));
        check_f2h(ldexpf((float)(rnd() & 0xffffff), (int)(rnd() % 48) - 52));
    }
    check_f2h(INFINITY);
    check_f2h(-INFINITY);
    check_f2h(FLT_MAX);
    check_f2h(65519.996f);
    check_f2h(65520.0f);
    ck_assert_uint_eq(coll_float_to_half(65520.0f), 0x7c00);
    ck_assert_uint_eq(coll_float_to_half(65519.0f), 0x7bff);
    ck_assert_uint_eq(coll_float_to_half(ldexpf(1.0f, -25)), 0x0000);    /* tie -> even 0 */
    ck_assert_uint_eq(coll_float_to_half(ldexpf(3.0f, -26)), 0x0001);    /* above the tie */
    ck_assert_uint_eq(coll_float_to_half(ldexpf(3.0f, -25)), 0x0002);    /* 1.5 units -> 2 */
    ck_assert_uint_eq(coll_float_to_half(-ldexpf(5.0f, -25)), 0x8002);   /* 2.5 units -> 2 */
    ck_assert_uint_eq(coll_float_to_half(ffrom(0x7fc00000)), 0x7e00);    /* canonical NaN */
}
END_TEST

START_TEST(test_bf16_roundtrip)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t b = (uint16_t)i;
        float f = coll_bf16_to_float(b);
        uint16_t back = coll_float_to_bf16(f);
        if (bf16_is_nan(b)) {
            REQUIRE(isnan(f), "bf16 %#x -> %#x is not a NaN", b, fbits(f));
            REQUIRE(bf16_is_nan(back) && (back & 0x40) && (back & 0x8000) == (b & 0x8000),
                          "bf16 NaN %#x came back as %#x", b, back);
            continue;
        }
        REQUIRE(fbits(f) == fbits(ref_bf2f(b)), "bf16 %#x -> %#x, expected %#x", b,
                      fbits(f), fbits(ref_bf2f(b)));
        REQUIRE(back == b, "bf16 %#x -> float -> %#x", b, back);
    }
}
END_TEST

static void check_f2bf(float f)
{
    uint16_t got = coll_float_to_bf16(f);
    if (isnan(f)) {
        REQUIRE(bf16_is_nan(got) && (got & 0x40), "NaN %#x -> bf16 %#x", fbits(f), got);
        return;
    }
    uint16_t want = ref_f2bf(f);
    REQUIRE(got == want, "float %#x (%a) -> bf16 %#x, expected %#x", fbits(f), (double)f, got,
                  want);
}

START_TEST(test_bf16_rounding)
{
    for (uint32_t b = 0; b < 0x7f80; b++) {
        uint32_t lo = b << 16, mid = lo | 0x8000;
        const uint32_t cand[] = {lo, mid, mid - 1, mid + 1, lo | 0xffff};
        for (size_t k = 0; k < ARRAY_LEN(cand); k++) {
            check_f2bf(ffrom(cand[k]));
            check_f2bf(ffrom(cand[k] | 0x80000000u));
        }
    }
    rng_state = 0xbf16;
    for (int i = 0; i < 2000000; i++)
        check_f2bf(ffrom((uint32_t)rnd()));
    ck_assert_uint_eq(coll_float_to_bf16(ffrom(0x7f7fffff)), 0x7f80); /* rounds up to inf */
    ck_assert_uint_eq(coll_float_to_bf16(ffrom(0x3f808000)), 0x3f80); /* tie -> even */
    ck_assert_uint_eq(coll_float_to_bf16(ffrom(0x3f818000)), 0x3f82); /* tie -> even */
    ck_assert_uint_eq(coll_float_to_bf16(ffrom(0x7f800001)), 0x7fc0); /* sNaN made quiet */
    ck_assert_uint_eq(coll_float_to_bf16(ffrom(0xffc00000)), 0xffc0);
}
END_TEST

/* ---- min/max algebra ------------------------------------------------------ */

/* All triples of special values as three arrays, so that both paths run
 * with whole vectors. Checks min/max(a, b) == (b, a) and
 * (a op b) op c == a op (b op c), bit for bit. */
START_TEST(test_minmax_algebra)
{
    coll_datatype_t dt = float_dts[_i / 2];
    int scalar = _i % 2;
    size_t es = coll_datatype_size(dt), nsp;
    const uint64_t *sp;

    specials(dt, &sp, &nsp);
    size_t n = nsp * nsp * nsp;
    char *A = malloc(n * es), *B = malloc(n * es), *C = malloc(n * es);
    char *r1 = malloc(n * es), *r2 = malloc(n * es), *t = malloc(n * es);
    ck_assert(A && B && C && r1 && r2 && t);
    for (size_t i = 0; i < n; i++) {
        put_bits(A + i * es, dt, sp[i % nsp]);
        put_bits(B + i * es, dt, sp[(i / nsp) % nsp]);
        put_bits(C + i * es, dt, sp[i / (nsp * nsp)]);
    }
    for (coll_op_t op = COLL_MIN; op <= COLL_MAX; op++) {
        CALL_OK(reduce_on(scalar, r1, A, B, n, dt, op));
        CALL_OK(reduce_on(scalar, r2, B, A, n, dt, op));
        size_t i = first_diff(r1, r2, n, es);
        REQUIRE(i == n, "%s %s %s not commutative: %#llx, %#llx -> %#llx vs %#llx",
                      path_name(scalar), coll_reduce_datatype_name(dt), coll_reduce_op_name(op),
                      (unsigned long long)elem_bits(A, i, es),
                      (unsigned long long)elem_bits(B, i, es),
                      (unsigned long long)elem_bits(r1, i, es),
                      (unsigned long long)elem_bits(r2, i, es));
        /* r1 = (A op B) op C, r2 = A op (B op C) */
        CALL_OK(reduce_on(scalar, r1, r1, C, n, dt, op));
        CALL_OK(reduce_on(scalar, t, B, C, n, dt, op));
        CALL_OK(reduce_on(scalar, r2, A, t, n, dt, op));
        i = first_diff(r1, r2, n, es);
        REQUIRE(i == n, "%s %s %s not associative on %#llx, %#llx, %#llx: %#llx vs %#llx",
                      path_name(scalar), coll_reduce_datatype_name(dt), coll_reduce_op_name(op),
                      (unsigned long long)elem_bits(A, i, es),
                      (unsigned long long)elem_bits(B, i, es),
                      (unsigned long long)elem_bits(C, i, es),
                      (unsigned long long)elem_bits(r1, i, es),
                      (unsigned long long)elem_bits(r2, i, es));
    }
    free(A), free(B), free(C), free(r1), free(r2), free(t);
}
END_TEST

/* The documented corner cases spelled out, on 40 lanes (vector + tail). */
START_TEST(test_minmax_zeros_nans)
{
    int scalar = _i;
    float a[40], b[40], r[40];
    for (int i = 0; i < 40; i++) {
        a[i] = i % 2 ? -0.0f : 0.0f;
        b[i] = i % 2 ? 0.0f : -0.0f;
    }
    CALL_OK(reduce_on(scalar, r, a, b, 40, COLL_FLOAT32, COLL_MIN));
    for (int i = 0; i < 40; i++)
        ck_assert_uint_eq(fbits(r[i]), 0x80000000u);
    CALL_OK(reduce_on(scalar, r, a, b, 40, COLL_FLOAT32, COLL_MAX));
    for (int i = 0; i < 40; i++)
        ck_assert_uint_eq(fbits(r[i]), 0);
    for (int i = 0; i < 40; i++) {
        a[i] = ffrom(i % 2 ? 0xffc00001u : 0x7f800001u); /* -qNaN with payload / sNaN */
        b[i] = (float)i;
    }
    for (coll_op_t op = COLL_SUM; op <= COLL_MAX; op++) {
        CALL_OK(reduce_on(scalar, r, a, b, 40, COLL_FLOAT32, op));
        for (int i = 0; i < 40; i++)
            ck_assert_uint_eq(fbits(r[i]), 0x7fc00000u);
        CALL_OK(reduce_on(scalar, r, b, a, 40, COLL_FLOAT32, op));
        for (int i = 0; i < 40; i++)
            ck_assert_uint_eq(fbits(r[i]), 0x7fc00000u);
    }
    /* The same on float64. */
    double da[20], db[20], dr[20];
    for (int i = 0; i < 20; i++) {
        da[i] = i % 2 ? -0.0 : 0.0;
        db[i] = i % 2 ? 0.0 : -0.0;
    }
    CALL_OK(reduce_on(scalar, dr, da, db, 20, COLL_FLOAT64, COLL_MIN));
    for (int i = 0; i < 20; i++)
        ck_assert_uint_eq(dbits(dr[i]), 0x8000000000000000ull);
    CALL_OK(reduce_on(scalar, dr, db, da, 20, COLL_FLOAT64, COLL_MAX));
    for (int i = 0; i < 20; i++)
        ck_assert_uint_eq(dbits(dr[i]), 0);
    for (int i = 0; i < 20; i++)
        da[i] = dfrom(i % 2 ? 0xfff8000000000001ull : 0x7ff0000000000001ull);
    CALL_OK(reduce_on(scalar, dr, db, da, 20, COLL_FLOAT64, COLL_MAX));
    for (int i = 0; i < 20; i++)
        ck_assert_uint_eq(dbits(dr[i]), QNAN64);
    /* inf - inf is a NaN: canonical too (x86's default NaN is negative). */
    for (int i = 0; i < 40; i++) {
        a[i] = INFINITY;
        b[i] = -INFINITY;
    }
    CALL_OK(reduce_on(scalar, r, a, b, 40, COLL_FLOAT32, COLL_SUM));
    for (int i = 0; i < 40; i++)
        ck_assert_uint_eq(fbits(r[i]), 0x7fc00000u);
}
END_TEST

/* ---- errors and the implementation name ----------------------------------- */

START_TEST(test_errors)
{
    float x[4] = {1, 2, 3, 4}, y[4];

    setenv("COLL_DEBUG", "NONE", 0); /* the expected errors are logged as warnings */

    /* support table: AVG only on the four floating types */
    for (size_t i = 0; i < ARRAY_LEN(all_dts); i++)
        for (size_t k = 0; k < ARRAY_LEN(all_ops); k++)
            ck_assert_int_eq(coll_reduce_supported(all_dts[i], all_ops[k]),
                             all_ops[k] != COLL_AVG || is_float_dt(all_dts[i]));
    ck_assert(!coll_reduce_supported(COLL_NUM_DATATYPES, COLL_SUM));
    ck_assert(!coll_reduce_supported(COLL_FLOAT32, COLL_NUM_OPS));
    ck_assert(!coll_reduce_supported((coll_datatype_t)-1, (coll_op_t)-1));

    static const coll_datatype_t ints[] = {COLL_INT8,  COLL_UINT8, COLL_INT32,
                                           COLL_UINT32, COLL_INT64, COLL_UINT64};
    for (size_t i = 0; i < ARRAY_LEN(ints); i++) {
        ck_assert_int_eq(coll_reduce_local(y, x, x, 1, ints[i], COLL_AVG), COLL_ERR_UNSUPPORTED);
        const char *msg = coll_get_last_error(NULL);
        REQUIRE(strstr(msg, "avg") && strstr(msg, coll_reduce_datatype_name(ints[i])),
                      "message does not name op and type: %s", msg);
        ck_assert_int_eq(coll_reduce_finish_avg(y, 1, ints[i], 2), COLL_ERR_UNSUPPORTED);
    }
    ck_assert_int_eq(coll_reduce_local(y, x, x, 4, COLL_NUM_DATATYPES, COLL_SUM),
                     COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "datatype"));
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "sum"));
    ck_assert_int_eq(coll_reduce_local(y, x, x, 4, (coll_datatype_t)-1, COLL_SUM),
                     COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_reduce_local(y, x, x, 4, COLL_FLOAT32, COLL_NUM_OPS),
                     COLL_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "op"));
    ck_assert_ptr_nonnull(strstr(coll_get_last_error(NULL), "float32"));
    ck_assert_int_eq(coll_reduce_local(y, x, x, 4, COLL_FLOAT32, (coll_op_t)-1),
                     COLL_ERR_INVALID_ARG);
    /* bad enums are reported even with count 0 */
    ck_assert_int_eq(coll_reduce_local(NULL, NULL, NULL, 0, COLL_NUM_DATATYPES, COLL_SUM),
                     COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_reduce_local(NULL, NULL, NULL, 0, COLL_INT32, COLL_AVG),
                     COLL_ERR_UNSUPPORTED);

    /* count 0 with NULL pointers is fine; NULL with a count is not */
    ck_assert_int_eq(coll_reduce_local(NULL, NULL, NULL, 0, COLL_FLOAT32, COLL_SUM), COLL_OK);
    ck_assert_int_eq(coll_reduce_finish_avg(NULL, 0, COLL_FLOAT32, 3), COLL_OK);
    ck_assert_int_eq(coll_reduce_local(NULL, x, x, 4, COLL_FLOAT32, COLL_SUM),
                     COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_reduce_local(y, NULL, x, 4, COLL_FLOAT32, COLL_SUM),
                     COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_reduce_local(y, x, NULL, 4, COLL_FLOAT32, COLL_SUM),
                     COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_reduce_finish_avg(NULL, 4, COLL_FLOAT32, 3), COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_reduce_local(y, x, x, SIZE_MAX / 2, COLL_FLOAT32, COLL_SUM),
                     COLL_ERR_INVALID_ARG);

    /* AVG's divisor */
    ck_assert_int_eq(coll_reduce_finish_avg(y, 4, COLL_FLOAT32, 0), COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_reduce_finish_avg(y, 4, COLL_FLOAT32, -2), COLL_ERR_INVALID_ARG);
    ck_assert_int_eq(coll_reduce_finish_avg(y, 4, COLL_NUM_DATATYPES, 2), COLL_ERR_INVALID_ARG);

    /* AVG's reduce step is the sum */
    ck_assert_int_eq(coll_reduce_local(y, x, x, 4, COLL_FLOAT32, COLL_AVG), COLL_OK);
    ck_assert(y[0] == 2.0f && y[3] == 8.0f);
    ck_assert_int_eq(coll_reduce_finish_avg(y, 4, COLL_FLOAT32, 2), COLL_OK);
    ck_assert(y[0] == 1.0f && y[3] == 4.0f);
}
END_TEST

/* The L3 the thresholds derive from: the kernel's figure wins; without
 * it CPUID's, unless it is too large to be one core complex's (a
 * hypervisor passing through the socket's total: 508 MiB on a 2-vCPU
 * Zen 5 guest); else 32 MiB. */
START_TEST(test_llc_choose)
{
    const size_t mib = 1u << 20;
    int guessed = -1;

    ck_assert_uint_eq(coll_llc_choose(32 * 1024, 532676608, &guessed), 32 * mib);
    ck_assert_int_eq(guessed, 0);
    ck_assert_uint_eq(coll_llc_choose(393216, 0, &guessed), 384 * mib); /* the kernel says so */
    ck_assert_int_eq(guessed, 0);
    ck_assert_uint_eq(coll_llc_choose(0, (long)(96 * mib), &guessed), 96 * mib);
    ck_assert_int_eq(guessed, 0);
    ck_assert_uint_eq(coll_llc_choose(0, (long)(128 * mib), NULL), 128 * mib);
    ck_assert_uint_eq(coll_llc_choose(0, 532676608, &guessed), 32 * mib);
    ck_assert_int_eq(guessed, 1);
    guessed = -1;
    ck_assert_uint_eq(coll_llc_choose(0, 0, &guessed), 32 * mib);
    ck_assert_int_eq(guessed, 1);
    ck_assert_uint_eq(coll_llc_choose(0, -1, NULL), 32 * mib);
    ck_assert_uint_gt(coll_llc_bytes(NULL), 0);
}
END_TEST

START_TEST(test_impl_name)
{
    const char *name = coll_reduce_impl();
    ck_assert(strcmp(name, "scalar") == 0 || strcmp(name, "avx2+f16c") == 0);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        ck_assert_str_eq(name, "avx2+f16c");
#endif
    coll_reduce_force_scalar(1);
    ck_assert_str_eq(coll_reduce_impl(), "scalar");
    coll_reduce_force_scalar(0);
    ck_assert_str_eq(coll_reduce_impl(), name);
    ck_assert_str_eq(coll_reduce_datatype_name(COLL_BFLOAT16), "bfloat16");
    ck_assert_str_eq(coll_reduce_op_name(COLL_AVG), "avg");
    ck_assert_str_eq(coll_reduce_datatype_name(COLL_NUM_DATATYPES), "unknown");
}
END_TEST

static TCase *tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, TIMEOUT_S);
    return tc;
}

static Suite *reduce_suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc;
    int ndt = (int)ARRAY_LEN(all_dts), nfloat = (int)ARRAY_LEN(float_dts);

    tc = tcase("matrix");
    tcase_add_loop_test(tc, test_matrix, 0, ndt);
    tcase_add_loop_test(tc, test_byte_misaligned, 0, ndt);
    suite_add_tcase(s, tc);

    tc = tcase("paths");
    tcase_add_loop_test(tc, test_paths_identical, 0, ndt);
    tcase_add_test(tc, test_paths_identical_large);
    tcase_add_test(tc, test_copy_local);
    tcase_add_test(tc, test_copy_distances);
    tcase_add_loop_test(tc, test_16bit_exhaustive, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase("avg");
    tcase_add_loop_test(tc, test_finish_avg, 0, nfloat);
    suite_add_tcase(s, tc);

    tc = tcase("convert");
    tcase_add_test(tc, test_half_roundtrip);
    tcase_add_test(tc, test_half_rounding);
    tcase_add_test(tc, test_bf16_roundtrip);
    tcase_add_test(tc, test_bf16_rounding);
    suite_add_tcase(s, tc);

    tc = tcase("minmax");
    tcase_add_loop_test(tc, test_minmax_algebra, 0, 2 * nfloat);
    tcase_add_loop_test(tc, test_minmax_zeros_nans, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase("api");
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_impl_name);
    tcase_add_test(tc, test_llc_choose);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return harness_main(reduce_suite());
}
