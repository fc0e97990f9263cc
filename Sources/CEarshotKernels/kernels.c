#include "earshot_kernels.h"

typedef float v8 __attribute__((vector_size(32), aligned(4)));

#include "clones.h"

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

// Weights for earshot_gemm_packed: panels of 16 rows, each panel k columns of 16 values
// (row r of panel p is lane r - 16p), rows past the end zero.
long earshot_packed_count(long rows, long k) { return (rows + 15) / 16 * 16 * k; }

void earshot_pack(const float *w, long rows, long k, float *packed) {
    long panels = (rows + 15) / 16;
    for (long p = 0; p < panels; p++)
        for (long i = 0; i < k; i++)
            for (long l = 0; l < 16; l++) {
                long r = p * 16 + l;
                packed[(p * k + i) * 16 + l] = r < rows ? w[r * k + i] : 0.0f;
            }
}

typedef float v16 __attribute__((vector_size(64), aligned(4)));
#define load16(p) (*(const v16 *)(p))

// The element-wise ops' values, one expression each, shared by the element-wise loops and the
// products' epilogues so that a fused op gives what the op alone gives, bit for bit.
#define LEAKY_RELU_OF(x, alpha) ((x) < 0 ? (alpha) * (x) : (x))
#define RELU_OF(x) ((x) < 0 ? 0.0f : (x))
// Max and Min: NaN from either operand; on a tie (+0 and -0) the first operand, as std::max and
// std::min give it to TFLite and onnxruntime.
#define MAX_OF(p, q) ((p) != (p) || (q) != (q) ? (p) + (q) : ((q) > (p) ? (q) : (p)))
#define MIN_OF(p, q) ((p) != (p) || (q) != (q) ? (p) + (q) : ((q) < (p) ? (q) : (p)))

// x (clamped to [-87, 88]) = n ln2 + r: T holds n in its low bits (see EXPV), R is r.
#define EXP_REDUCE(V, x, T, R) do {                                                    \
        V x_ = (x);                                                                    \
        x_ = __builtin_elementwise_min(__builtin_elementwise_max(x_, (V){0} - 87.0f), (V){0} + 88.0f); \
        (T) = x_ * 1.44269504f + 12583039.0f;                                          \
        V n_ = (T) - 12583039.0f;                                                      \
        (R) = x_ - n_ * 0.693145752f - n_ * 1.42860677e-6f;                            \
    } while (0)

// exp(x) for |x| <= 88: x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor series to r^7
// (relative error below 2e-8), scaled by 2^n through the exponent bits. n is rounded by adding
// 1.5 * 2^23 + 127 (a float's units from 2^23 up are whole numbers), whose low bits are then
// n + 127, the exponent of 2^n: two operations where rounding, converting and adding 127 took
// six (a swish 6.6 -> 5.6 ns a vector of 16). EXPV takes vectors of type V (integer lanes I),
// EXP8 8 lanes: each lane's value is the same at any width.
#define EXPV(V, I, x, out) do {                                                        \
        V _t, _r;                                                                      \
        EXP_REDUCE(V, x, _t, _r);                                                      \
        V _p = (V){0} + 1.0f / 5040;                                                   \
        _p = _p * _r + 1.0f / 720;                                                     \
        _p = _p * _r + 1.0f / 120;                                                     \
        _p = _p * _r + 1.0f / 24;                                                      \
        _p = _p * _r + 1.0f / 6;                                                       \
        _p = _p * _r + 0.5f;                                                           \
        _p = _p * _r + 1.0f;                                                           \
        _p = _p * _r + 1.0f;                                                           \
        I _e = (I)_t << 23;                                                            \
        (out) = _p * (V)_e;                                                            \
    } while (0)
typedef int i8v __attribute__((vector_size(32)));
#define EXP8(x, out) EXPV(v8, i8v, x, out)

// e^x as EXPV reduces it, for the sigmoids: e^r by a polynomial of degree 5 fitted to
// |r| <= ln2 / 2 (minimax), and 2^n (1 + r p(r)) as 2^n + (r 2^n) p(r). Two multiply-adds fewer
// than EXPV's series (a sigmoid 4.4-5.0 -> 3.6-3.9 ns a vector of 16 alone, a swish 5.4 -> 4.5);
// the sigmoid within 3.3 ulp of the exact one over [-100, 100], the swish 3.8 (2.5 and 2.8 with
// the series).
#define EXPS(V, I, x, out) do {                                                        \
        V _t, _r;                                                                      \
        EXP_REDUCE(V, x, _t, _r);                                                      \
        V _p = (V){0} + 0x1.0F9F9Cp-7f;                                                \
        _p = _p * _r + 0x1.573A1Ap-5f;                                                 \
        _p = _p * _r + 0x1.555A80p-3f;                                                 \
        _p = _p * _r + 0x1.FFFDC6p-2f;                                                 \
        _p = _p * _r + 0x1.FFFFF6p-1f;                                                 \
        V _s = (V)((I)_t << 23);                                                       \
        (out) = _s + (_r * _s) * _p;                                                   \
    } while (0)

typedef int vi16 __attribute__((vector_size(64), aligned(4)));
// sigmoid(x) = 1 / (1 + e^-x), and the swish x sigmoid(x) (x times that sigmoid: the bits of the
// Sigmoid and the Mul apart), on 8 or 16 lanes: each lane's value the same at either width.
#define SIGMOID8(x, out) do { v8 _e; EXPS(v8, i8v, -(x), _e); (out) = 1.0f / (1.0f + _e); } while (0)
#define SIGMOID16(x, out) do { v16 _e; EXPS(v16, vi16, -(x), _e); (out) = 1.0f / (1.0f + _e); } while (0)
#define SWISH8(x, out) do { v8 _w = (x), _g; SIGMOID8(_w, _g); (out) = _w * _g; } while (0)
#define SWISH16(x, out) do { v16 _w = (x), _g; SIGMOID16(_w, _g); (out) = _w * _g; } while (0)
#define SELECT16(m, a, b) ((v16)(((vi16)(a) & (m)) | ((vi16)(b) & ~(m))))

// One element-wise op of an epilogue, `kind` with its value q, on the v16 variable e_, lane by
// lane as the element-wise loops compute the op; where `kind` is a constant the choice folds
// away. A macro: a function passing 16-float vectors would have a different calling convention
// in each clone.
#define EPILOGUE_OP(kind, q) do {                                                                  \
        float q_ = (q);                                                                            \
        v16 qv_ = (v16){0} + q_;                                                                   \
        vi16 nan_;                                                                                 \
        switch (kind) {                                                                            \
        case EARSHOT_LEAKY_RELU: e_ = SELECT16(e_ < 0, qv_ * e_, e_); break;                       \
        case EARSHOT_RELU: e_ = SELECT16(e_ < 0, (v16){0}, e_); break;                             \
        case EARSHOT_NEG: e_ = -e_; break;                                                         \
        case EARSHOT_ABS: e_ = (v16)((vi16)e_ & 0x7fffffff); break;                                \
        case EARSHOT_EPILOGUE_BINARY + EARSHOT_ADD: e_ = e_ + q_; break;                           \
        case EARSHOT_EPILOGUE_BINARY + EARSHOT_SUB: e_ = e_ - q_; break;                           \
        case EARSHOT_EPILOGUE_BINARY + EARSHOT_MUL: e_ = e_ * q_; break;                           \
        case EARSHOT_EPILOGUE_BINARY + EARSHOT_DIV: e_ = e_ / q_; break;                           \
        case EARSHOT_EPILOGUE_BINARY + EARSHOT_SQUARE: e_ = e_ * e_; break;                        \
        case EARSHOT_EPILOGUE_BINARY + EARSHOT_MAX:                                                \
            nan_ = (e_ != e_) | (qv_ != qv_);                                                      \
            e_ = SELECT16(nan_, e_ + qv_, SELECT16(e_ > qv_, e_, qv_)); break;                     \
        case EARSHOT_EPILOGUE_BINARY + EARSHOT_MIN:                                                \
            nan_ = (e_ != e_) | (qv_ != qv_);                                                      \
            e_ = SELECT16(nan_, e_ + qv_, SELECT16(e_ < qv_, e_, qv_)); break;                     \
        case EARSHOT_SQRT:                                                                         \
            for (int l_ = 0; l_ < 16; l_++) e_[l_] = __builtin_sqrtf(e_[l_]);                      \
            break;                                                                                 \
        case EARSHOT_SIGMOID: SIGMOID16(e_, e_); break;                                            \
        case EARSHOT_SWISH: SWISH16(e_, e_); break;                                                \
        default: break;                                                                            \
        }                                                                                          \
    } while (0)

// A tile's outputs `out` (a v16 variable) through the epilogue: column `column`'s bias, then each
// op in order.
#define EPILOGUE(ep, column, out) do {                                                             \
        if (ep) {                                                                                  \
            v16 e_ = (out);                                                                        \
            if ((ep)->column_bias) e_ = e_ + (ep)->column_bias[column];                            \
            for (long o_ = 0; o_ < (ep)->count; o_++) EPILOGUE_OP((ep)->kinds[o_], (ep)->values[o_]); \
            (out) = e_;                                                                            \
        }                                                                                          \
    } while (0)

// Products sum in blocks of this many terms, each block's sum added to the output's total: a
// long sum (a head's 1536 inputs) then rounds about as a block does, not k times over (one
// chain of 1536 float sums moved openWakeWord's hey_mycroft score by 9.5e-5 where the exact
// value moved by 1.8e-6). A product of k <= 128 is one chain, as before.
#define K_BLOCK 128

// Columns of a tile_half: eight 8-lane chains (24 x 24 x 592: 44.8 GMAC/s; 12 columns 43.5, 16
// columns 36-41; the 32 rows of whole panels before, 52-54 counting the 8 zero rows).
#define HALF_COLUMNS 8

// Terms i0 ..< i1 of a tile's outputs into acc[p][c] (in tile_from).
#define TERMS(i0, i1) do {                                                                         \
        for (long i = (i0); i < (i1); i++) {                                                       \
            v16 w[8];                                                                              \
            for (int p = 0; p < NP; p++) {                                                         \
                if (blocks) {                                                                      \
                    int o = blocks[p * k + i];                                                     \
                    w[p] = load16(o >= 0 ? base + o : edges + (long)(-o - 1) * 16);                \
                } else {                                                                           \
                    w[p] = load16(wp + (p * k + i) * 16);                                          \
                }                                                                                  \
            }                                                                                      \
            for (int c = 0; c < NC; c++) {                                                         \
                float xv = x[c * ldx + i];                                                         \
                for (int p = 0; p < NP; p++) acc[p][c] = acc[p][c] + w[p] * xv;                    \
            }                                                                                      \
        }                                                                                          \
    } while (0)

// A tile of NP panels (16 NP rows) by NC columns: per output, for each block of K_BLOCK terms
// the chain acc = acc + w[r][i] * x[t][i] from 0, added to the output's total (0 before the
// first block), then + bias[r]. The order does not depend on the tile, so every output of a
// batch is what it is alone.
// With `blocks` (indirect: `wp` is then not read), block (p, i) of the packed matrix is not
// stored packed but found where it lies: base + blocks[p * k + i] when that is not negative, else
// block -blocks[p * k + i] - 1 of `edges`.
static inline __attribute__((always_inline)) void tile_from(const float *wp, const int *blocks, const float *base,
                                                          const float *edges, long k, const float *x, long ldx,
                                                          const float *bias, long r0, long rows, float *y, long ldy,
                                                          const earshot_epilogue *ep, long c0, const int NP, const int NC) {
    v16 acc[8][6], total[8][6];
    for (int p = 0; p < NP; p++)
        for (int c = 0; c < NC; c++) acc[p][c] = (v16){0};
    if (k <= K_BLOCK && r0 + NP * 16 <= rows) {
        // The common tile, one block of terms and whole panels, apart: the same sums as below
        // with no totals beside the accumulators and no partial rows (together they made a
        // 4 x 6 tile of 48 terms spill, at 41-47 of 58 GMAC/s, and a 2 x 6 tile of 24 at 37).
        TERMS(0, k);
        for (int p = 0; p < NP; p++) {
            long r = r0 + p * 16;
            v16 b = bias ? load16(bias + r) : (v16){0};
            for (int c = 0; c < NC; c++) {
                v16 out = acc[p][c] + b;
                EPILOGUE(ep, c0 + c, out);
                *(v16 *)(y + c * ldy + r) = out;
            }
        }
        return;
    }
    for (long i0 = 0; i0 < k; i0 += K_BLOCK) {
        long i1 = k - i0 > K_BLOCK ? i0 + K_BLOCK : k;
        TERMS(i0, i1);
        for (int p = 0; p < NP; p++)
            for (int c = 0; c < NC; c++) {
                total[p][c] = i0 == 0 ? acc[p][c] : total[p][c] + acc[p][c];
                acc[p][c] = (v16){0};
            }
    }
    if (k <= 0)
        for (int p = 0; p < NP; p++)
            for (int c = 0; c < NC; c++) total[p][c] = (v16){0};
    for (int p = 0; p < NP; p++) {
        long r = r0 + p * 16;
        v16 b = {0};
        if (bias) {
            if (r + 16 <= rows) b = load16(bias + r);
            else for (long l = 0; r + l < rows; l++) b[l] = bias[r + l];
        }
        for (int c = 0; c < NC; c++) {
            v16 out = total[p][c] + b;
            EPILOGUE(ep, c0 + c, out);
            float *yc = y + c * ldy + r;
            if (r + 16 <= rows) *(v16 *)yc = out;
            else for (long l = 0; r + l < rows; l++) yc[l] = out[l];
        }
    }
}

// A tile of the last panel when it holds at most 8 rows (24 or 72 output channels): the sums of
// tile_from in 8 lanes, half the vector work of a whole panel of zero rows, each output's chain
// the same, so the same bits. The epilogue takes the 8 lanes widened to 16.
static inline __attribute__((always_inline)) void tile_half(const float *wp, const int *blocks, const float *base,
                                                          const float *edges, long k, const float *x, long ldx,
                                                          const float *bias, long r0, long rows, float *y, long ldy,
                                                          const earshot_epilogue *ep, long c0, const int NC) {
    v8 acc[HALF_COLUMNS], total[HALF_COLUMNS];
    for (int c = 0; c < NC; c++) acc[c] = total[c] = (v8){0};
    for (long i0 = 0; i0 < k; i0 += K_BLOCK) {
        long i1 = k - i0 > K_BLOCK ? i0 + K_BLOCK : k;
        for (long i = i0; i < i1; i++) {
            v8 w;
            if (blocks) {
                int o = blocks[i];
                w = load8(o >= 0 ? base + o : edges + (long)(-o - 1) * 16);
            } else {
                w = load8(wp + i * 16);
            }
            for (int c = 0; c < NC; c++) acc[c] = acc[c] + w * x[c * ldx + i];
        }
        for (int c = 0; c < NC; c++) {
            total[c] = i0 == 0 ? acc[c] : total[c] + acc[c];
            acc[c] = (v8){0};
        }
    }
    long valid = rows - r0;
    v8 b = {0};
    if (bias) for (long l = 0; l < valid; l++) b[l] = bias[r0 + l];
    for (int c = 0; c < NC; c++) {
        v8 sum = total[c] + b;
        v16 out = __builtin_shufflevector(sum, (v8){0}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        EPILOGUE(ep, c0 + c, out);
        float *yc = y + c * ldy + r0;
        if (valid == 8) *(v8 *)yc = __builtin_shufflevector(out, out, 0, 1, 2, 3, 4, 5, 6, 7);
        else for (long l = 0; l < valid; l++) yc[l] = out[l];
    }
}

static inline __attribute__((always_inline)) void tile(const float *wp, long k, const float *x, long ldx, const float *bias,
                                                     long r0, long rows, float *y, long ldy, const int NP, const int NC) {
    tile_from(wp, 0, 0, 0, k, x, ldx, bias, r0, rows, y, ldy, 0, 0, NP, NC);
}

// One tile of NP panels by nc columns, from `wp` (packed) or, when `bp` is set, from the blocks
// it lists (earshot_gemm_indirect).
#define COLUMNS(NP, nc) do {                                                                   \
        switch (nc) {                                                                           \
        case 1: tile_from(wp, bp, base, edges, k, xt, ldx, bias, r0, rows, yt, ldy, ep, t, NP, 1); break;   \
        case 2: tile_from(wp, bp, base, edges, k, xt, ldx, bias, r0, rows, yt, ldy, ep, t, NP, 2); break;   \
        case 3: tile_from(wp, bp, base, edges, k, xt, ldx, bias, r0, rows, yt, ldy, ep, t, NP, 3); break;   \
        case 4: tile_from(wp, bp, base, edges, k, xt, ldx, bias, r0, rows, yt, ldy, ep, t, NP, 4); break;   \
        case 5: tile_from(wp, bp, base, edges, k, xt, ldx, bias, r0, rows, yt, ldy, ep, t, NP, 5); break;   \
        default: tile_from(wp, bp, base, edges, k, xt, ldx, bias, r0, rows, yt, ldy, ep, t, NP, 6); break;  \
        }                                                                                       \
    } while (0)

#define HALF(NC) case NC: tile_half(wp, bp, base, edges, k, xt, ldx, bias, r0, rows, yt, ldy, ep, t, NC); break

// A last panel of at most 8 rows, every column. A function of its own: inlined beside the whole
// panels' tiles it slowed them (32 x 24 x 592: 52 -> 33 GMAC/s). Tried and slower: this panel's
// tiles joined to the whole panel's before it (24 x 24 x 592: 41 GMAC/s).
CLONES
static void half_panel(const float *wp, const int *bp, const float *base, const float *edges, long k, const float *x,
                       long ldx, long n, const float *bias, long r0, long rows, float *y, long ldy,
                       const earshot_epilogue *ep) {
    for (long t = 0; t < n; t += HALF_COLUMNS) {
        long nc = n - t < HALF_COLUMNS ? n - t : HALF_COLUMNS;
        const float *xt = x + t * ldx;
        float *yt = y + t * ldy;
        switch (nc) {
        HALF(1); HALF(2); HALF(3); HALF(4); HALF(5); HALF(6); HALF(7);
        default: tile_half(wp, bp, base, edges, k, xt, ldx, bias, r0, rows, yt, ldy, ep, t, HALF_COLUMNS); break;
        }
    }
}

// Many columns: tiles of four panels (64 rows) by six columns, 24 sums in registers; the
// four panels stay in cache while every column passes over them. The matrix is `packed`, or the
// blocks `blocks` lists (earshot_gemm_indirect).
static inline __attribute__((always_inline)) void tiles(const float *packed, const int *blocks, const float *base,
                                                      const float *edges, long rows, long k, const float *x, long ldx,
                                                      long n, const float *bias, float *y, long ldy, const earshot_epilogue *ep) {
    long panels = (rows + 15) / 16;
    for (long p0 = 0, np; p0 < panels; p0 += np) {
        const float *wp = packed ? packed + p0 * k * 16 : 0;
        const int *bp = blocks ? blocks + p0 * k : 0;
        long r0 = p0 * 16;
        np = panels - p0 < 4 ? panels - p0 : 4;
        // A last panel of partial rows goes alone, so that the whole ones before it take the
        // common tile (24 x 24 x 592: 21.6 -> 31.4 GMAC/s, tools/bench_products.sh).
        if (np > 1 && p0 + np == panels && rows % 16 != 0) np -= 1;
        if (np == 1 && rows - r0 <= 8) {
            half_panel(wp, bp, base, edges, k, x, ldx, n, bias, r0, rows, y, ldy, ep);
            continue;
        }
        for (long t = 0; t < n; t += 6) {
            long nc = n - t < 6 ? n - t : 6;
            const float *xt = x + t * ldx;
            float *yt = y + t * ldy;
            switch (np) {
            case 1: COLUMNS(1, nc); break;
            case 2: COLUMNS(2, nc); break;
            case 3: COLUMNS(3, nc); break;
            default: COLUMNS(4, nc); break;
            }
        }
    }
}

CLONES
void earshot_gemm_packed(const float *packed, long rows, long k, const float *x, long ldx, long n, const float *bias,
                         float *y, long ldy) {
    long panels = (rows + 15) / 16;
    const int *bp = 0;
    const float *base = 0, *edges = 0;
    const earshot_epilogue *ep = 0;
    const long t = 0;
    if (n <= 2) {
        // One or two columns (one stream): eight panels at a time, so that eight or sixteen
        // independent sums hide the latency of each multiply-add.
        for (long p0 = 0; p0 < panels; p0 += 8) {
            const float *wp = packed + p0 * k * 16;
            long r0 = p0 * 16, np = panels - p0 < 8 ? panels - p0 : 8;
            const float *xt = x;
            float *yt = y;
            switch (np) {
            case 1: COLUMNS(1, n); break;
            case 2: COLUMNS(2, n); break;
            case 3: COLUMNS(3, n); break;
            case 4: COLUMNS(4, n); break;
            case 5: tile(wp, k, xt, ldx, bias, r0, rows, yt, ldy, 5, 1); if (n == 2) tile(wp, k, xt + ldx, ldx, bias, r0, rows, yt + ldy, ldy, 5, 1); break;
            case 6: tile(wp, k, xt, ldx, bias, r0, rows, yt, ldy, 6, 1); if (n == 2) tile(wp, k, xt + ldx, ldx, bias, r0, rows, yt + ldy, ldy, 6, 1); break;
            case 7: tile(wp, k, xt, ldx, bias, r0, rows, yt, ldy, 7, 1); if (n == 2) tile(wp, k, xt + ldx, ldx, bias, r0, rows, yt + ldy, ldy, 7, 1); break;
            default:
                if (n == 2) tile(wp, k, xt, ldx, bias, r0, rows, yt, ldy, 8, 2);
                else tile(wp, k, xt, ldx, bias, r0, rows, yt, ldy, 8, 1);
                break;
            }
        }
        return;
    }
    tiles(packed, 0, 0, 0, rows, k, x, ldx, n, bias, y, ldy, 0);
}

CLONES
void earshot_gemm_indirect(const int *blocks, const float *base, const float *edges, long rows, long k, const float *x,
                           long ldx, long n, const float *bias, float *y, long ldy, const earshot_epilogue *epilogue) {
    tiles(0, blocks, base, edges, rows, k, x, ldx, n, bias, y, ldy, epilogue);
}

CLONES
void earshot_pcm16_decode(const unsigned char *in, long n, float scale, float *out) {
    for (long i = 0; i < n; i++) {
        short v;
        __builtin_memcpy(&v, in + 2 * i, 2);  // little-endian, as on every target built for
        out[i] = (float)v * scale;
    }
}

CLONES
long earshot_first_nonfinite(const float *x, long n) {
    // x - x is 0 where finite and NaN where not; the NaN stays in the sum. One pass, one
    // horizontal sum; the index is looked for only when there is one.
    v16 acc = {0};
    long i = 0;
    for (; i + 16 <= n; i += 16) acc += load16(x + i) - load16(x + i);
    float sum = 0;
    for (int l = 0; l < 16; l++) sum += acc[l];
    for (; i < n; i++) sum += x[i] - x[i];
    if (sum == 0.0f) return -1;
    for (i = 0; i < n; i++)
        if (x[i] - x[i] != 0.0f) return i;
    return -1;
}

#define TANH8(x, out) do { v8 _t; SIGMOID8((x) * 2.0f, _t); (out) = 2.0f * _t - 1.0f; } while (0)

// One value through the 8-lane code. Always inlined, so that inside each clone it is compiled
// for that clone's instructions as the vector loops are: a tail value gets the bits it would
// get in a full vector, whatever the length (a batch of one equals a batch of many).
static inline __attribute__((always_inline)) float sigmoid1(float x) {
    v8 v = {x}, s;
    SIGMOID8(v, s);
    return s[0];
}

static inline __attribute__((always_inline)) float swish1(float x) {
    v8 v = {x}, s;
    SWISH8(v, s);
    return s[0];
}

static inline __attribute__((always_inline)) float tanh1(float x) {
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

// y = sigmoid(x), or the swish x sigmoid(x), 16 lanes at a time, then 8; a tail value through
// the same 8-lane code (sigmoid1, swish1), so a value gets the same bits wherever it lies. y may
// be x itself.
static inline __attribute__((always_inline)) void sigmoids(const float *x, float *y, long n, int swish) {
    long i = 0;
    for (; i + 16 <= n; i += 16) {
        v16 v = load16(x + i), s;
        if (swish) SWISH16(v, s);
        else SIGMOID16(v, s);
        *(v16 *)(y + i) = s;
    }
    for (; i + 8 <= n; i += 8) {
        v8 v = load8(x + i), s;
        if (swish) SWISH8(v, s);
        else SIGMOID8(v, s);
        *(v8 *)(y + i) = s;
    }
    for (; i < n; i++) y[i] = swish ? swish1(x[i]) : sigmoid1(x[i]);
}

CLONES
void earshot_sigmoid(float *x, long n) { sigmoids(x, x, n, 0); }

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
void earshot_spectrum(const float *c, long bins, int magnitude, float *out, long stride) {
    // Squares and their sum rounded one by one, as separate element-wise ops would round them.
#pragma clang fp contract(off)
    if (magnitude) {
        for (long k = 0; k < bins; k++) {
            float re = c[2 * k], im = c[2 * k + 1];
            out[k * stride] = __builtin_sqrtf(re * re + im * im);
        }
    } else {
        for (long k = 0; k < bins; k++) {
            float re = c[2 * k], im = c[2 * k + 1];
            out[k * stride] = re * re + im * im;
        }
    }
}

// For positive normal x: x = m 2^e, m in [sqrt(1/2), sqrt(2)) (e as 8 int lanes, m as floats).
#define LOG_SPLIT8(x, _e, _m) do {                                                      \
        i8 _bits = (i8)(x);                                                             \
        _e = ((_bits >> 23) & 0xFF) - 127;                                              \
        _m = (v8)((_bits & 0x007FFFFF) | 0x3F800000);                                   \
        i8 _high = _m > 1.4142135f;                                                     \
        _m = (v8)(((i8)(_m * 0.5f) & _high) | ((i8)_m & ~_high));                       \
        _e = _e - _high; /* true lanes are -1 */                                        \
    } while (0)

CLONES
void earshot_windowed_doubles(const float *x, const float *w, long n, int float_product, double *y) {
    if (!w) for (long i = 0; i < n; i++) y[i] = (double)x[i];
    else if (float_product) for (long i = 0; i < n; i++) y[i] = (double)(x[i] * w[i]);
    else for (long i = 0; i < n; i++) y[i] = (double)x[i] * (double)w[i];
}

CLONES
void earshot_round_doubles(const double *x, long n, long stride, float *y) {
    if (stride == 1) for (long i = 0; i < n; i++) y[i] = (float)x[i];
    else for (long i = 0; i < n; i++) y[i] = (float)x[i * stride];
}

CLONES
void earshot_split_complex(const float *c, long bins, float *re_out, float *im_out, float im_scale, long stride) {
    if (re_out) for (long k = 0; k < bins; k++) re_out[k * stride] = c[2 * k];
    if (im_out) for (long k = 0; k < bins; k++) im_out[k * stride] = im_scale * c[2 * k + 1];
}

// ln(x) for positive normal x: ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), summed to s^11.
#define LOG8(x, out) do {                                                               \
        typedef int i8 __attribute__((vector_size(32)));                                \
        i8 _e;                                                                          \
        v8 _m;                                                                          \
        LOG_SPLIT8(x, _e, _m);                                                          \
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

// Graph kernels: out-of-place element-wise ops and index gathers, for compiled graphs.

CLONES
void earshot_gather(const int *index, const float *x, float *y, long n) {
    for (long e = 0; e < n; e++) {
        int i = index[e];
        float v = x[i < 0 ? 0 : i];
        y[e] = i < 0 ? 0.0f : v;
    }
}

// Blocks of 16 that are one run of x with some lanes zero (a receptive field reaching into the
// padding): y[16 e + l] = x[starts[e] + l] where bit l of masks[e] is set, else 0. Every
// x[starts[e]] ... x[starts[e] + 15] must be readable; the cleared lanes are masked by bits, so
// whatever they hold (NaN included) gives an exact zero.
CLONES
void earshot_masked_blocks(const float *x, const int *starts, const unsigned short *masks, long count, float *y) {
    const vi16 lanes = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    for (long e = 0; e < count; e++) {
        vi16 bits = (vi16){0} + (int)masks[e];
        vi16 keep = -((bits >> lanes) & 1);
        vi16 v;
        __builtin_memcpy(&v, x + starts[e], sizeof v);
        v &= keep;
        __builtin_memcpy(y + 16 * e, &v, sizeof v);
    }
}

// Element-wise loops whose output may be their input itself (in place), never a shifted view of
// it: no iteration reads what another writes, so they vectorize without a runtime overlap check
// (which exact aliasing would fail, sending the loop to its scalar version).
#define SAFE _Pragma("clang loop vectorize(assume_safety)")

// ln(x) for 8 lanes at once where x is positive, normal and finite, within 1 ulp of the exact
// value; logf elsewhere (zero, negative, subnormal, infinite or NaN x). With f = m - 1 (exact),
// s = f / (2 + f) and h = f^2 / 2: ln(m) = 2 atanh(s) = f - h + s (h + R), R = sum 2 s^2k / (2k + 1)
// to s^10, whose terms after f are small, so their rounding is; e ln 2 is added as a part with
// few bits (exact for any e) and a small remainder. A tail goes through the same 8-lane code, so
// a value gets the same bits wherever it lies.
static inline __attribute__((always_inline)) void logs(const float *x, float *y, long n) {
    typedef int i8 __attribute__((vector_size(32)));
    for (long i = 0; i < n; i += 8) {
        long m = n - i < 8 ? n - i : 8;
        v8 p = (v8){0} + 1.0f;
        if (m == 8) p = load8(x + i);
        else for (long j = 0; j < m; j++) p[j] = x[i + j];
        i8 e;
        v8 mantissa;
        LOG_SPLIT8(p, e, mantissa);
        v8 f = mantissa - 1.0f, s = f / (f + 2.0f), z = s * s, h = 0.5f * f * f;
        v8 r = (v8){0} + 2.0f / 11;
        r = r * z + 2.0f / 9;
        r = r * z + 2.0f / 7;
        r = r * z + 2.0f / 5;
        r = r * z + 2.0f / 3;
        r = r * z;
        v8 k = __builtin_convertvector(e, v8);
        // ln 2 = 0.693145751953125 (15 significant bits: k times it is exact) + 1.42860677e-6.
        v8 l = k * 0.693145751953125f + (f - (h - (s * (h + r) + k * 1.42860677e-6f)));
        i8 ok = (p >= 1.17549435e-38f) & (p <= 3.40282347e38f);
        if (m == 8 && ok[0] & ok[1] & ok[2] & ok[3] & ok[4] & ok[5] & ok[6] & ok[7]) {
            *(v8 *)(y + i) = l;
            continue;
        }
        for (long j = 0; j < m; j++) y[i + j] = ok[j] ? l[j] : __builtin_logf(p[j]);
    }
}

CLONES
void earshot_unary(int op, float alpha, const float *x, float *y, long n) {
    switch (op) {
    case EARSHOT_LEAKY_RELU:
        SAFE for (long i = 0; i < n; i++) y[i] = LEAKY_RELU_OF(x[i], alpha);
        break;
    case EARSHOT_RELU:
        SAFE for (long i = 0; i < n; i++) y[i] = RELU_OF(x[i]);
        break;
    case EARSHOT_SQRT:
        SAFE for (long i = 0; i < n; i++) y[i] = __builtin_sqrtf(x[i]);
        break;
    case EARSHOT_NEG:
        SAFE for (long i = 0; i < n; i++) y[i] = -x[i];
        break;
    case EARSHOT_ABS:
        SAFE for (long i = 0; i < n; i++) y[i] = __builtin_fabsf(x[i]);
        break;
    case EARSHOT_SIGMOID:
    case EARSHOT_SWISH:
        sigmoids(x, y, n, op == EARSHOT_SWISH);
        break;
    case EARSHOT_LOG:
        logs(x, y, n);
        break;
    default:
        break;
    }
}

// a^b for 8 lanes at once: e^(b ln a) by LOG8 and EXP8 where a is positive and normal and
// |b ln a| <= 10 (relative error under 1e-6: b ln a's rounding alone costs 6e-8 per unit), powf
// elsewhere (zero, negative, subnormal, infinite or NaN a; NaN or large b ln a). A tail goes
// through the same 8-lane code, so a value gets the same bits wherever it lies.
static inline __attribute__((always_inline)) void pows(const float *a, long a_step, const float *b, long b_step,
                                                     float *y, long n) {
    typedef int i8 __attribute__((vector_size(32)));
    for (long i = 0; i < n; i += 8) {
        long m = n - i < 8 ? n - i : 8;
        v8 p = (v8){0} + 1.0f, q = (v8){0} + 1.0f, l, t, r;
        if (m == 8 && a_step) p = load8(a + i);
        else for (long j = 0; j < m; j++) p[j] = a[a_step ? i + j : 0];
        if (m == 8 && b_step) q = load8(b + i);
        else for (long j = 0; j < m; j++) q[j] = b[b_step ? i + j : 0];
        LOG8(p, l);
        t = q * l;
        EXP8(t, r);
        i8 ok = (p >= 1.17549435e-38f) & (p <= 3.40282347e38f) & (__builtin_elementwise_abs(t) <= 10.0f);
        if (m == 8 && ok[0] & ok[1] & ok[2] & ok[3] & ok[4] & ok[5] & ok[6] & ok[7]) {
            *(v8 *)(y + i) = r;
            continue;
        }
        for (long j = 0; j < m; j++) y[i + j] = ok[j] ? r[j] : __builtin_powf(p[j], q[j]);
    }
}

CLONES
void earshot_binary(int op, const float *a, long a_step, const float *b, long b_step, float *y, long n) {
#define BINARY_LOOP(expr)                                                                          \
    if (a_step && b_step) { SAFE for (long i = 0; i < n; i++) { float p = a[i], q = b[i]; y[i] = (expr); } } \
    else if (a_step) { float q = b[0]; SAFE for (long i = 0; i < n; i++) { float p = a[i]; y[i] = (expr); } } \
    else if (b_step) { float p = a[0]; SAFE for (long i = 0; i < n; i++) { float q = b[i]; y[i] = (expr); } } \
    else { float p = a[0], q = b[0]; SAFE for (long i = 0; i < n; i++) y[i] = (expr); }
    switch (op) {
    case EARSHOT_ADD: BINARY_LOOP(p + q) break;
    case EARSHOT_SUB: BINARY_LOOP(p - q) break;
    case EARSHOT_MUL: BINARY_LOOP(p * q) break;
    case EARSHOT_DIV: BINARY_LOOP(p / q) break;
    case EARSHOT_MAX: BINARY_LOOP(MAX_OF(p, q)) break;
    case EARSHOT_MIN: BINARY_LOOP(MIN_OF(p, q)) break;
    case EARSHOT_SQUARE:  // b is the exponent 2
        if (a_step) { SAFE for (long i = 0; i < n; i++) y[i] = a[i] * a[i]; }
        else { SAFE for (long i = 0; i < n; i++) y[i] = a[0] * a[0]; }
        break;
    case EARSHOT_POW: pows(a, a_step, b, b_step, y, n); break;
    default: break;
    }
#undef BINARY_LOOP
}

// Swap bit d of the row and of the lane between rows (a, b) of a 16 x 16 block (rows a and
// a + d, bit d of a clear): lanes with bit d set of a take b's lanes d before, and b's lanes with
// bit d clear take a's lanes d after. After d = 8, 4, 2 and 1 the block is transposed.
#define SWAP_BITS(a, b, lo, hi) do { v16 a_ = (a); (a) = __builtin_shufflevector(a_, (b), lo); (b) = __builtin_shufflevector(a_, (b), hi); } while (0)
#define LANES8_LO 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define LANES8_HI 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#define LANES4_LO 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define LANES4_HI 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define LANES2_LO 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define LANES2_HI 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define LANES1_LO 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define LANES1_HI 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
// The 16 x 16 block b[0...15] (rows of a v16 array) transposed in place.
#define TRANSPOSE16(b) do {                                                                      \
        for (int i_ = 0; i_ < 8; i_++) SWAP_BITS((b)[i_], (b)[i_ + 8], LANES8_LO, LANES8_HI);     \
        for (int i_ = 0; i_ < 16; i_ += 8)                                                       \
            for (int j_ = i_; j_ < i_ + 4; j_++) SWAP_BITS((b)[j_], (b)[j_ + 4], LANES4_LO, LANES4_HI); \
        for (int i_ = 0; i_ < 16; i_ += 4)                                                       \
            for (int j_ = i_; j_ < i_ + 2; j_++) SWAP_BITS((b)[j_], (b)[j_ + 2], LANES2_LO, LANES2_HI); \
        for (int i_ = 0; i_ < 16; i_ += 2) SWAP_BITS((b)[i_], (b)[i_ + 1], LANES1_LO, LANES1_HI); \
    } while (0)

// y [cols][rows] = the transpose of x [rows][cols]: whole blocks of 16 x 16 in registers (16
// rows loaded, four rounds of two-vector shuffles, 16 rows stored), the ragged rows and columns
// value by value. Values are only moved: the same bits whichever path a value takes.
CLONES
void earshot_transpose(const float *x, long rows, long cols, float *y) {
    long rows16 = rows / 16 * 16, cols16 = cols / 16 * 16;
    // The shorter side's blocks outermost: a stripe of 16 long rows (or long columns) at a time,
    // so that the lines it reads and writes are whole before they leave the cache.
    int rows_outer = rows <= cols;
    long outer = rows_outer ? rows16 : cols16, inner = rows_outer ? cols16 : rows16;
    for (long o0 = 0; o0 < outer; o0 += 16)
        for (long i0 = 0; i0 < inner; i0 += 16) {
            long r0 = rows_outer ? o0 : i0, c0 = rows_outer ? i0 : o0;
            v16 b[16];
            for (int i = 0; i < 16; i++) b[i] = load16(x + (r0 + i) * cols + c0);
            TRANSPOSE16(b);
            for (int i = 0; i < 16; i++) *(v16 *)(y + (c0 + i) * rows + r0) = b[i];
        }
    // The columns past the whole blocks, for every row: each an output row, read down the input.
    for (long c = cols16; c < cols; c++) {
        const float *from = x + c;
        float *to = y + c * rows;
        for (long r = 0; r < rows; r++) to[r] = from[r * cols];
    }
    // The rows past the whole blocks, in the whole blocks' columns: each input row read once.
    for (long r = rows16; r < rows; r++) {
        const float *from = x + r * cols;
        for (long c = 0; c < cols16; c++) y[c * rows + r] = from[c];
    }
}

// One output of earshot_reduce's maximum or minimum, member by member.
static inline __attribute__((always_inline)) float extreme1(int op, const float *v, const long *members, long count) {
    float m = op == EARSHOT_REDUCE_MAX ? -__builtin_inff() : __builtin_inff();
    for (long r = 0; r < count; r++) {
        float e = v[members[r]];
        if ((op == EARSHOT_REDUCE_MAX ? e > m : e < m) || e != e) m = e;
    }
    return m;
}

CLONES
void earshot_reduce(int op, const float *x, const long *starts, long outputs, const long *members, long count, float *y) {
    // Each output's members one run (offsets rising one by one).
    int contiguous = count > 0 && members[count - 1] - members[0] == count - 1;
    if (op == EARSHOT_REDUCE_MAX || op == EARSHOT_REDUCE_MIN) {
        // Contiguous members: sixteen lanes at a time. The extreme of the values does not depend
        // on their order, except for which NaN or which signed zero is kept: a NaN anywhere, or
        // an extreme of zero, is decided member by member.
        for (long o = 0; o < outputs; o++) {
            const float *v = x + starts[o];
            if (!contiguous || count < 32) {
                y[o] = extreme1(op, v, members, count);
                continue;
            }
            const float *run = v + members[0];
            v16 m = load16(run);
            vi16 nan = m != m;
            long r = 16;
            for (; r + 16 <= count; r += 16) {
                v16 e = load16(run + r);
                nan |= e != e;
                if (op == EARSHOT_REDUCE_MAX) m = SELECT16(e > m, e, m);
                else m = SELECT16(e < m, e, m);
            }
            float best = m[0];
            int any = 0;
            for (int l = 0; l < 16; l++) {
                any |= nan[l] | (m[l] != m[l]);
                if (op == EARSHOT_REDUCE_MAX ? m[l] > best : m[l] < best) best = m[l];
            }
            for (; r < count; r++) {
                float e = run[r];
                any |= e != e;
                if (op == EARSHOT_REDUCE_MAX ? e > best : e < best) best = e;
            }
            y[o] = any || best == 0.0f ? extreme1(op, v, members, count) : best;
        }
        return;
    }
    // Sums: each output one chain in member order, from 0. Sixteen outputs a vector, lane l
    // output o + l's chain: where the outputs' starts rise one by one (channels-last), each
    // member one vector; where each output's members are one run (offsets rising one by one),
    // 16 x 16 blocks of the runs transposed in registers (TRANSPOSE16), then added column by
    // column, so each lane still takes its members in order. Else eight outputs side by side so
    // that the chains overlap.
    long o = 0;
    int run = contiguous && count >= 16;
    for (; o + 16 <= outputs; o += 16) {
        const long *st = starts + o;
        int side = 1;
        for (int l = 1; l < 16; l++) side &= st[l] == st[0] + l;
        if (!side && !run) break;
        v16 sum = {0};
        long r = 0;
        if (side) {
            for (; r < count; r++) sum = sum + load16(x + st[0] + members[r]);
        } else {
            for (; r + 16 <= count; r += 16) {
                v16 b[16];
                for (int l = 0; l < 16; l++) b[l] = load16(x + st[l] + members[0] + r);
                TRANSPOSE16(b);
                for (int j = 0; j < 16; j++) sum = sum + b[j];
            }
            for (; r < count; r++) {
                v16 e;
                for (int l = 0; l < 16; l++) e[l] = x[st[l] + members[r]];
                sum = sum + e;
            }
        }
        if (op == EARSHOT_REDUCE_MEAN) sum = sum / (float)count;
        for (int l = 0; l < 16; l++) y[o + l] = sum[l];
    }
    for (; o + 8 <= outputs; o += 8) {
        float s[8] = {0};
        const long *st = starts + o;
        for (long r = 0; r < count; r++) {
            long m = members[r];
            for (int j = 0; j < 8; j++) s[j] += x[st[j] + m];
        }
        for (int j = 0; j < 8; j++) y[o + j] = op == EARSHOT_REDUCE_MEAN ? s[j] / (float)count : s[j];
    }
    for (; o < outputs; o++) {
        float s = 0;
        for (long r = 0; r < count; r++) s += x[starts[o] + members[r]];
        y[o] = op == EARSHOT_REDUCE_MEAN ? s / (float)count : s;
    }
}

// Pooling over windows given as lists: output k of each plane takes the plane's values at
// members[starts[k]..<starts[k + 1]]: their maximum (the first, then any larger one), or their
// sum over divisors[k] (0 for an empty window).
CLONES
void earshot_pool(int max, const float *x, long planes, long plane, const int *starts, const int *members,
                  const float *divisors, long outputs, float *y) {
    for (long p = 0; p < planes; p++) {
        const float *v = x + p * plane;
        float *o = y + p * outputs;
        for (long k = 0; k < outputs; k++) {
            int from = starts[k], to = starts[k + 1];
            if (max) {
                float best = -3.40282347e+38f;
                for (int m = from; m < to; m++) {
                    float e = v[members[m]];
                    if (m == from || e > best) best = e;
                }
                o[k] = best;
            } else {
                float sum = 0;
                for (int m = from; m < to; m++) sum += v[members[m]];
                o[k] = divisors[k] > 0 && to > from ? sum / divisors[k] : 0.0f;
            }
        }
    }
}

// Windows of `width` consecutive values every `stride`, as earshot_pool takes them: the maximum
// as the first, then any larger one; the average as (0 + the first) + each next, over the
// divisor. Pairs (stride and width 2) run 16 outputs at a time from two vectors of 16 split into
// their even and odd values, by the same expressions lane by lane.
CLONES
void earshot_pool_regular(int max, const float *x, long planes, long plane, long stride, long width, const float *divisors,
                          long outputs, float *y) {
    for (long p = 0; p < planes; p++) {
        const float *v = x + p * plane;
        float *o = y + p * outputs;
        long k = 0;
        if (stride == 2 && width == 2) {
            for (; k + 16 <= outputs; k += 16) {
                v16 lo = load16(v + 2 * k), hi = load16(v + 2 * k + 16);
                v16 first = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                v16 second = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
                if (max) {
                    *(v16 *)(o + k) = SELECT16(second > first, second, first);
                } else {
                    v16 d = load16(divisors + k);
                    v16 sum = ((v16){0} + first) + second;
                    *(v16 *)(o + k) = SELECT16(d > 0, sum / d, (v16){0});
                }
            }
        }
        for (; k < outputs; k++) {
            const float *w = v + k * stride;
            if (max) {
                float best = w[0];
                for (long m = 1; m < width; m++) if (w[m] > best) best = w[m];
                o[k] = best;
            } else {
                float sum = 0;
                for (long m = 0; m < width; m++) sum += w[m];
                o[k] = divisors[k] > 0 ? sum / divisors[k] : 0.0f;
            }
        }
    }
}

// Winograd F(4, 3): four outputs of a 3-tap correlation from six inputs d0..d5 with six products
// instead of twelve, y = A^T [(G g) . (B^T d)] with the interpolation points 0, 1, -1, 2, -2 and
// infinity. Values are channels-last rows of `channels` floats; each loop runs along a row.
CLONES
void earshot_winograd_input(const float *x, long channels, const int *rows, long tiles, const float *zeros, float *v,
                            long vstride) {
    for (long t = 0; t < tiles; t++) {
        const int *r = rows + t * 6;
        const float *d0 = r[0] >= 0 ? x + (long)r[0] * channels : zeros, *d1 = r[1] >= 0 ? x + (long)r[1] * channels : zeros;
        const float *d2 = r[2] >= 0 ? x + (long)r[2] * channels : zeros, *d3 = r[3] >= 0 ? x + (long)r[3] * channels : zeros;
        const float *d4 = r[4] >= 0 ? x + (long)r[4] * channels : zeros, *d5 = r[5] >= 0 ? x + (long)r[5] * channels : zeros;
        float *v0 = v + t * channels;
        float *v1 = v0 + vstride, *v2 = v1 + vstride, *v3 = v2 + vstride, *v4 = v3 + vstride, *v5 = v4 + vstride;
        SAFE for (long c = 0; c < channels; c++) {
            float a = d0[c], b = d1[c], e = d2[c], f = d3[c], g = d4[c], h = d5[c];
            v0[c] = 4.0f * a - 5.0f * e + g;
            v1[c] = g + f - 4.0f * (b + e);
            v2[c] = g - f + 4.0f * (b - e);
            v3[c] = g - e + 2.0f * (f - b);
            v4[c] = g - e - 2.0f * (f - b);
            v5[c] = 4.0f * b - 5.0f * f + h;
        }
    }
}

#define ACT_MAX (EARSHOT_EPILOGUE_BINARY + EARSHOT_MAX)
#define ACT_MIN (EARSHOT_EPILOGUE_BINARY + EARSHOT_MIN)

// A vector w_ through the fused ops: K1 then K2 (constants where the loop is compiled, with
// their values `first` and `second`, so that no op is chosen per vector), or with G the epilogue
// `ep` op by op. Instantiated for each list by WITH_LISTED_OPS.
#define FUSED_ACT(w_) do {                                                                         \
        v16 e_ = (w_);                                                                             \
        if (K1) EPILOGUE_OP(K1, first);                                                            \
        if (K2) EPILOGUE_OP(K2, second);                                                           \
        (w_) = e_;                                                                                 \
        if (G) EPILOGUE(ep, 0, w_);                                                                \
    } while (0)

// CALL(K1, K2, G) for `epilogue`'s ops (NULL: none): a list of up to two ops of LeakyRelu, Relu,
// Max and Min (the second Max or Min) as constants, their values listed_[0] and listed_[1]; any
// other list as CALL(0, 0, 1), through the epilogue op by op.
#define WITH_LISTED_OPS(epilogue, CALL) do {                                                       \
        int kind_[2] = {0, 0};                                                                     \
        float listed_[2] = {0, 0};                                                                 \
        long count_ = (epilogue) ? (epilogue)->count : 0;                                          \
        int ok_ = count_ <= 2;                                                                     \
        for (long o_ = 0; o_ < count_ && ok_; o_++) {                                              \
            int k_ = (epilogue)->kinds[o_];                                                        \
            ok_ = k_ == ACT_MAX || k_ == ACT_MIN || (o_ == 0 && (k_ == EARSHOT_LEAKY_RELU || k_ == EARSHOT_RELU)); \
            kind_[o_] = k_;                                                                        \
            listed_[o_] = (epilogue)->values[o_];                                                  \
        }                                                                                          \
        if (!ok_) { CALL(0, 0, 1); break; }                                                        \
        switch (kind_[0] * 64 + kind_[1]) {                                                        \
        case EARSHOT_LEAKY_RELU * 64: CALL(EARSHOT_LEAKY_RELU, 0, 0); break;                       \
        case EARSHOT_LEAKY_RELU * 64 + ACT_MAX: CALL(EARSHOT_LEAKY_RELU, ACT_MAX, 0); break;       \
        case EARSHOT_LEAKY_RELU * 64 + ACT_MIN: CALL(EARSHOT_LEAKY_RELU, ACT_MIN, 0); break;       \
        case EARSHOT_RELU * 64: CALL(EARSHOT_RELU, 0, 0); break;                                   \
        case EARSHOT_RELU * 64 + ACT_MAX: CALL(EARSHOT_RELU, ACT_MAX, 0); break;                   \
        case EARSHOT_RELU * 64 + ACT_MIN: CALL(EARSHOT_RELU, ACT_MIN, 0); break;                   \
        case ACT_MAX * 64: CALL(ACT_MAX, 0, 0); break;                                             \
        case ACT_MAX * 64 + ACT_MAX: CALL(ACT_MAX, ACT_MAX, 0); break;                             \
        case ACT_MAX * 64 + ACT_MIN: CALL(ACT_MAX, ACT_MIN, 0); break;                             \
        case ACT_MIN * 64: CALL(ACT_MIN, 0, 0); break;                                             \
        case ACT_MIN * 64 + ACT_MAX: CALL(ACT_MIN, ACT_MAX, 0); break;                             \
        case ACT_MIN * 64 + ACT_MIN: CALL(ACT_MIN, ACT_MIN, 0); break;                             \
        default: CALL(0, 0, 0); break;                                                             \
        }                                                                                          \
    } while (0)

#define WINOGRAD_STORE16(p, value) do { v16 w_ = (value); FUSED_ACT(w_); *(v16 *)(p) = w_; } while (0)
#define WINOGRAD_STORE8(p, value) do {                                                             \
        v8 v_ = (value);                                                                           \
        if (K1 || G) {                                                                             \
            v16 w_ = __builtin_shufflevector(v_, (v8){0}, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); \
            FUSED_ACT(w_);                                                                         \
            v_ = __builtin_shufflevector(w_, w_, 0, 1, 2, 3, 4, 5, 6, 7);                          \
        }                                                                                          \
        *(v8 *)(p) = v_;                                                                           \
    } while (0)

// Four outputs of a Winograd tile from its six products, vectors of VT at channel c, plus the
// bias, through the fused ops, stored to the tile's rows.
#define WINOGRAD_OUT(VT, STORE) do {                                                               \
        VT a = *(const VT *)(m0 + c), b = *(const VT *)(m1 + c), e = *(const VT *)(m2 + c);       \
        VT f = *(const VT *)(m3 + c), g = *(const VT *)(m4 + c), h = *(const VT *)(m5 + c);       \
        VT o = bias ? *(const VT *)(bias + c) : (VT){0};                                           \
        VT s = b + e, dd = b - e, p = f + g, q = f - g;                                            \
        STORE(y0 + c, a + s + p + o);                                                              \
        STORE(y1 + c, dd + 2.0f * q + o);                                                          \
        STORE(y2 + c, s + 4.0f * p + o);                                                           \
        STORE(y3 + c, dd + 8.0f * q + h + o);                                                      \
    } while (0)

static inline __attribute__((always_inline)) void winograd_tiles(const float *m, long mstride, long ldm, long channels,
                                                               const int *rows, long tiles, const float *bias, float *y,
                                                               float *sink, const int K1, float first, const int K2,
                                                               float second, const int G, const earshot_epilogue *ep) {
    float last[4][8];
    for (long t = 0; t < tiles; t++) {
        const int *r = rows + t * 4;
        const float *m0 = m + t * ldm;
        const float *m1 = m0 + mstride, *m2 = m1 + mstride, *m3 = m2 + mstride, *m4 = m3 + mstride, *m5 = m4 + mstride;
        float *y0 = r[0] >= 0 ? y + (long)r[0] * channels : sink, *y1 = r[1] >= 0 ? y + (long)r[1] * channels : sink;
        float *y2 = r[2] >= 0 ? y + (long)r[2] * channels : sink, *y3 = r[3] >= 0 ? y + (long)r[3] * channels : sink;
        long c = 0;
        for (; c + 16 <= channels; c += 16) WINOGRAD_OUT(v16, WINOGRAD_STORE16);
        for (; c + 8 <= channels; c += 8) WINOGRAD_OUT(v8, WINOGRAD_STORE8);
        if (c < channels) {
            // The last few channels: the products and the bias are read 8 at a time (ldm and
            // the bias are padded to a multiple of 8), the outputs written through a small buffer.
            float *to[4] = {y0, y1, y2, y3};
            long at = c;
            const float *tail_bias = bias ? bias + at : 0;
            m0 += at, m1 += at, m2 += at, m3 += at, m4 += at, m5 += at;
            y0 = last[0], y1 = last[1], y2 = last[2], y3 = last[3];
            {
                const float *bias = tail_bias;
                c = 0;
                WINOGRAD_OUT(v8, WINOGRAD_STORE8);
            }
            for (int k = 0; k < 4; k++)
                for (long l = at; l < channels; l++) to[k][l] = last[k][l - at];
        }
    }
}

CLONES
void earshot_winograd_output(const float *m, long mstride, long ldm, long channels, const int *rows, long tiles,
                             const float *bias, const earshot_epilogue *epilogue, float *y, float *sink) {
    // Up to two ops of LeakyRelu, Relu, Max and Min (the second Max or Min) each take a loop
    // compiled for them; any other list goes through EPILOGUE, op by op on each vector.
#define WINOGRAD_TILES(K1, K2, G) winograd_tiles(m, mstride, ldm, channels, rows, tiles, bias, y, sink, K1, listed_[0], K2, listed_[1], G, epilogue)
    WITH_LISTED_OPS(epilogue, WINOGRAD_TILES);
#undef WINOGRAD_TILES
}

// Positions of a direct convolution summed at once: eight independent chains for each vector of
// filters loaded.
#define DIRECT_POSITIONS 8

// 16 lanes of position q + p's outputs from channel c (`valid` of them kept) through the fused
// ops, stored.
#define DIRECT_STORE16(v, p, c, valid) do {                                                        \
        v16 e = (v);                                                                               \
        FUSED_ACT(e);                                                                              \
        float *yp = y + (q + (p)) * out_channels + (c);                                            \
        if ((valid) >= 16) *(v16 *)yp = e;                                                         \
        else for (long l = 0; l < (valid); l++) yp[l] = e[l];                                      \
    } while (0)

// A group of up to 32 output channels from cb (W0 of them in a v16 when W0 is 16; then W1 more,
// 0, 8 in a v8 or 16 in a v16) for positions q ..< q + np along a row from `at` (SW apart): per
// output, the chain over the taps in order from 0, + bias, the fused ops. Each input value is
// broadcast once for the group's vectors.
static inline __attribute__((always_inline)) void direct_group(const float *at, const long *taps, long depth, const float *w,
                                                             long ldw, long cb, long out_channels, const long SW,
                                                             const float *bias, float *y, long q, const int np,
                                                             const int W0, const int W1, const int K1, float first,
                                                             const int K2, float second, const int G,
                                                             const earshot_epilogue *ep) {
    v16 a0[DIRECT_POSITIONS], a1[DIRECT_POSITIONS];
    v8 h1[DIRECT_POSITIONS];
    for (int p = 0; p < DIRECT_POSITIONS; p++) a0[p] = a1[p] = (v16){0}, h1[p] = (v8){0};
    const float *w1 = w + cb + W0;
    for (long t = 0; t < depth; t++) {
        v16 f0 = W0 ? load16(w + t * ldw + cb) : (v16){0};
        v16 f1 = W1 == 16 ? load16(w1 + t * ldw) : (v16){0};
        v8 g1 = W1 == 8 ? load8(w1 + t * ldw) : (v8){0};
        const float *x_ = at + taps[t];
        for (int p = 0; p < DIRECT_POSITIONS; p++) {
            float xv = x_[p * SW];
            if (W0) a0[p] = a0[p] + f0 * xv;
            if (W1 == 16) a1[p] = a1[p] + f1 * xv;
            if (W1 == 8) h1[p] = h1[p] + g1 * xv;
        }
    }
    long rest = out_channels - cb - W0;
    if (W0) {
        v16 b = bias ? load16(bias + cb) : (v16){0};
        for (int p = 0; p < np; p++) DIRECT_STORE16(a0[p] + b, p, cb, out_channels - cb);
    }
    if (W1 == 16) {
        v16 b = bias ? load16(bias + cb + W0) : (v16){0};
        for (int p = 0; p < np; p++) DIRECT_STORE16(a1[p] + b, p, cb + W0, rest);
    }
    if (W1 == 8) {
        // Two positions' 8 lanes a vector of fused ops.
        v8 b = bias ? load8(bias + cb + W0) : (v8){0};
        for (int p = 0; p < np; p += 2) {
            v16 e = __builtin_shufflevector(h1[p] + b, h1[p + 1] + b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            FUSED_ACT(e);
            for (int h = 0; h < 2 && p + h < np; h++) {
                float *yp = y + (q + p + h) * out_channels + cb + W0;
                v8 half = h ? __builtin_shufflevector(e, e, 8, 9, 10, 11, 12, 13, 14, 15) : __builtin_shufflevector(e, e, 0, 1, 2, 3, 4, 5, 6, 7);
                if (rest >= 8) *(v8 *)yp = half;
                else for (long l = 0; l < rest; l++) yp[l] = half[l];
            }
        }
    }
}

// Positions q ..< q + NP (a constant where the block is whole) of output channels in groups of 32:
// 16 + 16, or at the end 16 + 8, 16 or 8.
#define DIRECT_BLOCK(NP) do {                                                                      \
        for (long cb = 0; cb < out_channels; cb += 32) {                                           \
            long r = out_channels - cb;                                                            \
            if (r > 24) direct_group(at, taps, depth, w, ldw, cb, out_channels, SW, bias, y, q, NP, 16, 16, K1, first, K2, second, G, ep); \
            else if (r > 16) direct_group(at, taps, depth, w, ldw, cb, out_channels, SW, bias, y, q, NP, 16, 8, K1, first, K2, second, G, ep); \
            else if (r > 8) direct_group(at, taps, depth, w, ldw, cb, out_channels, SW, bias, y, q, NP, 16, 0, K1, first, K2, second, G, ep); \
            else direct_group(at, taps, depth, w, ldw, cb, out_channels, SW, bias, y, q, NP, 0, 8, K1, first, K2, second, G, ep); \
        }                                                                                          \
    } while (0)

// Every output row oy, its positions DIRECT_POSITIONS at a time (a last block of fewer computes
// them all from its row's padding, storing its own).
static inline __attribute__((always_inline)) void direct_conv(const float *xp, long wp, const long *taps, long depth,
                                                            const float *w, long ldw, long out_channels, long sh, const long SW,
                                                            long oh, long ow, const float *bias, float *y, const int K1,
                                                            float first, const int K2, float second, const int G,
                                                            const earshot_epilogue *ep) {
    for (long oy = 0; oy < oh; oy++)
        for (long ox = 0; ox < ow; ox += DIRECT_POSITIONS) {
            const float *at = xp + oy * sh * wp + ox * SW;
            long q = oy * ow + ox;
            if (ow - ox >= DIRECT_POSITIONS) DIRECT_BLOCK(DIRECT_POSITIONS);
            else DIRECT_BLOCK((int)(ow - ox));
        }
}

CLONES
void earshot_conv_direct(const float *x, long channels, long h, long w, const float *filters, long ldw, long out_channels,
                         long kh, long kw, long sh, long sw, long dh, long dw, long ph, long pw, long oh, long ow,
                         const float *bias, const earshot_epilogue *epilogue, float *y, float *scratch) {
    long hp = earshot_conv_direct_rows(kh, sh, dh, oh), wp = earshot_conv_direct_columns(kw, sw, dw, ow);
    for (long c = 0; c < channels; c++)
        for (long r = 0; r < hp; r++) {
            float *row = scratch + (c * hp + r) * wp;
            long iy = r - ph;
            for (long k = 0; k < wp; k++) {
                long ix = k - pw;
                row[k] = iy >= 0 && iy < h && ix >= 0 && ix < w ? x[(c * h + iy) * w + ix] : 0.0f;
            }
        }
    long taps[EARSHOT_DIRECT_DEPTH];
    long depth = 0;
    for (long c = 0; c < channels; c++)
        for (long i = 0; i < kh; i++)
            for (long j = 0; j < kw && depth < EARSHOT_DIRECT_DEPTH; j++) taps[depth++] = (c * hp + i * dh) * wp + j * dw;
    // A stride of 1 along the rows compiled apart: the positions' values then at constant offsets.
#define DIRECT_CONV(K1, K2, G) do {                                                                \
        if (sw == 1) direct_conv(scratch, wp, taps, depth, filters, ldw, out_channels, sh, 1, oh, ow, bias, y, K1, listed_[0], K2, listed_[1], G, epilogue); \
        else direct_conv(scratch, wp, taps, depth, filters, ldw, out_channels, sh, sw, oh, ow, bias, y, K1, listed_[0], K2, listed_[1], G, epilogue); \
    } while (0)
    WITH_LISTED_OPS(epilogue, DIRECT_CONV);
#undef DIRECT_CONV
}

long earshot_conv_direct_rows(long kh, long sh, long dh, long oh) { return (oh - 1) * sh + (kh - 1) * dh + 1; }
// A row's blocks of DIRECT_POSITIONS outputs, the last one whole, read inside it.
long earshot_conv_direct_columns(long kw, long sw, long dw, long ow) {
    return ((ow + DIRECT_POSITIONS - 1) / DIRECT_POSITIONS * DIRECT_POSITIONS - 1) * sw + (kw - 1) * dw + 1;
}

// Pooling of channels-last values: output position k takes, channel by channel, the input
// positions members[starts[k]..<starts[k + 1]], as earshot_pool does plane by plane.
CLONES
void earshot_pool_last(int max, const float *x, long channels, const int *starts, const int *members, const float *divisors,
                       long outputs, float *y) {
    for (long k = 0; k < outputs; k++) {
        int from = starts[k], to = starts[k + 1];
        float *o = y + k * channels;
        if (to <= from) {
            for (long c = 0; c < channels; c++) o[c] = max ? -3.40282347e+38f : 0.0f;
            continue;
        }
        const float *first = x + (long)members[from] * channels;
        if (max) { SAFE for (long c = 0; c < channels; c++) o[c] = first[c]; }
        else { SAFE for (long c = 0; c < channels; c++) o[c] = 0.0f + first[c]; }
        for (int m = from + 1; m < to; m++) {
            const float *e = x + (long)members[m] * channels;
            if (max) { SAFE for (long c = 0; c < channels; c++) o[c] = e[c] > o[c] ? e[c] : o[c]; }
            else { SAFE for (long c = 0; c < channels; c++) o[c] = o[c] + e[c]; }
        }
        if (!max) {
            float d = divisors[k];
            SAFE for (long c = 0; c < channels; c++) o[c] = d > 0 ? o[c] / d : 0.0f;
        }
    }
}
