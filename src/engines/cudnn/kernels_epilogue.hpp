// Bias and epilogue CUDA kernels of the cuDNN engine: fully-connected biases
// and their gradients, per-channel bias gradients of convolutions, the fused
// bias + relu epilogue, residual add + relu, relu forward and backward, and
// the inference batch-norm folded into the convolution before it.
// All run on the caller's stream and are asynchronous; launch errors are
// checked (kernel_support.cuh's check_launch).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {

// Fully-connected bias: y[n, j] += b[j] (y: rows x features, packed).
void add_bias(void* y, DType y_type, const void* bias, DType bias_type, std::int64_t rows, std::int64_t features,
              cudaStream_t stream);
// db[j] = sum over n of dy[n, j], accumulated in fp32.
void bias_gradient(const void* dy, DType dy_type, void* db, DType db_type, std::int64_t rows,
                   std::int64_t features, cudaStream_t stream);

// Per-channel sum of a 4-D tensor (the bias gradient of a convolution), fp32
// accumulation in `accumulator` (C floats, zeroed here), written to `out` (C
// values of `out_type`). Where cuDNN has no cudnnConvolutionBackwardBias for
// the type (bf16), for NHWC, and where the measured search finds it faster
// than cuDNN's (layer_convolution.cpp). Packed NHWC, contiguous (H, W) planes
// and any other strides each have their own kernel.
void channel_sum(const void* x, DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides,
                 float* accumulator, void* out, DType out_type, cudaStream_t stream);

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

// relu over packed tensors of one type: y = max(x, 0) with NaN kept (x may be y).
// One bandwidth-bound pass; cudnnActivationForward/Backward took 2.4 ms of a
// 13.6 ms ResNet-50 bf16 training step on the H200 (layer times, 2026-11-30).
void relu(const void* x, void* y, DType type, std::int64_t count, cudaStream_t stream);
// dx = (y > 0 ? dy : 0) + beta * dx, beta 0 (write) or 1 (accumulate); dx may be dy.
void relu_backward(const void* y, const void* dy, void* dx, DType type, std::int64_t count, float beta,
                   cudaStream_t stream);

}  // namespace crossbench::cudnn::kernels
