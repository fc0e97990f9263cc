// Small dense kernels for the model runtime. Each is compiled for AVX-512, AVX2+FMA and a
// baseline, and the loader picks the best the CPU has at run time (target_clones), so one
// binary runs everywhere and takes the fast path where there is one.
#ifndef EARSHOT_KERNELS_H
#define EARSHOT_KERNELS_H

// sum_i a[i] * b[i]
float earshot_dot(const float *a, const float *b, long n);

// Floats of w [rows][k] packed for earshot_gemm_packed (rows rounded up to 16).
long earshot_packed_count(long rows, long k);
// Packs w [rows][k] into `packed` (earshot_packed_count floats).
void earshot_pack(const float *w, long rows, long k, float *packed);

// y[t * ldy + r] = sum_i w[r][i] * x[t * ldx + i] (+ bias[r] when bias is not NULL) for r < rows,
// t < n; w packed by earshot_pack. Every output is summed in the same order (i = 0, 1, ...,
// k - 1, then the bias) whatever rows and n are, so a batch gives each of its members exactly
// what it gets alone.
void earshot_gemm_packed(const float *packed, long rows, long k, const float *x, long ldx, long n, const float *bias,
                         float *y, long ldy);

// What a product does to each output before storing it: adds column t's bias (when
// column_bias is not NULL), then applies each of the `count` ops in order: kinds[o] is one of
// earshot_unary's ops (alpha values[o]), or EARSHOT_EPILOGUE_BINARY + one of earshot_binary's
// with the constant second operand values[o]. Each gives what the op alone gives, bit for bit.
enum { EARSHOT_EPILOGUE_BINARY = 16 };
typedef struct {
    const float *column_bias;
    const int *kinds;
    const float *values;
    long count;
} earshot_epilogue;

// earshot_gemm_packed on a matrix whose packed blocks of 16 values (panel p, column i) are not
// copied into one array but read where they lie: base + blocks[p * k + i] when that is not
// negative, else block -blocks[p * k + i] - 1 of `edges`. The same sums in the same order, then
// the epilogue (may be NULL).
void earshot_gemm_indirect(const int *blocks, const float *base, const float *edges, long rows, long k, const float *x,
                           long ldx, long n, const float *bias, float *y, long ldy, const earshot_epilogue *epilogue);

// Depthwise convolution: x [channels][h][w], filters [channels][kh][kw], y [channels][oh][ow];
// y[c][oy][ox] = sum over i < kh, j < kw (in that order) of filters[c][i][j] *
// x[c][oy * sh - ph + i * dh][ox * sw - pw + j * dw] (zero outside the plane), then + bias[c]
// (when bias is not NULL). Each output is computed the same way whatever the other outputs are.
void earshot_depthwise(const float *x, long channels, long h, long w, const float *filters, long kh, long kw, long sh, long sw,
                       long dh, long dw, long ph, long pw, long oh, long ow, const float *bias, float *y);
// earshot_depthwise (the same bits) for filters that are all finite, with a stride of 1 or 2 along
// the rows: each plane's rows padded in `scratch` (h * earshot_depthwise_padded_width(...) floats)
// so that every output of a row goes in vectors.
long earshot_depthwise_padded_width(long w, long kw, long sw, long dw, long pw, long ow);
void earshot_depthwise_padded(const float *x, long channels, long h, long w, const float *filters, long kh, long kw, long sh,
                              long sw, long dh, long dw, long ph, long pw, long oh, long ow, const float *bias, float *y,
                              float *scratch);
// earshot_depthwise on channels-last values: x [h][w][channels], filters [kh][kw][channels], y
// [oh][ow][channels], each output summed as earshot_depthwise sums it (the same bits).
void earshot_depthwise_last(const float *x, long channels, long h, long w, const float *filters, long kh, long kw, long sh,
                            long sw, long dh, long dw, long ph, long pw, long oh, long ow, const float *bias, float *y);

// n little-endian 16-bit samples at `in` (any alignment) times `scale`, into out[0..<n].
void earshot_pcm16_decode(const unsigned char *in, long n, float scale, float *out);

// The index of the first NaN or infinite value of x[0..<n], or -1.
long earshot_first_nonfinite(const float *x, long n);

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

#endif

#ifndef EARSHOT_KERNELS_FEATURES
#define EARSHOT_KERNELS_FEATURES
// out[i] = a[i] * b[i]
void earshot_multiply(const float *a, const float *b, float *out, long n);

// From interleaved complex bins (re, im): out[k * stride] = re^2 + im^2 (each product and the sum
// rounded on its own, never fused), or its square root when magnitude != 0.
void earshot_spectrum(const float *complex_bins, long bins, int magnitude, float *out, long stride);
// A frame for a double-precision FFT: y[i] = (double)x[i] * (double)w[i] (exact), or with
// float_product (double)(x[i] * w[i]) (the product rounded to float, as a Mul gives it), or
// (double)x[i] when w is NULL.
void earshot_windowed_doubles(const float *x, const float *w, long n, int float_product, double *y);
// y[i] = (float)x[i * stride], rounded to nearest.
void earshot_round_doubles(const double *x, long n, long stride, float *y);
// From interleaved complex bins (re, im): re_out[k * stride] = re and im_out[k * stride] =
// im_scale * im (either output may be NULL).
void earshot_split_complex(const float *complex_bins, long bins, float *re_out, float *im_out, float im_scale, long stride);

// x[i] = scale * ln(max(x[i] + offset, floor)) - shift (floor >= the smallest normal float);
// returns the largest result.
float earshot_scaled_log(float *x, long n, float offset, float floor, float scale, float shift);
#endif

#ifndef EARSHOT_KERNELS_SPARSE
#define EARSHOT_KERNELS_SPARSE
// Sparse rows: out[r] = sum_i weights[offsets[r] + i] * x[starts[r] + i] for i < counts[r].
void earshot_sparse_rows(const float *weights, const long *offsets, const long *starts, const long *counts,
                         long rows, const float *x, float *out);
#endif

#ifndef EARSHOT_KERNELS_GRAPH
#define EARSHOT_KERNELS_GRAPH
enum { EARSHOT_RELU = 1, EARSHOT_SQRT = 2, EARSHOT_NEG = 3, EARSHOT_ABS = 4, EARSHOT_LEAKY_RELU = 5, EARSHOT_SIGMOID = 6, EARSHOT_SWISH = 7, EARSHOT_LOG = 8 };
enum { EARSHOT_ADD = 1, EARSHOT_SUB = 2, EARSHOT_MUL = 3, EARSHOT_DIV = 4, EARSHOT_SQUARE = 5, EARSHOT_MAX = 6, EARSHOT_MIN = 7, EARSHOT_POW = 8 };
// y[e] = x[index[e]], or 0 where index[e] < 0.
void earshot_gather(const int *index, const float *x, float *y, long n);
// y[e] = sources[which[e]][index[e]], or 0 where index[e] < 0 (which[e] then not read).
void earshot_gather_sources(const int *index, const unsigned char *which, const float *const *sources, float *y, long n);
// Blocks of 16: y[16 e + l] = x[starts[e] + l] where bit l of masks[e] is set, else 0; all 16
// values of each run must lie in x.
void earshot_masked_blocks(const float *x, const int *starts, const unsigned short *masks, long count, float *y);
// y = op(x) for the EARSHOT_RELU (NaN kept), _SQRT, _NEG, _ABS, _LEAKY_RELU (slope alpha), _SIGMOID and
// _SWISH (x * sigmoid(x), the sigmoid's value as earshot_sigmoid gives it) ops, and _LOG (ln x
// within 1 ulp; not an epilogue op).
// Here and in earshot_binary, y may be an input itself (in place), but never a shifted view of one.
void earshot_unary(int op, float alpha, const float *x, float *y, long n);
// y[i] = a[i * (a_step != 0)] op b[i * (b_step != 0)] for the EARSHOT_ADD, _SUB, _MUL, _DIV and
// _SQUARE (a * a), _MAX and _MIN (NaN when either is NaN) and _POW (a to the power b: e^(b ln a)
// within 1e-6 of powf's value, relative, where a is positive and normal and b ln a within +-10;
// powf's value elsewhere) ops: each operand is n values, or one value when its step is 0.
void earshot_binary(int op, const float *a, long a_step, const float *b, long b_step, float *y, long n);
// MaxPool (max != 0) or AveragePool over windows listed per output: output k of each of `planes`
// planes (of `plane` values in, `outputs` out) takes members[starts[k]..<starts[k + 1]].
void earshot_pool(int max, const float *x, long planes, long plane, const int *starts, const int *members,
                  const float *divisors, long outputs, float *y);
// earshot_pool where window k is the `width` positions from k * stride of each plane: the same
// values, read in place.
void earshot_pool_regular(int max, const float *x, long planes, long plane, long stride, long width, const float *divisors,
                          long outputs, float *y);
enum { EARSHOT_REDUCE_SUM = 0, EARSHOT_REDUCE_MEAN = 1, EARSHOT_REDUCE_MAX = 2, EARSHOT_REDUCE_MIN = 3 };
// ReduceSum, ReduceMean, ReduceMax and ReduceMin (the EARSHOT_REDUCE_ ops) of groups of x: output o takes
// x[starts[o] + members[r]] for r in 0..<count (members strictly increasing) in that order, one
// float chain per output (sum += e; the mean that sum / count), the maximum as `e > m or e is
// NaN: m = e` from -infinity (the minimum likewise), bit for bit as a plain loop over the members.
void earshot_reduce(int op, const float *x, const long *starts, long outputs, const long *members, long count, float *y);
// y [cols][rows] = the transpose of x [rows][cols].
void earshot_transpose(const float *x, long rows, long cols, float *y);
// earshot_pool on channels-last values x [positions][channels]: output k's `channels` values take
// those of the input positions members[starts[k]..<starts[k + 1]], each channel as earshot_pool
// takes it, into y [outputs][channels].
void earshot_pool_last(int max, const float *x, long channels, const int *starts, const int *members, const float *divisors,
                       long outputs, float *y);
// A convolution of few taps (channels * kh * kw <= EARSHOT_DIRECT_DEPTH), one group, straight
// from its input x [channels][h][w] (copied with its padding into `scratch`: channels *
// earshot_conv_direct_rows(...) * earshot_conv_direct_columns(...) floats), every position's
// output channels in vector lanes: y [oh * ow][out_channels] (channels-last). filters [depth][ldw]
// (ldw a multiple of 16, zeros past out_channels; depth ordered [channel][kernel row][kernel
// column]); each output the chain 0 + f[0] x[0] + f[1] x[1] + ... in that order (a zero for the
// padding), + bias (NULL: none; ldw floats), then the epilogue's ops (its column bias not read):
// the sums of earshot_gemm_indirect's position-major fields, bit for bit.
enum { EARSHOT_DIRECT_DEPTH = 16 };
void earshot_conv_direct(const float *x, long channels, long h, long w, const float *filters, long ldw, long out_channels,
                         long kh, long kw, long sh, long sw, long dh, long dw, long ph, long pw, long oh, long ow,
                         const float *bias, const earshot_epilogue *epilogue, float *y, float *scratch);
long earshot_conv_direct_rows(long kh, long sh, long dh, long oh);
long earshot_conv_direct_columns(long kw, long sw, long dw, long ow);
// Winograd F(4, 3) for a 3-tap correlation along one axis of channels-last values (rows of
// `channels` floats). Tile t's six inputs are the rows rows[6 t ..< 6 t + 6] of x (-1: the row
// `zeros`, padding); v receives B^T d, the six transformed rows of tile t at v + i * vstride +
// t * channels (i < 6).
void earshot_winograd_input(const float *x, long channels, const int *rows, long tiles, const float *zeros, float *v,
                            long vstride);
// The other end: from the six products m + i * mstride + t * ldm of tile t, its four outputs
// A^T m plus bias (NULL: none), then the epilogue's element-wise ops (NULL or none: no ops; its
// column bias is not read), each value as the op alone gives it, to the rows rows[4 t ..< 4 t + 4]
// of y (-1: to `sink`, a row thrown away). ldm and the bias (when given) are padded to a multiple
// of 8 that is read.
void earshot_winograd_output(const float *m, long mstride, long ldm, long channels, const int *rows, long tiles,
                             const float *bias, const earshot_epilogue *epilogue, float *y, float *sink);
#endif
// Keeps freed memory in the process's heap instead of returning large blocks to the system at
// once: a program that runs batched model steps reallocates the same large buffers on every step,
// and would otherwise take fresh, zeroed pages each time. A process-wide setting (glibc mallopt):
// for programs to call at start-up, not for libraries.
void earshot_keep_freed_memory(void);
// Asks for the cache lines of `bytes` bytes at p to be brought in (a hint; it reads nothing).
void earshot_prefetch(const void *p, long bytes);

// TFLite's int8 kernels as its reference kernels compute them. A tensor is held either as int8
// codes (`signed char`, the kernels' `*_codes` flag set) or as whole-number floats; values held as
// floats are taken as int16 (clamped, NaN as the lowest). A convolution (or fully connected layer)
// of `groups` groups: the input's `count` values plus `input_offset` as int16; for each group g
// and position p, the K of them at fields[(g * positions + p) * k + i] (the index `count` stands
// for padding, which adds nothing) meet the int16 weights of each output channel o of the group
// (outputs g * per_group + j); acc + bias[o] is requantized with multiplier[o] and shift[o]
// (MultiplyByQuantizedMultiplier), offset, clamped to [lo, hi] and written to
// y[p * groups * per_group + o] (as codes only when [lo, hi] lies in -128...127). The weights are
// laid out in pairs of taps: w[((g * pairs + q) * stride + j) * 2 + t] is tap 2q + t of output j of
// group g, with pairs = (k + 1) / 2, stride = per_group rounded up to a multiple of 16, and zeros
// where j >= per_group or 2q + t >= k; with fewer than EARSHOT_QCONV_FEW outputs a group, the
// weights are rows instead, w[o * k + i]. `fields` may be NULL when groups is 1 and position p's
// field is x[p * k ..< (p + 1) * k] with k even or one position (the input read in place).
// `scratch` is room for (count + 2) / 2 + (k + 1) / 2 ints. On the VNNI path, an input of codes
// with int8 weights given in quads of taps as well (w4[((g * quads + q) * stride + j) * 4 + t],
// quads = (k + 3) / 4, zeros as for pairs) and base[o] = bias[o] + (input_offset - 128) times the
// sum of output o's weights (wrapping; 0 <= 128 - input_offset <= 255) runs four taps an
// instruction (`vpdpbusd`), with the same values; w4 and base may be NULL.
enum { EARSHOT_QCONV_FEW = 4 };
void earshot_qconv(const void *x, int x_codes, long count, const int *fields, long groups, long positions, long k, const short *w,
                   long per_group, const int *bias, const int *multiplier, const int *shift, int input_offset, int output_offset, int lo,
                   int hi, int *scratch, void *y, int y_codes, const signed char *w4, const int *base);
// earshot_qconv for `streams` streams, stream s's input at x + s * x_stride and its output at
// y + s * y_stride (strides in bytes), each stream's outputs exactly what earshot_qconv gives it
// alone. On the VNNI path, one group read in place (fields NULL) with k a multiple of 4, codes and
// w4 and base given, takes the streams four at a time, each quad of weights loaded once for the
// four; on the AMX path (8 streams or more), 16 streams a tile, w4 then followed by 15 rows of
// zeros (stride * 4 bytes each); otherwise stream by stream.
void earshot_qconv_streams(long streams, const void *x, long x_stride, int x_codes, long count, const int *fields, long groups,
                           long positions, long k, const short *w, long per_group, const int *bias, const int *multiplier, const int *shift,
                           int input_offset, int output_offset, int lo, int hi, int *scratch, void *y, long y_stride, int y_codes,
                           const signed char *w4, const int *base);
// A depthwise convolution of multiplier 1 whose taps are the same for every channel: at position
// p, tap i reads channel c at taps[p * k + i] + c (an index >= count is padding); the weights are
// [k][channels]. Otherwise as earshot_qconv; `scratch` is room for count int16 values. On the
// VNNI path, an input of codes whose taps all lie inside it runs two taps an instruction
// (`vpdpwssd`) from w2, the weights in pairs of taps (see `QuantizedProductStep.depthwisePairs`),
// and base, the bias with the input offset's products folded in; with the same values. w2 and
// base may be NULL.
void earshot_qdepthwise(const void *x, int x_codes, long count, const int *taps, long positions, long k, long channels, const short *w,
                        const int *bias, const int *multiplier, const int *shift, int input_offset, int output_offset, int lo, int hi,
                        short *scratch, void *y, int y_codes, const short *w2, const int *base);
// earshot_qdepthwise for `streams` streams, stream s's input at x + s * x_stride and its output at
// y + s * y_stride (strides in bytes), each stream's outputs exactly what earshot_qdepthwise gives
// it alone. On the VNNI path (codes, w2 and base given) the streams go four at a time through each
// block of channels, each pair of weights loaded once for the four; otherwise stream by stream.
void earshot_qdepthwise_streams(long streams, const void *x, long x_stride, int x_codes, long count, const int *taps, long positions, long k,
                                long channels, const short *w, const int *bias, const int *multiplier, const int *shift, int input_offset,
                                int output_offset, int lo, int hi, short *scratch, void *y, long y_stride, int y_codes, const short *w2,
                                const int *base);
// TFLite's Quantize of n floats: x / scale + zero in double, rounded half to even, clamped to
// [lo, hi], NaN to lo (the values `Quantized.quantize` gives), as whole-number floats or (with
// y_codes, [lo, hi] in -128...127) as codes.
void earshot_quantize(const float *x, long n, double scale, double zero, float lo, float hi, void *y, int y_codes);
// TFLite's MultiplyByQuantizedMultiplier (doubling high multiply, rounding shift).
int earshot_requantize(int acc, int multiplier, int shift);
// n accumulators requantized (multiplier[i], shift[i]), offset, clamped to [lo, hi] and stored as
// codes, on int8 path `path` (0 plain C; above 0 AVX-512, where the CPU has it): every path the same.
void earshot_requantize_many(const int *acc, long n, const int *multiplier, const int *shift, int output_offset, int lo, int hi, int path,
                             signed char *y);
// Int8 codes to whole-number floats and back (where a float step reads a tensor held as codes, or
// a caller asks for floats). To floats: exact. To codes: rounded to the nearest whole number and saturated
// to -128...127, NaN to 0 (the values are whole numbers in that range already; this only keeps
// any other value from being undefined).
void earshot_codes_to_floats(const signed char *codes, long n, float *y);
void earshot_floats_to_codes(const float *x, long n, signed char *codes);

// The int8 products run on one of these paths: 0 plain C, 1 AVX-512 (pairwise multiply-adds),
// 2 AVX-512 VNNI, 3 AMX tiles for products over many streams (earshot_qconv_streams) and VNNI
// for the rest (where CPUID shows AMX-INT8 and the kernel grants the tile state).
// earshot_int8_paths() is how many this CPU has (the best is the default, but VNNI where AMX is
// there too: AMX only when chosen); earshot_int8_path(p) chooses p for the process (beyond the
// best: the best; negative: the default) and
// returns the path chosen. Every path gives the same values (the sums wrap as int32).
int earshot_int8_paths(void);
int earshot_int8_path(int path);

// TensorFlow Lite Micro's audio front end as pymicro-features configures it (microfrontend.c;
// MicroFrontend in Swift takes its sizes from here): a window of EARSHOT_MF_WINDOW_SAMPLES at
// EARSHOT_MF_SAMPLE_RATE every EARSHOT_MF_STEP_SAMPLES, each frame EARSHOT_MF_CHANNELS values.
// A step's samples start with EARSHOT_MF_CONTEXT_FRAMES steps of context (the window less one
// step), so its first frames end the previous step's group. earshot_microfrontend_lanes runs
// EARSHOT_MF_LANES streams at once.
#define EARSHOT_MF_SAMPLE_RATE 16000
#define EARSHOT_MF_WINDOW_SAMPLES 480
#define EARSHOT_MF_STEP_SAMPLES 160
#define EARSHOT_MF_CONTEXT_FRAMES 2
#define EARSHOT_MF_CHANNELS 40
#define EARSHOT_MF_LANES 16

// One frame of TensorFlow Lite Micro's audio front end (pymicro-features' configuration): 480
// int16 samples at 16 kHz to 40 16-bit values, updating the 40 noise estimates.
void earshot_microfrontend_frame(const short *samples, unsigned *noise, unsigned short *out);
// earshot_microfrontend_frame for 16 streams at once, each exactly as alone: samples[l] is
// stream l's frame, noise [40][16] and out [40][16] hold channel c of stream l at 16 c + l.
// scratch: earshot_microfrontend_lanes_scratch() bytes, 64-byte aligned.
void earshot_microfrontend_lanes(const short *const *samples, unsigned *noise, unsigned short *out, void *scratch);
long earshot_microfrontend_lanes_scratch(void);
// The paths the front end can take here: 1 (portable vectorized C) or 2 (also AVX-512, the
// transform in 16-bit pairs); earshot_microfrontend_frame and _lanes take the best. The _on
// functions run path 0 (portable) or 1 (AVX-512, where the CPU has it), each giving the same values.
int earshot_microfrontend_paths(void);
void earshot_microfrontend_frame_on(int path, const short *samples, unsigned *noise, unsigned short *out);
void earshot_microfrontend_lanes_on(int path, const short *const *samples, unsigned *noise, unsigned short *out, void *scratch);
// A block of streams' front-end state around earshot_microfrontend_lanes (lanes 1 for one
// stream alone). _estimates: stream `lane`'s 40 noise estimates into estimates [40][lanes], each
// from its state's two 16-bit halves noise[2c] (high) and noise[2c + 1] (low), each taken as a
// whole number in 0...65535 (NaN as 0, fractions dropped).
void earshot_microfrontend_estimates(const float *noise, long lanes, long lane, unsigned *estimates);
// _finish: stream `lane`'s step from its frames [stride][40][lanes] and estimates [40][lanes]:
// features [stride][40] are pending [(stride - 2) * 40] then frames 0 and 1 times scale (all 0
// when not started), pending_out frames 2...stride - 1 times scale, noise_out the estimates as
// 16-bit halves. pending may be pending_out and noise_out the noise the estimates came from.
void earshot_microfrontend_finish(const unsigned short *frames, const unsigned *estimates, long stride, long lanes, long lane,
                                  int started, float scale, const float *pending, float *features, float *pending_out,
                                  float *noise_out);
// Audio in [-1, 1] as int16: x * 32768 rounded to the nearest (halves to even) and clamped.
void earshot_pcm16(const float *x, long n, short *out);

#ifndef EARSHOT_KERNELS_PEAK
#define EARSHOT_KERNELS_PEAK
// The machine's peak multiply-add rates (`earshot bench peak`), each a loop in registers on the
// calling thread for about `seconds`: multiply-adds per second, or 0 when the CPU (or, for
// AMX, the kernel) does not allow that path.
enum {
    EARSHOT_PEAK_FP32_AVX512 = 0, EARSHOT_PEAK_FP32_AVX2 = 1, EARSHOT_PEAK_INT8_VNNI = 2, EARSHOT_PEAK_BF16_AVX512 = 3,
    EARSHOT_PEAK_AMX_BF16 = 4, EARSHOT_PEAK_AMX_INT8 = 5
};
double earshot_peak(int path, double seconds);
// Whether AMX can run here: EARSHOT_AMX_READY (the CPU has AMX-TILE, -BF16 and -INT8 and the
// kernel granted this process the tile state), _NO_CPU (CPUID does not report them: the CPU or
// its hypervisor lacks them) or _NO_PERMISSION (arch_prctl(ARCH_REQ_XCOMP_PERM) refused).
enum { EARSHOT_AMX_READY = 0, EARSHOT_AMX_NO_CPU = 1, EARSHOT_AMX_NO_PERMISSION = 2 };
int earshot_amx_state(void);
#endif

#ifndef EARSHOT_KERNELS_BF16
#define EARSHOT_KERNELS_BF16
// Products in bf16 with fp32 sums (bf16.c). earshot_bf16(x): x rounded to bf16 (nearest, ties to
// even; NaN stays NaN; a subnormal is read as a zero of its sign, as the hardware paths read it),
// the upper 16 bits of the float it stands for.
unsigned short earshot_bf16(float x);
// uint16 values of w [rows][k] packed for earshot_gemm_bf16 (rows rounded up to 16, k to 32).
long earshot_bf16_packed_count(long rows, long k);
// Packs w [rows][k], each weight rounded by earshot_bf16.
void earshot_bf16_pack(const float *w, long rows, long k, unsigned short *packed);
// earshot_gemm_packed's product in bf16: y[t * ldy + r] = sum_i w[r][i] * bf16(x[t * ldx + i])
// (+ bias[r]), each product of two bf16 values, every sum in fp32. Each output gets what it gets
// alone, whatever n is.
void earshot_gemm_bf16(const unsigned short *packed, long rows, long k, const float *x, long ldx, long n, const float *bias,
                       float *y, long ldy);
// The paths of earshot_gemm_bf16: 0 portable (fp32 multiply-adds of the bf16 values), 1 AVX-512
// BF16 (vdpbf16ps, the same values as 0), 2 AMX tiles (the same products, summed in the tiles'
// order). earshot_bf16_paths() is how many this CPU (and kernel, for AMX) allows; the best is the
// default. earshot_bf16_path(p) chooses p for the process (beyond the best, or negative: the
// best) and returns the path chosen; earshot_bf16_path_chosen() the one in use.
int earshot_bf16_paths(void);
int earshot_bf16_path(int path);
int earshot_bf16_path_chosen(void);
// The filters of a convolution for earshot_conv_bf16: w [rows][k] rounded to bf16 row by row (k
// padded to 32 with zeros), zero rows up to a multiple of 16; earshot_bf16_rows_count values.
long earshot_bf16_rows_count(long rows, long k);
void earshot_bf16_pack_rows(const float *w, long rows, long k, unsigned short *packed);
// A convolution over many positions in bf16, written [outs][positions]: y[o * ldy + p] =
// sum_i w[o][i] * bf16(field_p[i]) + bias[o], where the fields are found as earshot_gemm_indirect
// finds its packed blocks (position p's value i in lane p % 16 of base + blocks[(p / 16) * k + i],
// or of edge block -blocks[...] - 1 when negative). The fields are rounded to bf16 as they are
// packed into the product's layout, a few panels of 16 positions at a time (no fp32 copy of
// them, no transpose of the output). Each output is earshot_gemm_bf16's value for that field
// and filter on paths 0 and 1 (the same sums in the same order), and summed in the tiles' order
// on path 2.
void earshot_conv_bf16(const int *blocks, const float *base, const float *edges, long positions, long k,
                       const unsigned short *rows_packed, long outs, const float *bias, float *y, long ldy);
#endif
