// TensorFlow Lite Micro's audio front end in integer arithmetic, bit for bit as pymicro-features
// computes it (see MicroFrontend.swift for the stages). Every value that the front end keeps in
// 16 bits is truncated to 16 bits where it does; sums that it keeps in 32 or 64 bits wrap there.
#include "earshot_kernels.h"
#include "microfrontend_tables.h"
#include <math.h>
#include <stdint.h>

#include "clones.h"

// The sizes (earshot_kernels.h): a frame's channels, its window, and the transform's points
// (the window zero-padded), whose first half the radix-4 stages below take as complex values.
#define CHANNELS EARSHOT_MF_CHANNELS
#define WINDOW EARSHOT_MF_WINDOW_SAMPLES
#define POINTS 512
_Static_assert(EARSHOT_MF_CONTEXT_FRAMES * EARSHOT_MF_STEP_SAMPLES == EARSHOT_MF_WINDOW_SAMPLES - EARSHOT_MF_STEP_SAMPLES,
               "a step's context is whole frames: the window less one step");
_Static_assert(WINDOW % 32 == 0 && POINTS - WINDOW == 32, "the window is whole vectors of 32 samples, one vector of zeros after it");

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
// channels), in three parts around the two table lookups (so that a path may look them up a
// vector at a time). CHANNEL_NOISE: the square root of the energy ACC rounded to the nearest
// (floor(sqrt) corrected by one either way; below 2^32 it never passes 0xFFFF), shifted back by
// SHIFT; noise reduction on the estimate at ESTIMATE (smoothing SMOOTHING), into V; the noise
// estimate into G and the gain table's row for it into ROW (0 for G <= 2, else G's bit length:
// row r holds mf_gain_pairs[4 r - 6] and [4 r - 5]).
#define CHANNEL_NOISE(ACC, SHIFT, ESTIMATE, SMOOTHING, V, G, ROW) do {                                         \
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
    (V) = v < floor_ ? floor_ : v;                                                                             \
    uint32_t g = *estimate;                                                                                    \
    (G) = g;                                                                                                   \
    (ROW) = g <= 2 ? 0 : lane_bit_length(g);                                                                   \
    } while (0)
// CHANNEL_GAIN: PCAN's gain (the interpolation of the gain table's pairs PAIR0, PAIR1 of G's row)
// on V, the shrink, and the log's first part: into U, the exponent I, the fraction FR and the log
// table's segment SEG.
#define CHANNEL_GAIN(V, G, PAIR0, PAIR1, U, I, FR, SEG) do {                                                   \
    uint32_t g = (G);                                                                                          \
    int32_t interval = (int32_t)lane_bit_length(g);                                                            \
    uint32_t frac = (interval < 11 ? g << ((11 - interval) & 31) : g >> ((interval - 11) & 31)) & 0x3FF;       \
    int32_t pair0 = (PAIR0), pair1 = (PAIR1); /* gain[base...base + 2] */                                      \
    int32_t gain0 = (int16_t)(pair0 & 0xFFFF), gain1 = pair0 >> 16, gain2 = pair1 >> 16;                       \
    int32_t gr = (gain2 * (int32_t)frac) >> 5;                                                                 \
    gr = (int32_t)((uint32_t)gr + (uint32_t)(gain1 * 32));                                                     \
    gr = (int32_t)((uint32_t)gr * frac);                                                                       \
    gr = (int32_t)((uint32_t)gr + 16384u) >> 15;                                                               \
    /* g <= 2: the row is 0 (base 0), and gain[g] is one of the three. */                                     \
    int32_t small = g == 0 ? gain0 : (g == 1 ? gain1 : gain2);                                                 \
    int16_t gain16 = g <= 2 ? (int16_t)small : S16((uint32_t)gr + (uint32_t)gain0);                            \
    uint32_t gain = (uint32_t)(int32_t)gain16;                                                                 \
    uint32_t snr = (uint32_t)(((uint64_t)(V) * gain) >> 6);                                                    \
    uint32_t w = snr < 8192 ? (snr * snr) >> 20 : (snr >> 6) - 64;                                             \
    /* The fixed-point log. */                                                                                \
    uint32_t u = w << 3, uu = u <= 1 ? 2 : u; /* u <= 1 logs to 0; uu keeps unused lookups in the table */     \
    int32_t i = (int32_t)lane_bit_length(uu) - 1;                                                              \
    int32_t fr = (int32_t)(uu - (1u << i));                                                                    \
    fr = i < 16 ? (int32_t)((uint32_t)fr << ((16 - i) & 31)) : fr >> ((i - 16) & 31);                          \
    (U) = u; (I) = i; (FR) = fr; (SEG) = fr >> 9;                                                              \
    } while (0)
// CHANNEL_LOG: the log's interpolation in segment SEG (LOGS its pair of table values), scaled,
// into OUT.
#define CHANNEL_LOG(U, I, FR, SEG, LOGS, OUT) do {                                                             \
    int32_t logs = (LOGS), c0 = logs & 0xFFFF, c1 = logs >> 16, fr = (FR);                                     \
    fr = (int32_t)((uint32_t)fr + (uint32_t)c0 + (uint32_t)(((c1 - c0) * (fr - 512 * (SEG))) >> 16));          \
    uint32_t log2 = ((uint32_t)(I) << 16) + (uint32_t)fr;                                                      \
    uint32_t scaled = (uint32_t)((45426ull * log2 + 32768) >> 16);                                             \
    uint32_t logged = ((scaled << 6) + 32768u) >> 16;                                                          \
    logged = logged > 65535 ? 65535 : logged;                                                                  \
    (OUT) = (U) <= 1 ? 0 : (uint16_t)logged;                                                                   \
    } while (0)
// The whole channel, its lookups from the tables one value at a time.
#define CHANNEL(ACC, SHIFT, ESTIMATE, SMOOTHING, OUT) do {                                                     \
    uint32_t v_, g_, row_, u_; int32_t i_, fr_, seg_;                                                          \
    CHANNEL_NOISE(ACC, SHIFT, ESTIMATE, SMOOTHING, v_, g_, row_);                                              \
    int32_t base_ = row_ == 0 ? 0 : 4 * (int32_t)row_ - 6;                                                     \
    CHANNEL_GAIN(v_, g_, mf_gain_pairs[base_], mf_gain_pairs[base_ + 1], u_, i_, fr_, seg_);                  \
    CHANNEL_LOG(u_, i_, fr_, seg_, mf_log_pairs[seg_], OUT);                                                   \
    } while (0)

// One stream's filterbank over the bins' powers energy[5...240], then its 40 channels: the
// channels are independent of each other from here on, one vector lane each (even and odd
// channels smooth their noise at their own rates).
static inline __attribute__((always_inline)) void channels(const uint32_t *energy, int shift, unsigned *noise, unsigned short *out) {
    uint64_t acc[CHANNELS];
    for (int c = 0; c < CHANNELS; c++) {
        acc[c] = 0;
        for (int f = mf_bands[c]; f < mf_bands[c + 1]; f++) acc[c] += (uint64_t)(4096 - mf_weights[f - 5]) * energy[f];
        for (int f = mf_bands[c + 1]; f < mf_bands[c + 2]; f++) acc[c] += (uint64_t)mf_weights[f - 5] * energy[f];
    }
    _Pragma("clang loop vectorize(assume_safety)") for (int c = 0; c < CHANNELS; c++) {
        CHANNEL(acc[c], shift, noise + c, (uint64_t)((c & 1) ? 983 : 409), out[c]);
    }
}

CLONES
static void frame_portable(const short *samples, unsigned *noise, unsigned short *out) {
    int16_t x[POINTS];
    for (int i = 0; i < WINDOW; i++) x[i] = S16((samples[i] * mf_window[i]) >> 12);
    // The largest magnitude, as the front end takes it: -32768 negated stays -32768.
    int16_t largest = 0;
    for (int i = 0; i < WINDOW; i++) {
        int16_t a = x[i] == -32768 ? -32768 : (x[i] < 0 ? (int16_t)-x[i] : x[i]);
        largest = a > largest ? a : largest;
    }
    int shift = 15 - bit_length((uint16_t)largest);
    for (int i = 0; i < WINDOW; i++) x[i] = S16((uint32_t)(uint16_t)x[i] << shift);
    for (int i = WINDOW; i < POINTS; i++) x[i] = 0;
    int16_t re[257], im[257];
    real_fft(x, re, im);
    uint32_t energy[241];
    for (int f = 5; f < 241; f++) energy[f] = (uint32_t)((int32_t)re[f] * re[f] + (uint32_t)((int32_t)im[f] * im[f]));
    channels(energy, shift, noise, out);
}

// A 16-bit half of a noise estimate as its state tensor keeps it (a float), as a whole number.
static inline uint32_t estimate_half(float v) {
    v = v > 0 ? v : 0;  // NaN too
    return (uint32_t)(v < 65535 ? v : 65535);
}

void earshot_microfrontend_estimates(const float *noise, long lanes, long lane, unsigned *estimates) {
    for (int c = 0; c < CHANNELS; c++) estimates[c * lanes + lane] = estimate_half(noise[2 * c]) << 16 | estimate_half(noise[2 * c + 1]);
}

void earshot_microfrontend_finish(const unsigned short *frames, const unsigned *estimates, long stride, long lanes, long lane,
                                  int started, float scale, const float *pending, float *features, float *pending_out,
                                  float *noise_out) {
    const long kept = (stride - EARSHOT_MF_CONTEXT_FRAMES) * CHANNELS, first = EARSHOT_MF_CONTEXT_FRAMES * CHANNELS;
    if (started) {
        for (long i = 0; i < kept; i++) features[i] = pending[i];
        for (long i = 0; i < first; i++) features[kept + i] = (float)frames[i * lanes + lane] * scale;
    } else {
        for (long i = 0; i < stride * CHANNELS; i++) features[i] = 0;
    }
    for (long i = 0; i < kept; i++) pending_out[i] = (float)frames[(first + i) * lanes + lane] * scale;
    for (int c = 0; c < CHANNELS; c++) {
        unsigned e = estimates[c * lanes + lane];
        noise_out[2 * c] = (float)(e >> 16);
        noise_out[2 * c + 1] = (float)(e & 0xFFFF);
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

#define LANES EARSHOT_MF_LANES
_Static_assert(LANES == 16, "the AVX-512 path holds one stream a 32-bit lane of a vector");
#define LANE(a, i) a[i][l]
#define EACH _Pragma("clang loop vectorize(assume_safety)") for (int l = 0; l < LANES; l++)

typedef struct {
    int16_t x[POINTS][LANES];
    int32_t zr[256][LANES], zi[256][LANES];
    int32_t re[257][LANES], im[257][LANES];
} lanes_scratch;



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
static void lanes_portable(const short *const *samples, unsigned *noise, unsigned short *out, void *scratch) {
    lanes_scratch *s = (lanes_scratch *)scratch;
    int16_t (*x)[LANES] = s->x;
    for (int i = 0; i < WINDOW; i++) {
        int32_t w = mf_window[i];
        EACH x[i][l] = S16((samples[l][i] * w) >> 12);
    }
    int32_t shift[LANES];
    {
        int32_t largest[LANES];
        EACH largest[l] = 0;
        for (int i = 0; i < WINDOW; i++) EACH {
            int16_t v = x[i][l];
            int16_t a = v == -32768 ? -32768 : (v < 0 ? (int16_t)-v : v);
            largest[l] = a > largest[l] ? a : largest[l];
        }
        EACH shift[l] = 15 - (int32_t)lane_bit_length((uint16_t)largest[l]);
    }
    for (int i = 0; i < WINDOW; i++) EACH x[i][l] = S16((uint32_t)(uint16_t)x[i][l] << shift[l]);
    for (int i = WINDOW; i < POINTS; i++) EACH x[i][l] = 0;
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
    for (int c = 0; c < CHANNELS; c++) {
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

// earshot_microfrontend_lanes with AVX-512 (BW): the same integer operations on the same values,
// the transform held as 16-bit pairs. A vector is 16 streams' complex values, each (re, im) two
// int16 words; a multiply by a constant with rounding (C_FIXDIV, ROUND15 of an int16 product) is
// vpmulhrsw, which is (a * b + 2^14) >> 15 truncated to 16 bits for every a and b; a complex
// multiply by a twiddle sums its two products in 32 bits (vpmaddwd) before rounding, as kissfft
// does; sums of int16 values wrap as S16 truncates them; and the power of a bin, re^2 + im^2 in
// 32 bits, is one vpmaddwd of the pair with itself.
#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512_LANES __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"), always_inline)) static inline

// S16I(ROUND15(a * b)) for a word vector and an int16 constant b.
AVX512_LANES __m512i pair_round(__m512i a, short b) { return _mm512_mulhrs_epi16(a, _mm512_set1_epi16(b)); }

// The complex products of the pairs in z with per-lane twiddles given as the pairs a = (wr, -wi)
// and b = (wi, wr): each part rounded from its 32-bit sum, then truncated to 16 bits.
AVX512_LANES __m512i pair_twiddle_v(__m512i z, __m512i a, __m512i b) {
    __m512i half = _mm512_set1_epi32(16384);
    __m512i re = _mm512_srai_epi32(_mm512_add_epi32(_mm512_madd_epi16(z, a), half), 15);
    __m512i im = _mm512_slli_epi32(_mm512_srai_epi32(_mm512_add_epi32(_mm512_madd_epi16(z, b), half), 15), 16);
    return _mm512_mask_blend_epi16(0xAAAAAAAAu, re, im);
}

// 16 twiddles (wr[k], wi[k]), one a lane, as pair_twiddle_v takes them.
AVX512_LANES void twiddle_lanes(__m512i wr, __m512i wi, __m512i *a, __m512i *b) {
    __m512i low = _mm512_set1_epi32(0xFFFF);
    *a = _mm512_or_si512(_mm512_and_si512(wr, low), _mm512_slli_epi32(_mm512_sub_epi32(_mm512_setzero_si512(), wi), 16));
    *b = _mm512_or_si512(_mm512_and_si512(wi, low), _mm512_slli_epi32(wr, 16));
}

// The twiddle (wr, wi) in every lane, as pair_twiddle_v takes it.
AVX512_LANES __m512i pair_twiddle(__m512i z, int wr, int wi) {
    __m512i a, b;
    twiddle_lanes(_mm512_set1_epi32(wr), _mm512_set1_epi32(wi), &a, &b);
    return pair_twiddle_v(z, a, b);
}

// One radix-4 butterfly on four vectors of pairs, with twiddles as pair_twiddle_v takes them.
AVX512_LANES void pair_butterfly(__m512i *z0, __m512i *z1, __m512i *z2, __m512i *z3, const __m512i *w) {
    __m512i a0 = pair_round(*z0, 8191), a1 = pair_round(*z1, 8191), a2 = pair_round(*z2, 8191), a3 = pair_round(*z3, 8191);
    __m512i s0 = pair_twiddle_v(a1, w[0], w[1]), s1 = pair_twiddle_v(a2, w[2], w[3]), s2 = pair_twiddle_v(a3, w[4], w[5]);
    __m512i s5 = _mm512_sub_epi16(a0, s1), t0 = _mm512_add_epi16(a0, s1);
    __m512i s3 = _mm512_add_epi16(s0, s2), s4 = _mm512_sub_epi16(s0, s2);
    *z2 = _mm512_sub_epi16(t0, s3);
    *z0 = _mm512_add_epi16(t0, s3);
    // (s5r + s4i, s5i - s4r) and (s5r - s4i, s5i + s4r): s4 with its parts swapped.
    __m512i u = _mm512_rol_epi32(s4, 16);
    __m512i p = _mm512_add_epi16(s5, u), q = _mm512_sub_epi16(s5, u);
    *z1 = _mm512_mask_blend_epi16(0xAAAAAAAAu, p, q);
    *z3 = _mm512_mask_blend_epi16(0xAAAAAAAAu, q, p);
}

// Stage twiddles k (one for every lane) as pair_butterfly takes them.
AVX512_LANES void stage_twiddles(__m512i *w, int k, const int *t1r, const int *t1i, const int *t2r, const int *t2i,
                                 const int *t3r, const int *t3i) {
    const int *r[3] = {t1r, t2r, t3r}, *i[3] = {t1i, t2i, t3i};
    for (int t = 0; t < 3; t++) {
        w[2 * t] = _mm512_set1_epi32((int)((uint32_t)(uint16_t)r[t][k] | (uint32_t)(uint16_t)(-i[t][k]) << 16));
        w[2 * t + 1] = _mm512_set1_epi32((int)((uint32_t)(uint16_t)i[t][k] | (uint32_t)(uint16_t)r[t][k] << 16));
    }
}

// Stage twiddles k...k + 15, one a lane.
AVX512_LANES void stage_twiddle_lanes(__m512i *w, int k, const int *t1r, const int *t1i, const int *t2r, const int *t2i,
                                      const int *t3r, const int *t3i) {
    twiddle_lanes(_mm512_loadu_si512((const void *)(t1r + k)), _mm512_loadu_si512((const void *)(t1i + k)), &w[0], &w[1]);
    twiddle_lanes(_mm512_loadu_si512((const void *)(t2r + k)), _mm512_loadu_si512((const void *)(t2i + k)), &w[2], &w[3]);
    twiddle_lanes(_mm512_loadu_si512((const void *)(t3r + k)), _mm512_loadu_si512((const void *)(t3i + k)), &w[4], &w[5]);
}

// floor((a + b) / 2) and floor((a - b) / 2) of int16 words, exactly (no 16-bit overflow).
AVX512_LANES __m512i half_sum(__m512i a, __m512i b) {
    return _mm512_add_epi16(_mm512_and_si512(a, b), _mm512_srai_epi16(_mm512_xor_si512(a, b), 1));
}
AVX512_LANES __m512i half_difference(__m512i a, __m512i b) {
    return _mm512_sub_epi16(_mm512_srai_epi16(_mm512_xor_si512(a, b), 1), _mm512_andnot_si512(a, b));
}

AVX512_LANES void pair_butterflies(__m512i *restrict z, int base, int m, const int *t1r, const int *t1i, const int *t2r,
                                   const int *t2i, const int *t3r, const int *t3i) {
    for (int k = 0; k < m; k++) {
        __m512i w[6];
        stage_twiddles(w, k, t1r, t1i, t2r, t2i, t3r, t3i);
        int i0 = base + k;
        pair_butterfly(&z[i0], &z[i0 + m], &z[i0 + 2 * m], &z[i0 + 3 * m], w);
    }
}

// One stream's 480 samples windowed (Q12) and shifted so that the largest magnitude is at the
// top, 32 at a time, into row[0...511] (zeros after 480): (sample * window) >> 12 truncated is
// the product's bits 12...27. Returns the shift.
AVX512_LANES int32_t window_row(const short *samples, int16_t *row) {
    __m512i largest = _mm512_setzero_si512();
    for (int i = 0; i < WINDOW; i += 32) {
        __m512i a = _mm512_loadu_si512((const void *)(samples + i)), w = _mm512_loadu_si512((const void *)(mf_window + i));
        __m512i v = _mm512_or_si512(_mm512_slli_epi16(_mm512_mulhi_epi16(a, w), 4), _mm512_srli_epi16(_mm512_mullo_epi16(a, w), 12));
        _mm512_storeu_si512((void *)(row + i), v);
        // Magnitudes as the front end takes them: -32768 stays -32768, below every other.
        largest = _mm512_max_epi16(largest, _mm512_abs_epi16(v));
    }
    int32_t top = _mm512_reduce_max_epi32(_mm512_max_epi32(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(largest)),
                                                           _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(largest, 1))));
    int32_t shift = 15 - (int32_t)lane_bit_length((uint16_t)top);
    __m128i count = _mm_cvtsi32_si128(shift);
    for (int i = 0; i < WINDOW; i += 32) {
        _mm512_storeu_si512((void *)(row + i), _mm512_sll_epi16(_mm512_loadu_si512((const void *)(row + i)), count));
    }
    _mm512_storeu_si512((void *)(row + WINDOW), _mm512_setzero_si512());
    return shift;
}

// 16 of the 64 words of four vectors v[0...3]: lane r takes word index[r] of the pair v[0], v[1]
// (0...31) where high's bit r is clear, and of the pair v[2], v[3] where it is set.
AVX512_LANES __m512i pick64(const __m512i *v, __m512i index, __mmask16 high) {
    return _mm512_mask_blend_epi32(high, _mm512_permutex2var_epi32(v[0], index, v[1]), _mm512_permutex2var_epi32(v[2], index, v[3]));
}

// The 16 x 16 transpose of 32-bit words: c[j] lane l = r[l] lane j.
AVX512_LANES void transpose16(const __m512i *r, __m512i *c) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) {
        u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    // u[4g + j], 128-bit lane k: rows 4g...4g + 3 at word 4k + j.
    for (int j = 0; j < 4; j++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
        __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88), v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
        c[j] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        c[4 + j] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        c[8 + j] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
        c[12 + j] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

// The gain table by row (see CHANNEL_NOISE), rows 0...31: the first words of the rows' pairs
// (gains[0], gains[1]) and the second (gains[2], gains[3]).
AVX512_LANES void gain_rows(__m512i *gains) {
    __m512i r0 = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), sixteen = _mm512_set1_epi32(16);
    for (int h = 0; h < 2; h++) {
        __m512i r = _mm512_add_epi32(r0, _mm512_mullo_epi32(sixteen, _mm512_set1_epi32(h)));
        __m512i base = _mm512_max_epi32(_mm512_sub_epi32(_mm512_slli_epi32(r, 2), _mm512_set1_epi32(6)), _mm512_setzero_si512());
        base = _mm512_mask_blend_epi32(_mm512_cmpeq_epi32_mask(r, _mm512_set1_epi32(1)), base, _mm512_setzero_si512());
        gains[h] = _mm512_i32gather_epi32(base, mf_gain_pairs, 4);
        gains[2 + h] = _mm512_i32gather_epi32(_mm512_add_epi32(base, _mm512_set1_epi32(1)), mf_gain_pairs, 4);
    }
}

// The pairs of 16 lanes' gain rows (0...32; row 32, a noise estimate of 2^31 or more, is not in
// the registers).
AVX512_LANES void gain_pairs(const uint32_t *rows, int32_t *pair0, int32_t *pair1, const __m512i *gains) {
    __m512i r = _mm512_loadu_si512((const void *)rows);
    __mmask16 last = _mm512_cmpeq_epi32_mask(r, _mm512_set1_epi32(32));
    __m512i p0 = _mm512_permutex2var_epi32(gains[0], r, gains[1]), p1 = _mm512_permutex2var_epi32(gains[2], r, gains[3]);
    p0 = _mm512_mask_mov_epi32(p0, last, _mm512_set1_epi32(mf_gain_pairs[122]));
    p1 = _mm512_mask_mov_epi32(p1, last, _mm512_set1_epi32(mf_gain_pairs[123]));
    _mm512_storeu_si512((void *)pair0, p0);
    _mm512_storeu_si512((void *)pair1, p1);
}

// t[k] holds entries 16 k...16 k + 15 of a 128-entry table: the entries at 16 indices 0...127.
AVX512_LANES __m512i lookup128(const __m512i *t, __m512i index) {
    __m512i a = _mm512_permutex2var_epi32(t[0], index, t[1]), b = _mm512_permutex2var_epi32(t[2], index, t[3]);
    __m512i c = _mm512_permutex2var_epi32(t[4], index, t[5]), d = _mm512_permutex2var_epi32(t[6], index, t[7]);
    __mmask16 b5 = _mm512_test_epi32_mask(index, _mm512_set1_epi32(32)), b6 = _mm512_test_epi32_mask(index, _mm512_set1_epi32(64));
    return _mm512_mask_blend_epi32(b6, _mm512_mask_blend_epi32(b5, a, b), _mm512_mask_blend_epi32(b5, c, d));
}

typedef struct {
    int16_t rows[LANES][POINTS];
    __m512i z[256];
    __m512i bins[257];
} pair_scratch;

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
static void lanes_avx512(const short *const *samples, unsigned *noise, unsigned short *out, void *scratch) {
    pair_scratch *s = (pair_scratch *)scratch;
    __m512i gains[4], log_table[8];
    gain_rows(gains);
    for (int k = 0; k < 8; k++) log_table[k] = _mm512_loadu_si512((const void *)(mf_log_pairs + 16 * k));
    int32_t shift[LANES];
    for (int l = 0; l < LANES; l++) shift[l] = window_row(samples[l], s->rows[l]);
    __m512i *z = s->z;
    // Pairs (x[2m], x[2m + 1]) of each stream (one 32-bit word of its row), in digit-reversed
    // order: the rows transposed 16 words at a time.
    for (int b = 0; b < 16; b++) {
        __m512i r[16], c[16];
        for (int l = 0; l < 16; l++) r[l] = _mm512_loadu_si512((const void *)(s->rows[l] + 32 * b));
        transpose16(r, c);
        for (int j = 0; j < 16; j++) z[reverse4(16 * b + j)] = c[j];
    }
    for (int base = 0; base < 256; base += 4)
        pair_butterflies(z, base, 1, mf_stage1_t1r, mf_stage1_t1i, mf_stage1_t2r, mf_stage1_t2i, mf_stage1_t3r, mf_stage1_t3i);
    for (int base = 0; base < 256; base += 16)
        pair_butterflies(z, base, 4, mf_stage4_t1r, mf_stage4_t1i, mf_stage4_t2r, mf_stage4_t2i, mf_stage4_t3r, mf_stage4_t3i);
    for (int base = 0; base < 256; base += 64)
        pair_butterflies(z, base, 16, mf_stage16_t1r, mf_stage16_t1i, mf_stage16_t2r, mf_stage16_t2i, mf_stage16_t3r, mf_stage16_t3i);
    pair_butterflies(z, 0, 64, mf_stage64_t1r, mf_stage64_t1i, mf_stage64_t2r, mf_stage64_t2i, mf_stage64_t3r, mf_stage64_t3i);
    // The real split, into bins as (re, im) pairs.
    __m512i *bins = s->bins;
    {
        __m512i d = pair_round(z[0], 16383);  // (dr, di)
        __m512i swapped = _mm512_rol_epi32(d, 16);  // (di, dr)
        __m512i low = _mm512_set1_epi32(0xFFFF);
        bins[0] = _mm512_and_si512(_mm512_add_epi16(d, swapped), low);    // (dr + di, 0)
        bins[256] = _mm512_and_si512(_mm512_sub_epi16(d, swapped), low);  // (dr - di, 0)
    }
    const __mmask32 odd = 0xAAAAAAAAu;
    for (int k = 1; k <= 128; k++) {
        __m512i p = pair_round(z[k], 16383);
        __m512i c = _mm512_mask_sub_epi16(z[256 - k], odd, _mm512_setzero_si512(), z[256 - k]);  // (zr, S16(-zi))
        __m512i q = pair_round(c, 16383);
        __m512i f1 = _mm512_add_epi16(p, q), f2 = _mm512_sub_epi16(p, q);
        __m512i t = pair_twiddle(f2, mf_split_r[k - 1], mf_split_i[k - 1]);
        bins[k] = half_sum(f1, t);
        // ((f1r - tr) >> 1, (ti - f1i) >> 1)
        bins[256 - k] = _mm512_mask_blend_epi16(odd, half_difference(f1, t), half_difference(t, f1));
    }
    // The filterbank's 64-bit sums: vpmuludq multiplies the low half of each 64-bit word, so
    // the even lanes' powers are taken where they lie and the odd lanes' shifted down, one
    // shift a bin where widening each half took two shuffles; the lanes are put back in order
    // once a channel (exact integer sums: the order of the terms changes nothing).
    const __m512i first_half = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), second_half = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    for (int c = 0; c < CHANNELS; c++) {
        __m512i even = _mm512_setzero_si512(), odd = _mm512_setzero_si512();
        for (int f = mf_bands[c]; f < mf_bands[c + 1]; f++) {
            __m512i e = _mm512_madd_epi16(bins[f], bins[f]);
            __m512i w = _mm512_set1_epi64(4096 - mf_weights[f - 5]);
            even = _mm512_add_epi64(even, _mm512_mul_epu32(e, w));
            odd = _mm512_add_epi64(odd, _mm512_mul_epu32(_mm512_srli_epi64(e, 32), w));
        }
        for (int f = mf_bands[c + 1]; f < mf_bands[c + 2]; f++) {
            __m512i e = _mm512_madd_epi16(bins[f], bins[f]);
            __m512i w = _mm512_set1_epi64(mf_weights[f - 5]);
            even = _mm512_add_epi64(even, _mm512_mul_epu32(e, w));
            odd = _mm512_add_epi64(odd, _mm512_mul_epu32(_mm512_srli_epi64(e, 32), w));
        }
        uint64_t acc[LANES];
        _mm512_storeu_si512((void *)acc, _mm512_permutex2var_epi64(even, first_half, odd));
        _mm512_storeu_si512((void *)(acc + 8), _mm512_permutex2var_epi64(even, second_half, odd));
        uint64_t smoothing = (c & 1) ? 983 : 409;
        // The channel in three parts, the table lookups between them as permutes of tables
        // held in registers (a gather a lookup costs more than the rest of the channel).
        uint32_t lane_v[LANES], lane_g[LANES], lane_row[LANES], lane_u[LANES];
        int32_t lane_i[LANES], lane_fr[LANES], lane_seg[LANES], lane_pair0[LANES], lane_pair1[LANES], lane_logs[LANES];
        EACH CHANNEL_NOISE(acc[l], shift[l], noise + c * LANES + l, smoothing, lane_v[l], lane_g[l], lane_row[l]);
        gain_pairs(lane_row, lane_pair0, lane_pair1, gains);
        EACH CHANNEL_GAIN(lane_v[l], lane_g[l], lane_pair0[l], lane_pair1[l], lane_u[l], lane_i[l], lane_fr[l], lane_seg[l]);
        _mm512_storeu_si512((void *)lane_logs, lookup128(log_table, _mm512_loadu_si512((const void *)lane_seg)));
        EACH CHANNEL_LOG(lane_u[l], lane_i[l], lane_fr[l], lane_seg[l], lane_logs[l], out[c * LANES + l]);
    }
}

// A 32-bit word's worth of memory read or written as such whatever it holds (two int16 values).
typedef uint32_t __attribute__((may_alias)) pair_word;

// earshot_microfrontend_frame with AVX-512: one stream's transform as int16 (re, im) pairs, 16
// butterflies a vector. The first two stages read their operands 4 and 16 values apart, so the
// values are laid out for each: for stage 1 by n mod 4, then for stage 2 by (n / 4) mod 4 and n
// mod 4 (16 rows of 16 groups, transposed back to their order for stages 3 and 4, whose operands
// lie side by side).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
static void frame_avx512(const short *samples, unsigned *noise, unsigned short *out) {
    int16_t x[POINTS] __attribute__((aligned(64)));
    int shift = window_row(samples, x);
    // pairs[m] = (x[2m], x[2m + 1]), 16 a vector.
    __m512i pairs[16];
    for (int i = 0; i < 16; i++) pairs[i] = _mm512_load_si512((const void *)(x + 32 * i));
    // Stage 1 (butterflies on n = 4g...4g + 3): value n = 4g + j of the digit-reversed order,
    // pairs[reverse4(4g + j)] = pairs[64j + reverse3(g)], at v1[4j + g / 16] lane g mod 16. For
    // g = 16a + 4e + d that is word 16d + 4e + a of block j: two of its vectors permuted together,
    // twice, and blended.
    __m512i v1[16];
    for (int a = 0; a < 4; a++) {
        // lane r = 4e + d takes word 4e + a of vector d: (d & 1) * 16 + 4e + a of the pair (d & 2).
        __m512i index = _mm512_add_epi32(_mm512_set_epi32(28, 12, 28, 12, 24, 8, 24, 8, 20, 4, 20, 4, 16, 0, 16, 0), _mm512_set1_epi32(a));
        for (int j = 0; j < 4; j++) v1[4 * j + a] = pick64(pairs + 4 * j, index, 0xCCCC);
    }
    {
        __m512i w[6];
        stage_twiddles(w, 0, mf_stage1_t1r, mf_stage1_t1i, mf_stage1_t2r, mf_stage1_t2i, mf_stage1_t3r, mf_stage1_t3i);
        for (int b = 0; b < 4; b++) pair_butterfly(&v1[b], &v1[4 + b], &v1[8 + b], &v1[12 + b], w);
    }
    // Stage 2 (butterflies on 16h + k + 4j, j = 0...3): value 16h + 4j + k, which stage 1 left at
    // word 4h + j of block k, at v2[4j + k] lane h: lane h takes word 4 (h mod 4) + j of vector h / 4.
    __m512i v2[16];
    for (int j = 0; j < 4; j++) {
        __m512i index = _mm512_add_epi32(_mm512_set_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0), _mm512_set1_epi32(j));
        for (int k = 0; k < 4; k++) v2[4 * j + k] = pick64(v1 + 4 * k, index, 0xFF00);
    }
    for (int k = 0; k < 4; k++) {
        __m512i w[6];
        stage_twiddles(w, k, mf_stage4_t1r, mf_stage4_t1i, mf_stage4_t2r, mf_stage4_t2i, mf_stage4_t3r, mf_stage4_t3i);
        pair_butterfly(&v2[k], &v2[4 + k], &v2[8 + k], &v2[12 + k], w);
    }
    // Back to the natural order: row 4j + k, lane h -> z[16h + 4j + k].
    __m512i z[16];
    transpose16(v2, z);
    {
        __m512i w[6];  // the same 16 twiddles for each of the four groups
        stage_twiddle_lanes(w, 0, mf_stage16_t1r, mf_stage16_t1i, mf_stage16_t2r, mf_stage16_t2i, mf_stage16_t3r, mf_stage16_t3i);
        for (int q = 0; q < 4; q++) pair_butterfly(&z[4 * q], &z[4 * q + 1], &z[4 * q + 2], &z[4 * q + 3], w);
    }
    for (int c = 0; c < 4; c++) {
        __m512i w[6];
        stage_twiddle_lanes(w, 16 * c, mf_stage64_t1r, mf_stage64_t1i, mf_stage64_t2r, mf_stage64_t2i, mf_stage64_t3r, mf_stage64_t3i);
        pair_butterfly(&z[c], &z[4 + c], &z[8 + c], &z[12 + c], w);
    }
    // The real split, bins 1...128 and 255...128 16 at a time.
    pair_word natural[256] __attribute__((aligned(64)));
    for (int i = 0; i < 16; i++) _mm512_store_si512((void *)(natural + 16 * i), z[i]);
    pair_word bins[257 + 15] __attribute__((aligned(64)));
    {
        int32_t zr = (int16_t)(natural[0] & 0xFFFF), zi = (int16_t)(natural[0] >> 16);
        int32_t dr = S16I(ROUND15(zr * 16383)), di = S16I(ROUND15(zi * 16383));
        bins[0] = (uint16_t)S16(dr + di);
        bins[256] = (uint16_t)S16(dr - di);
    }
    const __mmask32 odd = 0xAAAAAAAAu;
    const __m512i reverse = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int c = 0; c < 8; c++) {
        int k = 16 * c + 1;  // bins k...k + 15, and 256 - k down to 241 - k
        __m512i p = pair_round(_mm512_loadu_si512((const void *)(natural + k)), 16383);
        __m512i back = _mm512_permutexvar_epi32(reverse, _mm512_loadu_si512((const void *)(natural + 241 - k)));
        __m512i q = pair_round(_mm512_mask_sub_epi16(back, odd, _mm512_setzero_si512(), back), 16383);
        __m512i f1 = _mm512_add_epi16(p, q), f2 = _mm512_sub_epi16(p, q);
        __m512i a, b;
        twiddle_lanes(_mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(mf_split_r + k - 1))),
                      _mm512_cvtepi16_epi32(_mm256_loadu_si256((const __m256i *)(mf_split_i + k - 1))), &a, &b);
        __m512i t = pair_twiddle_v(f2, a, b);
        _mm512_storeu_si512((void *)(bins + k), half_sum(f1, t));
        __m512i high = _mm512_mask_blend_epi16(odd, half_difference(f1, t), half_difference(t, f1));
        _mm512_storeu_si512((void *)(bins + 241 - k), _mm512_permutexvar_epi32(reverse, high));
    }
    uint32_t energy[256] __attribute__((aligned(64)));
    for (int f = 0; f < 256; f += 16) {
        __m512i v = _mm512_loadu_si512((const void *)(bins + f));
        _mm512_store_si512((void *)(energy + f), _mm512_madd_epi16(v, v));
    }
    channels(energy, shift, noise, out);
}
#endif

int earshot_microfrontend_paths(void) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        return 2;
#endif
    return 1;
}

long earshot_microfrontend_lanes_scratch(void) {
    long a = (long)sizeof(lanes_scratch);
#if defined(__x86_64__)
    long b = (long)sizeof(pair_scratch);
    return a > b ? a : b;
#else
    return a;
#endif
}

void earshot_microfrontend_lanes_on(int path, const short *const *samples, unsigned *noise, unsigned short *out, void *scratch) {
#if defined(__x86_64__)
    if (path >= 1 && earshot_microfrontend_paths() > 1) {
        lanes_avx512(samples, noise, out, scratch);
        return;
    }
#endif
    lanes_portable(samples, noise, out, scratch);
}

// The best path, earshot_microfrontend_paths() - 1 (once known; every thread finds the same).
static int best_path(void) {
    static int best = -1;
    int path = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (path < 0) {
        path = earshot_microfrontend_paths() - 1;
        __atomic_store_n(&best, path, __ATOMIC_RELAXED);
    }
    return path;
}

void earshot_microfrontend_lanes(const short *const *samples, unsigned *noise, unsigned short *out, void *scratch) {
    earshot_microfrontend_lanes_on(best_path(), samples, noise, out, scratch);
}

void earshot_microfrontend_frame_on(int path, const short *samples, unsigned *noise, unsigned short *out) {
#if defined(__x86_64__)
    if (path >= 1 && earshot_microfrontend_paths() > 1) {
        frame_avx512(samples, noise, out);
        return;
    }
#endif
    frame_portable(samples, noise, out);
}

void earshot_microfrontend_frame(const short *samples, unsigned *noise, unsigned short *out) {
    earshot_microfrontend_frame_on(best_path(), samples, noise, out);
}
