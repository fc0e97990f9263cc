#include "earshot_kernels.h"

typedef float v8 __attribute__((vector_size(32), aligned(4)));

#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

// Macros rather than functions: a function passing 8-float vectors would have a different
// calling convention in each clone.
#define load8(p) (*(const v8 *)(p))
#define sum8(s) (((s)[0] + (s)[4]) + ((s)[1] + (s)[5]) + (((s)[2] + (s)[6]) + ((s)[3] + (s)[7])))

CLONES
float earshot_dot(const float *a, const float *b, long n) {
    v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    long i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 += load8(a + i) * load8(b + i);
        s1 += load8(a + i + 8) * load8(b + i + 8);
        s2 += load8(a + i + 16) * load8(b + i + 16);
        s3 += load8(a + i + 24) * load8(b + i + 24);
    }
    for (; i + 8 <= n; i += 8) s0 += load8(a + i) * load8(b + i);
    float r = sum8((s0 + s1) + (s2 + s3));
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

// Every output of gemm_nt is one dot product summed the same way (eight lanes, one
// accumulator, lanes added pairwise, then the scalar tail), whichever column it is and however
// many columns there are: a batch of streams gives each stream exactly what it gets alone.
CLONES
void earshot_gemm_nt(const float *w, long rows, long k, const float *x, long n, const float *bias, const float *column_bias,
                     float *y, long ldy) {
    long blocked = n - n % 4;
    // Columns in panels that stay in cache while every row passes over them (a batch of many
    // streams is far larger than the cache).
    long panel = 4 * (long)(1 + 16384 / (k + 1));
    for (long t0 = 0; t0 < blocked; t0 += panel) {
        long tEnd = t0 + panel < blocked ? t0 + panel : blocked;
        long r = 0;
        // Tiles of four rows by four columns: sixteen independent sums, so that the additions
        // overlap instead of waiting on each other, and each load serves four of them.
        for (; r + 4 <= rows; r += 4) {
            const float *w0 = w + r * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
            for (long t = t0; t < tEnd; t += 4) {
                const float *x0 = x + t * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
                v8 a00 = {0}, a01 = {0}, a02 = {0}, a03 = {0}, a10 = {0}, a11 = {0}, a12 = {0}, a13 = {0};
                v8 a20 = {0}, a21 = {0}, a22 = {0}, a23 = {0}, a30 = {0}, a31 = {0}, a32 = {0}, a33 = {0};
                long i = 0;
                for (; i + 8 <= k; i += 8) {
                    v8 v0 = load8(x0 + i), v1 = load8(x1 + i), v2 = load8(x2 + i), v3 = load8(x3 + i);
                    v8 u = load8(w0 + i);
                    a00 += u * v0; a01 += u * v1; a02 += u * v2; a03 += u * v3;
                    u = load8(w1 + i);
                    a10 += u * v0; a11 += u * v1; a12 += u * v2; a13 += u * v3;
                    u = load8(w2 + i);
                    a20 += u * v0; a21 += u * v1; a22 += u * v2; a23 += u * v3;
                    u = load8(w3 + i);
                    a30 += u * v0; a31 += u * v1; a32 += u * v2; a33 += u * v3;
                }
                float o[4][4] = {
                    {sum8(a00), sum8(a01), sum8(a02), sum8(a03)}, {sum8(a10), sum8(a11), sum8(a12), sum8(a13)},
                    {sum8(a20), sum8(a21), sum8(a22), sum8(a23)}, {sum8(a30), sum8(a31), sum8(a32), sum8(a33)}};
                const float *ws[4] = {w0, w1, w2, w3}, *xs[4] = {x0, x1, x2, x3};
                for (long j = i; j < k; j++)
                    for (int a = 0; a < 4; a++)
                        for (int c = 0; c < 4; c++) o[a][c] += ws[a][j] * xs[c][j];
                for (int a = 0; a < 4; a++)
                    for (int c = 0; c < 4; c++) y[(r + a) * ldy + t + c] = (bias ? bias[r + a] : column_bias ? column_bias[t + c] : 0) + o[a][c];
            }
        }
        for (; r < rows; r++) {
            const float *wr = w + r * k;
            for (long t = t0; t < tEnd; t += 4) {
                const float *x0 = x + t * k, *x1 = x0 + k, *x2 = x1 + k, *x3 = x2 + k;
                v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
                long i = 0;
                for (; i + 8 <= k; i += 8) {
                    v8 wv = load8(wr + i);
                    s0 += wv * load8(x0 + i);
                    s1 += wv * load8(x1 + i);
                    s2 += wv * load8(x2 + i);
                    s3 += wv * load8(x3 + i);
                }
                float t0s = sum8(s0), t1 = sum8(s1), t2 = sum8(s2), t3 = sum8(s3);
                for (; i < k; i++) {
                    t0s += wr[i] * x0[i];
                    t1 += wr[i] * x1[i];
                    t2 += wr[i] * x2[i];
                    t3 += wr[i] * x3[i];
                }
                y[r * ldy + t] = (bias ? bias[r] : column_bias ? column_bias[t] : 0) + t0s;
                y[r * ldy + t + 1] = (bias ? bias[r] : column_bias ? column_bias[t + 1] : 0) + t1;
                y[r * ldy + t + 2] = (bias ? bias[r] : column_bias ? column_bias[t + 2] : 0) + t2;
                y[r * ldy + t + 3] = (bias ? bias[r] : column_bias ? column_bias[t + 3] : 0) + t3;
            }
        }
    }
    // The remaining columns: four rows at a time share each load of the column.
    for (long t = blocked; t < n; t++) {
        const float *xt = x + t * k;
        long r = 0;
        for (; r + 4 <= rows; r += 4) {
            const float *w0 = w + r * k, *w1 = w0 + k, *w2 = w1 + k, *w3 = w2 + k;
            v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
            long i = 0;
            for (; i + 8 <= k; i += 8) {
                v8 xv = load8(xt + i);
                s0 += load8(w0 + i) * xv;
                s1 += load8(w1 + i) * xv;
                s2 += load8(w2 + i) * xv;
                s3 += load8(w3 + i) * xv;
            }
            float t0 = sum8(s0), t1 = sum8(s1), t2 = sum8(s2), t3 = sum8(s3);
            for (; i < k; i++) {
                t0 += w0[i] * xt[i];
                t1 += w1[i] * xt[i];
                t2 += w2[i] * xt[i];
                t3 += w3[i] * xt[i];
            }
            float cb = column_bias ? column_bias[t] : 0;
            y[r * ldy + t] = (bias ? bias[r] : cb) + t0;
            y[(r + 1) * ldy + t] = (bias ? bias[r + 1] : cb) + t1;
            y[(r + 2) * ldy + t] = (bias ? bias[r + 2] : cb) + t2;
            y[(r + 3) * ldy + t] = (bias ? bias[r + 3] : cb) + t3;
        }
        for (; r < rows; r++) {
            const float *wr = w + r * k;
            v8 s0 = {0};
            long i = 0;
            for (; i + 8 <= k; i += 8) s0 += load8(wr + i) * load8(xt + i);
            float t0 = sum8(s0);
            for (; i < k; i++) t0 += wr[i] * xt[i];
            y[r * ldy + t] = (bias ? bias[r] : column_bias ? column_bias[t] : 0) + t0;
        }
    }
}

// exp(x) for |x| <= 88: x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor series to r^7
// (relative error below 2e-8), scaled by 2^n through the exponent bits.
#define EXP8(x, out) do {                                                              \
        v8 _x = (x);                                                                   \
        _x = __builtin_elementwise_min(__builtin_elementwise_max(_x, (v8){0} - 87.0f), (v8){0} + 88.0f); \
        v8 _n = __builtin_elementwise_round(_x * 1.44269504f);                         \
        v8 _r = _x - _n * 0.693145752f - _n * 1.42860677e-6f;                          \
        v8 _p = 1.0f / 5040 + _r * 0.0f;                                               \
        _p = _p * _r + 1.0f / 720;                                                     \
        _p = _p * _r + 1.0f / 120;                                                     \
        _p = _p * _r + 1.0f / 24;                                                      \
        _p = _p * _r + 1.0f / 6;                                                       \
        _p = _p * _r + 0.5f;                                                           \
        _p = _p * _r + 1.0f;                                                           \
        _p = _p * _r + 1.0f;                                                           \
        typedef int i8 __attribute__((vector_size(32)));                               \
        i8 _e = (__builtin_convertvector(_n, i8) + 127) << 23;                         \
        (out) = _p * (v8)_e;                                                           \
    } while (0)

#define SIGMOID8(x, out) do { v8 _s; EXP8(-(x), _s); (out) = 1.0f / (1.0f + _s); } while (0)
#define TANH8(x, out) do { v8 _t; SIGMOID8((x) * 2.0f, _t); (out) = 2.0f * _t - 1.0f; } while (0)

static float sigmoid1(float x) {
    v8 v = {x}, s;
    SIGMOID8(v, s);
    return s[0];
}

static float tanh1(float x) {
    v8 v = {x}, t;
    TANH8(v, t);
    return t[0];
}

CLONES
void earshot_lstm_cell(const float *gates, long hidden, float *h, float *c) {
    const float *gi = gates, *gf = gates + hidden, *gg = gates + 2 * hidden, *go = gates + 3 * hidden;
    long j = 0;
    for (; j + 8 <= hidden; j += 8) {
        v8 i, f, g, o, tc;
        SIGMOID8(load8(gi + j), i);
        SIGMOID8(load8(gf + j), f);
        TANH8(load8(gg + j), g);
        SIGMOID8(load8(go + j), o);
        v8 cn = f * load8(c + j) + i * g;
        TANH8(cn, tc);
        *(v8 *)(c + j) = cn;
        *(v8 *)(h + j) = o * tc;
    }
    for (; j < hidden; j++) {
        float cn = sigmoid1(gf[j]) * c[j] + sigmoid1(gi[j]) * tanh1(gg[j]);
        c[j] = cn;
        h[j] = sigmoid1(go[j]) * tanh1(cn);
    }
}

CLONES
void earshot_relu(float *x, long n) {
    for (long i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0.0f;
}

CLONES
void earshot_sigmoid(float *x, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        v8 s;
        SIGMOID8(load8(x + i), s);
        *(v8 *)(x + i) = s;
    }
    for (; i < n; i++) x[i] = sigmoid1(x[i]);
}

CLONES
void earshot_tanh(float *x, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        v8 t;
        TANH8(load8(x + i), t);
        *(v8 *)(x + i) = t;
    }
    for (; i < n; i++) x[i] = tanh1(x[i]);
}

CLONES
void earshot_multiply(const float *a, const float *b, float *out, long n) {
    for (long i = 0; i < n; i++) out[i] = a[i] * b[i];
}

CLONES
void earshot_spectrum(const float *c, long bins, int magnitude, float *out) {
    for (long k = 0; k < bins; k++) {
        float re = c[2 * k], im = c[2 * k + 1];
        out[k] = re * re + im * im;
    }
    if (magnitude) {
        for (long k = 0; k < bins; k++) out[k] = __builtin_sqrtf(out[k]);
    }
}

// ln(x) for positive normal x: x = m 2^e, m in [sqrt(1/2), sqrt(2)), ln(m) = 2 atanh(s),
// s = (m - 1) / (m + 1), summed to s^11.
#define LOG8(x, out) do {                                                               \
        typedef int i8 __attribute__((vector_size(32)));                                \
        i8 _bits = (i8)(x);                                                             \
        i8 _e = ((_bits >> 23) & 0xFF) - 127;                                           \
        v8 _m = (v8)((_bits & 0x007FFFFF) | 0x3F800000);                                \
        i8 _high = _m > 1.4142135f;                                                     \
        _m = (v8)(((i8)(_m * 0.5f) & _high) | ((i8)_m & ~_high));                       \
        _e = _e - _high; /* true lanes are -1 */                                        \
        v8 _s = (_m - 1.0f) / (_m + 1.0f), _s2 = _s * _s;                               \
        v8 _p = (v8){0} + 2.0f / 11;                                                    \
        _p = _p * _s2 + 2.0f / 9;                                                       \
        _p = _p * _s2 + 2.0f / 7;                                                       \
        _p = _p * _s2 + 2.0f / 5;                                                       \
        _p = _p * _s2 + 2.0f / 3;                                                       \
        _p = _p * _s2 + 2.0f;                                                           \
        (out) = __builtin_convertvector(_e, v8) * 0.693147182f + _s * _p;               \
    } while (0)

CLONES
float earshot_scaled_log(float *x, long n, float offset, float floor, float scale, float shift) {
    v8 largest = (v8){0} - __builtin_inff();
    v8 vfloor = (v8){0} + floor;
    long i = 0;
    for (; i + 8 <= n; i += 8) {
        v8 v = __builtin_elementwise_max(load8(x + i) + offset, vfloor), y;
        LOG8(v, y);
        y = y * scale - shift;
        *(v8 *)(x + i) = y;
        largest = __builtin_elementwise_max(largest, y);
    }
    float best = largest[0];
    for (int l = 1; l < 8; l++) best = best > largest[l] ? best : largest[l];
    if (i < n) {
        v8 v = (v8){0} + 1.0f, y;
        for (long l = 0; l < n - i; l++) v[l] = x[i + l] + offset > floor ? x[i + l] + offset : floor;
        LOG8(v, y);
        y = y * scale - shift;
        for (long l = 0; l < n - i; l++) {
            x[i + l] = y[l];
            best = best > y[l] ? best : y[l];
        }
    }
    return best;
}

CLONES
void earshot_sparse_rows(const float *weights, const long *offsets, const long *starts, const long *counts,
                         long rows, const float *x, float *out) {
    for (long r = 0; r < rows; r++) {
        const float *w = weights + offsets[r], *v = x + starts[r];
        long n = counts[r], i = 0;
        v8 s = {0};
        for (; i + 8 <= n; i += 8) s += load8(w + i) * load8(v + i);
        float t = sum8(s);
        for (; i < n; i++) t += w[i] * v[i];
        out[r] = t;
    }
}
