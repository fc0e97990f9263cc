// The dense products alone: earshot_gemm_packed (fp32) and earshot_gemm_bf16 on the shapes of
// openWakeWord's embedding (Winograd's six products per layer: output channels rounded to 16 x
// input channels x tiles) and a few deeper ones; the best of 5 runs, multiply-adds per second.
// Built and run by tools/bench_products.sh.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "earshot_kernels.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    static const long shapes[][3] = {{32, 24, 592}, {48, 48, 136}, {80, 72, 60}, {96, 96, 12}, {24, 24, 592},
                                     {24, 72, 592}, {64, 256, 200}, {32, 288, 200}};
    int bf16 = earshot_bf16_paths() > 1;
    printf("rows x k x columns: fp32 GMAC/s%s (best of 5)\n", bf16 ? ", bf16 (AVX-512 BF16)" : "");
    for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        long m = shapes[s][0], k = shapes[s][1], n = shapes[s][2], ldy = (m + 15) / 16 * 16;
        float *w = malloc(sizeof(float) * m * k), *x = malloc(sizeof(float) * k * n), *y = malloc(sizeof(float) * ldy * n);
        float *packed = aligned_alloc(64, (sizeof(float) * earshot_packed_count(m, k) + 63) / 64 * 64);
        unsigned short *halves = aligned_alloc(64, (2 * earshot_bf16_packed_count(m, k) + 63) / 64 * 64);
        if (!w || !x || !y || !packed || !halves) return 1;
        for (long i = 0; i < m * k; i++) w[i] = (float)(i % 7) * 0.1f;
        for (long i = 0; i < k * n; i++) x[i] = (float)(i % 5) * 0.1f;
        earshot_pack(w, m, k, packed);
        earshot_bf16_pack(w, m, k, halves);
        double best[2] = {1e9, 1e9};
        int reps = (int)(2e8 / (double)(m * k * n)) + 1;
        for (int r = 0; r < 5; r++)
            for (int p = 0; p < 1 + bf16; p++) {
                double t0 = now();
                for (int i = 0; i < reps; i++) {
                    if (p == 0) earshot_gemm_packed(packed, m, k, x, k, n, 0, y, ldy);
                    else earshot_gemm_bf16(halves, m, k, x, k, n, 0, y, ldy);
                }
                double t = (now() - t0) / reps;
                if (t < best[p]) best[p] = t;
            }
        printf("%4ld x %4ld x %4ld: fp32 %5.1f", m, k, n, (double)(m * k * n) / best[0] / 1e9);
        if (bf16) printf(", bf16 %5.1f", (double)(m * k * n) / best[1] / 1e9);
        printf("\n");
        free(w), free(x), free(y), free(packed), free(halves);
    }
    return 0;
}
