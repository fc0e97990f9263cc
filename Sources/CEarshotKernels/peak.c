// The machine's peak multiply-add rates, each measured by a loop that keeps its operands in
// registers (no memory traffic): fp32 FMA on AVX-512 and on AVX2, int8 dot products on
// AVX-512 VNNI (vpdpbusd: 64 multiply-adds an instruction), bf16 pairs on AVX-512 BF16
// (vdpbf16ps: 32), and AMX tiles (tdpbf16ps, tdpbssd) where the CPU has them and the kernel
// grants the tile state. Each returns multiply-adds per second on the calling thread, or 0 when
// the CPU lacks the instructions; only the loops the CPU has are ever called.
#include <cpuid.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "earshot_kernels.h"
#include "amx.h"

static double seconds_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// Runs `body` (one call: `per_call` multiply-adds) until `seconds` have passed; the rate.
#define TIMED(per_call, seconds, body) do {                                                        \
        double start_ = seconds_now(), end_ = start_;                                              \
        long calls_ = 0;                                                                           \
        do {                                                                                       \
            for (int r_ = 0; r_ < 1000; r_++) { body; }                                            \
            calls_ += 1000;                                                                        \
            end_ = seconds_now();                                                                  \
        } while (end_ - start_ < (seconds));                                                       \
        return (double)calls_ * (double)(per_call) / (end_ - start_);                             \
    } while (0)

// Twelve independent chains, each pinned to a register between iterations (the empty asm), so
// that nothing is folded away and latency never limits the rate.
#define CHAINS(a, step) do {                                                                    \
        for (int j_ = 0; j_ < 12; j_++) { step; }                                                  \
        __asm__ volatile("" : "+v"(a[0]), "+v"(a[1]), "+v"(a[2]), "+v"(a[3]), "+v"(a[4]), "+v"(a[5]), \
                         "+v"(a[6]), "+v"(a[7]), "+v"(a[8]), "+v"(a[9]), "+v"(a[10]), "+v"(a[11])); \
    } while (0)

typedef float pf16 __attribute__((vector_size(64)));
typedef float pf8 __attribute__((vector_size(32)));
typedef int pi16 __attribute__((vector_size(64)));
typedef __bf16 pb32 __attribute__((vector_size(64)));

__attribute__((target("avx512f,fma"))) static double fp32_avx512(double seconds) {
    pf16 a[12], b = (pf16){0} + 0.999f, c = (pf16){0} + 1e-3f;
    for (int j = 0; j < 12; j++) a[j] = (pf16){0} + (float)j;
    TIMED(12 * 16, seconds, CHAINS(a, a[j_] = __builtin_elementwise_fma(a[j_], b, c)));
}

__attribute__((target("avx2,fma"))) static double fp32_avx2(double seconds) {
    pf8 a[12], b = (pf8){0} + 0.999f, c = (pf8){0} + 1e-3f;
    for (int j = 0; j < 12; j++) a[j] = (pf8){0} + (float)j;
    TIMED(12 * 8, seconds, CHAINS(a, a[j_] = __builtin_elementwise_fma(a[j_], b, c)));
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double int8_vnni(double seconds) {
    pi16 a[12], b = (pi16){0} + 0x01020304, c = (pi16){0} + 0x05060708;
    for (int j = 0; j < 12; j++) a[j] = (pi16){0} + j;
    TIMED(12 * 64, seconds, CHAINS(a, a[j_] = (pi16)__builtin_ia32_vpdpbusd512((pi16)a[j_], (pi16)b, (pi16)c)));
}

__attribute__((target("avx512f,avx512bw,avx512bf16"))) static double bf16_avx512(double seconds) {
    pf16 a[12];
    pb32 b, c;
    memset(&b, 0, sizeof b);
    memset(&c, 0, sizeof c);
    for (int j = 0; j < 12; j++) a[j] = (pf16){0} + (float)j;
    TIMED(12 * 32, seconds, CHAINS(a, a[j_] = __builtin_ia32_dpbf16ps_512(a[j_], b, c)));
}

// AMX: a 64-byte tile configuration (palette 1): tiles 0-7 of 16 rows of 64 bytes. A product
// C[16][16] += A[16][32 pairs] B[16 pairs][16] is 16 * 16 * 32 multiply-adds (bf16) or
// 16 * 16 * 64 (int8). Four accumulators (tiles 0-3, blocked 2 x 2 over A in tiles 4-5 and B in
// tiles 6-7), so that no product waits for the one before it on the same tile.

__attribute__((target("amx-tile,amx-bf16,amx-int8"))) static double amx_loop(int int8, double seconds) {
    TIMED(int8 ? 4 * 16 * 16 * 64 : 4 * 16 * 16 * 32, seconds, {
        if (int8) {
            __builtin_ia32_tdpbssd(0, 4, 6);
            __builtin_ia32_tdpbssd(1, 4, 7);
            __builtin_ia32_tdpbssd(2, 5, 6);
            __builtin_ia32_tdpbssd(3, 5, 7);
        } else {
            __builtin_ia32_tdpbf16ps(0, 4, 6);
            __builtin_ia32_tdpbf16ps(1, 4, 7);
            __builtin_ia32_tdpbf16ps(2, 5, 6);
            __builtin_ia32_tdpbf16ps(3, 5, 7);
        }
    });
}

__attribute__((target("amx-tile,amx-bf16,amx-int8"))) static double amx(int int8, double seconds) {
    static uint8_t zeros[16 * 64] __attribute__((aligned(64)));
    amx_configure_tiles();
    __builtin_ia32_tilezero(0);
    __builtin_ia32_tilezero(1);
    __builtin_ia32_tilezero(2);
    __builtin_ia32_tilezero(3);
    __builtin_ia32_tileloadd64(4, zeros, 64);
    __builtin_ia32_tileloadd64(5, zeros, 64);
    __builtin_ia32_tileloadd64(6, zeros, 64);
    __builtin_ia32_tileloadd64(7, zeros, 64);
    double rate = amx_loop(int8, seconds);
    __builtin_ia32_tilerelease();
    return rate;
}

int earshot_amx_state(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return EARSHOT_AMX_NO_CPU;
    // CPUID.(7,0):EDX bit 24 AMX-TILE, 22 AMX-BF16, 25 AMX-INT8.
    if (!(d & (1u << 24)) || !(d & (1u << 22)) || !(d & (1u << 25))) return EARSHOT_AMX_NO_CPU;
    // ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18): the kernel's grant.
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return EARSHOT_AMX_NO_PERMISSION;
    return EARSHOT_AMX_READY;
}

double earshot_peak(int path, double seconds) {
    switch (path) {
    case EARSHOT_PEAK_FP32_AVX512:
        return __builtin_cpu_supports("avx512f") ? fp32_avx512(seconds) : 0;
    case EARSHOT_PEAK_FP32_AVX2:
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? fp32_avx2(seconds) : 0;
    case EARSHOT_PEAK_INT8_VNNI:
        return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") ? int8_vnni(seconds) : 0;
    case EARSHOT_PEAK_BF16_AVX512:
        return __builtin_cpu_supports("avx512bf16") ? bf16_avx512(seconds) : 0;
    case EARSHOT_PEAK_AMX_BF16:
    case EARSHOT_PEAK_AMX_INT8:
        return earshot_amx_state() == EARSHOT_AMX_READY ? amx(path == EARSHOT_PEAK_AMX_INT8, seconds) : 0;
    default:
        return 0;
    }
}
