// TensorFlow Lite Micro's audio front end in integer arithmetic, bit for bit as pymicro-features
// computes it (see MicroFrontend.swift for the stages). Every value that the front end keeps in
// 16 bits is truncated to 16 bits where it does; sums that it keeps in 32 or 64 bits wrap there.
#include "earshot_kernels.h"
#include "microfrontend_tables.h"
#include <math.h>
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

#define S16(v) ((int16_t)(int32_t)(v))
#define ROUND15(v) ((int32_t)((uint32_t)(v) + 16384u) >> 15)

static inline int bit_length(uint32_t x) { return x ? 32 - __builtin_clz(x) : 0; }

// Base-4 digit reversal of 0..255.
static inline int reverse4(int n) { return (n >> 6) | ((n >> 4) & 3) << 2 | ((n >> 2) & 3) << 4 | (n & 3) << 6; }

// kissfft's int16 real FFT of 512 points (a 256-point complex radix-4 transform, then the real
// split): bins 0...256 into re, im.
static inline __attribute__((always_inline)) void real_fft(const int16_t *x, int16_t *re, int16_t *im) {
    int16_t zr[256], zi[256];
    for (int n = 0; n < 256; n++) {
        int m = reverse4(n);
        zr[n] = x[2 * m];
        zi[n] = x[2 * m + 1];
    }
    for (int m = 1; m < 256; m *= 4) {
        int fs = 64 / m;
        for (int base = 0; base < 256; base += 4 * m) {
            for (int k = 0; k < m; k++) {
                int i0 = base + k, i1 = i0 + m, i2 = i0 + 2 * m, i3 = i0 + 3 * m;
                // C_FIXDIV by 4: a multiply by 8191, rounded.
                int16_t a0r = S16(ROUND15(zr[i0] * 8191)), a0i = S16(ROUND15(zi[i0] * 8191));
                int16_t a1r = S16(ROUND15(zr[i1] * 8191)), a1i = S16(ROUND15(zi[i1] * 8191));
                int16_t a2r = S16(ROUND15(zr[i2] * 8191)), a2i = S16(ROUND15(zi[i2] * 8191));
                int16_t a3r = S16(ROUND15(zr[i3] * 8191)), a3i = S16(ROUND15(zi[i3] * 8191));
                int t1 = k * fs, t2 = 2 * k * fs, t3 = 3 * k * fs;
                int16_t s0r = S16(ROUND15((uint32_t)(a1r * mf_twiddle_r[t1]) - (uint32_t)(a1i * mf_twiddle_i[t1])));
                int16_t s0i = S16(ROUND15((uint32_t)(a1r * mf_twiddle_i[t1]) + (uint32_t)(a1i * mf_twiddle_r[t1])));
                int16_t s1r = S16(ROUND15((uint32_t)(a2r * mf_twiddle_r[t2]) - (uint32_t)(a2i * mf_twiddle_i[t2])));
                int16_t s1i = S16(ROUND15((uint32_t)(a2r * mf_twiddle_i[t2]) + (uint32_t)(a2i * mf_twiddle_r[t2])));
                int16_t s2r = S16(ROUND15((uint32_t)(a3r * mf_twiddle_r[t3]) - (uint32_t)(a3i * mf_twiddle_i[t3])));
                int16_t s2i = S16(ROUND15((uint32_t)(a3r * mf_twiddle_i[t3]) + (uint32_t)(a3i * mf_twiddle_r[t3])));
                int16_t s5r = S16(a0r - s1r), s5i = S16(a0i - s1i);
                int16_t t0r = S16(a0r + s1r), t0i = S16(a0i + s1i);
                int16_t s3r = S16(s0r + s2r), s3i = S16(s0i + s2i);
                int16_t s4r = S16(s0r - s2r), s4i = S16(s0i - s2i);
                zr[i2] = S16(t0r - s3r); zi[i2] = S16(t0i - s3i);
                zr[i0] = S16(t0r + s3r); zi[i0] = S16(t0i + s3i);
                zr[i1] = S16(s5r + s4i); zi[i1] = S16(s5i - s4r);
                zr[i3] = S16(s5r - s4i); zi[i3] = S16(s5i + s4r);
            }
        }
    }
    // The real split: C_FIXDIV by 2 (a multiply by 16383), the split twiddles, halves.
    int16_t dr = S16(ROUND15(zr[0] * 16383)), di = S16(ROUND15(zi[0] * 16383));
    re[0] = S16(dr + di); im[0] = 0;
    re[256] = S16(dr - di); im[256] = 0;
    for (int k = 1; k <= 128; k++) {
        int16_t pr = S16(ROUND15(zr[k] * 16383)), pi = S16(ROUND15(zi[k] * 16383));
        int16_t qr = S16(ROUND15(zr[256 - k] * 16383)), qi = S16(ROUND15(S16(-zi[256 - k]) * 16383));
        int16_t f1r = S16(pr + qr), f1i = S16(pi + qi), f2r = S16(pr - qr), f2i = S16(pi - qi);
        int16_t tr = S16(ROUND15((uint32_t)(f2r * mf_split_r[k - 1]) - (uint32_t)(f2i * mf_split_i[k - 1])));
        int16_t ti = S16(ROUND15((uint32_t)(f2r * mf_split_i[k - 1]) + (uint32_t)(f2i * mf_split_r[k - 1])));
        re[k] = S16((f1r + tr) >> 1);
        im[k] = S16((f1i + ti) >> 1);
        re[256 - k] = S16((f1r - tr) >> 1);
        im[256 - k] = S16((ti - f1i) >> 1);
    }
}

// floor(sqrt(n)) rounded to the nearest; below 2^32 it never passes 0xFFFF.
static inline __attribute__((always_inline)) uint64_t rounded_sqrt(uint64_t n) {
    uint64_t r = (uint64_t)sqrt((double)n);
    while (r > 0 && (r > 0xFFFFFFFFull || r * r > n)) r--;
    while (r < 0xFFFFFFFFull && (r + 1) * (r + 1) <= n) r++;
    uint64_t cap = n < (1ull << 32) ? 0xFFFF : 0xFFFFFFFFull;
    if (n - r * r > r && r != cap) r++;
    return r;
}

// PCAN's gain for a noise estimate (the gain table's interpolation).
static inline __attribute__((always_inline)) int16_t gain_for(uint32_t x) {
    if (x <= 2) return mf_gain[x];
    int interval = bit_length(x), base = 4 * interval - 6;
    int32_t frac = (int32_t)((interval < 11 ? x << (11 - interval) : x >> (interval - 11)) & 0x3FF);
    int32_t r = (mf_gain[base + 2] * frac) >> 5;
    r = (int32_t)((uint32_t)r + (uint32_t)(mf_gain[base + 1] * 32));
    r = (int32_t)((uint32_t)r * (uint32_t)frac);
    r = (int32_t)((uint32_t)r + 16384u) >> 15;
    return S16((uint32_t)r + (uint32_t)mf_gain[base]);
}

// The front end's fixed-point log.
static inline __attribute__((always_inline)) uint16_t fixed_log(uint32_t v) {
    uint32_t u = v << 3;
    if (u <= 1) return 0;
    int i = bit_length(u) - 1;
    int32_t fr = (int32_t)(u - (1u << i));
    fr = i < 16 ? (int32_t)((uint32_t)fr << (16 - i)) : fr >> (i - 16);
    int seg = fr >> 9;
    int32_t c0 = mf_log[seg], c1 = mf_log[seg + 1];
    fr = (int32_t)((uint32_t)fr + (uint32_t)c0 + (uint32_t)(((c1 - c0) * (fr - 512 * seg)) >> 16));
    uint32_t log2 = ((uint32_t)i << 16) + (uint32_t)fr;
    uint32_t scaled = (uint32_t)((45426ull * log2 + 32768) >> 16);
    uint32_t out = ((scaled << 6) + 32768u) >> 16;
    return (uint16_t)(out > 65535 ? 65535 : out);
}

CLONES
void earshot_microfrontend_frame(const short *samples, unsigned *noise, unsigned short *out) {
    int16_t x[512];
    int16_t largest = 0;
    for (int i = 0; i < 480; i++) {
        int16_t w = S16((samples[i] * mf_window[i]) >> 12);
        x[i] = w;
        int16_t a = w < 0 ? S16(-w) : w;
        if (a > largest) largest = a;
    }
    int shift = 15 - bit_length((uint16_t)largest);
    for (int i = 0; i < 480; i++) x[i] = S16((uint32_t)(uint16_t)x[i] << shift);
    for (int i = 480; i < 512; i++) x[i] = 0;
    int16_t re[257], im[257];
    real_fft(x, re, im);
    uint64_t energy[241];
    for (int f = 5; f < 241; f++) energy[f] = (uint32_t)((int32_t)re[f] * re[f] + (uint32_t)((int32_t)im[f] * im[f]));
    for (int c = 0; c < 40; c++) {
        uint64_t acc = 0;
        for (int f = mf_bands[c]; f < mf_bands[c + 1]; f++) acc += (uint64_t)(4096 - mf_weights[f - 5]) * energy[f];
        for (int f = mf_bands[c + 1]; f < mf_bands[c + 2]; f++) acc += (uint64_t)mf_weights[f - 5] * energy[f];
        uint32_t signal = (uint32_t)(rounded_sqrt(acc) >> shift);
        // Noise reduction: even and odd channels smooth at their own rates.
        uint64_t smoothing = (c & 1) ? 983 : 409;
        uint32_t up = signal << 10;
        noise[c] = (uint32_t)(((uint64_t)up * smoothing + (uint64_t)noise[c] * (16384 - smoothing)) >> 14);
        uint32_t estimate = noise[c] < up ? noise[c] : up;
        uint32_t floor_ = (uint32_t)(((uint64_t)signal * 819) >> 14);
        uint32_t v = (up - estimate) >> 10;
        if (v < floor_) v = floor_;
        // PCAN gain control, then the shrink.
        uint32_t gain = (uint32_t)(int32_t)gain_for(noise[c]);
        uint32_t snr = (uint32_t)(((uint64_t)v * gain) >> 6);
        v = snr < 8192 ? (snr * snr) >> 20 : (snr >> 6) - 64;
        out[c] = fixed_log(v);
    }
}
