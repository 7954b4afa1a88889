/*
 * bench_data.c: names of datatypes and operations, and exact inputs and
 * expected results for the benchmarks' checks (see bench_data.h).
 *
 * Every pattern is periodic in the element index, so a buffer is filled
 * by computing one period and doubling it with memcpy: checking a
 * 64 MiB result costs about as much as copying it.
 */
#include "bench_data.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;   /* as nccl-tests prints it */
    const char *alias1, *alias2, *alias3;
} type_names[COLL_NUM_DATATYPES] = {
    [COLL_INT8] = {"int8", "char", NULL, NULL},
    [COLL_UINT8] = {"uint8", NULL, NULL, NULL},
    [COLL_INT32] = {"int32", "int", NULL, NULL},
    [COLL_UINT32] = {"uint32", NULL, NULL, NULL},
    [COLL_INT64] = {"int64", NULL, NULL, NULL},
    [COLL_UINT64] = {"uint64", NULL, NULL, NULL},
    [COLL_FLOAT16] = {"half", "float16", "fp16", NULL},
    [COLL_BFLOAT16] = {"bfloat16", "bf16", NULL, NULL},
    [COLL_FLOAT32] = {"float", "float32", "fp32", NULL},
    [COLL_FLOAT64] = {"double", "float64", "fp64", NULL},
};

static const char *const op_names[COLL_NUM_OPS] = {
    [COLL_SUM] = "sum", [COLL_PROD] = "prod", [COLL_MIN] = "min", [COLL_MAX] = "max",
    [COLL_AVG] = "avg",
};

const char *bench_datatype_name(coll_datatype_t dt)
{
    return (unsigned)dt < COLL_NUM_DATATYPES ? type_names[dt].name : "?";
}

static int name_is(const char *name, const char *candidate)
{
    return candidate && strcasecmp(name, candidate) == 0;
}

int bench_parse_datatype(const char *name, coll_datatype_t *dt)
{
    for (int i = 0; i < COLL_NUM_DATATYPES; i++)
        if (name_is(name, type_names[i].name) || name_is(name, type_names[i].alias1) ||
            name_is(name, type_names[i].alias2) || name_is(name, type_names[i].alias3)) {
            *dt = (coll_datatype_t)i;
            return 0;
        }
    return -1;
}

const char *bench_op_name(coll_op_t op)
{
    return (unsigned)op < COLL_NUM_OPS ? op_names[op] : "?";
}

int bench_parse_op(const char *name, coll_op_t *op)
{
    for (int i = 0; i < COLL_NUM_OPS; i++)
        if (name_is(name, op_names[i])) {
            *op = (coll_op_t)i;
            return 0;
        }
    return -1;
}

static int is_float(coll_datatype_t dt)
{
    return dt == COLL_FLOAT16 || dt == COLL_BFLOAT16 || dt == COLL_FLOAT32 || dt == COLL_FLOAT64;
}

static int is_unsigned(coll_datatype_t dt)
{
    return dt == COLL_UINT8 || dt == COLL_UINT32 || dt == COLL_UINT64;
}

int bench_op_supported(coll_datatype_t dt, coll_op_t op)
{
    return (unsigned)dt < COLL_NUM_DATATYPES && (unsigned)op < COLL_NUM_OPS &&
           (op != COLL_AVG || is_float(dt));
}

/* ---- float16 and bfloat16 ---------------------------------------------------- */

/* Round-to-nearest-even of the low `shift` bits away from m. */
static uint32_t round_shift(uint32_t m, int shift)
{
    uint32_t kept = m >> shift, rest = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return kept + (rest > half || (rest == half && (kept & 1)));
}

/* IEEE binary16 from a float, rounding to nearest even (as the library's
 * reductions do when they store a float16 result). */
static uint16_t float_to_half(float f)
{
    uint32_t x, sign, man;
    int e;

    memcpy(&x, &f, sizeof(x));
    sign = (x >> 16) & 0x8000;
    man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) /* inf or NaN */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    e = (int)((x >> 23) & 0xff) - 127 + 15; /* biased float16 exponent */
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00);
    if (e <= 0) { /* float16 subnormal: units of 2^-24 */
        if (e < -10)
            return (uint16_t)sign;
        return (uint16_t)(sign | round_shift(man | 0x800000, 14 - e));
    }
    /* a carry out of the mantissa bumps the exponent, up to inf: correct */
    return (uint16_t)(sign | round_shift(((uint32_t)e << 23) | man, 13));
}

/* bfloat16: the top half of a float, rounded to nearest even. */
static uint16_t float_to_bf16(float f)
{
    uint32_t x;

    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40); /* NaN stays NaN */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* ---- storing values ----------------------------------------------------------------- */

/* Element i of buf = x, an integer value (wrapping to the type's width,
 * as the library's integer arithmetic does) or a float. */
static void put(void *buf, coll_datatype_t dt, size_t i, double x)
{
    int64_t v = (int64_t)x;

    switch (dt) {
    case COLL_INT8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)v; break;
    case COLL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case COLL_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)v; break;
    case COLL_UINT32: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    case COLL_INT64: ((int64_t *)buf)[i] = v; break;
    case COLL_UINT64: ((uint64_t *)buf)[i] = (uint64_t)v; break;
    case COLL_FLOAT16: ((uint16_t *)buf)[i] = float_to_half((float)x); break;
    case COLL_BFLOAT16: ((uint16_t *)buf)[i] = float_to_bf16((float)x); break;
    case COLL_FLOAT32: ((float *)buf)[i] = (float)x; break;
    default: ((double *)buf)[i] = x; break;
    }
}

/* Copy the first `period` elements over the rest of n: the pattern at
 * index i equals the one at i + period. */
static void tile(void *buf, size_t n, size_t es, size_t period)
{
    for (size_t done = period; done < n; done *= 2)
        memcpy((char *)buf + done * es, buf, (done * 2 <= n ? done : n - done) * es);
}

/* ---- reductions ---------------------------------------------------------------------- */

/* Element g of rank r's input for op on nranks ranks. Every partial
 * result in any order is an integer (or +-1, +-2) that every datatype
 * holds exactly. */
static double reduce_input(coll_datatype_t dt, coll_op_t op, int nranks, int r, size_t g)
{
    switch (op) {
    case COLL_PROD: /* one rank contributes 2, the others +-1: the product is +-2 */
        if (g % (size_t)nranks == (size_t)r)
            return 2;
        return (g * 3 + (size_t)r) % 4 == 0 ? -1 : 1;
    case COLL_MIN:
    case COLL_MAX: {
        double x = (double)((int)((g * 37 + (size_t)r * 101) % 255) - 127);
        return is_unsigned(dt) && x < 0 ? x + 256 : x; /* keep the order meaningful */
    }
    default: /* SUM, AVG: |any partial sum| <= 5 * 51 or 1 * nranks */
        if (nranks <= 51)
            return (double)((int)((g * 7 + (size_t)r * 13) % 11) - 5);
        return (double)((int)((g + (size_t)r) % 3) - 1);
    }
}

/* A period of reduce_input in g (for every rank). */
static size_t reduce_period(coll_op_t op, int nranks)
{
    switch (op) {
    case COLL_PROD: return 4 * (size_t)nranks;
    case COLL_MIN:
    case COLL_MAX: return 255;
    default: return nranks <= 51 ? 11 : 3;
    }
}

void bench_fill_reduce_input(void *buf, coll_datatype_t dt, coll_op_t op, int nranks, int rank,
                             size_t base, size_t count)
{
    size_t period = reduce_period(op, nranks);

    if (period > count)
        period = count;
    for (size_t i = 0; i < period; i++)
        put(buf, dt, i, reduce_input(dt, op, nranks, rank, base + i));
    tile(buf, count, coll_datatype_size(dt), period);
}

/* v narrowed to dt's width with two's complement wrap, widened back with
 * dt's signedness. */
static int64_t narrow(coll_datatype_t dt, int64_t v)
{
    switch (dt) {
    case COLL_INT8: return (int8_t)(uint8_t)v;
    case COLL_UINT8: return (uint8_t)v;
    case COLL_INT32: return (int32_t)(uint32_t)v;
    case COLL_UINT32: return (uint32_t)v;
    default: return v; /* 64-bit: the bits themselves */
    }
}

/* The exact integer result of element g, wrapped as the library wraps. */
static int64_t expect_int(coll_datatype_t dt, coll_op_t op, int nranks, size_t g)
{
    int64_t acc = narrow(dt, (int64_t)reduce_input(dt, op, nranks, 0, g));

    for (int k = 1; k < nranks; k++) {
        int64_t x = narrow(dt, (int64_t)reduce_input(dt, op, nranks, k, g));
        int less = dt == COLL_UINT64 ? (uint64_t)x < (uint64_t)acc : x < acc;
        if (op == COLL_SUM)
            acc = narrow(dt, (int64_t)((uint64_t)acc + (uint64_t)x));
        else if (op == COLL_PROD)
            acc = narrow(dt, (int64_t)((uint64_t)acc * (uint64_t)x));
        else if ((op == COLL_MIN) == less && x != acc)
            acc = x;
    }
    return acc;
}

/* The exact floating result of element g: integers are exact in double;
 * an average is divided once, as the library does (in float for the
 * 16- and 32-bit types, in double for float64). */
static double expect_float(coll_datatype_t dt, coll_op_t op, int nranks, size_t g)
{
    double acc = reduce_input(dt, op, nranks, 0, g);

    for (int k = 1; k < nranks; k++) {
        double x = reduce_input(dt, op, nranks, k, g);
        acc = op == COLL_PROD  ? acc * x
              : op == COLL_MIN ? fmin(acc, x)
              : op == COLL_MAX ? fmax(acc, x)
                               : acc + x;
    }
    if (op == COLL_AVG)
        acc = dt == COLL_FLOAT64 ? acc / nranks : (double)((float)acc / (float)nranks);
    return acc;
}

void bench_fill_reduce_expected(void *buf, coll_datatype_t dt, coll_op_t op, int nranks,
                                size_t base, size_t count)
{
    size_t period = reduce_period(op, nranks), es = coll_datatype_size(dt);

    if (period > count)
        period = count;
    for (size_t i = 0; i < period; i++) {
        if (is_float(dt)) {
            put(buf, dt, i, expect_float(dt, op, nranks, base + i));
        } else {
            int64_t v = expect_int(dt, op, nranks, base + i);
            memcpy((char *)buf + i * es, &v, es); /* little-endian: the low bytes */
        }
    }
    tile(buf, count, es, period);
}

/* ---- non-reducing collectives ----------------------------------------------------------- */

#define COPY_PERIOD 251 /* a prime: blocks from different ranks or offsets differ */

void bench_fill_copy(void *buf, coll_datatype_t dt, int rank, size_t base, size_t count)
{
    size_t period = count < COPY_PERIOD ? count : COPY_PERIOD;

    /* values in [-125, 125]: exact in every type, and never the bytes
     * 0x80 of an int8 or uint8 */
    for (size_t i = 0; i < period; i++)
        put(buf, dt, i, (double)((int)(((size_t)rank * 131 + (base + i) * 7) % COPY_PERIOD) - 125));
    tile(buf, count, coll_datatype_size(dt), period);
}

size_t bench_count_wrong(const void *got, const void *want, size_t count, size_t es)
{
    const char *g = got, *w = want;
    size_t wrong = 0, step = 4096 / es * es; /* compare in pages, then element by element */

    for (size_t off = 0, bytes = count * es; off < bytes; off += step) {
        size_t len = bytes - off < step ? bytes - off : step;
        if (memcmp(g + off, w + off, len) == 0)
            continue;
        for (size_t i = 0; i < len; i += es)
            wrong += memcmp(g + off + i, w + off + i, es) != 0;
    }
    return wrong;
}

void bench_complement(void *dst, const void *src, size_t bytes)
{
    const unsigned char *s = src;
    unsigned char *d = dst;

    for (size_t i = 0; i < bytes; i++)
        d[i] = (unsigned char)~s[i];
}
