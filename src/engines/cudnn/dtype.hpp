// Element types of device tensors. Kept free of library headers so that the
// CUDA kernels (kernels_*.cu) can share it.
#pragma once

#include <cstdint>

namespace crossbench::cudnn {

enum class DType : std::uint8_t { f32, f16, bf16, u8, f64 };

inline std::int64_t size_of(DType type) {
  switch (type) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::u8: return 1;
    case DType::f64: return 8;
  }
  return 4;
}

inline const char* name_of(DType type) {
  switch (type) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::u8: return "u8";
    case DType::f64: return "f64";
  }
  return "?";
}

}  // namespace crossbench::cudnn
