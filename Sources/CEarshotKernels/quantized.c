#include "earshot_kernels.h"
#include <stdint.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EARSHOT_NO_CLONES 1
#endif
#endif
#ifdef EARSHOT_NO_CLONES
#define CLONES
#else
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

// (a * b * 2 + 2^31 rounded) / 2^32, saturated: gemmlowp's SaturatingRoundingDoublingHighMul.
static inline int32_t doubling_high_multiply(int32_t a, int32_t b) {
    if (a == b && a == INT32_MIN) return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
    return (int32_t)((ab + nudge) / (1LL << 31));
}

// x / 2^e, rounded half away from zero: gemmlowp's RoundingDivideByPOT.
static inline int32_t rounding_divide(int32_t x, int e) {
    int32_t mask = e >= 31 ? INT32_MAX : (int32_t)((1U << e) - 1);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> (e > 31 ? 31 : e)) + (remainder > threshold ? 1 : 0);
}

int earshot_requantize(int acc, int multiplier, int shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int32_t scaled = (int32_t)((uint32_t)acc * (1U << left));  // wraps as TFLite's int32 would
    return rounding_divide(doubling_high_multiply(scaled, multiplier), right);
}

// Sums of int16 products, wrapping as int32 (each product fits; the sum wraps as TFLite's
// int32 accumulator would): the loop vectorizes to multiply-adds of pairs.
CLONES
static int32_t dot16(const short *a, const short *b, long n) {
    uint32_t s = 0;
    for (long i = 0; i < n; i++) s += (uint32_t)((int32_t)a[i] * (int32_t)b[i]);
    return (int32_t)s;
}

// A value held as a float, as an int16 (whole numbers in range are exact; others are clamped).
static inline int as_int16(float v) {
    if (!(v > -32768.0f)) return v != v ? 0 : -32768;
    if (v > 32767.0f) return 32767;
    return (int)v;
}

void earshot_qconv(const float *x, const int *fields, long groups, long positions, long k, const short *w, long per_group,
                   const int *bias, const int *multiplier, const int *shift, int input_offset, int output_offset, int lo, int hi,
                   short *col, float *y) {
    long outputs = groups * per_group;
    for (long g = 0; g < groups; g++) {
        for (long p = 0; p < positions; p++) {
            const int *f = fields + (g * positions + p) * k;
            for (long i = 0; i < k; i++) col[i] = f[i] < 0 ? 0 : (short)(as_int16(x[f[i]]) + input_offset);
            for (long j = 0; j < per_group; j++) {
                long o = g * per_group + j;
                int32_t acc = (int32_t)((uint32_t)dot16(w + o * k, col, k) + (uint32_t)bias[o]);
                int32_t v = (int32_t)((uint32_t)earshot_requantize(acc, multiplier[o], shift[o]) + (uint32_t)output_offset);
                y[p * outputs + o] = (float)(v < lo ? lo : (v > hi ? hi : v));
            }
        }
    }
}
