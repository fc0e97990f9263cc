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
