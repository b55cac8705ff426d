// The few CUDA kernels the engine needs besides cuDNN and cuBLAS: synthetic
// data generation on the device (the exact generator of synthetic.hpp),
// crossbench's deterministic dropout, the negative log-likelihood of the
// loss and its gradient, fully-connected biases, the SGD update and the
// reductions of check(). All run on the caller's stream and are
// asynchronous; launch errors are checked (CB_CHECK_CUDA on cudaGetLastError).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {

// Fills a tensor stored in `type`, physically in canonical order (d0, d1, d2, d3)
// or, with `channels_last`, in (d0, d2, d3, d1), with element
// i = fp32(scale) * (2 * uniform01(seed, tensor_id, i) - 1) of the canonical flat
// index i (synthetic.hpp's fill_uniform), rounded once to `type`. With
// `stored_d1` > d1 (channels_last only), each pixel stores `stored_d1` channels
// and the extra ones are zero (the input padded to 8 channels for tensor cores).
// `first_index` shifts the canonical index: a data-parallel rank's shard of the global batch.
void fill_synthetic(void* dst, DType type, std::array<std::int64_t, 4> canonical_dims, bool channels_last,
                    std::uint64_t seed, std::uint64_t tensor_id, float scale, cudaStream_t stream,
                    std::int64_t stored_d1 = 0, std::uint64_t first_index = 0);
void fill_constant(void* dst, DType type, std::int64_t count, float value, cudaStream_t stream);

// Inverted dropout with crossbench's mask for the step held in device memory at
// `step` (so that a captured CUDA graph sees each replay's step):
// kept when uniform01(seed, mask_tensor_id + (step << 32), canonical index) >= rate.
// `x`, `y` are packed tensors of `type` with canonical dims (N, C, H, W) stored in
// NCHW or (channels_last) NHWC order; `mask` gets one byte per element.
void dropout_forward(const void* x, void* y, std::uint8_t* mask, DType type, std::array<std::int64_t, 4> dims,
                     bool channels_last, std::uint64_t seed, std::uint64_t mask_tensor_id, const std::uint64_t* step,
                     double rate, cudaStream_t stream, std::uint64_t first_index = 0);
// dx = mask ? dy / (1 - rate) : 0, plus beta * dx (beta 0 or 1: gradient accumulation).
void dropout_backward(const void* dy, void* dx, const std::uint8_t* mask, DType type, std::int64_t count,
                      double rate, float beta, cudaStream_t stream);
void increment(std::uint64_t* counter, cudaStream_t stream);

// Negative log-likelihood from log-probabilities logp (fp32, rows of `classes`):
// row_loss[n] = -logp[n, label[n]]; with dlogits: (exp(logp) - onehot) / rows, in `dlogits_type`.
void nll(const float* logp, const std::int32_t* labels, float* row_loss, void* dlogits, DType dlogits_type,
         std::int64_t rows, std::int64_t classes, cudaStream_t stream);

// Fully-connected bias: y[n, j] += b[j] (y: rows x features, packed).
void add_bias(void* y, DType y_type, const void* bias, DType bias_type, std::int64_t rows, std::int64_t features,
              cudaStream_t stream);
// db[j] = sum over n of dy[n, j], accumulated in fp32.
void bias_gradient(const void* dy, DType dy_type, void* db, DType db_type, std::int64_t rows,
                   std::int64_t features, cudaStream_t stream);

// y = x + beta * y over 4-D tensors of one type with any element strides (the
// fallback of cudnnTransformTensor / cudnnAddTensor where this cuDNN refuses a type).
void strided_add(const void* x, std::array<std::int64_t, 4> x_strides, void* y, std::array<std::int64_t, 4> y_strides,
                 std::array<std::int64_t, 4> dims, DType type, float beta, cudaStream_t stream);

// Per-channel sum of a 4-D tensor (the bias gradient of a convolution), fp32
// accumulation in `accumulator` (C floats, zeroed here), written to `out` (C
// values of `out_type`). Where cuDNN has no cudnnConvolutionBackwardBias for
// the type (bf16), for NHWC, and where the measured search finds it faster
// than cuDNN's (layer_convolution.cpp). Packed NHWC, contiguous (H, W) planes
// and any other strides each have their own kernel.
void channel_sum(const void* x, DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides,
                 float* accumulator, void* out, DType out_type, cudaStream_t stream);

// Local response normalisation across channels (the definition of layer_pooling.cpp),
// one warp per pixel with the pixel's channels in shared memory: coalesced in
// NHWC, where cuDNN's LRN is slow, and for bf16, which cuDNN's LRN refuses.
struct LrnParameters {
  int size;
  float alpha, beta, k;
};
void lrn_forward(const void* x, void* y, DType type, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> strides, LrnParameters p, cudaStream_t stream);
// dx = dy s^-beta - 2 alpha beta / size * x * sum over windows containing c of dy y / s, plus beta_dx * dx.
void lrn_backward(const void* x, const void* y, const void* dy, void* dx, DType type, std::array<std::int64_t, 4> dims,
                  std::array<std::int64_t, 4> strides, LrnParameters p, float beta_dx, cudaStream_t stream);

// Max pooling of packed NHWC tensors (dims N, C, H, W of input and output):
// forward writes y and, per output, the window position of its maximum
// (first maximum, one byte); backward gathers, for every input element, the
// output gradients of the windows whose maximum it was (plus beta * dx).
// cuDNN's NHWC pooling backward is several times slower than this.
struct PoolGeometry {
  int kernel, stride, padding;
};
void max_pool_nhwc_forward(const void* x, void* y, std::uint8_t* argmax, DType type, std::array<std::int64_t, 4> in,
                           std::array<std::int64_t, 4> out, PoolGeometry g, cudaStream_t stream);
void max_pool_nhwc_backward(const void* dy, const std::uint8_t* argmax, void* dx, DType type,
                            std::array<std::int64_t, 4> in, std::array<std::int64_t, 4> out, PoolGeometry g, float beta,
                            cudaStream_t stream);

// A convolution's epilogue in one pass over y: y = y + bias[c], then
// max(y, 0) when `relu` (NaN stays NaN, as cuDNN's relu). Instead of
// cudnnAddTensor plus a separate relu (three passes) where cuDNN's fused
// conv+bias+relu call is not the fastest algorithm. Takes y packed NHWC or
// with contiguous (H, W) planes (NCHW, and NCHW concat slices);
// bias_activation_supported says whether y's layout is one of these.
bool bias_activation_supported(std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides);
void bias_activation(void* y, DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides,
                     const void* bias, bool relu, cudaStream_t stream);

// y = max(a + b, 0) elementwise over `count` elements of three tensors of one
// type and one layout (y may be a): a residual add and the relu after it in
// one pass instead of two (NaN stays NaN).
void add_relu(const void* a, const void* b, void* y, DType type, std::int64_t count, cudaStream_t stream);

// Inference batch-norm folded into the convolution before it (once, after the
// weights are initialised): scale = gamma / sqrt(variance + epsilon) per output
// channel o; w[o, ...] *= scale[o] (w: `out_channels` blocks of
// `per_output` elements, output channel outermost in NCHW and NHWC filters);
// shift[o] = (conv_bias[o] or 0 - mean[o]) * scale[o] + beta[o].
struct BatchNormStatistics {
  const float* gamma;
  const float* beta;
  const float* mean;
  const float* variance;
  double epsilon;
};
void fold_batch_norm(void* w, DType type, std::int64_t out_channels, std::int64_t per_output, const void* conv_bias,
                     void* shift, BatchNormStatistics bn, cudaStream_t stream);

// A square convolution window and its output size.
struct ConvolutionGeometry {
  int kernel, stride, padding;
  std::int64_t out_h, out_w;
};
// im2col of an fp32 NCHW tensor for convolution as explicit GEMMs
// (im2col_gemm.hpp): a matrix of rows of P*Q output positions, one row per
// (image n, filter tap crs = (c, r, s)) in that order, holding
// x[n, c, p*stride - pad + r, q*stride - pad + s] (0 outside the image), each
// image's rows followed by zero rows up to `padded_taps` (>= C*R*S): each
// image's padded_taps x PQ block is contiguous. x: dims (N, C, H, W) with
// element strides `x_strides` (W's stride 1).
void im2col(const float* x, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> x_strides,
            ConvolutionGeometry g, std::int64_t padded_taps, float* columns, cudaStream_t stream);

// dst (rows x padded_length) = src (rows x length), zero-padded on the right.
void pad_rows(const float* src, std::int64_t rows, std::int64_t length, std::int64_t padded_length, float* dst,
              cudaStream_t stream);

// dst (rows x length, packed) = the sum of `matrices` consecutive rows x
// padded_length matrices (their first `length` columns), summed in order.
void sum_padded_matrices(const float* partials, std::int64_t matrices, std::int64_t rows, std::int64_t length,
                         std::int64_t padded_length, float* dst, cudaStream_t stream);

// w -= rate * g, elementwise in fp32.
void sgd(void* w, const void* g, DType type, std::int64_t count, float rate, cudaStream_t stream);

// *out += sum of squares of x (fp64 accumulation; *out must be zeroed first). Also
// counts non-finite elements into *non_finite.
void sum_of_squares(const void* x, DType type, std::int64_t count, double* out, unsigned long long* non_finite,
                    cudaStream_t stream);

}  // namespace crossbench::cudnn::kernels
