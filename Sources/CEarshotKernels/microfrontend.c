// TensorFlow Lite Micro's audio front end in integer arithmetic, bit for bit as pymicro-features
// computes it (see MicroFrontend.swift for the stages). Every value that the front end keeps in
// 16 bits is truncated to 16 bits where it does; sums that it keeps in 32 or 64 bits wrap there.
#include "earshot_kernels.h"
#include "microfrontend_tables.h"
#include <math.h>
#include <stdint.h>

#include "clones.h"

#define S16(v) ((int16_t)(int32_t)(v))
#define ROUND15(v) ((int32_t)((uint32_t)(v) + 16384u) >> 15)

static inline int bit_length(uint32_t x) { return x ? 32 - __builtin_clz(x) : 0; }

// Base-4 digit reversal of 0..255.
static inline int reverse4(int n) { return (n >> 6) | ((n >> 4) & 3) << 2 | ((n >> 2) & 3) << 4 | (n & 3) << 6; }

// One radix-4 stage over the 256 values (zr, zi: int16 values held in int32 so that the loops
// vectorize): groups of 4 m from `base`, butterfly k of a group with the stage's twiddles.
#define S16I(v) ((int32_t)(int16_t)(int32_t)(v))
#define MULR(ar, ai, br, bi) S16I(ROUND15((uint32_t)((ar) * (br)) - (uint32_t)((ai) * (bi))))
#define MULI(ar, ai, br, bi) S16I(ROUND15((uint32_t)((ar) * (bi)) + (uint32_t)((ai) * (br))))
// One radix-4 butterfly on the values Z(zr, i) and Z(zi, i) at i0...i3, with twiddles w1...w3;
// Z says where a value lies (one stream's array, or one lane of many streams').
#define BUTTERFLY(Z, i0, i1, i2, i3, w1r, w1i, w2r, w2i, w3r, w3i) do {                                  \
        /* C_FIXDIV by 4: a multiply by 8191, rounded. */                                                  \
        int32_t a0r = S16I(ROUND15(Z(zr, i0) * 8191)), a0i = S16I(ROUND15(Z(zi, i0) * 8191));              \
        int32_t a1r = S16I(ROUND15(Z(zr, i1) * 8191)), a1i = S16I(ROUND15(Z(zi, i1) * 8191));              \
        int32_t a2r = S16I(ROUND15(Z(zr, i2) * 8191)), a2i = S16I(ROUND15(Z(zi, i2) * 8191));              \
        int32_t a3r = S16I(ROUND15(Z(zr, i3) * 8191)), a3i = S16I(ROUND15(Z(zi, i3) * 8191));              \
        int32_t s0r = MULR(a1r, a1i, w1r, w1i), s0i = MULI(a1r, a1i, w1r, w1i);                            \
        int32_t s1r = MULR(a2r, a2i, w2r, w2i), s1i = MULI(a2r, a2i, w2r, w2i);                            \
        int32_t s2r = MULR(a3r, a3i, w3r, w3i), s2i = MULI(a3r, a3i, w3r, w3i);                            \
        int32_t s5r = S16I(a0r - s1r), s5i = S16I(a0i - s1i);                                              \
        int32_t t0r = S16I(a0r + s1r), t0i = S16I(a0i + s1i);                                              \
        int32_t s3r = S16I(s0r + s2r), s3i = S16I(s0i + s2i);                                              \
        int32_t s4r = S16I(s0r - s2r), s4i = S16I(s0i - s2i);                                              \
        Z(zr, i2) = S16I(t0r - s3r); Z(zi, i2) = S16I(t0i - s3i);                                          \
        Z(zr, i0) = S16I(t0r + s3r); Z(zi, i0) = S16I(t0i + s3i);                                          \
        Z(zr, i1) = S16I(s5r + s4i); Z(zi, i1) = S16I(s5i - s4r);                                          \
        Z(zr, i3) = S16I(s5r - s4i); Z(zi, i3) = S16I(s5i + s4r);                                          \
    } while (0)

// The real split of bin pair (k, 256 - k): C_FIXDIV by 2 (a multiply by 16383), the split
// twiddle (sr, si), halves; Z and OUT say where the values lie.
#define SPLIT(Z, OUT, k, sr, si) do {                                                                       \
        int32_t pr = S16I(ROUND15(Z(zr, k) * 16383)), pi = S16I(ROUND15(Z(zi, k) * 16383));                \
        int32_t qr = S16I(ROUND15(Z(zr, 256 - (k)) * 16383)), qi = S16I(ROUND15(S16I(-Z(zi, 256 - (k))) * 16383)); \
        int32_t f1r = S16I(pr + qr), f1i = S16I(pi + qi), f2r = S16I(pr - qr), f2i = S16I(pi - qi);        \
        int32_t tr = MULR(f2r, f2i, sr, si), ti = MULI(f2r, f2i, sr, si);                                  \
        OUT(re, k) = S16((f1r + tr) >> 1);                                                                 \
        OUT(im, k) = S16((f1i + ti) >> 1);                                                                 \
        OUT(re, 256 - (k)) = S16((f1r - tr) >> 1);                                                         \
        OUT(im, 256 - (k)) = S16((ti - f1i) >> 1);                                                         \
    } while (0)

#define ONE(a, i) a[i]

// The four radix-4 stages of the 256-point transform, by a butterflies function.
#define STAGES(fn) do {                                                                                     \
        for (int base = 0; base < 256; base += 4)                                                          \
            fn(zr, zi, base, 1, mf_stage1_t1r, mf_stage1_t1i, mf_stage1_t2r, mf_stage1_t2i, mf_stage1_t3r, mf_stage1_t3i); \
        for (int base = 0; base < 256; base += 16)                                                         \
            fn(zr, zi, base, 4, mf_stage4_t1r, mf_stage4_t1i, mf_stage4_t2r, mf_stage4_t2i, mf_stage4_t3r, mf_stage4_t3i); \
        for (int base = 0; base < 256; base += 64)                                                         \
            fn(zr, zi, base, 16, mf_stage16_t1r, mf_stage16_t1i, mf_stage16_t2r, mf_stage16_t2i, mf_stage16_t3r, mf_stage16_t3i); \
        fn(zr, zi, 0, 64, mf_stage64_t1r, mf_stage64_t1i, mf_stage64_t2r, mf_stage64_t2i, mf_stage64_t3r, mf_stage64_t3i); \
    } while (0)
static inline __attribute__((always_inline)) void butterflies(int32_t *restrict zr, int32_t *restrict zi, int base, int m,
                                                              const int *t1r, const int *t1i, const int *t2r, const int *t2i,
                                                              const int *t3r, const int *t3i) {
    for (int k = 0; k < m; k++) {
        int i0 = base + k, i1 = i0 + m, i2 = i0 + 2 * m, i3 = i0 + 3 * m;
        BUTTERFLY(ONE, i0, i1, i2, i3, t1r[k], t1i[k], t2r[k], t2i[k], t3r[k], t3i[k]);
    }
}

// kissfft's int16 real FFT of 512 points (a 256-point complex radix-4 transform, then the real
// split): bins 0...256 into re, im.
static inline __attribute__((always_inline)) void real_fft(const int16_t *x, int16_t *re, int16_t *im) {
    int32_t zr[256], zi[256];
    for (int n = 0; n < 256; n++) {
        int m = reverse4(n);
        zr[n] = x[2 * m];
        zi[n] = x[2 * m + 1];
    }
    STAGES(butterflies);
    // The real split: C_FIXDIV by 2 (a multiply by 16383), the split twiddles, halves.
    int32_t dr = S16I(ROUND15(zr[0] * 16383)), di = S16I(ROUND15(zi[0] * 16383));
    re[0] = S16(dr + di); im[0] = 0;
    re[256] = S16(dr - di); im[256] = 0;
    for (int k = 1; k <= 128; k++) SPLIT(ONE, ONE, k, mf_split_r[k - 1], mf_split_i[k - 1]);
}

// The bit length of x, with no branch on x (0 for 0).
static inline __attribute__((always_inline)) uint32_t lane_bit_length(uint32_t x) { return x ? 32 - __builtin_clz(x | 1) : 0; }

// One channel after the filterbank, as selections (so that it vectorizes over streams or over
// channels): the square root of its energy ACC rounded to the nearest (floor(sqrt) corrected by
// one either way; below 2^32 it never passes 0xFFFF), shifted back by SHIFT; noise reduction on
// the estimate at ESTIMATE (smoothing SMOOTHING); PCAN's gain (the gain table's interpolation);
// the shrink; and the front end's fixed-point log, into OUT.
#define CHANNEL(ACC, SHIFT, ESTIMATE, SMOOTHING, OUT) do {                                                     \
    uint64_t n = (ACC);                                                                                        \
    uint64_t r = (uint64_t)sqrt((double)n);                                                                    \
    r = r > 0 && r * r > n ? r - 1 : r;                                                                        \
    r = (r + 1) * (r + 1) <= n ? r + 1 : r;                                                                    \
    uint64_t cap = n < (1ull << 32) ? 0xFFFF : 0xFFFFFFFFull;                                                  \
    r = n - r * r > r && r != cap ? r + 1 : r;                                                                 \
    uint32_t signal = (uint32_t)(r >> (SHIFT));                                                                \
    unsigned *estimate = (ESTIMATE);                                                                           \
    uint32_t up = signal << 10;                                                                                \
    *estimate = (uint32_t)(((uint64_t)up * (SMOOTHING) + (uint64_t)*estimate * (16384 - (SMOOTHING))) >> 14);  \
    uint32_t low = *estimate < up ? *estimate : up;                                                            \
    uint32_t floor_ = (uint32_t)(((uint64_t)signal * 819) >> 14);                                              \
    uint32_t v = (up - low) >> 10;                                                                             \
    v = v < floor_ ? floor_ : v;                                                                               \
    /* PCAN's gain. */                                                                                         \
    uint32_t g = *estimate;                                                                                    \
    int32_t interval = (int32_t)lane_bit_length(g), base = 4 * interval - 6;                                   \
    base = g <= 2 ? 0 : base;                                                                                  \
    uint32_t frac = (interval < 11 ? g << ((11 - interval) & 31) : g >> ((interval - 11) & 31)) & 0x3FF;       \
    int32_t gr = (mf_gain[base + 2] * (int32_t)frac) >> 5;                                                     \
    gr = (int32_t)((uint32_t)gr + (uint32_t)(mf_gain[base + 1] * 32));                                         \
    gr = (int32_t)((uint32_t)gr * frac);                                                                       \
    gr = (int32_t)((uint32_t)gr + 16384u) >> 15;                                                               \
    int16_t gain16 = g <= 2 ? (int16_t)mf_gain[g <= 2 ? g : 0] : S16((uint32_t)gr + (uint32_t)mf_gain[base]);  \
    uint32_t gain = (uint32_t)(int32_t)gain16;                                                                 \
    uint32_t snr = (uint32_t)(((uint64_t)v * gain) >> 6);                                                      \
    v = snr < 8192 ? (snr * snr) >> 20 : (snr >> 6) - 64;                                                      \
    /* The fixed-point log. */                                                                                \
    uint32_t u = v << 3, uu = u <= 1 ? 2 : u; /* u <= 1 logs to 0; uu keeps unused lookups in the table */     \
    int32_t i = (int32_t)lane_bit_length(uu) - 1;                                                              \
    int32_t fr = (int32_t)(uu - (1u << i));                                                                    \
    fr = i < 16 ? (int32_t)((uint32_t)fr << ((16 - i) & 31)) : fr >> ((i - 16) & 31);                          \
    int seg = fr >> 9;                                                                                         \
    int32_t c0 = mf_log[seg], c1 = mf_log[seg + 1];                                                            \
    fr = (int32_t)((uint32_t)fr + (uint32_t)c0 + (uint32_t)(((c1 - c0) * (fr - 512 * seg)) >> 16));            \
    uint32_t log2 = ((uint32_t)i << 16) + (uint32_t)fr;                                                        \
    uint32_t scaled = (uint32_t)((45426ull * log2 + 32768) >> 16);                                             \
    uint32_t logged = ((scaled << 6) + 32768u) >> 16;                                                          \
    logged = logged > 65535 ? 65535 : logged;                                                                  \
    (OUT) = u <= 1 ? 0 : (uint16_t)logged;                                                                     \
    } while (0)

CLONES
void earshot_microfrontend_frame(const short *samples, unsigned *noise, unsigned short *out) {
    int16_t x[512];
    for (int i = 0; i < 480; i++) x[i] = S16((samples[i] * mf_window[i]) >> 12);
    // The largest magnitude, as the front end takes it: -32768 negated stays -32768.
    int16_t largest = 0;
    for (int i = 0; i < 480; i++) {
        int16_t a = x[i] == -32768 ? -32768 : (x[i] < 0 ? (int16_t)-x[i] : x[i]);
        largest = a > largest ? a : largest;
    }
    int shift = 15 - bit_length((uint16_t)largest);
    for (int i = 0; i < 480; i++) x[i] = S16((uint32_t)(uint16_t)x[i] << shift);
    for (int i = 480; i < 512; i++) x[i] = 0;
    int16_t re[257], im[257];
    real_fft(x, re, im);
    uint64_t energy[241];
    for (int f = 5; f < 241; f++) energy[f] = (uint32_t)((int32_t)re[f] * re[f] + (uint32_t)((int32_t)im[f] * im[f]));
    uint64_t acc[40];
    for (int c = 0; c < 40; c++) {
        acc[c] = 0;
        for (int f = mf_bands[c]; f < mf_bands[c + 1]; f++) acc[c] += (uint64_t)(4096 - mf_weights[f - 5]) * energy[f];
        for (int f = mf_bands[c + 1]; f < mf_bands[c + 2]; f++) acc[c] += (uint64_t)mf_weights[f - 5] * energy[f];
    }
    // The channels are independent of each other from here on: one vector lane each (even and
    // odd channels smooth their noise at their own rates).
    _Pragma("clang loop vectorize(assume_safety)") for (int c = 0; c < 40; c++) {
        CHANNEL(acc[c], shift, noise + c, (uint64_t)((c & 1) ? 983 : 409), out[c]);
    }
}

CLONES
void earshot_pcm16(const float *x, long n, short *out) {
    for (long i = 0; i < n; i++) {
        float v = __builtin_rintf(x[i] * 32768.0f);
        v = __builtin_fminf(__builtin_fmaxf(v, -32768.0f), 32767.0f);  // NaN becomes -32768
        out[i] = (short)(int)v;
    }
}

// earshot_microfrontend_frame for 16 streams at once, one stream per lane: every value the
// single-stream frame computes is computed here for each lane by the same integer operations,
// laid out [index][lane] so that each step is one vector operation across the streams. Branches
// become selections; the square root's corrections are the loops' (each runs at most once for
// sums below 2^52, which the band sums never reach: 2^31 per bin times 4096 over under 2^9 bins).

#define LANES 16
#define LANE(a, i) a[i][l]
#define EACH _Pragma("clang loop vectorize(assume_safety)") for (int l = 0; l < LANES; l++)

typedef struct {
    int16_t x[512][LANES];
    int32_t zr[256][LANES], zi[256][LANES];
    int32_t re[257][LANES], im[257][LANES];
} lanes_scratch;

long earshot_microfrontend_lanes_scratch(void) { return (long)sizeof(lanes_scratch); }

static inline __attribute__((always_inline)) void lane_butterflies(int32_t (*restrict zr)[LANES], int32_t (*restrict zi)[LANES],
                                                                   int base, int m, const int *t1r, const int *t1i, const int *t2r,
                                                                   const int *t2i, const int *t3r, const int *t3i) {
    for (int k = 0; k < m; k++) {
        int i0 = base + k, i1 = i0 + m, i2 = i0 + 2 * m, i3 = i0 + 3 * m;
        int32_t w1r = t1r[k], w1i = t1i[k], w2r = t2r[k], w2i = t2i[k], w3r = t3r[k], w3i = t3i[k];
        EACH BUTTERFLY(LANE, i0, i1, i2, i3, w1r, w1i, w2r, w2i, w3r, w3i);
    }
}


CLONES
void earshot_microfrontend_lanes(const short *const *samples, unsigned *noise, unsigned short *out, void *scratch) {
    lanes_scratch *s = (lanes_scratch *)scratch;
    int16_t (*x)[LANES] = s->x;
    for (int i = 0; i < 480; i++) {
        int32_t w = mf_window[i];
        EACH x[i][l] = S16((samples[l][i] * w) >> 12);
    }
    int32_t shift[LANES];
    {
        int32_t largest[LANES];
        EACH largest[l] = 0;
        for (int i = 0; i < 480; i++) EACH {
            int16_t v = x[i][l];
            int16_t a = v == -32768 ? -32768 : (v < 0 ? (int16_t)-v : v);
            largest[l] = a > largest[l] ? a : largest[l];
        }
        EACH shift[l] = 15 - (int32_t)lane_bit_length((uint16_t)largest[l]);
    }
    for (int i = 0; i < 480; i++) EACH x[i][l] = S16((uint32_t)(uint16_t)x[i][l] << shift[l]);
    for (int i = 480; i < 512; i++) EACH x[i][l] = 0;
    int32_t (*zr)[LANES] = s->zr, (*zi)[LANES] = s->zi;
    for (int n = 0; n < 256; n++) {
        int m = reverse4(n);
        EACH { zr[n][l] = x[2 * m][l]; zi[n][l] = x[2 * m + 1][l]; }
    }
    STAGES(lane_butterflies);
    int32_t (*re)[LANES] = s->re, (*im)[LANES] = s->im;
    EACH {
        int32_t dr = S16I(ROUND15(zr[0][l] * 16383)), di = S16I(ROUND15(zi[0][l] * 16383));
        re[0][l] = S16(dr + di); im[0][l] = 0;
        re[256][l] = S16(dr - di); im[256][l] = 0;
    }
    for (int k = 1; k <= 128; k++) {
        int32_t sr = mf_split_r[k - 1], si = mf_split_i[k - 1];
        EACH SPLIT(LANE, LANE, k, sr, si);
    }
    for (int c = 0; c < 40; c++) {
        uint64_t acc[LANES];
        EACH acc[l] = 0;
        for (int f = mf_bands[c]; f < mf_bands[c + 1]; f++) {
            uint64_t w = (uint64_t)(4096 - mf_weights[f - 5]);
            EACH acc[l] += w * (uint32_t)(re[f][l] * re[f][l] + (uint32_t)(im[f][l] * im[f][l]));
        }
        for (int f = mf_bands[c + 1]; f < mf_bands[c + 2]; f++) {
            uint64_t w = (uint64_t)mf_weights[f - 5];
            EACH acc[l] += w * (uint32_t)(re[f][l] * re[f][l] + (uint32_t)(im[f][l] * im[f][l]));
        }
        uint64_t smoothing = (c & 1) ? 983 : 409;
        EACH CHANNEL(acc[l], shift[l], noise + c * LANES + l, smoothing, out[c * LANES + l]);
    }
}
