#include "earshot_hybrid.h"
#include <immintrin.h>
#include <math.h>

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
    __m512 low = _mm512_set1_ps(x[0]), high = low;
    __mmask16 nan = 0;
    for (long i = 0; i < n; i += 16) {
        __mmask16 lanes = (__mmask16)(n - i >= 16 ? 0xffff : (1U << (n - i)) - 1);
        __m512 v = _mm512_mask_loadu_ps(low, lanes, x + i);  // lanes past the end repeat the first value
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        low = _mm512_min_ps(low, v);
        high = _mm512_max_ps(high, v);
    }
    if (nan) return quantize_plain(x, n, asymmetric, q);
    block_params p = params(_mm512_reduce_min_ps(low), _mm512_reduce_max_ps(high), asymmetric);
    if (p.zeros) {
        for (long i = 0; i < n; i++) q[i] = 0;
        return p.scale;
    }
    const __m512 inverse = _mm512_set1_ps(p.inverse), offset = _mm512_set1_ps(p.offset);
    const __m512 lo = _mm512_set1_ps(asymmetric ? -128.0f : -127.0f), hi = _mm512_set1_ps(127.0f);
    for (long i = 0; i < n; i += 16) {
        __mmask16 lanes = (__mmask16)(n - i >= 16 ? 0xffff : (1U << (n - i)) - 1);
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
