#include "earshot_kernels.h"
#include <stdint.h>

#include "clones.h"

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
static inline __attribute__((always_inline)) int32_t dot16(const short *a, const short *b, long n) {
    uint32_t s = 0;
    for (long i = 0; i < n; i++) s += (uint32_t)((int32_t)a[i] * (int32_t)b[i]);
    return (int32_t)s;
}

// A value held as a float, as an int16 (whole numbers in range are exact; others are clamped,
// NaN taken as the lowest).
static inline int as_int16(float v) { return (int)__builtin_fminf(__builtin_fmaxf(v, -32768.0f), 32767.0f); }

CLONES
void earshot_qconv(const float *x, long count, const int *fields, long groups, long positions, long k, const short *w, long per_group,
                   const int *bias, const int *multiplier, const int *shift, int input_offset, int output_offset, int lo, int hi,
                   short *scratch, float *y) {
    short *xi = scratch, *col = scratch + count + 1;
    for (long j = 0; j < count; j++) xi[j] = (short)(as_int16(x[j]) + input_offset);
    xi[count] = 0;  // padding adds nothing
    long outputs = groups * per_group;
    for (long g = 0; g < groups; g++) {
        for (long p = 0; p < positions; p++) {
            const int *f = fields + (g * positions + p) * k;
            for (long i = 0; i < k; i++) col[i] = xi[f[i]];
            for (long j = 0; j < per_group; j++) {
                long o = g * per_group + j;
                int32_t acc = (int32_t)((uint32_t)dot16(w + o * k, col, k) + (uint32_t)bias[o]);
                int32_t v = (int32_t)((uint32_t)earshot_requantize(acc, multiplier[o], shift[o]) + (uint32_t)output_offset);
                y[p * outputs + o] = (float)(v < lo ? lo : (v > hi ? hi : v));
            }
        }
    }
}

CLONES
void earshot_qdepthwise(const float *x, long count, const int *taps, long positions, long k, long channels, const short *w,
                        const int *bias, const int *multiplier, const int *shift, int input_offset, int output_offset, int lo, int hi,
                        short *scratch, float *y) {
    short *xi = scratch;
    for (long j = 0; j < count; j++) xi[j] = (short)(as_int16(x[j]) + input_offset);
    for (long p = 0; p < positions; p++) {
        const int *t = taps + p * k;
        for (long c0 = 0; c0 < channels; c0 += 64) {
            long n = channels - c0 < 64 ? channels - c0 : 64;
            uint32_t acc[64];
            for (long c = 0; c < n; c++) acc[c] = (uint32_t)bias[c0 + c];
            for (long i = 0; i < k; i++) {
                if (t[i] >= count) continue;  // padding adds nothing
                const short *in = xi + t[i] + c0, *wi = w + i * channels + c0;
                for (long c = 0; c < n; c++) acc[c] += (uint32_t)((int32_t)wi[c] * (int32_t)in[c]);
            }
            for (long c = 0; c < n; c++) {
                long o = c0 + c;
                int32_t v = (int32_t)((uint32_t)earshot_requantize((int32_t)acc[c], multiplier[o], shift[o]) + (uint32_t)output_offset);
                y[p * channels + o] = (float)(v < lo ? lo : (v > hi ? hi : v));
            }
        }
    }
}
