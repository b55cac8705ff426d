// Element types and 4-D tensor views of the session's device pool.
//
// A Tensor is (N, C, H, W) with explicit element strides, a data type, and a
// place: a pool buffer and a byte offset into it. Packed NCHW and NHWC are
// the two layouts a session uses; a channel slice of a packed tensor (concat)
// is a strided view of the same buffer.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <string>

#include "crossbench/cell.hpp"
#include "crossbench/error.hpp"
#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn {

inline cudnnDataType_t cudnn_type(DType type) {
  switch (type) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::u8: return CUDNN_DATA_UINT8;
    case DType::f64: return CUDNN_DATA_DOUBLE;
  }
  return CUDNN_DATA_FLOAT;
}

inline cudaDataType_t cuda_type(DType type) {
  switch (type) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::u8: return CUDA_R_8U;
    case DType::f64: return CUDA_R_64F;
  }
  return CUDA_R_32F;
}

// Tensor data type of a precision: tf32 keeps fp32 storage (only the
// arithmetic of convolutions and GEMMs changes).
inline DType data_type_of(Precision precision) {
  switch (precision) {
    case Precision::fp16: return DType::f16;
    case Precision::bf16: return DType::bf16;
    default: return DType::f32;
  }
}

struct Tensor {
  std::array<std::int64_t, 4> dims{};     // N, C, H, W
  std::array<std::int64_t, 4> strides{};  // [elements], in the same order
  DType type = DType::f32;
  bool channels_last = false;             // packed order N, H, W, C (else N, C, H, W)
  int buffer = -1;                        // pool buffer, -1 when not placed
  std::int64_t offset = 0;                // [bytes] from the buffer's start

  static Tensor packed(std::array<std::int64_t, 4> dims, DType type, bool channels_last) {
    Tensor t;
    t.dims = dims;
    t.type = type;
    t.channels_last = channels_last;
    const auto [n, c, h, w] = dims;
    (void)n;
    t.strides = channels_last ? std::array<std::int64_t, 4>{c * h * w, 1, w * c, c}
                              : std::array<std::int64_t, 4>{c * h * w, h * w, w, 1};
    return t;
  }

  bool valid() const { return buffer >= 0; }
  std::int64_t n() const { return dims[0]; }
  std::int64_t c() const { return dims[1]; }
  std::int64_t h() const { return dims[2]; }
  std::int64_t w() const { return dims[3]; }
  std::int64_t elements() const { return dims[0] * dims[1] * dims[2] * dims[3]; }
  std::int64_t bytes() const { return elements() * size_of(type); }  // of a packed tensor
  // [bytes] from the first to one past the last element (a strided view spans more than it holds).
  std::int64_t span_bytes() const {
    std::int64_t last = 0;
    for (int i = 0; i < 4; ++i) last += (dims[static_cast<std::size_t>(i)] - 1) * strides[static_cast<std::size_t>(i)];
    return (last + 1) * size_of(type);
  }
  bool is_packed() const { return strides == packed(dims, type, channels_last).strides; }

  // The same bytes seen with other dims (packed in this tensor's order), e.g. flatten.
  Tensor reshaped(std::array<std::int64_t, 4> new_dims) const {
    Tensor t = packed(new_dims, type, channels_last);
    t.buffer = buffer;
    t.offset = offset;
    return t;
  }
  // Channels [first, first + count) of a packed tensor: a strided view.
  Tensor channel_slice(std::int64_t first, std::int64_t count) const {
    Tensor t = *this;
    t.dims[1] = count;
    t.offset = offset + first * strides[1] * size_of(type);
    return t;
  }
  // A packed tensor with this one's dims, order and type (not placed).
  Tensor packed_like() const { return packed(dims, type, channels_last); }
  Tensor with_type(DType new_type) const {
    Tensor t = packed(dims, new_type, channels_last);
    return t;
  }
};

inline std::string shape_text(const Tensor& t) {
  return std::to_string(t.n()) + "x" + std::to_string(t.c()) + "x" + std::to_string(t.h()) + "x" +
         std::to_string(t.w()) + (t.channels_last ? " nhwc " : " nchw ") + name_of(t.type);
}

}  // namespace crossbench::cudnn
