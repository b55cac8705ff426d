// What the cuDNN kernel tests (cudnn_kernels_test's sources) share: the skip
// without a GPU, host values stored on the device in fp32, fp16 or bf16, the
// host's rounding to those types, and seeded random values.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "crossbench/device.hpp"
#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::test {

#define SKIP_WITHOUT_GPU()                                                                          \
  do {                                                                                              \
    if (visible_gpu_count() == 0) GTEST_SKIP() << "no GPU visible: the engine's kernels cannot run here"; \
  } while (false)

// Host values stored on the device as fp32, fp16 or bf16.
class DeviceArray {
 public:
  DeviceArray(const std::vector<float>& values, DType type) : type_(type), count_(values.size()) {
    EXPECT_EQ(cudaMalloc(&data_, bytes()), cudaSuccess);
    if (type == DType::bf16) {
      std::vector<__nv_bfloat16> stored(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) stored[i] = __float2bfloat16_rn(values[i]);
      EXPECT_EQ(cudaMemcpy(data_, stored.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    } else if (type == DType::f16) {
      std::vector<__half> stored(values.size());
      for (std::size_t i = 0; i < values.size(); ++i) stored[i] = __float2half_rn(values[i]);
      EXPECT_EQ(cudaMemcpy(data_, stored.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    } else {
      EXPECT_EQ(cudaMemcpy(data_, values.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { (void)cudaFree(data_); }
  void* get() const { return data_; }
  // The element at `offset` (for views that do not start on 16 bytes).
  void* at(std::size_t offset) const { return static_cast<char*>(data_) + offset * element_bytes(); }
  std::vector<float> values() const {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> out(count_);
    if (type_ == DType::bf16) {
      std::vector<__nv_bfloat16> stored(count_);
      EXPECT_EQ(cudaMemcpy(stored.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
      for (std::size_t i = 0; i < count_; ++i) out[i] = __bfloat162float(stored[i]);
    } else if (type_ == DType::f16) {
      std::vector<__half> stored(count_);
      EXPECT_EQ(cudaMemcpy(stored.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
      for (std::size_t i = 0; i < count_; ++i) out[i] = __half2float(stored[i]);
    } else {
      EXPECT_EQ(cudaMemcpy(out.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return out;
  }

 private:
  std::size_t element_bytes() const { return type_ == DType::f32 ? 4 : 2; }
  std::size_t bytes() const { return count_ * element_bytes(); }
  DType type_;
  std::size_t count_;
  void* data_ = nullptr;
};

// v rounded to `type` (fp32: itself).
inline float stored(float v, DType type) {
  if (type == DType::bf16) return __bfloat162float(__float2bfloat16_rn(v));
  if (type == DType::f16) return __half2float(__float2half_rn(v));
  return v;
}

inline std::vector<float> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(generator);
  return values;
}

}  // namespace crossbench::cudnn::test
