#include "earshot_kernels.h"

#include "clones.h"

typedef float dw16 __attribute__((vector_size(64), aligned(4)));
#define dw_load16(p) (*(const dw16 *)(p))

// 16 values of a row from `p` at stride `sw` (1 or 2). A macro: a function passing 16-float
// vectors would have a different calling convention in each clone.
#define DW_ROW16(p, sw)                                                                                                     \
    ((sw) == 1 ? dw_load16(p)                                                                                               \
               : __builtin_shufflevector(dw_load16(p), dw_load16((p) + 16), 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, \
                                         26, 28, 30))

// Output (oy, ox) of one plane: 0, then + filter * value for each tap inside the plane (rows i,
// then columns j, in order), then + bias: the sums every path of earshot_depthwise makes.
static inline __attribute__((always_inline)) float depthwise_one(const float *plane, long h, long w, const float *f, long kh,
                                                                 long kw, long sh, long sw, long dh, long dw, long ph, long pw,
                                                                 long oy, long ox, const float *bias) {
    float acc = 0.0f;
    for (long i = 0; i < kh; i++) {
        long iy = oy * sh - ph + i * dh;
        if (iy < 0 || iy >= h) continue;  // the padding's zeros add nothing
        for (long j = 0; j < kw; j++) {
            long ix = ox * sw - pw + j * dw;
            if (ix < 0 || ix >= w) continue;
            acc += f[i * kw + j] * plane[iy * w + ix];
        }
    }
    if (bias) acc += *bias;
    return acc;
}

// NB outputs (NB / 16 vectors) from ox of row oy, all of whose taps lie inside the row: the sums
// held in registers across every tap, each output summed as depthwise_one sums it.
#define DW_BLOCK(NB)                                                                                              \
    do {                                                                                                          \
        dw16 acc[NB / 16];                                                                                        \
        for (int b = 0; b < NB / 16; b++) acc[b] = (dw16){0};                                                     \
        for (long i = 0; i < kh; i++) {                                                                           \
            long iy = oy * sh - ph + i * dh;                                                                      \
            if (iy < 0 || iy >= h) continue;                                                                      \
            const float *row = plane + iy * w + ox * sw - pw;                                                     \
            for (long j = 0; j < kw; j++) {                                                                       \
                float v = f[i * kw + j];                                                                          \
                for (int b = 0; b < NB / 16; b++) acc[b] = acc[b] + v * DW_ROW16(row + j * dw + b * 16 * sw, sw); \
            }                                                                                                     \
        }                                                                                                         \
        for (int b = 0; b < NB / 16; b++) {                                                                       \
            if (bias) acc[b] = acc[b] + bias[c];                                                                  \
            *(dw16 *)(out + ox + b * 16) = acc[b];                                                                \
        }                                                                                                         \
    } while (0)

// Depthwise convolution of NCHW planes, one filter per channel: see earshot_kernels.h. Along each
// output row, the outputs whose taps all lie inside the row (stride 1 or 2) go 64 or 16 at a time
// with their sums in registers; the others one by one. Every output is summed in one order
// whatever the path.
CLONES
void earshot_depthwise(const float *x, long channels, long h, long w, const float *filters, long kh, long kw, long sh, long sw,
                       long dh, long dw, long ph, long pw, long oh, long ow, const float *bias, float *y) {
    // Outputs [lo, hi) of a row read no padding along it: ox * sw - pw >= 0 and
    // ox * sw - pw + (kw - 1) * dw + (sw - 1) <= w - 1 (a stride of 2 loads one value past the last).
    long lo = ow, hi = 0;
    if ((sw == 1 || sw == 2) && dw >= 0) {
        lo = (pw + sw - 1) / sw;
        long last = w - 1 + pw - (kw - 1) * dw - (sw - 1);
        hi = last < 0 ? 0 : last / sw + 1;
        if (hi > ow) hi = ow;
        if (lo > hi) lo = hi;
    }
    for (long c = 0; c < channels; c++) {
        const float *plane = x + c * h * w, *f = filters + c * kh * kw;
        const float *b = bias ? bias + c : 0;
        for (long oy = 0; oy < oh; oy++) {
            float *out = y + (c * oh + oy) * ow;
            if (hi - lo < 16) {
                // A narrow row: tap by tap over the outputs it reaches, the sums kept in the row.
                for (long ox = 0; ox < ow; ox++) out[ox] = 0.0f;
                for (long i = 0; i < kh; i++) {
                    long iy = oy * sh - ph + i * dh;
                    if (iy < 0 || iy >= h) continue;
                    const float *row = plane + iy * w;
                    for (long j = 0; j < kw; j++) {
                        // The outputs whose tap j lands inside the row: ox * sw - pw + j * dw in [0, w).
                        long offset = j * dw - pw;
                        long first = offset >= 0 ? 0 : (-offset + sw - 1) / sw;
                        long end = w - offset <= 0 ? 0 : (w - offset + sw - 1) / sw;
                        if (end > ow) end = ow;
                        float v = f[i * kw + j];
                        for (long ox = first; ox < end; ox++) out[ox] += v * row[ox * sw + offset];
                    }
                }
                if (bias)
                    for (long ox = 0; ox < ow; ox++) out[ox] += bias[c];
                continue;
            }
            long ox = 0;
            for (; ox < lo; ox++) out[ox] = depthwise_one(plane, h, w, f, kh, kw, sh, sw, dh, dw, ph, pw, oy, ox, b);
            for (; ox + 64 <= hi; ox += 64) DW_BLOCK(64);
            for (; ox + 16 <= hi; ox += 16) DW_BLOCK(16);
            for (; ox < ow; ox++) out[ox] = depthwise_one(plane, h, w, f, kh, kw, sh, sw, dh, dw, ph, pw, oy, ox, b);
        }
    }
}

// The width of earshot_depthwise_padded's rows: every block of 16 outputs (the last one whole)
// reads inside it, and a row of the plane fits with its padding on the left.
long earshot_depthwise_padded_width(long w, long kw, long sw, long dw, long pw, long ow) {
    long reach = (ow + 15) / 16 * 16 * sw + (kw - 1) * dw + 16;
    return reach > w + pw ? reach : w + pw;
}

// A block of 16 outputs from ox of row oy: + bias, then stored (the lanes past the row not).
#define DW_PADDED_STORE()                                                                                 \
    do {                                                                                                  \
        if (bias) acc = acc + bias[c];                                                                    \
        if (ox + 16 <= ow) {                                                                              \
            *(dw16 *)(out + ox) = acc;                                                                    \
        } else {                                                                                          \
            for (long l = 0; l < ow - ox; l++) out[ox + l] = acc[l];                                      \
        }                                                                                                 \
    } while (0)

// One filter row's three taps (filter values F0..F2) along padded row `row_` at stride SW.
#define DW_PADDED_ROW3(I, SW, F0, F1, F2)                                                                 \
    do {                                                                                                  \
        long iy = oy * sh - ph + (I) * dh;                                                                \
        if (iy >= 0 && iy < h) {                                                                          \
            const float *row_ = scratch + iy * wp + ox * (SW);                                            \
            acc = acc + (F0) * DW_ROW16(row_, SW);                                                        \
            acc = acc + (F1) * DW_ROW16(row_ + dw, SW);                                                   \
            acc = acc + (F2) * DW_ROW16(row_ + 2 * dw, SW);                                               \
        }                                                                                                 \
    } while (0)

// 3 x 3 taps at row stride SW (a constant), the plane's nine filter values in registers.
#define DW_PADDED3(SW)                                                                                    \
    do {                                                                                                  \
        dw16 g00 = f[0] - (dw16){0}, g01 = f[1] - (dw16){0}, g02 = f[2] - (dw16){0};                      \
        dw16 g10 = f[3] - (dw16){0}, g11 = f[4] - (dw16){0}, g12 = f[5] - (dw16){0};                      \
        dw16 g20 = f[6] - (dw16){0}, g21 = f[7] - (dw16){0}, g22 = f[8] - (dw16){0};                      \
        for (long oy = 0; oy < oh; oy++) {                                                                \
            float *out = y + (c * oh + oy) * ow;                                                          \
            for (long ox = 0; ox < ow; ox += 16) {                                                        \
                dw16 acc = (dw16){0};                                                                     \
                DW_PADDED_ROW3(0, SW, g00, g01, g02);                                                     \
                DW_PADDED_ROW3(1, SW, g10, g11, g12);                                                     \
                DW_PADDED_ROW3(2, SW, g20, g21, g22);                                                     \
                DW_PADDED_STORE();                                                                        \
            }                                                                                             \
        }                                                                                                 \
    } while (0)

// earshot_depthwise with each plane's rows laid out once in `scratch` (h rows of
// earshot_depthwise_padded_width floats, the plane's values after pw zeros, zeros after them), so
// that every output along a row goes 16 at a time, the tail block's lanes past the row not kept.
// A tap on the padding adds filter * 0 = +-0 to a sum that is never -0 (it starts at +0, and a
// sum is -0 only when both its terms are), so each output has the bits earshot_depthwise gives
// it: for finite filters only (inf * 0 is NaN).
CLONES
void earshot_depthwise_padded(const float *x, long channels, long h, long w, const float *filters, long kh, long kw, long sh,
                              long sw, long dh, long dw, long ph, long pw, long oh, long ow, const float *bias, float *y,
                              float *scratch) {
    const long wp = earshot_depthwise_padded_width(w, kw, sw, dw, pw, ow);
    for (long c = 0; c < channels; c++) {
        const float *plane = x + c * h * w, *f = filters + c * kh * kw;
        for (long r = 0; r < h; r++) {
            float *row = scratch + r * wp;
            for (long k = 0; k < pw; k++) row[k] = 0.0f;
            for (long k = 0; k < w; k++) row[pw + k] = plane[r * w + k];
            for (long k = pw + w; k < wp; k++) row[k] = 0.0f;
        }
        if (kh == 3 && kw == 3 && sw == 1) DW_PADDED3(1);
        else if (kh == 3 && kw == 3) DW_PADDED3(2);
        else
            for (long oy = 0; oy < oh; oy++) {
                float *out = y + (c * oh + oy) * ow;
                for (long ox = 0; ox < ow; ox += 16) {
                    dw16 acc = (dw16){0};
                    for (long i = 0; i < kh; i++) {
                        long iy = oy * sh - ph + i * dh;
                        if (iy < 0 || iy >= h) continue;
                        const float *row = scratch + iy * wp + ox * sw;
                        for (long j = 0; j < kw; j++) acc = acc + f[i * kw + j] * DW_ROW16(row + j * dw, sw);
                    }
                    DW_PADDED_STORE();
                }
            }
    }
}

// NC channels (NC / 16 vectors) from c of output (oy, ox), their sums in registers across the
// taps inside the plane, each summed as depthwise_one sums it.
#define DW_LAST(NC)                                                                                       \
    do {                                                                                                  \
        dw16 acc[NC / 16];                                                                                \
        for (int b = 0; b < NC / 16; b++) acc[b] = (dw16){0};                                             \
        for (long i = 0; i < kh; i++) {                                                                   \
            long iy = oy * sh - ph + i * dh;                                                              \
            if (iy < 0 || iy >= h) continue;                                                              \
            for (long j = 0; j < kw; j++) {                                                               \
                long ix = ox * sw - pw + j * dw;                                                          \
                if (ix < 0 || ix >= w) continue;                                                          \
                const float *xv = x + (iy * w + ix) * channels + c, *fv = filters + (i * kw + j) * channels + c; \
                for (int b = 0; b < NC / 16; b++) acc[b] = acc[b] + dw_load16(fv + 16 * b) * dw_load16(xv + 16 * b); \
            }                                                                                             \
        }                                                                                                 \
        for (int b = 0; b < NC / 16; b++) {                                                               \
            if (bias) acc[b] = acc[b] + dw_load16(bias + c + 16 * b);                                     \
            *(dw16 *)(out + c + 16 * b) = acc[b];                                                         \
        }                                                                                                 \
    } while (0)

// Depthwise convolution of channels-last values: see earshot_kernels.h.
CLONES
void earshot_depthwise_last(const float *x, long channels, long h, long w, const float *filters, long kh, long kw, long sh,
                            long sw, long dh, long dw, long ph, long pw, long oh, long ow, const float *bias, float *y) {
    for (long oy = 0; oy < oh; oy++)
        for (long ox = 0; ox < ow; ox++) {
            float *out = y + (oy * ow + ox) * channels;
            long c = 0;
            for (; c + 64 <= channels; c += 64) DW_LAST(64);
            for (; c + 16 <= channels; c += 16) DW_LAST(16);
            for (; c < channels; c++) {
                float acc = 0.0f;
                for (long i = 0; i < kh; i++) {
                    long iy = oy * sh - ph + i * dh;
                    if (iy < 0 || iy >= h) continue;
                    for (long j = 0; j < kw; j++) {
                        long ix = ox * sw - pw + j * dw;
                        if (ix < 0 || ix >= w) continue;
                        acc += filters[(i * kw + j) * channels + c] * x[(iy * w + ix) * channels + c];
                    }
                }
                if (bias) acc += bias[c];
                out[c] = acc;
            }
        }
}
