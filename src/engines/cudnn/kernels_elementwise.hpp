// Elementwise CUDA kernels of the cuDNN engine: synthetic data generated on
// the device (the exact generator of synthetic.hpp, splitmix64.hpp), the
// deterministic dropout, the loss's negative log-likelihood and its gradient,
// strided copies, the SGD update and the reductions of check().
// All run on the caller's stream and are asynchronous; launch errors are
// checked (kernel_support.cuh's check_launch).
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

// y = x + beta * y over 4-D tensors of one type with any element strides (the
// fallback of cudnnTransformTensor / cudnnAddTensor where this cuDNN refuses a type).
void strided_add(const void* x, std::array<std::int64_t, 4> x_strides, void* y, std::array<std::int64_t, 4> y_strides,
                 std::array<std::int64_t, 4> dims, DType type, float beta, cudaStream_t stream);

// y = y + bias[c] (bias: C values of y's type; nullptr: none), then max(y, 0) when `relu` (NaN
// kept), over a 4-D tensor with any element strides (a concat's channel slice in NHWC too). One
// plain pass: the agreement check's reference for a fused graph (layer_convolution.cpp), not a
// timed path (kernels_epilogue.hpp's bias_activation is the fast one for the layouts it takes).
void bias_relu_strided(void* y, DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides,
                       const void* bias, bool relu, cudaStream_t stream);

// How far `got` is from `want` (two tensors of one type, dims and element strides): out[0] =
// the bits of max |want|, out[1] = the bits of max |got - want| (both fp32, over the finite
// pairs), out[2] += the pairs where either is not finite. `out` (3 unsigned) must be zeroed first.
// The search's agreement check (layer_convolution.cpp), without copying tensors to the host.
void differences(const void* want, const void* got, DType type, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> strides, unsigned* out, cudaStream_t stream);

// w -= rate * g, elementwise in fp32.
void sgd(void* w, const void* g, DType type, std::int64_t count, float rate, cudaStream_t stream);

// *out += sum of squares of x (fp64 accumulation; *out must be zeroed first). Also
// counts non-finite elements into *non_finite.
void sum_of_squares(const void* x, DType type, std::int64_t count, double* out, unsigned long long* non_finite,
                    cudaStream_t stream);

}  // namespace crossbench::cudnn::kernels
