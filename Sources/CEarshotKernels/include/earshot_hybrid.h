#pragma once

// Kernels of TFLite's hybrid operators (int8 weights, float activations).

// A block of n floats quantized as TFLite's hybrid kernels quantize their input, with the values
// `HybridQuantize.quantize` gives, bit for bit: symmetric (asymmetric 0): x * (127 / max |x|)
// rounded half away from zero into -127...127, the scale max |x| / 127 (1 for a block of zeros);
// asymmetric: TFLite's nudged zero point over [min(x, 0), max(x, 0)] (the range a float
// difference, the scale and zero point from it in double) into -128...127. q gets the integers
// less the zero point, as floats (NaN gives 0); the scale is returned. `path`: 0 plain C, 1
// AVX-512 (where the CPU has it; else plain C), negative the best the CPU has. A block holding a
// NaN runs in plain C on every path (its first value decides what the scan takes).
float earshot_hybrid_quantize(const float *x, long n, int asymmetric, int path, float *q);
// How many paths this CPU has (1: plain C; 2: AVX-512 too).
int earshot_hybrid_paths(void);

// The integer sums of a hybrid product (a Conv or Gemm of int8 weights on a hybrid input's
// integers), TFLite's int32 sums (wrapping alike), each converted to float: for each of
// `positions` fields of k taps and each of `outputs` outputs o,
// y[o * o_stride + p * p_stride] = (float)(the sum over i < k of w[o][i] * x[f(p, i)]), x whole
// numbers held as floats (as int16: clamped, NaN as 0), f(p, i) = fields[p * k + i] (negative: a
// tap of 0) or, where fields is NULL, p * k + i. w: the weights as earshot_hybrid_pack packs them;
// scratch: room for earshot_hybrid_scratch_count(positions, k) int16 values. `path`: 0 plain C,
// 1 AVX-512, 2 AVX-512 VNNI (a path the CPU lacks gives its best), negative the best it has.
void earshot_hybrid_sums(const float *x, const int *fields, long positions, long k, const short *w, long outputs, long o_stride,
                         long p_stride, int path, short *scratch, float *y);
// [outputs][k] weights (whole numbers as floats, as int16) packed for earshot_hybrid_sums: pairs of
// taps, blocks of 16 outputs; earshot_hybrid_packed_count(outputs, k) int16 values.
void earshot_hybrid_pack(const float *w, long outputs, long k, short *packed);
long earshot_hybrid_packed_count(long outputs, long k);
long earshot_hybrid_scratch_count(long positions, long k);
// How many paths of earshot_hybrid_sums this CPU has (1: plain C; 2: AVX-512; 3: VNNI too).
int earshot_hybrid_sum_paths(void);
