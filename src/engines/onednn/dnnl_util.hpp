// Small helpers shared by the oneDNN engine's files: data types, plain
// layouts, bf16 conversion. Nothing here allocates tensor memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "crossbench/cell.hpp"

namespace crossbench::onednn {

using dims = dnnl::memory::dims;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using md = dnnl::memory::desc;

// Tensor data type of a precision: bf16 keeps tensors in 16 bits; oneDNN
// accumulates in fp32 inside every primitive.
inline dt data_type_of(Precision precision) { return precision == Precision::bf16 ? dt::bf16 : dt::f32; }

inline std::size_t size_of(dt type) {
  switch (type) {
    case dt::f32: case dt::s32: return 4;
    case dt::bf16: case dt::f16: return 2;
    case dt::s8: case dt::u8: return 1;
    default: return 0;
  }
}

// The dense row-major layout of a rank: a, ab, abc, abcd (NCHW for activations, OIHW for weights).
inline tag plain_tag(std::size_t rank) {
  switch (rank) {
    case 1: return tag::a;
    case 2: return tag::ab;
    case 3: return tag::abc;
    default: return tag::abcd;
  }
}

inline md plain_md(const dims& shape, dt type) { return md(shape, type, plain_tag(shape.size())); }
inline md plain_like(const md& m) { return plain_md(m.dims(), m.data_type()); }
inline md plain_like(const md& m, dt type) { return plain_md(m.dims(), type); }
inline bool is_plain(const md& m) { return m == plain_like(m); }

// Whether a layout holds more elements than its dims (channels padded up to a block of 8 or 16).
inline bool has_padding(const md& m) {
  for (int i = 0; i < m.data.ndims; ++i)
    if (m.data.padded_dims[i] != m.data.dims[i]) return true;
  return false;
}

inline std::int64_t elements_of(const md& m) {
  std::int64_t n = 1;  // from the C descriptor: no temporary vector
  for (int i = 0; i < m.data.ndims; ++i) n *= m.data.dims[i];
  return n;
}

// bf16 is the upper half of an fp32; round to nearest even like oneDNN does.
inline float bf16_to_float(std::uint16_t value) {
  const std::uint32_t bits = static_cast<std::uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

inline std::uint16_t float_to_bf16(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) return 0x7fc0;  // NaN stays NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

// Element i of a buffer of f32 or bf16, as float.
inline float load(const void* data, dt type, std::int64_t i) {
  if (type == dt::bf16) return bf16_to_float(static_cast<const std::uint16_t*>(data)[i]);
  return static_cast<const float*>(data)[i];
}

inline void store(void* data, dt type, std::int64_t i, float value) {
  if (type == dt::bf16)
    static_cast<std::uint16_t*>(data)[i] = float_to_bf16(value);
  else
    static_cast<float*>(data)[i] = value;
}

std::string isa_name(dnnl::cpu_isa isa);

// `m` with another data type, same layout (strides count elements, so a plain
// or blocked layout carries over).
inline md with_data_type(md m, dt type) {
  m.data.data_type = static_cast<dnnl_data_type_t>(type);
  return m;
}

// oneDNN resolves `any` layouts per primitive. Where another primitive already
// fixed a layout (the forward weights), taking it saves a reorder every step,
// but only if oneDNN runs the same kernel with it: `make_fixed` builds the
// primitive descriptor with the fixed layout; `chosen` is the one with `any`.
template <typename PD, typename Make>
PD same_kernel_or(const PD& chosen, Make&& make_fixed) {
  try {
    PD fixed = make_fixed();
    if (std::string(fixed.impl_info_str()) == chosen.impl_info_str()) return fixed;
  } catch (const dnnl::error&) {
  }
  return chosen;
}

// The channel-blocked activation layout of this CPU's vector width: what
// oneDNN's jit kernels use between layers (nChw16c with AVX-512, else nChw8c).
inline tag blocked_activation_tag() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl_cpu_isa_avx512_core);
  return (isa & avx512) == avx512 ? tag::aBcd16b : tag::aBcd8b;
}

inline bool is_slow_kernel(const char* impl) {
  const std::string name(impl);
  return name.find("ref") != std::string::npos || name.find("simple") != std::string::npos;
}

}  // namespace crossbench::onednn
