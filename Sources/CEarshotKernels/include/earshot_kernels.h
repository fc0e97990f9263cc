// Small dense kernels for the model runtime. Each is compiled for AVX-512, AVX2+FMA and a
// baseline, and the loader picks the best the CPU has at run time (target_clones), so one
// binary runs everywhere and takes the fast path where there is one.
#ifndef EARSHOT_KERNELS_H
#define EARSHOT_KERNELS_H

// sum_i a[i] * b[i]
float earshot_dot(const float *a, const float *b, long n);

// y[r] = (bias ? bias[r] : 0) + sum_c w[r * cols + c] * x[c]        w: [rows][cols]
void earshot_gemv(const float *w, long rows, long cols, const float *x, const float *bias, float *y);

// y[r * ldy + t] = (bias ? bias[r] : 0) + sum_i w[r * k + i] * x[t * k + i]
// w: [rows][k], x: [n][k] (one row per output column), y: [rows][ldy]
void earshot_gemm_nt(const float *w, long rows, long k, const float *x, long n, const float *bias, float *y, long ldy);

#endif

#ifndef EARSHOT_KERNELS_POINTWISE
#define EARSHOT_KERNELS_POINTWISE
// One LSTM cell update from pre-activation gates [4][hidden] in PyTorch order i, f, g, o:
// c = sigmoid(f) * c + sigmoid(i) * tanh(g); h = sigmoid(o) * tanh(c).
void earshot_lstm_cell(const float *gates, long hidden, float *h, float *c);

// x = max(x, 0)
void earshot_relu(float *x, long n);

// x = 1 / (1 + exp(-x)), and x = tanh(x): to about 2 ulp of float32
void earshot_sigmoid(float *x, long n);
void earshot_tanh(float *x, long n);

// Receptive fields of a 1-D convolution: cols[t][c * kernel + k] = x[c][t * stride - padding + k * dilation]
// (zero outside 0 ..< time). x: [channels][time], cols: [outTime][channels * kernel].
void earshot_im2col(const float *x, long channels, long time, long kernel, long stride, long padding,
                    long dilation, long outTime, float *cols);
#endif
