// The convolution the search tests time (cudnn_search_l2_test, _tie_test, _warmup_test): 3x3, 64 -> 64
// channels on 28x28, batch 8, fp32 NCHW, padding 1 (the kind of layer whose choice the H200 measured
// misleading warm, and small enough to search in a second).
#pragma once

#include <cudnn.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "crossbench/device.hpp"
#include "engines/cudnn/algorithms.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/handles.hpp"

#define SKIP_WITHOUT_GPU()                                                                            \
  do {                                                                                                \
    if (crossbench::visible_gpu_count() == 0) GTEST_SKIP() << "no GPU visible: the cuDNN engine cannot run here"; \
  } while (false)

namespace crossbench::cudnn {

struct SearchTestProblem {
  static constexpr int n = 8, c = 64, h = 28, w = 28, k = 64;
  TensorDesc x = make_tensor_desc(), y = make_tensor_desc();
  FilterDesc filter = make_filter_desc();
  ConvDesc conv = make_conv_desc();
  static constexpr std::int64_t activation_bytes = std::int64_t{n} * c * h * w * 4;  // [bytes]
  static constexpr std::int64_t weight_bytes = std::int64_t{k} * c * 9 * 4;          // [bytes]

  // Sets the descriptors (each call checked by the test that makes it).
  void describe() {
    ASSERT_EQ(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, h, w), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetFilter4dDescriptor(filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, 3, 3), CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              CUDNN_STATUS_SUCCESS);
    ASSERT_EQ(cudnnSetConvolutionMathType(conv, initial_math_type(Precision::fp32)), CUDNN_STATUS_SUCCESS);
  }
  ConvolutionProblem problem() const { return {x, filter, conv, y}; }
  // The search arena this problem needs (x and y activations, the filter).
  static void reserve(SetupContext& ctx) { ctx.reserve_arena(activation_bytes, weight_bytes, activation_bytes); }
};

// A cuDNN handle bound to a stream of its own, as a session's (each test checks the binding with bind()).
struct SearchTestHandles {
  CudnnHandle dnn = make_cudnn_handle();
  Stream stream = make_stream();
  void bind() const { ASSERT_EQ(cudnnSetStream(dnn, stream), CUDNN_STATUS_SUCCESS); }
};

}  // namespace crossbench::cudnn
