#include "earshot_hybrid.h"
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

// Every float operation here is rounded on its own, as Swift's are (no fused multiply-adds).
#pragma clang fp contract(off)

// ref: tensorflow/lite/kernels/internal/reference/portable_tensor_utils.cc
// PortableSymmetricQuantizeFloats and (its range as neon_tensor_utils.cc takes it, in float)
// PortableAsymmetricQuantizeFloats; Sources/EarshotGraph/HybridQuantize.swift is the same in Swift.

// Swift's min and max (min(a, b) = b < a ? b : a; max(a, b) = b >= a ? b : a).
static inline float swift_min(float a, float b) { return b < a ? b : a; }
static inline float swift_max(float a, float b) { return b >= a ? b : a; }

// v rounded half away from zero (TfLiteRound), clamped to [lo, hi]; NaN to 0.
static inline float whole(float v, float lo, float hi) {
    float r = roundf(v);
    return r != r ? 0.0f : swift_min(swift_max(r, lo), hi);
}

// The block's scale and, for an asymmetric block, its zero point; 0 when the block quantizes to zeros.
typedef struct {
    float scale, inverse, offset;
    int zeros;
} block_params;

static block_params params(float low, float high, int asymmetric) {
    block_params p = {1, 0, 0, 1};
    if (!asymmetric) {
        float range = swift_max(fabsf(low), fabsf(high));
        if (range == 0) return p;
        p.inverse = 127 / range;
        p.scale = range / 127;
        p.zeros = 0;
        return p;
    }
    double rmin = (double)swift_min(0, low), rmax = (double)swift_max(0, high);
    if (rmin == rmax || !isfinite(rmin) || !isfinite(rmax)) return p;
    double scale = (double)(swift_max(0, high) - swift_min(0, low)) / 255;
    double from_min = -128 - rmin / scale, from_max = 127 - rmax / scale;
    double zero = 128 + fabs(rmin / scale) < 127 + fabs(rmax / scale) ? from_min : from_max;
    p.offset = zero <= -128 ? -128.0f : (zero >= 127 ? 127.0f : (float)round(zero));
    p.scale = (float)scale;
    p.inverse = (float)(1.0 / (double)p.scale);
    p.zeros = 0;
    return p;
}

static float quantize_plain(const float *x, long n, int asymmetric, float *q) {
    // std::minmax_element: the first value, then each value below the least or above the greatest.
    float low = n > 0 ? x[0] : 0, high = low;
    for (long i = 0; i < n; i++) {
        if (x[i] < low) low = x[i];
        if (x[i] > high) high = x[i];
    }
    block_params p = params(low, high, asymmetric);
    if (p.zeros) {
        for (long i = 0; i < n; i++) q[i] = 0;
    } else if (!asymmetric) {
        for (long i = 0; i < n; i++) q[i] = whole(x[i] * p.inverse, -127, 127);
    } else {
        for (long i = 0; i < n; i++) q[i] = whole(p.offset + x[i] * p.inverse, -128, 127) - p.offset;
    }
    return p.scale;
}

#define AVX512 __attribute__((target("avx512f,avx512dq,avx512vl")))

// whole() on 16 lanes: truncated, then one away from zero where the part cut off is a half or more.
static inline __attribute__((always_inline)) AVX512 __m512 whole16(__m512 v, __m512 lo, __m512 hi) {
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 cut = _mm512_abs_ps(_mm512_sub_ps(v, t));
    __mmask16 up = _mm512_cmp_ps_mask(cut, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));  // 1 with v's sign
    __m512 r = _mm512_mask_add_ps(t, up, t, one);
    r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);  // r is -0.0 only where r is; lo, hi are not zero
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), r);
}

AVX512 static float quantize_avx512(const float *x, long n, int asymmetric, float *q) {
    if (n <= 0) return 1;
    // The least and greatest in four independent pairs (the order does not matter: a tie of +0
    // and -0 gives the same block either way), NaN looked for alongside.
    __m512 low[4], high[4];
    for (int j = 0; j < 4; j++) low[j] = high[j] = _mm512_set1_ps(x[0]);
    __mmask16 nan = 0;
    long i = 0;
    for (; i + 64 <= n; i += 64)
        for (int j = 0; j < 4; j++) {
            __m512 v = _mm512_loadu_ps(x + i + 16 * j);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            low[j] = _mm512_min_ps(low[j], v);
            high[j] = _mm512_max_ps(high[j], v);
        }
    for (; i < n; i += 16) {
        __mmask16 lanes = (__mmask16)(n - i >= 16 ? 0xffff : (1U << (n - i)) - 1);
        __m512 v = _mm512_mask_loadu_ps(low[0], lanes, x + i);  // lanes past the end repeat a value already seen
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        low[0] = _mm512_min_ps(low[0], v);
        high[0] = _mm512_max_ps(high[0], v);
    }
    if (nan) return quantize_plain(x, n, asymmetric, q);
    __m512 least = _mm512_min_ps(_mm512_min_ps(low[0], low[1]), _mm512_min_ps(low[2], low[3]));
    __m512 greatest = _mm512_max_ps(_mm512_max_ps(high[0], high[1]), _mm512_max_ps(high[2], high[3]));
    block_params p = params(_mm512_reduce_min_ps(least), _mm512_reduce_max_ps(greatest), asymmetric);
    if (p.zeros) {
        for (long i = 0; i < n; i++) q[i] = 0;
        return p.scale;
    }
    const __m512 inverse = _mm512_set1_ps(p.inverse), offset = _mm512_set1_ps(p.offset);
    const __m512 lo = _mm512_set1_ps(asymmetric ? -128.0f : -127.0f), hi = _mm512_set1_ps(127.0f);
    i = 0;
    if (asymmetric) {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(q + i, _mm512_sub_ps(whole16(_mm512_add_ps(offset, _mm512_mul_ps(_mm512_loadu_ps(x + i), inverse)), lo, hi), offset));
    } else {
        for (; i + 16 <= n; i += 16) _mm512_storeu_ps(q + i, whole16(_mm512_mul_ps(_mm512_loadu_ps(x + i), inverse), lo, hi));
    }
    if (i < n) {
        __mmask16 lanes = (__mmask16)((1U << (n - i)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, x + i), inverse);
        __m512 r = asymmetric ? _mm512_sub_ps(whole16(_mm512_add_ps(offset, v), lo, hi), offset) : whole16(v, lo, hi);
        _mm512_mask_storeu_ps(q + i, lanes, r);
    }
    return p.scale;
}

static int has_avx512(void) {
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return known;
}

int earshot_hybrid_paths(void) { return has_avx512() ? 2 : 1; }

float earshot_hybrid_quantize(const float *x, long n, int asymmetric, int path, float *q) {
    if (path != 0 && has_avx512()) return quantize_avx512(x, n, asymmetric, q);
    return quantize_plain(x, n, asymmetric, q);
}

// ---- The integer sums of a hybrid product ----
// ref: tensorflow/lite/kernels/internal/reference/conv.h HybridConvPerChannel and
// optimized_ops HybridConv: int32 accumulators of int8 weights times the quantized input, then a
// float conversion of each sum. Here the input is the integers less the zero point (whole numbers
// in -255...255, held as floats), as int16 pairs, and the weights int16 pairs: every product and
// the sums are TFLite's int32 values (wrapping alike), any order giving the same bits.

long earshot_hybrid_packed_count(long outputs, long k) { return (k + 1) / 2 * ((outputs + 15) / 16 * 16) * 2; }

long earshot_hybrid_scratch_count(long positions, long k) { return positions * ((k + 1) / 2 * 2); }

void earshot_hybrid_pack(const float *w, long outputs, long k, short *packed) {
    long pairs = (k + 1) / 2, stride = (outputs + 15) / 16 * 16;
    for (long i = 0; i < pairs * stride * 2; i++) packed[i] = 0;
    for (long o = 0; o < outputs; o++) {
        for (long i = 0; i < k; i++) {
            float v = w[o * k + i];
            // Whole numbers in range are exact; others are clamped, NaN taken as 0.
            packed[((i / 2) * stride + o) * 2 + i % 2] = v != v ? 0 : (short)__builtin_fminf(__builtin_fmaxf(v, -32768.0f), 32767.0f);
        }
    }
}

// A whole number held as a float, as an int16 (clamped; NaN as 0).
static inline short int16_of(float v) { return v != v ? 0 : (short)__builtin_fminf(__builtin_fmaxf(v, -32768.0f), 32767.0f); }

// The fields as int16 rows of pairs: row p holds field p's k values and a zero where k is odd.
// Inlined into each path, so that its loops vectorize for the path's CPU.
static inline __attribute__((always_inline)) void fields_int16(const float *x, const int *fields, long positions, long k, short *rows) {
    long kp = (k + 1) / 2 * 2;
    for (long p = 0; p < positions; p++) {
        short *row = rows + p * kp;
        if (fields) {
            const int *f = fields + p * k;
            for (long i = 0; i < k; i++) row[i] = f[i] < 0 ? 0 : int16_of(x[f[i]]);
        } else {
            const float *in = x + p * k;
            for (long i = 0; i < k; i++) row[i] = int16_of(in[i]);
        }
        if (kp > k) row[k] = 0;
    }
}

static void sums_plain(const float *in, const int *fields, long positions, long k, const short *w, long outputs, long o_stride,
                       long p_stride, short *rows, float *y) {
    fields_int16(in, fields, positions, k, rows);
    long pairs = (k + 1) / 2, stride = (outputs + 15) / 16 * 16;
    for (long p = 0; p < positions; p++) {
        const short *row = rows + p * pairs * 2;
        for (long o = 0; o < outputs; o++) {
            uint32_t s = 0;
            for (long i = 0; i < pairs; i++) {
                const short *wi = w + (i * stride + o) * 2;
                s += (uint32_t)((int32_t)wi[0] * row[2 * i]) + (uint32_t)((int32_t)wi[1] * row[2 * i + 1]);
            }
            y[o * o_stride + p * p_stride] = (float)(int32_t)s;
        }
    }
}

typedef int32_t __attribute__((may_alias)) hybrid_pair;

// Whether the field's k indices are one run f[0], f[0] + 1, ... of x (none negative).
__attribute__((target("avx512f"))) static int contiguous(const int *f, long k) {
    if (k <= 0 || f[0] < 0) return 0;
    const __m512i step = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (long i = 0; i < k; i += 16) {
        __mmask16 lanes = (__mmask16)(k - i >= 16 ? 0xffff : (1U << (k - i)) - 1);
        __m512i want = _mm512_add_epi32(_mm512_set1_epi32(f[0] + (int)i), step);
        if (_mm512_mask_cmpneq_epi32_mask(lanes, _mm512_maskz_loadu_epi32(lanes, f + i), want)) return 0;
    }
    return 1;
}

#define INT16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

// Up to 16 whole numbers held as floats into row's int16 lanes, as int16_of: clamped, NaN as 0.
static inline __attribute__((always_inline)) INT16_TARGET void store_int16(short *row, __mmask16 lanes, __m512 v) {
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-32768.0f)), _mm512_set1_ps(32767.0f)));
    _mm256_mask_storeu_epi16(row, lanes, _mm512_cvtepi32_epi16(_mm512_cvttps_epi32(v)));
}

// The fields as int16 rows (fields_int16) 16 values at a time: a field that is one run of x read
// in place, another gathered (a negative index a zero).
INT16_TARGET static void fields_int16_512(const float *x, const int *fields, long positions, long k, short *rows) {
    if (!fields) {
        fields_int16(x, fields, positions, k, rows);
        return;
    }
    long kp = (k + 1) / 2 * 2;
    for (long p = 0; p < positions; p++) {
        short *row = rows + p * kp;
        const int *f = fields + p * k;
        int run = contiguous(f, k);
        for (long i = 0; i < k; i += 16) {
            __mmask16 lanes = (__mmask16)(k - i >= 16 ? 0xffff : (1U << (k - i)) - 1);
            if (run) {
                // One run of x (a Conv whose stride is its width).
                store_int16(row + i, lanes, _mm512_maskz_loadu_ps(lanes, x + f[0] + i));
            } else {
                __m512i at = _mm512_maskz_loadu_epi32(lanes, f + i);
                __mmask16 listed = _mm512_mask_cmpge_epi32_mask(lanes, at, _mm512_setzero_si512());
                store_int16(row + i, lanes, _mm512_mask_i32gather_ps(_mm512_setzero_ps(), listed, at, x, 4));
            }
        }
        if (kp > k) row[k] = 0;
    }
}

// 16 outputs a register, eight positions in flight (eight independent sums hide each
// instruction's latency); with VNNI one instruction a pair, else a pairwise multiply-add and an add.
#define HYBRID_SUMS_512(NAME, TARGET, STEP)                                                                                 \
    __attribute__((target(TARGET))) static void NAME(const float *in, const int *fields, long positions, long k,             \
                                                     const short *w, long outputs, long o_stride, long p_stride, short *rows, \
                                                     float *y) {                                                              \
        fields_int16_512(in, fields, positions, k, rows);                                                                  \
        long pairs = (k + 1) / 2, stride = (outputs + 15) / 16 * 16;                                                       \
        const hybrid_pair *x = (const hybrid_pair *)rows;                                                                  \
        for (long o0 = 0; o0 < outputs; o0 += 16) {                                                                        \
            long n = outputs - o0 < 16 ? outputs - o0 : 16;                                                                \
            const short *wb = w + o0 * 2;                                                                                  \
            for (long p = 0; p < positions; p += 8) {                                                                      \
                long m = positions - p < 8 ? positions - p : 8;                                                            \
                const hybrid_pair *xs[8];                                                                                  \
                for (int t = 0; t < 8; t++) xs[t] = x + (p + (t < m ? t : 0)) * pairs;                                     \
                __m512i a[8];                                                                                              \
                for (int t = 0; t < 8; t++) a[t] = _mm512_setzero_si512();                                                 \
                for (long i = 0; i < pairs; i++) {                                                                         \
                    __m512i wv = _mm512_loadu_si512(wb + i * stride * 2);                                                  \
                    for (int t = 0; t < 8; t++) a[t] = STEP(a[t], _mm512_set1_epi32(xs[t][i]), wv);                        \
                }                                                                                                          \
                float s[8][16];                                                                                            \
                for (int t = 0; t < 8; t++) _mm512_storeu_ps(s[t], _mm512_cvtepi32_ps(a[t]));                              \
                for (long j = 0; j < n; j++) {                                                                             \
                    for (long t = 0; t < m; t++) y[(o0 + j) * o_stride + (p + t) * p_stride] = s[t][j];                    \
                }                                                                                                          \
            }                                                                                                              \
        }                                                                                                                  \
    }
#define HYBRID_MADD_ADD(a, x, w) _mm512_add_epi32((a), _mm512_madd_epi16((x), (w)))
HYBRID_SUMS_512(sums_avx512, "avx512f,avx512bw", HYBRID_MADD_ADD)
HYBRID_SUMS_512(sums_vnni, "avx512f,avx512bw,avx512vnni", _mm512_dpwssd_epi32)

int earshot_hybrid_sum_paths(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) ? 1 : __builtin_cpu_supports("avx512vnni") ? 3 : 2;
    }
    return known;
}

void earshot_hybrid_sums(const float *x, const int *fields, long positions, long k, const short *w, long outputs, long o_stride,
                         long p_stride, int path, short *scratch, float *y) {
    long best = earshot_hybrid_sum_paths() - 1, chosen = path < 0 || path > best ? best : path;
    if (chosen == 2) sums_vnni(x, fields, positions, k, w, outputs, o_stride, p_stride, scratch, y);
    else if (chosen == 1) sums_avx512(x, fields, positions, k, w, outputs, o_stride, p_stride, scratch, y);
    else sums_plain(x, fields, positions, k, w, outputs, o_stride, p_stride, scratch, y);
}
