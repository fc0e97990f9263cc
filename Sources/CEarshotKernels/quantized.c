#include "earshot_kernels.h"
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "clones.h"
#include "amx.h"

// TFLite's MultiplyByQuantizedMultiplier without branches, so that loops of it vectorize:
// the left shift (wrapping as TFLite's int32 would), gemmlowp's SaturatingRoundingDoublingHighMul
// ((a * b * 2 + 2^31 rounded) / 2^32, saturated) and its RoundingDivideByPOT (half away from zero).
static inline __attribute__((always_inline)) int32_t requantize(int32_t acc, int32_t multiplier, int32_t shift) {
    int32_t left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : (shift < -31 ? 31 : -shift);
    int32_t a = (int32_t)((uint32_t)acc << left);
    int64_t ab = (int64_t)a * (int64_t)multiplier;
    int64_t q = ab + (ab >= 0 ? (1LL << 30) : (1 - (1LL << 30)));
    int32_t high = (int32_t)((q + (q < 0 ? (1LL << 31) - 1 : 0)) >> 31);  // q / 2^31, toward zero
    high = (a == INT32_MIN && multiplier == INT32_MIN) ? INT32_MAX : high;
    int32_t mask = (int32_t)((1U << right) - 1);
    int32_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
    return (high >> right) + ((high & mask) > threshold ? 1 : 0);
}

int earshot_requantize(int acc, int multiplier, int shift) { return requantize(acc, multiplier, shift); }

// n accumulators (bias included) requantized, offset, clamped and written at element `at` of y:
// as codes (y_codes) or as floats.
static inline __attribute__((always_inline)) void store_requantized(const int32_t *acc, long n, const int *multiplier, const int *shift,
                                                                    int output_offset, int lo, int hi, void *y, int y_codes, long at) {
    if (y_codes) {
        signed char *out = (signed char *)y + at;
        for (long o = 0; o < n; o++) {
            int32_t v = (int32_t)((uint32_t)requantize(acc[o], multiplier[o], shift[o]) + (uint32_t)output_offset);
            out[o] = (signed char)(v < lo ? lo : (v > hi ? hi : v));
        }
    } else {
        float *out = (float *)y + at;
        for (long o = 0; o < n; o++) {
            int32_t v = (int32_t)((uint32_t)requantize(acc[o], multiplier[o], shift[o]) + (uint32_t)output_offset);
            out[o] = (float)(v < lo ? lo : (v > hi ? hi : v));
        }
    }
}

// store_requantized on AVX-512, 16 outputs a vector: requantize's integer operations lane by
// lane. The 64-bit products are taken for the even lanes and for the odd lanes apart (vpmuldq),
// each rounded and divided by 2^31 toward zero in 64 bits, then the two halves interleaved back.
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl"))) __m512i high_product(__m512i ab) {
    const __m512i zero = _mm512_setzero_si512();
    __mmask8 negative = _mm512_cmplt_epi64_mask(ab, zero);
    __m512i q = _mm512_add_epi64(ab, _mm512_mask_blend_epi64(negative, _mm512_set1_epi64(1LL << 30), _mm512_set1_epi64(1 - (1LL << 30))));
    q = _mm512_mask_add_epi64(q, _mm512_cmplt_epi64_mask(q, zero), q, _mm512_set1_epi64((1LL << 31) - 1));
    return _mm512_srai_epi64(q, 31);
}

static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl"))) __m512i requantize16(__m512i acc, __m512i multiplier,
                                                                                                   __m512i shift) {
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1), min = _mm512_set1_epi32(INT32_MIN);
    __m512i left = _mm512_max_epi32(shift, zero);
    __m512i right = _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(zero, shift), zero), _mm512_set1_epi32(31));
    __m512i a = _mm512_sllv_epi32(acc, left);
    __m512i even = high_product(_mm512_mul_epi32(a, multiplier));
    __m512i odd = high_product(_mm512_mul_epi32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(multiplier, 32)));
    __m512i high = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
    __mmask16 saturated = _mm512_cmpeq_epi32_mask(a, min) & _mm512_cmpeq_epi32_mask(multiplier, min);
    high = _mm512_mask_mov_epi32(high, saturated, _mm512_set1_epi32(INT32_MAX));
    __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
    __m512i threshold = _mm512_add_epi32(_mm512_srai_epi32(mask, 1), _mm512_srli_epi32(high, 31));
    __m512i r = _mm512_srav_epi32(high, right);
    return _mm512_mask_add_epi32(r, _mm512_cmpgt_epi32_mask(_mm512_and_si512(high, mask), threshold), r, one);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void store_requantized_avx512(const int32_t *acc, long n, const int *multiplier,
                                                                                       const int *shift, int output_offset, int lo, int hi,
                                                                                       void *y, int y_codes, long at) {
    const __m512i offset = _mm512_set1_epi32(output_offset), low = _mm512_set1_epi32(lo), high = _mm512_set1_epi32(hi);
    for (long o = 0; o < n; o += 16) {
        __mmask16 lanes = (__mmask16)(n - o >= 16 ? 0xffff : (1U << (n - o)) - 1);
        __m512i r = requantize16(_mm512_maskz_loadu_epi32(lanes, acc + o), _mm512_maskz_loadu_epi32(lanes, multiplier + o),
                                 _mm512_maskz_loadu_epi32(lanes, shift + o));
        r = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(r, offset), low), high);
        if (y_codes) {
            _mm512_mask_cvtepi32_storeu_epi8((signed char *)y + at + o, lanes, r);
        } else {
            _mm512_mask_storeu_ps((float *)y + at + o, lanes, _mm512_cvtepi32_ps(r));
        }
    }
}

// store_requantized on AVX-512 (wide) or in plain C: the same values.
static inline __attribute__((always_inline)) void store_requantized_on(int wide, const int32_t *acc, long n, const int *multiplier,
                                                                       const int *shift, int output_offset, int lo, int hi, void *y,
                                                                       int y_codes, long at) {
    if (wide) {
        store_requantized_avx512(acc, n, multiplier, shift, output_offset, lo, hi, y, y_codes, at);
    } else {
        store_requantized(acc, n, multiplier, shift, output_offset, lo, hi, y, y_codes, at);
    }
}

void earshot_requantize_many(const int *acc, long n, const int *multiplier, const int *shift, int output_offset, int lo, int hi, int path,
                             signed char *y) {
    store_requantized_on(path > 0 && earshot_int8_paths() > 1, acc, n, multiplier, shift, output_offset, lo, hi, y, 1, 0);
}

// A value held as a float, as an int16 (whole numbers in range are exact; others are clamped,
// NaN taken as the lowest).
static inline int as_int16(float v) { return (int)__builtin_fminf(__builtin_fmaxf(v, -32768.0f), 32767.0f); }

// The input's count values plus the offset, as the int16s the kernels multiply.
static inline __attribute__((always_inline)) void offset_input(const void *x, int x_codes, long count, int input_offset, short *xi) {
    if (x_codes) {
        const signed char *codes = (const signed char *)x;
        for (long j = 0; j < count; j++) xi[j] = (short)(codes[j] + input_offset);
    } else {
        const float *floats = (const float *)x;
        for (long j = 0; j < count; j++) xi[j] = (short)(as_int16(floats[j]) + input_offset);
    }
}

// The products of one receptive field: acc[j] (holding the bias) += the sum over pairs p of
// w[p][j][0] * x[2p] + w[p][j][1] * x[2p + 1], for the n <= 64 outputs j of a block; pairs[p]
// holds x[2p] and x[2p + 1] as one int32 and the weights' rows are `stride` outputs long. The
// sums wrap as int32, as TFLite's accumulator would, so any order of them gives the same value.
// The pairs may be the int16 input itself, read two values at a time (hence may_alias).
typedef int32_t __attribute__((may_alias)) int16_pair;
typedef void (*pair_products)(const int16_pair *pairs, long count, const short *w, long stride, long n, int32_t *acc);

static void pair_products_baseline(const int16_pair *pairs, long count, const short *w, long stride, long n, int32_t *acc) {
    for (long p = 0; p < count; p++) {
        int32_t x0 = (int16_t)(pairs[p] & 0xffff), x1 = (int16_t)((uint32_t)pairs[p] >> 16);
        const short *row = w + p * stride * 2;
        for (long j = 0; j < n; j++) acc[j] = (int32_t)((uint32_t)acc[j] + (uint32_t)(row[2 * j] * x0) + (uint32_t)(row[2 * j + 1] * x1));
    }
}

// Blocks of 16 outputs in AVX-512 registers: with VNNI one instruction a block and pair, else a
// pairwise multiply-add and an add (the same wrapping sums).
#define PAIR_PRODUCTS_512(NAME, TARGET, STEP)                                                                        \
    __attribute__((target(TARGET))) static void NAME(const int16_pair *pairs, long count, const short *w, long stride, \
                                                     long n, int32_t *acc) {                                        \
        long blocks = (n + 15) / 16;                                                                                 \
        __mmask16 last = (__mmask16)(n % 16 == 0 ? 0xffff : (1U << (n % 16)) - 1);                                   \
        __m512i a0 = _mm512_maskz_loadu_epi32(blocks == 1 ? last : 0xffff, acc);                                     \
        __m512i a1 = blocks > 1 ? _mm512_maskz_loadu_epi32(blocks == 2 ? last : 0xffff, acc + 16) : _mm512_setzero_si512(); \
        __m512i a2 = blocks > 2 ? _mm512_maskz_loadu_epi32(blocks == 3 ? last : 0xffff, acc + 32) : _mm512_setzero_si512(); \
        __m512i a3 = blocks > 3 ? _mm512_maskz_loadu_epi32(last, acc + 48) : _mm512_setzero_si512();                  \
        for (long p = 0; p < count; p++) {                                                                           \
            __m512i x = _mm512_set1_epi32(pairs[p]);                                                                 \
            const short *row = w + p * stride * 2;                                                                   \
            a0 = STEP(a0, x, _mm512_loadu_si512(row));                                                               \
            if (blocks > 1) a1 = STEP(a1, x, _mm512_loadu_si512(row + 32));                                          \
            if (blocks > 2) a2 = STEP(a2, x, _mm512_loadu_si512(row + 64));                                          \
            if (blocks > 3) a3 = STEP(a3, x, _mm512_loadu_si512(row + 96));                                          \
        }                                                                                                            \
        _mm512_mask_storeu_epi32(acc, blocks == 1 ? last : 0xffff, a0);                                              \
        if (blocks > 1) _mm512_mask_storeu_epi32(acc + 16, blocks == 2 ? last : 0xffff, a1);                         \
        if (blocks > 2) _mm512_mask_storeu_epi32(acc + 32, blocks == 3 ? last : 0xffff, a2);                         \
        if (blocks > 3) _mm512_mask_storeu_epi32(acc + 48, last, a3);                                                \
    }
#define MADD_ADD(a, x, w) _mm512_add_epi32((a), _mm512_madd_epi16((x), (w)))
PAIR_PRODUCTS_512(pair_products_avx512, "avx512f,avx512bw", MADD_ADD)
PAIR_PRODUCTS_512(pair_products_vnni, "avx512f,avx512bw,avx512vnni", _mm512_dpwssd_epi32)

// The products of one receptive field in quads of taps: acc[j] += the sum over quads q of
// w[q][j][t] * u[4q + t] (t < 4), u the input as unsigned bytes (the codes plus 128) and w int8,
// for the n <= 64 outputs j of a block, with AVX-512 VNNI (`vpdpbusd`, four taps an instruction;
// each sum of four products fits an int32, so nothing saturates). The sums wrap as int32.
typedef int32_t __attribute__((may_alias)) byte_quad;

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static inline void quad_products_vnni(const byte_quad *quads, long count,
                                                                                            const short *weights, long stride, long n,
                                                                                            int32_t *acc) {
    const signed char *w = (const signed char *)weights;  // int8 weights, four a 32-bit group as int16 pairs are two
    long blocks = (n + 15) / 16;
    __mmask16 last = (__mmask16)(n % 16 == 0 ? 0xffff : (1U << (n % 16)) - 1);
    __m512i a0 = _mm512_maskz_loadu_epi32(blocks == 1 ? last : 0xffff, acc);
    __m512i a1 = blocks > 1 ? _mm512_maskz_loadu_epi32(blocks == 2 ? last : 0xffff, acc + 16) : _mm512_setzero_si512();
    __m512i a2 = blocks > 2 ? _mm512_maskz_loadu_epi32(blocks == 3 ? last : 0xffff, acc + 32) : _mm512_setzero_si512();
    __m512i a3 = blocks > 3 ? _mm512_maskz_loadu_epi32(last, acc + 48) : _mm512_setzero_si512();
    // Even and odd quads into separate sums, added at the end (int32 sums wrap: any order gives
    // the same bits), so that two chains of products are in flight rather than one.
    __m512i b0 = _mm512_setzero_si512(), b1 = _mm512_setzero_si512(), b2 = _mm512_setzero_si512(), b3 = _mm512_setzero_si512();
    long q = 0;
    for (; q + 2 <= count; q += 2) {
        __m512i x = _mm512_set1_epi32(quads[q]), xb = _mm512_set1_epi32(quads[q + 1]);
        const signed char *row = w + q * stride * 4, *rowb = row + stride * 4;
        a0 = _mm512_dpbusd_epi32(a0, x, _mm512_loadu_si512(row));
        b0 = _mm512_dpbusd_epi32(b0, xb, _mm512_loadu_si512(rowb));
        if (blocks > 1) {
            a1 = _mm512_dpbusd_epi32(a1, x, _mm512_loadu_si512(row + 64));
            b1 = _mm512_dpbusd_epi32(b1, xb, _mm512_loadu_si512(rowb + 64));
        }
        if (blocks > 2) {
            a2 = _mm512_dpbusd_epi32(a2, x, _mm512_loadu_si512(row + 128));
            b2 = _mm512_dpbusd_epi32(b2, xb, _mm512_loadu_si512(rowb + 128));
        }
        if (blocks > 3) {
            a3 = _mm512_dpbusd_epi32(a3, x, _mm512_loadu_si512(row + 192));
            b3 = _mm512_dpbusd_epi32(b3, xb, _mm512_loadu_si512(rowb + 192));
        }
    }
    if (q < count) {
        __m512i x = _mm512_set1_epi32(quads[q]);
        const signed char *row = w + q * stride * 4;
        a0 = _mm512_dpbusd_epi32(a0, x, _mm512_loadu_si512(row));
        if (blocks > 1) a1 = _mm512_dpbusd_epi32(a1, x, _mm512_loadu_si512(row + 64));
        if (blocks > 2) a2 = _mm512_dpbusd_epi32(a2, x, _mm512_loadu_si512(row + 128));
        if (blocks > 3) a3 = _mm512_dpbusd_epi32(a3, x, _mm512_loadu_si512(row + 192));
    }
    a0 = _mm512_add_epi32(a0, b0);
    a1 = _mm512_add_epi32(a1, b1);
    a2 = _mm512_add_epi32(a2, b2);
    a3 = _mm512_add_epi32(a3, b3);
    _mm512_mask_storeu_epi32(acc, blocks == 1 ? last : 0xffff, a0);
    if (blocks > 1) _mm512_mask_storeu_epi32(acc + 16, blocks == 2 ? last : 0xffff, a1);
    if (blocks > 2) _mm512_mask_storeu_epi32(acc + 32, blocks == 3 ? last : 0xffff, a2);
    if (blocks > 3) _mm512_mask_storeu_epi32(acc + 48, last, a3);
}

// Path 3 (AMX tiles) runs the products over blocks of streams on tiles and everything else as
// path 2 does.
static const pair_products paths[] = {pair_products_baseline, pair_products_avx512, pair_products_vnni, pair_products_vnni};
static int path_chosen = -1;  // the best the CPU has, unless a test chose one
static int path_best = -1;

static int best_int8_path(void) {
    int best = __atomic_load_n(&path_best, __ATOMIC_RELAXED);
    if (best >= 0) return best;
    __builtin_cpu_init();
    best = 0;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
        best = 1;
        if (__builtin_cpu_supports("avx512vnni")) best = earshot_amx_state() == EARSHOT_AMX_READY ? 3 : 2;
    }
    __atomic_store_n(&path_best, best, __ATOMIC_RELAXED);
    return best;
}

int earshot_int8_paths(void) { return best_int8_path() + 1; }

// The path taken unless one is asked for: AVX-512 VNNI where AMX is also there, since AMX's tiles
// were not measured faster on microWakeWord's small layers (their set-up is paid per call).
static int default_int8_path(void) {
    int best = best_int8_path();
    return best == 3 ? 2 : best;
}

int earshot_int8_path(int path) {
    int best = best_int8_path();
    __atomic_store_n(&path_chosen, path < 0 ? default_int8_path() : path > best ? best : path, __ATOMIC_RELAXED);
    return __atomic_load_n(&path_chosen, __ATOMIC_RELAXED);
}

static int chosen_index(void) {
    int path = __atomic_load_n(&path_chosen, __ATOMIC_RELAXED);
    if (path < 0) {
        path = default_int8_path();
        __atomic_store_n(&path_chosen, path, __ATOMIC_RELAXED);
    }
    return path;
}

static pair_products chosen_path(void) { return paths[chosen_index()]; }

// Sums of int16 products over k, wrapping as int32 (each product fits): the loop vectorizes to
// multiply-adds of pairs along k, for layers of few outputs.
static inline __attribute__((always_inline)) int32_t dot16(const short *a, const short *b, long n) {
    uint32_t s = 0;
    for (long i = 0; i < n; i++) s += (uint32_t)((int32_t)a[i] * (int32_t)b[i]);
    return (int32_t)s;
}

// One receptive field's outputs of group g at position p, in blocks of up to 64: sums from
// `first` (the bias, or the base), `products` over the field's `count` 32-bit groups of taps
// (pairs of int16, or quads of bytes: four bytes an output and group either way, so block j0
// starts j0 * 4 bytes into the group's weights wg), requantized and stored.
static inline __attribute__((always_inline)) void field_outputs(pair_products products, const int32_t *in, long count,
                                                                const char *wg, long stride, long g, long per_group,
                                                                const int *first, const int *multiplier, const int *shift,
                                                                int output_offset, int lo, int hi, void *y, int y_codes, long at,
                                                                int wide) {
    for (long j0 = 0; j0 < per_group; j0 += 64) {
        long n = per_group - j0 < 64 ? per_group - j0 : 64;
        int32_t acc[64];
        long o0 = g * per_group + j0;
        for (long j = 0; j < n; j++) acc[j] = first[o0 + j];
        products(in, count, (const short *)(wg + j0 * 4), stride, n, acc);
        store_requantized_on(wide, acc, n, multiplier + o0, shift + o0, output_offset, lo, hi, y, y_codes, at + o0);
    }
}

// earshot_qconv on codes in quads of taps (VNNI): u = codes + 128 as bytes, the padding's byte
// 128 - input_offset, so that with base = bias + (input_offset - 128) * (the sum of the output's
// weights) every tap adds w * (x + input_offset) as the reference does, padding nothing. Compiled
// for the CPU of the VNNI path it runs on, so that its loops (the bytes, the requantization)
// vectorize as the clones' do.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512cd,avx512vnni,bmi,bmi2,lzcnt,popcnt,fma,avx2,avx")))
static void qconv_quads(const signed char *x, long count, const int *fields, long groups, long positions, long k,
                        const signed char *w4, long per_group, const int *base, const int *multiplier, const int *shift,
                        int input_offset, int output_offset, int lo, int hi, int *scratch, void *y, int y_codes) {
    long quads = (k + 3) / 4, stride = (per_group + 15) / 16 * 16, outputs = groups * per_group;
    unsigned char *u = (unsigned char *)scratch;
    byte_quad *field = (byte_quad *)(scratch + (count + 7) / 4);
    for (long j = 0; j < count; j++) u[j] = (unsigned char)(x[j] ^ 0x80);
    u[count] = (unsigned char)(128 - input_offset);
    u[count + 1] = u[count + 2] = u[count + 3] = 0;  // read past a field's last tap, against zero weights
    for (long g = 0; g < groups; g++) {
        const signed char *wg = w4 + g * quads * stride * 4;
        for (long p = 0; p < positions; p++) {
            const byte_quad *in = (const byte_quad *)(u + p * k);
            if (fields) {
                const int *f = fields + (g * positions + p) * k;
                for (long i = 0; i < quads; i++) {
                    uint32_t v = 0;
                    for (long t = 0; t < 4 && 4 * i + t < k; t++) v |= (uint32_t)u[f[4 * i + t]] << (8 * t);
                    field[i] = (int32_t)v;
                }
                in = field;
            }
            field_outputs(quad_products_vnni, in, quads, (const char *)wg, stride, g, per_group, base, multiplier, shift, output_offset,
                          lo, hi, y, y_codes, p * outputs, 1);
        }
    }
}

CLONES
void earshot_qconv(const void *x, int x_codes, long count, const int *fields, long groups, long positions, long k, const short *w,
                   long per_group, const int *bias, const int *multiplier, const int *shift, int input_offset, int output_offset, int lo,
                   int hi, int *scratch, void *y, int y_codes, const signed char *w4, const int *base) {
    pair_products products = chosen_path();
    if (products == pair_products_vnni && w4 && base && x_codes && per_group >= EARSHOT_QCONV_FEW) {
        qconv_quads((const signed char *)x, count, fields, groups, positions, k, w4, per_group, base, multiplier, shift, input_offset,
                    output_offset, lo, hi, scratch, y, y_codes);
        return;
    }
    long pairs = (k + 1) / 2, stride = (per_group + 15) / 16 * 16;
    short *xi = (short *)scratch;
    int32_t *field = scratch + (count + 2) / 2;
    offset_input(x, x_codes, count, input_offset, xi);
    xi[count] = 0;  // padding adds nothing
    long outputs = groups * per_group;
    if (per_group < EARSHOT_QCONV_FEW) {
        // Few outputs a group: each output's weights are one row, the products along it.
        short *col = (short *)field;
        for (long g = 0; g < groups; g++) {
            for (long p = 0; p < positions; p++) {
                const short *row = xi + p * k;
                if (fields) {
                    const int *f = fields + (g * positions + p) * k;
                    for (long i = 0; i < k; i++) col[i] = xi[f[i]];
                    row = col;
                }
                int32_t acc[EARSHOT_QCONV_FEW];
                long o0 = g * per_group;
                for (long j = 0; j < per_group; j++) {
                    acc[j] = (int32_t)((uint32_t)dot16(w + (o0 + j) * k, row, k) + (uint32_t)bias[o0 + j]);
                }
                store_requantized(acc, per_group, multiplier + o0, shift + o0, output_offset, lo, hi, y, y_codes, p * outputs + o0);
            }
        }
        return;
    }
    for (long g = 0; g < groups; g++) {
        const short *wg = w + g * pairs * stride * 2;
        for (long p = 0; p < positions; p++) {
            // A contiguous field is the input itself, its int16 values read two at a time.
            const int16_pair *in = (const int16_pair *)(xi + p * k);
            if (fields) {
                const int *f = fields + (g * positions + p) * k;
                for (long i = 0; i < pairs; i++) {
                    uint32_t x0 = (uint16_t)xi[f[2 * i]], x1 = 2 * i + 1 < k ? (uint16_t)xi[f[2 * i + 1]] : 0;
                    field[i] = (int32_t)(x0 | (x1 << 16));
                }
                in = field;
            }
            field_outputs(products, in, pairs, (const char *)wg, stride, g, per_group, bias, multiplier, shift, output_offset, lo, hi, y,
                          y_codes, p * outputs, products != pair_products_baseline);
        }
    }
}

// The products of one field for each of `S` streams (S <= 4, a constant where it is inlined):
// sums[s][j] = first[j] + the sum over quads q of w[q][j][t] * (in[s][4q + t] + 128), for the
// n <= 64 outputs j of a block, with AVX-512 VNNI. Each quad of weights is loaded once for the S
// streams (the weights of a whole layer stay in registers for four streams' products), and each
// stream's codes are read in place, made unsigned bytes as they are broadcast. The sums wrap as
// int32, as quad_products_vnni's do: the same bits.
#define STREAM_BLOCK 4
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static inline __attribute__((always_inline)) void
stream_quads_vnni(const int S, const byte_quad *const *in, long quads, const signed char *w, long stride, long n, const int *first,
                  int32_t sums[][64]) {
    const long blocks = (n + 15) / 16;
    const __mmask16 last = (__mmask16)(n % 16 == 0 ? 0xffff : (1U << (n % 16)) - 1);
    const __m512i flip = _mm512_set1_epi32((int)0x80808080u);
    __m512i a[STREAM_BLOCK][4];
    for (int b = 0; b < 4; b++) {
        __m512i f = b < blocks ? _mm512_maskz_loadu_epi32(b == blocks - 1 ? last : 0xffff, first + 16 * b) : _mm512_setzero_si512();
        for (int s = 0; s < S; s++) a[s][b] = f;
    }
    for (long q = 0; q < quads; q++) {
        const signed char *row = w + q * stride * 4;
        __m512i w0 = _mm512_loadu_si512(row);
        __m512i w1 = blocks > 1 ? _mm512_loadu_si512(row + 64) : _mm512_setzero_si512();
        __m512i w2 = blocks > 2 ? _mm512_loadu_si512(row + 128) : _mm512_setzero_si512();
        __m512i w3 = blocks > 3 ? _mm512_loadu_si512(row + 192) : _mm512_setzero_si512();
        for (int s = 0; s < S; s++) {
            __m512i x = _mm512_xor_si512(_mm512_set1_epi32(in[s][q]), flip);
            a[s][0] = _mm512_dpbusd_epi32(a[s][0], x, w0);
            if (blocks > 1) a[s][1] = _mm512_dpbusd_epi32(a[s][1], x, w1);
            if (blocks > 2) a[s][2] = _mm512_dpbusd_epi32(a[s][2], x, w2);
            if (blocks > 3) a[s][3] = _mm512_dpbusd_epi32(a[s][3], x, w3);
        }
    }
    for (int s = 0; s < S; s++)
        for (int b = 0; b < 4; b++) _mm512_storeu_si512((void *)(sums[s] + 16 * b), a[s][b]);
}

// earshot_qconv_streams on VNNI for one group read in place (fields NULL, k a multiple of 4): the
// streams in blocks of STREAM_BLOCK, each block's outputs requantized stream by stream.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void qconv_streams_vnni(
    long streams, const signed char *x, long x_stride, long positions, long k, const signed char *w4, long per_group, const int *base,
    const int *multiplier, const int *shift, int output_offset, int lo, int hi, char *y, long y_stride, int y_codes) {
    const long quads = k / 4, stride = (per_group + 15) / 16 * 16;
    int32_t sums[STREAM_BLOCK][64];
    for (long s0 = 0; s0 < streams; s0 += STREAM_BLOCK) {
        const int S = streams - s0 < STREAM_BLOCK ? (int)(streams - s0) : STREAM_BLOCK;
        for (long p = 0; p < positions; p++) {
            const byte_quad *in[STREAM_BLOCK];
            for (int s = 0; s < S; s++) in[s] = (const byte_quad *)(x + (s0 + s) * x_stride + p * k);
            for (long j0 = 0; j0 < per_group; j0 += 64) {
                const long n = per_group - j0 < 64 ? per_group - j0 : 64;
                const signed char *wj = w4 + j0 * 4;
                switch (S) {
                case 4: stream_quads_vnni(4, in, quads, wj, stride, n, base + j0, sums); break;
                case 3: stream_quads_vnni(3, in, quads, wj, stride, n, base + j0, sums); break;
                case 2: stream_quads_vnni(2, in, quads, wj, stride, n, base + j0, sums); break;
                default: stream_quads_vnni(1, in, quads, wj, stride, n, base + j0, sums); break;
                }
                for (int s = 0; s < S; s++) {
                    store_requantized_avx512(sums[s], n, multiplier + j0, shift + j0, output_offset, lo, hi, y + (s0 + s) * y_stride, y_codes,
                                             p * per_group + j0);
                }
            }
        }
    }
}

// earshot_qconv_streams on AMX tiles, 16 streams a block: A (tile 4) holds the block's fields,
// 64 bytes (16 quads) of each stream's codes made unsigned bytes (codes + 128; zeros past k), a
// row a stream; B (tiles 5, 6) is 16 quads of 16 outputs' weights read from w4 in place (w4 is
// laid out with 15 rows of zeros past its last quad, so that the last B tile of a field reads
// nothing outside it); C (tiles 0-3) sums 16 streams by 64 outputs. `tdpbusd` sums each output's
// products in int32, wrapping, as the reference's accumulator: base added, the sums are
// requantized stream by stream and equal what every other path gives.
__attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl"))) static void qconv_streams_amx(
    long streams, const signed char *x, long x_stride, long positions, long k, const signed char *w4, long per_group, const int *base,
    const int *multiplier, const int *shift, int output_offset, int lo, int hi, char *y, long y_stride, int y_codes) {
    const long stride = (per_group + 15) / 16 * 16, chunks = (k + 63) / 64;
    unsigned char a[16][64] __attribute__((aligned(64)));
    int32_t sums[16][64] __attribute__((aligned(64)));
    memset(a, 0, sizeof a);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    amx_configure_tiles();
    for (long s0 = 0; s0 < streams; s0 += 16) {
        const long S = streams - s0 < 16 ? streams - s0 : 16;
        for (long p = 0; p < positions; p++) {
            for (long j0 = 0; j0 < per_group; j0 += 64) {
                const long n = per_group - j0 < 64 ? per_group - j0 : 64, panels = (n + 15) / 16;
                __builtin_ia32_tilezero(0);
                __builtin_ia32_tilezero(1);
                __builtin_ia32_tilezero(2);
                __builtin_ia32_tilezero(3);
                for (long c = 0; c < chunks; c++) {
                    const long left = k - 64 * c;
                    const __mmask64 bytes = left >= 64 ? ~0ULL : (1ULL << left) - 1;
                    for (long s = 0; s < S; s++) {
                        __m512i v = _mm512_maskz_loadu_epi8(bytes, x + (s0 + s) * x_stride + p * k + 64 * c);
                        _mm512_store_si512((void *)a[s], _mm512_maskz_mov_epi8(bytes, _mm512_xor_si512(v, flip)));
                    }
                    __builtin_ia32_tileloadd64(4, a, 64);
                    const signed char *b = w4 + (16 * c * stride + j0) * 4;
                    __builtin_ia32_tileloadd64(5, b, stride * 4);
                    __builtin_ia32_tdpbusd(0, 4, 5);
                    if (panels > 1) {
                        __builtin_ia32_tileloadd64(6, b + 64, stride * 4);
                        __builtin_ia32_tdpbusd(1, 4, 6);
                    }
                    if (panels > 2) {
                        __builtin_ia32_tileloadd64(5, b + 128, stride * 4);
                        __builtin_ia32_tdpbusd(2, 4, 5);
                    }
                    if (panels > 3) {
                        __builtin_ia32_tileloadd64(6, b + 192, stride * 4);
                        __builtin_ia32_tdpbusd(3, 4, 6);
                    }
                }
                __builtin_ia32_tilestored64(0, sums[0], 256);
                if (panels > 1) __builtin_ia32_tilestored64(1, sums[0] + 16, 256);
                if (panels > 2) __builtin_ia32_tilestored64(2, sums[0] + 32, 256);
                if (panels > 3) __builtin_ia32_tilestored64(3, sums[0] + 48, 256);
                for (long s = 0; s < S; s++) {
                    for (long j = 0; j < n; j++) sums[s][j] = (int32_t)((uint32_t)sums[s][j] + (uint32_t)base[j0 + j]);
                    store_requantized_avx512(sums[s], n, multiplier + j0, shift + j0, output_offset, lo, hi, y + (s0 + s) * y_stride, y_codes,
                                             p * per_group + j0);
                }
            }
        }
    }
    __builtin_ia32_tilerelease();
}

void earshot_qconv_streams(long streams, const void *x, long x_stride, int x_codes, long count, const int *fields, long groups,
                           long positions, long k, const short *w, long per_group, const int *bias, const int *multiplier, const int *shift,
                           int input_offset, int output_offset, int lo, int hi, int *scratch, void *y, long y_stride, int y_codes,
                           const signed char *w4, const int *base) {
    if (chosen_path() == pair_products_vnni && w4 && base && x_codes && !fields && groups == 1 && k % 4 == 0 &&
        per_group >= EARSHOT_QCONV_FEW) {
        if (chosen_index() == 3 && streams >= 8) {
            qconv_streams_amx(streams, (const signed char *)x, x_stride, positions, k, w4, per_group, base, multiplier, shift, output_offset,
                              lo, hi, (char *)y, y_stride, y_codes);
            return;
        }
        qconv_streams_vnni(streams, (const signed char *)x, x_stride, positions, k, w4, per_group, base, multiplier, shift, output_offset, lo,
                           hi, (char *)y, y_stride, y_codes);
        return;
    }
    for (long s = 0; s < streams; s++) {
        earshot_qconv((const char *)x + s * x_stride, x_codes, count, fields, groups, positions, k, w, per_group, bias, multiplier, shift,
                      input_offset, output_offset, lo, hi, scratch, (char *)y + s * y_stride, y_codes, w4, base);
    }
}

// earshot_qdepthwise on AVX-512: 16 channels a register, their sums kept in it over the taps.
// Each input is read as a code (sign-extended) or as a float taken to int16 as the plain loop does
// (clamped, offset, wrapped).
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl"))) __m512i depthwise_input(const void *x, int x_codes, long at,
                                                                                                   __mmask16 lanes, __m512i offset) {
    if (x_codes) {
        __m128i codes = _mm_maskz_loadu_epi8(lanes, (const signed char *)x + at);
        return _mm512_add_epi32(_mm512_cvtepi8_epi32(codes), offset);
    }
    __m512 v = _mm512_maskz_loadu_ps(lanes, (const float *)x + at);
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-32768.0f)), _mm512_set1_ps(32767.0f));  // NaN becomes the lowest, as as_int16
    __m512i xi = _mm512_add_epi32(_mm512_cvttps_epi32(v), offset);
    return _mm512_srai_epi32(_mm512_slli_epi32(xi, 16), 16);  // the int16 it is stored as
}

// `a` plus one tap's products for 16 channels: the inputs from `at`, the int16 weights from `w`.
static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl"))) __m512i depthwise_tap(__m512i a, const void *x, int x_codes, long at,
                                                                                                 const short *w, __mmask16 lanes, __m512i offset) {
    __m512i wi = _mm512_cvtepi16_epi32(_mm512_castsi512_si256(_mm512_maskz_loadu_epi16((__mmask32)lanes, w)));
    return _mm512_add_epi32(a, _mm512_mullo_epi32(depthwise_input(x, x_codes, at, lanes, offset), wi));
}

static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl"))) void qdepthwise_avx512(
    const void *x, int x_codes, long count, const int *taps, long positions, long k, long channels, const short *w, const int *bias,
    const int *multiplier, const int *shift, int input_offset, int output_offset, int lo, int hi, void *y, int y_codes) {
    const __m512i offset = _mm512_set1_epi32(input_offset);
    for (long p = 0; p < positions; p++) {
        const int *t = taps + p * k;
        // Up to 64 channels at once, one accumulator per 16: each tap's offset is read once for
        // all of them, and the four sums advance side by side.
        for (long c0 = 0; c0 < channels; c0 += 64) {
            long n = channels - c0 < 64 ? channels - c0 : 64, blocks = (n + 15) / 16;
            __mmask16 last = (__mmask16)(n % 16 == 0 ? 0xffff : (1U << (n % 16)) - 1);
            __mmask16 m0 = blocks == 1 ? last : 0xffff, m1 = blocks == 2 ? last : 0xffff, m2 = blocks == 3 ? last : 0xffff, m3 = last;
            __m512i a0 = _mm512_maskz_loadu_epi32(m0, bias + c0);
            __m512i a1 = blocks > 1 ? _mm512_maskz_loadu_epi32(m1, bias + c0 + 16) : _mm512_setzero_si512();
            __m512i a2 = blocks > 2 ? _mm512_maskz_loadu_epi32(m2, bias + c0 + 32) : _mm512_setzero_si512();
            __m512i a3 = blocks > 3 ? _mm512_maskz_loadu_epi32(m3, bias + c0 + 48) : _mm512_setzero_si512();
            for (long i = 0; i < k; i++) {
                if (t[i] >= count) continue;  // padding adds nothing
                long at = t[i] + c0;
                const short *wi = w + i * channels + c0;
                a0 = depthwise_tap(a0, x, x_codes, at, wi, m0, offset);
                if (blocks > 1) a1 = depthwise_tap(a1, x, x_codes, at + 16, wi + 16, m1, offset);
                if (blocks > 2) a2 = depthwise_tap(a2, x, x_codes, at + 32, wi + 32, m2, offset);
                if (blocks > 3) a3 = depthwise_tap(a3, x, x_codes, at + 48, wi + 48, m3, offset);
            }
            int32_t sums[64];
            _mm512_storeu_si512(sums, a0);
            _mm512_storeu_si512(sums + 16, a1);
            _mm512_storeu_si512(sums + 32, a2);
            _mm512_storeu_si512(sums + 48, a3);
            store_requantized_avx512(sums, n, multiplier + c0, shift + c0, output_offset, lo, hi, y, y_codes, p * channels + c0);
        }
    }
}

// The two kinds of input, each its own loop.
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void qdepthwise_avx512_codes(
    const void *x, long count, const int *taps, long positions, long k, long channels, const short *w, const int *bias,
    const int *multiplier, const int *shift, int input_offset, int output_offset, int lo, int hi, void *y, int y_codes) {
    qdepthwise_avx512(x, 1, count, taps, positions, k, channels, w, bias, multiplier, shift, input_offset, output_offset, lo, hi, y, y_codes);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void qdepthwise_avx512_floats(
    const void *x, long count, const int *taps, long positions, long k, long channels, const short *w, const int *bias,
    const int *multiplier, const int *shift, int input_offset, int output_offset, int lo, int hi, void *y, int y_codes) {
    qdepthwise_avx512(x, 0, count, taps, positions, k, channels, w, bias, multiplier, shift, input_offset, output_offset, lo, hi, y, y_codes);
}

// earshot_qdepthwise on AVX-512 VNNI for taps that all lie inside the input (no padding), on
// codes, 32 channels at a time (the last block masked) and two taps a vpdpwssd. The two taps'
// codes, widened to int16, are interleaved by vpunpck[lh]wd, which works within 128-bit lanes: one
// sum holds channels 0-3, 8-11, 16-19 and 24-27 of the 32, the other 4-7, 12-15, 20-23 and 28-31
// (w2 is laid out to match: pair j, block b at (j * blocks + b) * 64, the first sum's 16
// (w[2j], w[2j + 1]) pairs, then the second's, zeros past the channels), and the two are put back
// in order before the requantization. The input offset's products are in `base` (bias + offset x
// the sum of the channel's weights, blocks * 32 of them); the sums wrap as int32, so their bits are
// the reference's. S streams (S <= STREAM_BLOCK, a constant where it is inlined) go through a
// block together, stream s's codes at x[s] and its outputs at y[s]: each pair of weights is loaded
// once for the S, and their sums advance side by side, each stream's in the same order as alone.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static inline __attribute__((always_inline)) void qdepthwise_pairs_block(
    const int S, const signed char *const *x, const int *taps, long positions, long k, long channels, const short *w2, const int *base,
    const int *multiplier, const int *shift, int output_offset, int lo, int hi, char *const *y, int y_codes) {
    const long pairs = (k + 1) / 2, blocks = (channels + 31) / 32;
    const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
    for (long p = 0; p < positions; p++) {
        const int *t = taps + p * k;
        for (long b = 0; b < blocks; b++) {
            const long c0 = 32 * b, n = channels - c0 < 32 ? channels - c0 : 32;
            const __mmask32 lanes = n == 32 ? 0xFFFFFFFFu : (1U << n) - 1;
            __m512i low[STREAM_BLOCK], high[STREAM_BLOCK];
            for (int s = 0; s < S; s++) low[s] = high[s] = _mm512_setzero_si512();
            for (long j = 0; j < pairs; j++) {
                const long ta = t[2 * j], tb = 2 * j + 1 < k ? t[2 * j + 1] : ta;  // a missing second tap weighs 0
                const short *wj = w2 + (j * blocks + b) * 64;
                const __m512i wl = _mm512_loadu_si512((const void *)wj), wh = _mm512_loadu_si512((const void *)(wj + 32));
                for (int s = 0; s < S; s++) {
                    __m512i a = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(lanes, x[s] + ta + c0));
                    __m512i c = _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(lanes, x[s] + tb + c0));
                    low[s] = _mm512_dpwssd_epi32(low[s], _mm512_unpacklo_epi16(a, c), wl);
                    high[s] = _mm512_dpwssd_epi32(high[s], _mm512_unpackhi_epi16(a, c), wh);
                }
            }
            const __m512i base0 = _mm512_loadu_si512((const void *)(base + c0)), base1 = _mm512_loadu_si512((const void *)(base + c0 + 16));
            for (int s = 0; s < S; s++) {
                int32_t sums[32];
                _mm512_storeu_si512(sums, _mm512_add_epi32(_mm512_permutex2var_epi32(low[s], first, high[s]), base0));
                _mm512_storeu_si512(sums + 16, _mm512_add_epi32(_mm512_permutex2var_epi32(low[s], second, high[s]), base1));
                store_requantized_avx512(sums, n, multiplier + c0, shift + c0, output_offset, lo, hi, y[s], y_codes, p * channels + c0);
            }
        }
    }
}

// qdepthwise_pairs_block over `streams` streams, STREAM_BLOCK at a time: stream s's codes at
// x + s * x_stride, its outputs at y + s * y_stride (bytes).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) static void qdepthwise_pairs(
    long streams, const signed char *x, long x_stride, const int *taps, long positions, long k, long channels, const short *w2,
    const int *base, const int *multiplier, const int *shift, int output_offset, int lo, int hi, char *y, long y_stride, int y_codes) {
    for (long s0 = 0; s0 < streams; s0 += STREAM_BLOCK) {
        const int S = streams - s0 < STREAM_BLOCK ? (int)(streams - s0) : STREAM_BLOCK;
        const signed char *in[STREAM_BLOCK];
        char *out[STREAM_BLOCK];
        for (int s = 0; s < S; s++) {
            in[s] = x + (s0 + s) * x_stride;
            out[s] = y + (s0 + s) * y_stride;
        }
        switch (S) {
        case 4: qdepthwise_pairs_block(4, in, taps, positions, k, channels, w2, base, multiplier, shift, output_offset, lo, hi, out, y_codes); break;
        case 3: qdepthwise_pairs_block(3, in, taps, positions, k, channels, w2, base, multiplier, shift, output_offset, lo, hi, out, y_codes); break;
        case 2: qdepthwise_pairs_block(2, in, taps, positions, k, channels, w2, base, multiplier, shift, output_offset, lo, hi, out, y_codes); break;
        default: qdepthwise_pairs_block(1, in, taps, positions, k, channels, w2, base, multiplier, shift, output_offset, lo, hi, out, y_codes); break;
        }
    }
}

CLONES
void earshot_qdepthwise(const void *x, int x_codes, long count, const int *taps, long positions, long k, long channels, const short *w,
                        const int *bias, const int *multiplier, const int *shift, int input_offset, int output_offset, int lo, int hi,
                        short *scratch, void *y, int y_codes, const short *w2, const int *base) {
    if (w2 && base && x_codes && chosen_path() == pair_products_vnni) {
        qdepthwise_pairs(1, (const signed char *)x, 0, taps, positions, k, channels, w2, base, multiplier, shift, output_offset, lo, hi, (char *)y,
                         0, y_codes);
        return;
    }
    if (chosen_path() != pair_products_baseline) {
        (x_codes ? qdepthwise_avx512_codes : qdepthwise_avx512_floats)(x, count, taps, positions, k, channels, w, bias, multiplier, shift,
                                                                       input_offset, output_offset, lo, hi, y, y_codes);
        return;
    }
    short *xi = scratch;
    offset_input(x, x_codes, count, input_offset, xi);
    for (long p = 0; p < positions; p++) {
        const int *t = taps + p * k;
        for (long c0 = 0; c0 < channels; c0 += 64) {
            long n = channels - c0 < 64 ? channels - c0 : 64;
            int32_t acc[64];
            for (long c = 0; c < n; c++) acc[c] = bias[c0 + c];
            for (long i = 0; i < k; i++) {
                if (t[i] >= count) continue;  // padding adds nothing
                const short *in = xi + t[i] + c0, *wi = w + i * channels + c0;
                for (long c = 0; c < n; c++) acc[c] = (int32_t)((uint32_t)acc[c] + (uint32_t)((int32_t)wi[c] * (int32_t)in[c]));
            }
            store_requantized(acc, n, multiplier + c0, shift + c0, output_offset, lo, hi, y, y_codes, p * channels + c0);
        }
    }
}

void earshot_qdepthwise_streams(long streams, const void *x, long x_stride, int x_codes, long count, const int *taps, long positions, long k,
                                long channels, const short *w, const int *bias, const int *multiplier, const int *shift, int input_offset,
                                int output_offset, int lo, int hi, short *scratch, void *y, long y_stride, int y_codes, const short *w2,
                                const int *base) {
    if (w2 && base && x_codes && chosen_path() == pair_products_vnni) {
        qdepthwise_pairs(streams, (const signed char *)x, x_stride, taps, positions, k, channels, w2, base, multiplier, shift, output_offset, lo,
                         hi, (char *)y, y_stride, y_codes);
        return;
    }
    for (long s = 0; s < streams; s++) {
        earshot_qdepthwise((const char *)x + s * x_stride, x_codes, count, taps, positions, k, channels, w, bias, multiplier, shift, input_offset,
                           output_offset, lo, hi, scratch, (char *)y + s * y_stride, y_codes, w2, base);
    }
}

static inline __attribute__((always_inline)) float quantized(float x, double scale, double zero, float lo, float hi) {
    float q = (float)__builtin_rint((double)x / scale + zero);
    q = q < lo ? lo : (q > hi ? hi : q);
    return x != x ? lo : q;
}

CLONES
void earshot_quantize(const float *x, long n, double scale, double zero, float lo, float hi, void *y, int y_codes) {
    if (y_codes) {
        signed char *codes = (signed char *)y;
        for (long i = 0; i < n; i++) codes[i] = (signed char)(int)quantized(x[i], scale, zero, lo, hi);
    } else {
        float *floats = (float *)y;
        for (long i = 0; i < n; i++) floats[i] = quantized(x[i], scale, zero, lo, hi);
    }
}

CLONES
void earshot_codes_to_floats(const signed char *codes, long n, float *y) {
    for (long i = 0; i < n; i++) y[i] = (float)codes[i];
}

CLONES
void earshot_floats_to_codes(const float *x, long n, signed char *codes) {
    for (long i = 0; i < n; i++) {
        float v = x[i] != x[i] ? 0.0f : __builtin_rintf(x[i]);
        v = v < -128.0f ? -128.0f : (v > 127.0f ? 127.0f : v);
        codes[i] = (signed char)(int)v;
    }
}
