// Products in bf16 with fp32 sums (`--precision bf16`): the weights rounded to bf16 once, when
// they are packed; each product's activations rounded to bf16 as it reads them; every sum in
// fp32. Three paths, chosen once per process by CPUID:
//   2  AMX tiles (tdpbf16ps), where the CPU has AMX-TILE and -BF16 and the kernel grants the
//      process the tile state (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA));
//   1  AVX-512 BF16 (vdpbf16ps), 32 multiply-adds an instruction;
//   0  portable: the same bf16 operands through fp32 multiply-adds (a product of two bf16 values
//      is exact in fp32), in vdpbf16ps's order, so it gives path 1's values.
// Paths 0 and 1 sum each output in blocks of 128 terms as the fp32 product does; AMX sums in its
// own order. Every path gives each output what it gives that output alone (batches equal single
// streams); paths differ from one another only by the order of the sums.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "earshot_kernels.h"
#include "clones.h"
#include "amx.h"

// Round to nearest even; NaN stays a (quiet) NaN; a subnormal (exponent bits 0) is read as a
// zero of its sign, as vdpbf16ps and the tiles read their inputs, so that every path multiplies
// the same values.
static inline uint16_t to_bf16(uint32_t u) {
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

unsigned short earshot_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return to_bf16(u);
}

// Values a row of the packed matrix and of the rounded activations holds: k rounded up to a
// multiple of 32 (one tile's depth), zeros past k.
static inline long padded_depth(long k) { return (k + 31) / 32 * 32; }

long earshot_bf16_packed_count(long rows, long k) { return (rows + 15) / 16 * 16 * padded_depth(k); }

// Panels of 16 rows; in panel p, pair q (terms 2q and 2q + 1) is 32 values: lane l's two terms
// side by side, packed[((p * pairs + q) * 16 + l) * 2 + e] = w[16 p + l][2 q + e] (zero past the
// rows or k). This is vdpbf16ps's operand and an AMX B tile's row (16 pairs of a panel are one
// tile, 64 bytes a row).
void earshot_bf16_pack(const float *w, long rows, long k, unsigned short *packed) {
    long panels = (rows + 15) / 16, pairs = padded_depth(k) / 2;
    for (long p = 0; p < panels; p++)
        for (long q = 0; q < pairs; q++)
            for (long l = 0; l < 16; l++)
                for (long e = 0; e < 2; e++) {
                    long r = p * 16 + l, i = 2 * q + e;
                    packed[((p * pairs + q) * 16 + l) * 2 + e] = r < rows && i < k ? earshot_bf16(w[r * k + i]) : 0;
                }
}

// n columns of x (ldx apart, k values each) rounded to bf16, rows of `depth` values (zeros past
// k), then `extra` rows of zeros.
// to_bf16 without branches, so that a loop of it vectorizes: the same values.
static inline __attribute__((always_inline)) uint16_t round_bits(uint32_t u) {
    uint16_t nan = (uint16_t)((u >> 16) | 0x0040u), zero = (uint16_t)((u >> 16) & 0x8000u);
    uint16_t rounded = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    return (u & 0x7f800000u) == 0 ? zero : ((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

CLONES
static void round_columns(const float *x, long ldx, long n, long k, long depth, long extra, uint16_t *out) {
    if (ldx == k && depth == k) {
        // Columns side by side and rows as long: one run of n k values.
        const uint32_t *from = (const uint32_t *)x;
        for (long i = 0; i < n * k; i++) out[i] = round_bits(from[i]);
        memset(out + n * depth, 0, (size_t)(extra * depth) * sizeof(uint16_t));
        return;
    }
    for (long t = 0; t < n; t++) {
        const uint32_t *from = (const uint32_t *)(x + t * ldx);
        uint16_t *to = out + t * depth;
        for (long i = 0; i < k; i++) to[i] = round_bits(from[i]);
        for (long i = k; i < depth; i++) to[i] = 0;
    }
    memset(out + n * depth, 0, (size_t)(extra * depth) * sizeof(uint16_t));
}

// The rounded activations live in a buffer per thread, grown as needed, freed when the thread ends.
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static __thread uint16_t *scratch_values;
static __thread long scratch_capacity;

static void make_scratch_key(void) { pthread_key_create(&scratch_key, free); }

static uint16_t *scratch(long count) {
    if (count <= scratch_capacity) return scratch_values;
    pthread_once(&scratch_once, make_scratch_key);
    long capacity = count + count / 2 + 64;
    uint16_t *grown = aligned_alloc(64, (size_t)((capacity * 2 + 63) / 64 * 64));
    if (!grown) return 0;
    free(scratch_values);
    scratch_values = grown;
    scratch_capacity = capacity;
    pthread_setspecific(scratch_key, grown);
    return grown;
}

typedef float f16v __attribute__((vector_size(64), aligned(4)));
typedef unsigned int u16v __attribute__((vector_size(64), aligned(4)));
typedef __bf16 b32v __attribute__((vector_size(64), aligned(4)));

// Blocks of this many pairs (128 terms), each block's sum added to the output's total, as the
// fp32 product sums.
#define PAIR_BLOCK 64

// Stores a tile's totals (plus the bias) to y: column c of panel p at y + c * ldy + 16 p; a
// whole panel as one vector a column, a panel past the rows value by value.
#define STORE_TILE(total, NP, NC) do {                                                            \
        for (int p = 0; p < NP; p++) {                                                             \
            long r = r0 + p * 16;                                                                  \
            if (r + 16 <= rows) {                                                                  \
                f16v b = bias ? *(const f16v *)(bias + r) : (f16v){0};                             \
                for (int c = 0; c < NC; c++) *(f16v *)(y + c * ldy + r) = total[p][c] + b;         \
                continue;                                                                          \
            }                                                                                      \
            for (int c = 0; c < NC; c++) {                                                         \
                float *yc = y + c * ldy + r;                                                       \
                for (long l = 0; r + l < rows && l < 16; l++) yc[l] = total[p][c][l] + (bias ? bias[r + l] : 0.0f); \
            }                                                                                      \
        }                                                                                          \
    } while (0)

// Pairs q0 ..< q1 of a tile's outputs into acc[p][c] (in PAIR_TILE).
#define PAIRS(q0, q1, W_TYPE, LOAD_W, ...) do {                                                         \
        for (long q = (q0); q < (q1); q++) {                                                          \
            W_TYPE w[4];                                                                              \
            for (int p = 0; p < NP; p++) LOAD_W;                                                      \
            for (int c = 0; c < NC; c++) {                                                            \
                uint32_t pair;                                                                        \
                memcpy(&pair, xb + c * xdepth + 2 * q, 4);                                            \
                __VA_ARGS__                                                                           \
            }                                                                                         \
        }                                                                                             \
    } while (0)

// A tile of NP panels by NC columns: per block of PAIR_BLOCK pairs, acc from zero through
// LOAD_W (the panels' values of pair q into w[p]) and the step given last (pair q of column c into acc[p][c]),
// then added to the total; then the totals stored. Only the `used` pairs that hold terms are
// read (`pairs`, the layout's, may add zero pairs up to a tile's depth): adding zero changes no sum.
#define PAIR_TILE(W_TYPE, LOAD_W, ...) do {                                                             \
        f16v acc[4][6], total[4][6];                                                                  \
        if (used <= PAIR_BLOCK && r0 + NP * 16 <= rows) {                                             \
            /* One block and whole panels, apart: the same sums with no totals (as the fp32 */        \
            /* products' common tile). */                                                             \
            for (int p = 0; p < NP; p++)                                                              \
                for (int c = 0; c < NC; c++) acc[p][c] = (f16v){0};                                   \
            PAIRS(0, used, W_TYPE, LOAD_W, __VA_ARGS__);                                              \
            for (int p = 0; p < NP; p++) {                                                            \
                f16v b = bias ? *(const f16v *)(bias + r0 + p * 16) : (f16v){0};                      \
                for (int c = 0; c < NC; c++) *(f16v *)(y + c * ldy + r0 + p * 16) = acc[p][c] + b;    \
            }                                                                                         \
            break;                                                                                    \
        }                                                                                             \
        for (int p = 0; p < NP; p++)                                                                  \
            for (int c = 0; c < NC; c++) total[p][c] = (f16v){0};                                     \
        for (long q0 = 0; q0 < used; q0 += PAIR_BLOCK) {                                              \
            long q1 = used - q0 > PAIR_BLOCK ? q0 + PAIR_BLOCK : used;                                \
            for (int p = 0; p < NP; p++)                                                              \
                for (int c = 0; c < NC; c++) acc[p][c] = (f16v){0};                                   \
            PAIRS(q0, q1, W_TYPE, LOAD_W, __VA_ARGS__);                                               \
            for (int p = 0; p < NP; p++)                                                              \
                for (int c = 0; c < NC; c++) total[p][c] = q0 == 0 ? acc[p][c] : total[p][c] + acc[p][c]; \
        }                                                                                             \
        STORE_TILE(total, NP, NC);                                                                    \
    } while (0)

// Path 0: per pair, acc + w_odd * x_odd, then + w_even * x_even (vdpbf16ps's order); each
// product of bf16 values exact in fp32, so contraction into a multiply-add changes nothing.
// w[p] holds the pair's 16 lanes as 32-bit words: the odd term in the high half, the even in the low.
static inline __attribute__((always_inline)) void portable_tile(const uint16_t *wp, long pairs, long used, const uint16_t *xb, long xdepth,
                                                              long r0, long rows, const float *bias, float *y, long ldy,
                                                              const int NP, const int NC) {
    PAIR_TILE(u16v, w[p] = *(const u16v *)(wp + (p * pairs + q) * 32), {
        uint32_t ue = pair << 16, uo = pair & 0xffff0000u;
        float xe, xo;
        memcpy(&xe, &ue, 4);
        memcpy(&xo, &uo, 4);
        for (int p = 0; p < NP; p++) {
            acc[p][c] = acc[p][c] + (f16v)(w[p] & 0xffff0000u) * xo;
            acc[p][c] = acc[p][c] + (f16v)(w[p] << 16) * xe;
        }
    });
}

#define SWITCH_TILES(TILE, NP, nc) do {                                                                  \
        switch (nc) {                                                                                     \
        case 1: TILE(wp, pairs, used, xt, xdepth, r0, rows, bias, yt, ldy, NP, 1); break;                        \
        case 2: TILE(wp, pairs, used, xt, xdepth, r0, rows, bias, yt, ldy, NP, 2); break;                        \
        case 3: TILE(wp, pairs, used, xt, xdepth, r0, rows, bias, yt, ldy, NP, 3); break;                        \
        case 4: TILE(wp, pairs, used, xt, xdepth, r0, rows, bias, yt, ldy, NP, 4); break;                        \
        case 5: TILE(wp, pairs, used, xt, xdepth, r0, rows, bias, yt, ldy, NP, 5); break;                        \
        default: TILE(wp, pairs, used, xt, xdepth, r0, rows, bias, yt, ldy, NP, 6); break;                       \
        }                                                                                                 \
    } while (0)

// Tiles of up to four panels by six columns over the whole product.
#define TILED(TILE) do {                                                                                 \
        long panels = (rows + 15) / 16, pairs = depth / 2, used = (k + 1) / 2;                            \
        for (long p0 = 0; p0 < panels; p0 += 4) {                                                         \
            const uint16_t *wp = packed + p0 * pairs * 32;                                                \
            long r0 = p0 * 16, np = panels - p0 < 4 ? panels - p0 : 4;                                    \
            for (long t = 0; t < n; t += 6) {                                                             \
                long nc = n - t < 6 ? n - t : 6;                                                          \
                const uint16_t *xt = xb + t * xdepth;                                                     \
                float *yt = y + t * ldy;                                                                  \
                switch (np) {                                                                             \
                case 1: SWITCH_TILES(TILE, 1, nc); break;                                                 \
                case 2: SWITCH_TILES(TILE, 2, nc); break;                                                 \
                case 3: SWITCH_TILES(TILE, 3, nc); break;                                                 \
                default: SWITCH_TILES(TILE, 4, nc); break;                                                \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
    } while (0)

CLONES
static void gemm_portable(const uint16_t *packed, long rows, long k, long depth, const uint16_t *xb, long xdepth, long n,
                          const float *bias, float *y, long ldy) {
    TILED(portable_tile);
}

// Path 1: vdpbf16ps, the pair of activations broadcast to every lane.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static inline __attribute__((always_inline)) void
avx512_tile(const uint16_t *wp, long pairs, long used, const uint16_t *xb, long xdepth, long r0, long rows, const float *bias, float *y, long ldy,
            const int NP, const int NC) {
    PAIR_TILE(b32v, w[p] = *(const b32v *)(wp + (p * pairs + q) * 32), {
        b32v xv = (b32v)((u16v){0} + pair);
        for (int p = 0; p < NP; p++) acc[p][c] = __builtin_ia32_dpbf16ps_512(acc[p][c], w[p], xv);
    });
}

typedef float f8v __attribute__((vector_size(32), aligned(4)));
typedef unsigned int u8v __attribute__((vector_size(32), aligned(4)));
typedef __bf16 b16v __attribute__((vector_size(32), aligned(4)));

// Path 1's tile of a last panel of at most 8 rows (24 or 72 outputs): vdpbf16ps on the panel's
// first 8 lanes, each lane's sums those of PAIR_TILE's 16 lanes, in half the vector work.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static inline __attribute__((always_inline)) void
avx512_half_tile(const uint16_t *wp, long used, const uint16_t *xb, long xdepth, long r0, long rows, const float *bias, float *y,
                 long ldy, const int NC) {
    f8v acc[8], total[8];
    for (int c = 0; c < NC; c++) total[c] = (f8v){0};
    for (long q0 = 0; q0 < used; q0 += PAIR_BLOCK) {
        long q1 = used - q0 > PAIR_BLOCK ? q0 + PAIR_BLOCK : used;
        for (int c = 0; c < NC; c++) acc[c] = (f8v){0};
        for (long q = q0; q < q1; q++) {
            b16v w = *(const b16v *)(wp + q * 32);
            for (int c = 0; c < NC; c++) {
                uint32_t pair;
                memcpy(&pair, xb + c * xdepth + 2 * q, 4);
                acc[c] = __builtin_ia32_dpbf16ps_256(acc[c], w, (b16v)((u8v){0} + pair));
            }
        }
        for (int c = 0; c < NC; c++) total[c] = q0 == 0 ? acc[c] : total[c] + acc[c];
    }
    long valid = rows - r0;
    f8v b = {0};
    if (bias) for (long l = 0; l < valid; l++) b[l] = bias[r0 + l];
    for (int c = 0; c < NC; c++) {
        float *yc = y + c * ldy + r0;
        f8v out = total[c] + b;
        if (valid == 8) *(f8v *)yc = out;
        else for (long l = 0; l < valid; l++) yc[l] = out[l];
    }
}

// The last panel's tiles, every column, 8 at a time. A function of its own, as the fp32
// product's half panel is (inlined beside the whole panels' tiles it can slow them).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) __attribute__((noinline)) static void
avx512_half_panel(const uint16_t *wp, long used, const uint16_t *xb, long xdepth, long n, long r0, long rows, const float *bias,
                  float *y, long ldy) {
    for (long t = 0; t < n; t += 8) {
        const uint16_t *xt = xb + t * xdepth;
        float *yt = y + t * ldy;
        switch (n - t < 8 ? n - t : 8) {
        case 1: avx512_half_tile(wp, used, xt, xdepth, r0, rows, bias, yt, ldy, 1); break;
        case 2: avx512_half_tile(wp, used, xt, xdepth, r0, rows, bias, yt, ldy, 2); break;
        case 3: avx512_half_tile(wp, used, xt, xdepth, r0, rows, bias, yt, ldy, 3); break;
        case 4: avx512_half_tile(wp, used, xt, xdepth, r0, rows, bias, yt, ldy, 4); break;
        case 5: avx512_half_tile(wp, used, xt, xdepth, r0, rows, bias, yt, ldy, 5); break;
        case 6: avx512_half_tile(wp, used, xt, xdepth, r0, rows, bias, yt, ldy, 6); break;
        case 7: avx512_half_tile(wp, used, xt, xdepth, r0, rows, bias, yt, ldy, 7); break;
        default: avx512_half_tile(wp, used, xt, xdepth, r0, rows, bias, yt, ldy, 8); break;
        }
    }
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static void gemm_avx512(const uint16_t *packed, long rows, long k, long depth,
                                                                                const uint16_t *xb, long xdepth, long n,
                                                                                const float *bias, float *y, long ldy) {
    if (rows % 16 != 0 && rows % 16 <= 8) {
        // The whole panels, then the last one's 8 lanes.
        long whole = rows / 16 * 16;
        if (whole > 0) gemm_avx512(packed, whole, k, depth, xb, xdepth, n, bias, y, ldy);
        avx512_half_panel(packed + whole / 16 * (depth / 2) * 32, (k + 1) / 2, xb, xdepth, n, whole, rows, bias, y, ldy);
        return;
    }
    TILED(avx512_tile);
}

// Path 2: AMX. Tiles 0-3 accumulate C [16 columns][16 rows of a panel] for two blocks of 16
// columns (A tiles 4, 5: the rounded activations, 32 terms a row) by two panels (B tiles 6, 7: 16
// pairs of a panel, 64 bytes a row, as packed). The activations come with zero rows up to a
// multiple of 16 columns.
__attribute__((target("amx-tile,amx-bf16,avx512f"))) static void gemm_amx(const uint16_t *packed, long rows, long depth,
                                                                        const uint16_t *xb, long n, const float *bias, float *y,
                                                                        long ldy) {
    amx_configure_tiles();
    float c[4][16][16] __attribute__((aligned(64)));
    long panels = (rows + 15) / 16, pairs = depth / 2, blocks = (n + 15) / 16, stride = depth * 2;
    for (long b0 = 0; b0 < blocks; b0 += 2) {
        int two_blocks = b0 + 1 < blocks;
        const uint16_t *a0 = xb + b0 * 16 * depth, *a1 = a0 + 16 * depth;
        for (long p0 = 0; p0 < panels; p0 += 2) {
            int two_panels = p0 + 1 < panels;
            const uint16_t *w0 = packed + p0 * pairs * 32, *w1 = w0 + pairs * 32;
            __builtin_ia32_tilezero(0);
            __builtin_ia32_tilezero(1);
            __builtin_ia32_tilezero(2);
            __builtin_ia32_tilezero(3);
            for (long q = 0; q < pairs; q += 16) {
                __builtin_ia32_tileloadd64(4, a0 + 2 * q, stride);
                __builtin_ia32_tileloadd64(6, w0 + q * 32, 64);
                __builtin_ia32_tdpbf16ps(0, 4, 6);
                if (two_panels) {
                    __builtin_ia32_tileloadd64(7, w1 + q * 32, 64);
                    __builtin_ia32_tdpbf16ps(1, 4, 7);
                }
                if (two_blocks) {
                    __builtin_ia32_tileloadd64(5, a1 + 2 * q, stride);
                    __builtin_ia32_tdpbf16ps(2, 5, 6);
                    if (two_panels) __builtin_ia32_tdpbf16ps(3, 5, 7);
                }
            }
            // A whole tile (16 columns by 16 rows) is stored straight into y, then its bias added; a
            // tile at an edge goes through c.
#define STORE_AMX_TILE(T, BP, PP) do {                                                                          \
        long r = (p0 + PP) * 16, t0 = (b0 + BP) * 16;                                                               \
        if (r < rows && t0 < n) {                                                                                   \
            float *yt = y + t0 * ldy + r;                                                                           \
            if (r + 16 <= rows && t0 + 16 <= n) {                                                                   \
                __builtin_ia32_tilestored64(T, yt, ldy * 4);                                                        \
                if (bias)                                                                                           \
                    for (long m = 0; m < 16; m++) *(f16v *)(yt + m * ldy) = *(f16v *)(yt + m * ldy) + *(const f16v *)(bias + r); \
            } else {                                                                                                \
                __builtin_ia32_tilestored64(T, c[T], 64);                                                           \
                for (long m = 0; m < 16 && t0 + m < n; m++)                                                         \
                    for (long l = 0; r + l < rows && l < 16; l++) yt[m * ldy + l] = c[T][m][l] + (bias ? bias[r + l] : 0.0f); \
            }                                                                                                       \
        }                                                                                                           \
    } while (0)
            STORE_AMX_TILE(0, 0, 0);
            STORE_AMX_TILE(1, 0, 1);
            STORE_AMX_TILE(2, 1, 0);
            STORE_AMX_TILE(3, 1, 1);
#undef STORE_AMX_TILE
        }
    }
    __builtin_ia32_tilerelease();
}

static int bf16_best = -1;
static int bf16_chosen = -1;

static int best_bf16_path(void) {
    int best = __atomic_load_n(&bf16_best, __ATOMIC_RELAXED);
    if (best >= 0) return best;
    __builtin_cpu_init();
    best = 0;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512bf16")) {
        best = 1;
        if (earshot_amx_state() == EARSHOT_AMX_READY) best = 2;
    }
    __atomic_store_n(&bf16_best, best, __ATOMIC_RELAXED);
    return best;
}

int earshot_bf16_paths(void) { return best_bf16_path() + 1; }

int earshot_bf16_path(int path) {
    int best = best_bf16_path();
    __atomic_store_n(&bf16_chosen, path < 0 || path > best ? best : path, __ATOMIC_RELAXED);
    return __atomic_load_n(&bf16_chosen, __ATOMIC_RELAXED);
}

int earshot_bf16_path_chosen(void) {
    int path = __atomic_load_n(&bf16_chosen, __ATOMIC_RELAXED);
    return path < 0 ? earshot_bf16_path(-1) : path;
}

void earshot_gemm_bf16(const unsigned short *packed, long rows, long k, const float *x, long ldx, long n, const float *bias, float *y,
                       long ldy) {
    if (n <= 0 || rows <= 0) return;
    int path = earshot_bf16_path_chosen();
    long depth = padded_depth(k), extra = path == 2 ? (n + 15) / 16 * 16 - n : 0;
    // The tiles read rows of a tile's depth; the vector paths only the pairs that hold terms.
    long xdepth = path == 2 ? depth : (k + 1) / 2 * 2;
    uint16_t *xb = scratch((n + extra) * depth);
    if (!xb) {
        // No memory for the rounded activations: a column at a time, in a buffer on the stack
        // (AMX: 16 rows), with the values each column gets in a batch; a product too deep for it
        // gives NaN (never values that look right).
        enum { STACK = 16 * 1024 };
        uint16_t one[STACK] __attribute__((aligned(64)));
        long rowsNeeded = path == 2 ? 16 : 1;
        if (rowsNeeded * depth > STACK) {
            for (long t = 0; t < n; t++)
                for (long r = 0; r < rows; r++) y[t * ldy + r] = __builtin_nanf("");
            return;
        }
        for (long t = 0; t < n; t++) {
            round_columns(x + t * ldx, ldx, 1, k, depth, rowsNeeded - 1, one);
            if (path == 2) gemm_amx(packed, rows, depth, one, 1, bias, y + t * ldy, ldy);
            else if (path == 1) gemm_avx512(packed, rows, k, depth, one, depth, 1, bias, y + t * ldy, ldy);
            else gemm_portable(packed, rows, k, depth, one, depth, 1, bias, y + t * ldy, ldy);
        }
        return;
    }
    round_columns(x, ldx, n, k, xdepth, extra, xb);
    if (path == 2) gemm_amx(packed, rows, depth, xb, n, bias, y, ldy);
    else if (path == 1) gemm_avx512(packed, rows, k, depth, xb, xdepth, n, bias, y, ldy);
    else gemm_portable(packed, rows, k, depth, xb, xdepth, n, bias, y, ldy);
}

// Values a row of earshot_bf16_pack_rows holds: rows rounded up to 16, k to 32.
long earshot_bf16_rows_count(long rows, long k) { return (rows + 15) / 16 * 16 * padded_depth(k); }

// w [rows][k] rounded to bf16, row by row (k padded to 32 with zeros), zero rows up to 16: the
// rounded activations' layout, an AMX A tile's rows.
void earshot_bf16_pack_rows(const float *w, long rows, long k, unsigned short *packed) {
    long depth = padded_depth(k);
    round_columns(w, k, rows, k, depth, (rows + 15) / 16 * 16 - rows, packed);
}

// The receptive fields of positions p0 ..< p0 + 16 * panels, each block of 16 found as
// earshot_gemm_indirect finds it (base + blocks[p * k + i], or edge block -blocks[p * k + i] - 1),
// rounded to bf16 and packed as earshot_bf16_pack packs a matrix [positions][k]: pair q of panel
// p is 16 lanes' terms 2q and 2q + 1 side by side (zeros past k).
CLONES
static void pack_fields(const int *blocks, const float *base, const float *edges, long k, long depth, long first, long panels,
                        uint16_t *out) {
    long pairs = depth / 2;
    for (long p = 0; p < panels; p++) {
        const int *bp = blocks + (first + p) * k;
        uint16_t *to = out + p * pairs * 32;
        for (long q = 0; q < pairs; q++, to += 32) {
            long i = 2 * q;
            const float *even = i < k ? (bp[i] >= 0 ? base + bp[i] : edges + (long)(-bp[i] - 1) * 16) : 0;
            const float *odd = i + 1 < k ? (bp[i + 1] >= 0 ? base + bp[i + 1] : edges + (long)(-bp[i + 1] - 1) * 16) : 0;
            uint32_t e[16], o[16];
            if (even) memcpy(e, even, 64); else memset(e, 0, 64);
            if (odd) memcpy(o, odd, 64); else memset(o, 0, 64);
            for (int l = 0; l < 16; l++) {
                to[2 * l] = round_bits(e[l]);
                to[2 * l + 1] = round_bits(o[l]);
            }
        }
    }
}

// Positions packed and multiplied this many panels at a time: the packed fields stay in cache.
#define FIELD_PANELS 4

void earshot_conv_bf16(const int *blocks, const float *base, const float *edges, long positions, long k,
                       const unsigned short *rows_packed, long outs, const float *bias, float *y, long ldy) {
    if (positions <= 0 || outs <= 0) return;
    int path = earshot_bf16_path_chosen();
    long depth = padded_depth(k), panels = (positions + 15) / 16;
    uint16_t *fields = scratch(FIELD_PANELS * 16 * depth);
    if (!fields) {
        // No memory for a few panels of fields: NaN, never values that look right.
        for (long o = 0; o < outs; o++)
            for (long p = 0; p < positions; p++) y[o * ldy + p] = __builtin_nanf("");
        return;
    }
    for (long p0 = 0; p0 < panels; p0 += FIELD_PANELS) {
        long np = panels - p0 < FIELD_PANELS ? panels - p0 : FIELD_PANELS;
        long r0 = p0 * 16, rows = positions - r0 < np * 16 ? positions - r0 : np * 16;
        pack_fields(blocks, base, edges, k, depth, p0, np, fields);
        // The fields are the packed matrix (rows: positions), the filters the columns: column o of
        // the product is output channel o's row of y.
        if (path == 2) gemm_amx(fields, rows, depth, rows_packed, outs, 0, y + r0, ldy);
        else if (path == 1) gemm_avx512(fields, rows, k, depth, rows_packed, depth, outs, 0, y + r0, ldy);
        else gemm_portable(fields, rows, k, depth, rows_packed, depth, outs, 0, y + r0, ldy);
    }
    if (bias)
        for (long o = 0; o < outs; o++)
            for (long p = 0; p < positions; p++) y[o * ldy + p] += bias[o];
}
