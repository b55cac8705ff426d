// The cuDNN engine's own fusion kernels (kernels.hpp) against host
// references (label `gpu`; skips with a reason when no GPU is visible): the
// convolution epilogue (bias + relu) in every layout it takes, the residual
// add + relu, the inference batch-norm folding, and NHWC max pooling (vector
// and scalar paths, disjoint, overlapping and ceil-mode windows, the relu
// mask of conv_bias_relu_pool, 32- and 64-bit offsets), and the cuBLAS GEMM
// weight gradient of 1x1 NHWC convolutions (gemm_weight_gradient.hpp), and
// the im2col + GEMM forward and weight gradient (im2col_gemm.hpp), and the
// fused training batch-norm + (add +) relu, forward and backward
// (kernels_batch_norm.hpp), and the Graph API forward with a residual in its
// epilogue (graph_api_convolution.hpp: conv_bn_add_relu's fused graph). The LRN and
// pitched-row kernels are in cudnn_kernels_lrn_rows_test.cpp, the shared helpers in
// kernels_test_support.hpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "crossbench/device.hpp"
#include "crossbench/error.hpp"
#include "engines/cudnn/gemm_weight_gradient.hpp"
#include "engines/cudnn/graph_api_convolution.hpp"
#include "engines/cudnn/handles.hpp"
#include "engines/cudnn/cublaslt_matmul.hpp"
#include "engines/cudnn/im2col_gemm.hpp"
#include "engines/cudnn/kernels_batch_norm.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"
#include "engines/cudnn/tensor_compare.hpp"
#include "engines/cudnn/kernels_pooling_lrn.hpp"
#include "engines_cudnn/kernels_test_support.hpp"

namespace crossbench::cudnn {
namespace {

using test::DeviceArray;
using test::random_values;
using test::stored;

using Dims = std::array<std::int64_t, 4>;

struct EpilogueCase {
  const char* name;
  Dims dims;          // N, C, H, W of y
  Dims strides;       // y's element strides (may be a slice of a larger buffer)
  std::int64_t span;  // elements of the buffer holding y
};

// Packed NHWC with C a multiple of the vector (fp32: 4, bf16: 8) and without;
// NCHW packed; an NCHW concat slice (channels 2..5 of 9).
std::vector<EpilogueCase> epilogue_cases() {
  return {
      {"nhwc_vector", {2, 16, 3, 5}, {16 * 15, 1, 5 * 16, 16}, 2 * 16 * 15},
      {"nhwc_scalar", {2, 6, 3, 5}, {6 * 15, 1, 5 * 6, 6}, 2 * 6 * 15},
      {"nchw", {2, 6, 3, 5}, {6 * 15, 15, 5, 1}, 2 * 6 * 15},
      {"nchw_slice", {2, 4, 3, 5}, {9 * 15, 15, 5, 1}, 2 * 9 * 15},
  };
}

TEST(CudnnKernels, BiasActivationMatchesTheHostInEveryLayout) {
  SKIP_WITHOUT_GPU();
  for (DType type : {DType::f32, DType::bf16})
    for (bool relu : {false, true})
      for (const EpilogueCase& c : epilogue_cases()) {
        ASSERT_TRUE(kernels::bias_activation_supported(c.dims, c.strides)) << c.name;
        std::vector<float> y = random_values(static_cast<std::size_t>(c.span), 1);
        y[0] = std::numeric_limits<float>::quiet_NaN();  // a NaN stays NaN through the relu
        const std::vector<float> bias = random_values(static_cast<std::size_t>(c.dims[1]), 2);
        DeviceArray device_y(y, type), device_bias(bias, type);
        kernels::bias_activation(device_y.get(), type, c.dims, c.strides, device_bias.get(), relu, nullptr);
        const std::vector<float> got = device_y.values();
        std::vector<float> expected(y.size());
        for (std::size_t i = 0; i < y.size(); ++i) expected[i] = stored(y[i], type);
        for (std::int64_t n = 0; n < c.dims[0]; ++n)
          for (std::int64_t ch = 0; ch < c.dims[1]; ++ch)
            for (std::int64_t h = 0; h < c.dims[2]; ++h)
              for (std::int64_t w = 0; w < c.dims[3]; ++w) {
                const auto i = static_cast<std::size_t>(n * c.strides[0] + ch * c.strides[1] + h * c.strides[2] +
                                                        w * c.strides[3]);
                float v = stored(y[i], type) + stored(bias[static_cast<std::size_t>(ch)], type);
                if (relu && v < 0) v = 0;
                expected[i] = stored(v, type);
              }
        const float tolerance = type == DType::bf16 ? 1e-2f : 1e-6f;
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (std::isnan(expected[i])) {
            EXPECT_TRUE(std::isnan(got[i])) << c.name << " element " << i;
            continue;
          }
          ASSERT_NEAR(got[i], expected[i], tolerance) << c.name << (relu ? " relu" : "") << " element " << i
                                                      << " (elements outside a slice must stay as they were)";
        }
      }
}

// A 3x3 (padding 1) or 1x1 convolution, stride 1, over NHWC x and OHWI weights as stored in `type`
// (rounded), in double: y (NHWC) before any epilogue.
struct HostConvolution {
  std::int64_t n, in, out, h, w, k;
};
std::vector<double> host_convolution_nhwc(const std::vector<float>& x, const std::vector<float>& weights,
                                          const HostConvolution& c, DType type) {
  std::vector<double> y(static_cast<std::size_t>(c.n * c.h * c.w * c.out), 0.0);
  const std::int64_t pad = c.k / 2;
  for (std::int64_t b = 0; b < c.n; ++b)
    for (std::int64_t i = 0; i < c.h; ++i)
      for (std::int64_t j = 0; j < c.w; ++j)
        for (std::int64_t o = 0; o < c.out; ++o) {
          double sum = 0;
          for (std::int64_t di = 0; di < c.k; ++di)
            for (std::int64_t dj = 0; dj < c.k; ++dj) {
              const std::int64_t si = i + di - pad, sj = j + dj - pad;
              if (si < 0 || si >= c.h || sj < 0 || sj >= c.w) continue;
              for (std::int64_t ch = 0; ch < c.in; ++ch)
                sum += static_cast<double>(stored(x[static_cast<std::size_t>(((b * c.h + si) * c.w + sj) * c.in + ch)], type)) *
                       stored(weights[static_cast<std::size_t>(((o * c.k + di) * c.k + dj) * c.in + ch)], type);
            }
          y[static_cast<std::size_t>(((b * c.h + i) * c.w + j) * c.out + o)] = sum;
        }
  return y;
}

// The problem's graph, or null with cuDNN's refusal added to `skipped` (the case is then not checked).
std::unique_ptr<GraphConvolution> created_or_noted(const CudnnHandle& handle, const GraphConvolutionProblem& problem,
                                                   const std::string& what, std::string& skipped) {
  try {
    return GraphConvolution::create(handle.get(), problem);
  } catch (const Error& e) {
    skipped += what + ": refused (" + e.what() + "); ";
    return nullptr;
  }
}

// conv_bn_add_relu's graph, y = relu(conv(x, w) + bias + residual), every
// plan of the heuristics' first six that builds, against a double-precision
// host convolution of the stored inputs (3x3, padding 1, NHWC, 2x16x6x6 →
// 32 channels): tf32 within 5e-3 of the largest |y| (inputs rounded to 10
// mantissa bits), bf16 within 1.6e-2 (the output's rounding, 2^-8, and the
// fp32 sum's). Where cuDNN lists or builds no plan for the graph (the engine
// then runs the unfused ops and says so), the case says why and is skipped.
TEST(CudnnKernels, GraphConvolutionAddsTheResidualInItsEpilogue) {
  SKIP_WITHOUT_GPU();
  if (!graph_api_available()) GTEST_SKIP() << "no Graph API in this build: " << graph_api_unavailable_reason();
  const std::int64_t n = 2, in = 16, out = 32, h = 6, w = 6, k = 3;
  const CudnnHandle handle = make_cudnn_handle();
  std::string skipped;
  int checked = 0;
  for (const auto& [precision, type, bound] : {std::tuple{Precision::tf32, DType::f32, 5e-3},
                                               std::tuple{Precision::bf16, DType::bf16, 1.6e-2},
                                               std::tuple{Precision::fp32, DType::f32, 1e-5}}) {
    const std::string what(to_string(precision));
    GraphConvolutionProblem problem;
    problem.precision = precision;
    problem.x = Tensor::packed({n, in, h, w}, type, true);
    problem.w = Tensor::packed({out, in, k, k}, type, true);
    problem.y = Tensor::packed({n, out, h, w}, type, true);
    problem.bias = Tensor::packed({1, out, 1, 1}, type, true);
    problem.residual = problem.y;
    problem.residual.buffer = 0;  // valid: the graph takes it
    problem.bias_relu = true;
    problem.padding = 1;
    problem.stride = 1;
    problem.workspace_limit_bytes = std::int64_t{256} << 20;
    const std::unique_ptr<GraphConvolution> graph = created_or_noted(handle, problem, what, skipped);
    if (!graph) continue;
    const std::vector<float> x = random_values(static_cast<std::size_t>(n * h * w * in), 11);
    const std::vector<float> weights = random_values(static_cast<std::size_t>(out * k * k * in), 12);
    const std::vector<float> bias = random_values(static_cast<std::size_t>(out), 13);
    const std::vector<float> residual = random_values(static_cast<std::size_t>(n * h * w * out), 14);
    DeviceArray device_x(x, type), device_w(weights, type), device_bias(bias, type), device_residual(residual, type),
        device_y(std::vector<float>(residual.size(), 0.0f), type);
    // The host reference over the stored (rounded) values; tf32's own input rounding is within the bound.
    std::vector<double> want = host_convolution_nhwc(x, weights, {n, in, out, h, w, k}, type);
    double largest = 0;
    for (std::size_t at = 0; at < want.size(); ++at) {
      const std::size_t o = at % static_cast<std::size_t>(out);
      want[at] = std::max(0.0, want[at] + stored(bias[o], type) + stored(residual[at], type));
      largest = std::max(largest, want[at]);
    }
    std::int64_t workspace_bytes = 0;
    for (int plan = 0; plan < graph->plan_count() && plan < 6; ++plan)
      if (graph->build(plan)) workspace_bytes = std::max(workspace_bytes, graph->workspace_bytes(plan));
    void* workspace = nullptr;
    if (workspace_bytes > 0) ASSERT_EQ(cudaMalloc(&workspace, static_cast<std::size_t>(workspace_bytes)), cudaSuccess);
    int ran = 0;
    for (int plan = 0; plan < graph->plan_count() && plan < 6; ++plan) {
      if (!graph->build(plan)) continue;
      ASSERT_EQ(cudaMemset(device_y.get(), 0, residual.size() * (type == DType::bf16 ? 2 : 4)), cudaSuccess);
      if (!graph->run(handle.get(), plan, device_x.get(), device_w.get(), device_y.get(), device_bias.get(),
                      device_residual.get(), workspace, true)) {
        std::cerr << what << " plan " << graph->plan_name(plan) << ": refused at run time\n";
        continue;
      }
      ++ran;
      const std::vector<float> got = device_y.values();
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LE(worst, bound * largest) << what << " plan " << graph->plan_name(plan);
      std::cerr << what << " plan " << graph->plan_name(plan) << ": worst |error| " << worst / largest
                << " of the largest |y|\n";
    }
    if (workspace != nullptr) (void)cudaFree(workspace);
    if (ran == 0) skipped += what + ": " + std::to_string(graph->plan_count()) + " plans listed, none built and ran; ";
    checked += ran > 0;
  }
  if (!skipped.empty()) std::cerr << "not checked: " << skipped << "\n";
  if (checked == 0) GTEST_SKIP() << "cuDNN runs no plan of the graph in any precision here: " << skipped;
}

// A plain forward that also writes y's per-channel sum and sum of squares (cuDNN's genstats: the
// statistics a training batch-norm after the convolution needs, issue 24), for a 3x3 and a 1x1
// convolution (NHWC, 2x16x6x6 -> 32 channels), every plan of the heuristics' first six that builds: y
// against the host convolution as the residual graph's test holds it, and each channel's sums against the
// host's sums of y (the reference's, not the stored output's): tf32 within 5e-3 of the channel's sum of |y|
// (sum of y^2: 1e-2), bf16 within 1.6e-2 (3.2e-2), fp16 2e-3 (4e-3), fp32 1e-5 (2e-5). It asks cuDNN which engines this GPU
// has for the fusion, and prints their names and whether a plan writes its sums or adds to its outputs:
// where none builds and runs in a precision, the case says why.
TEST(CudnnKernels, GraphConvolutionWritesTheOutputsStatistics) {
  SKIP_WITHOUT_GPU();
  if (!graph_api_available()) GTEST_SKIP() << "no Graph API in this build: " << graph_api_unavailable_reason();
  const std::int64_t n = 2, in = 16, out = 32, h = 6, w = 6;
  const CudnnHandle handle = make_cudnn_handle();
  std::string skipped;
  int checked = 0;
  for (const std::int64_t k : {3, 1})
    for (const auto& [precision, type, bound] : {std::tuple{Precision::tf32, DType::f32, 5e-3},
                                                 std::tuple{Precision::bf16, DType::bf16, 1.6e-2},
                                                 // fp16: the one io type whose statistics graph cuDNN 9.14 runs
                                                 // on an H100 (bench/results/2026-12-13/call74h); fp16's rounding
                                                 // of y is 2^-11 relative, so 2e-3 leaves four times that
                                                 std::tuple{Precision::fp16, DType::f16, 2e-3},
                                                 std::tuple{Precision::fp32, DType::f32, 1e-5}}) {
      const std::string what = std::string(to_string(precision)) + " " + std::to_string(k) + "x" + std::to_string(k);
      GraphConvolutionProblem problem;
      problem.precision = precision;
      problem.x = Tensor::packed({n, in, h, w}, type, true);
      problem.w = Tensor::packed({out, in, k, k}, type, true);
      problem.y = Tensor::packed({n, out, h, w}, type, true);
      problem.statistics = true;
      problem.padding = static_cast<int>(k / 2);
      problem.stride = 1;
      problem.workspace_limit_bytes = std::int64_t{256} << 20;
      const std::unique_ptr<GraphConvolution> graph = created_or_noted(handle, problem, what, skipped);
      if (!graph) continue;
      EXPECT_TRUE(graph->runtime_compiled()) << "a graph with statistics admits cuDNN's runtime fusion engines";
      const std::vector<float> x = random_values(static_cast<std::size_t>(n * h * w * in), 21);
      const std::vector<float> weights = random_values(static_cast<std::size_t>(out * k * k * in), 22);
      const std::vector<double> want = host_convolution_nhwc(x, weights, {n, in, out, h, w, k}, type);
      std::vector<double> want_sum(static_cast<std::size_t>(out)), want_squares(want_sum.size()), magnitude(want_sum.size());
      double largest = 0;
      for (std::size_t at = 0; at < want.size(); ++at) {
        const std::size_t o = at % static_cast<std::size_t>(out);
        want_sum[o] += want[at];
        want_squares[o] += want[at] * want[at];
        magnitude[o] += std::abs(want[at]);
        largest = std::max(largest, std::abs(want[at]));
      }
      DeviceArray device_x(x, type), device_w(weights, type), device_y(std::vector<float>(want.size(), 0.0f), type),
          device_sum(std::vector<float>(want_sum.size(), 0.0f), DType::f32),
          device_squares(std::vector<float>(want_sum.size(), 0.0f), DType::f32);
      std::int64_t workspace_bytes = 0;
      for (int plan = 0; plan < graph->plan_count() && plan < 6; ++plan)
        if (graph->build(plan)) workspace_bytes = std::max(workspace_bytes, graph->workspace_bytes(plan));
      void* workspace = nullptr;
      if (workspace_bytes > 0) ASSERT_EQ(cudaMalloc(&workspace, static_cast<std::size_t>(workspace_bytes)), cudaSuccess);
      std::cerr << what << ": " << graph->plan_count() << " plans listed\n";
      int ran = 0;
      for (int plan = 0; plan < graph->plan_count() && plan < 6; ++plan) {
        if (!graph->build(plan)) {
          std::cerr << what << " plan " << graph->plan_name(plan) << ": refused at build\n";
          continue;
        }
        // Zeroed before each run (the sums may be accumulated into their outputs: said below), so a plan that
        // skips a sum cannot pass on an earlier plan's.
        ASSERT_EQ(cudaMemset(device_sum.get(), 0, want_sum.size() * sizeof(float)), cudaSuccess);
        ASSERT_EQ(cudaMemset(device_squares.get(), 0, want_sum.size() * sizeof(float)), cudaSuccess);
        if (!graph->run_with_statistics(handle.get(), plan, device_x.get(), device_w.get(), device_y.get(),
                                        static_cast<float*>(device_sum.get()), static_cast<float*>(device_squares.get()),
                                        workspace, true)) {
          std::cerr << what << " plan " << graph->plan_name(plan) << ": refused at run time\n";
          continue;
        }
        ++ran;
        const std::vector<float> y = device_y.values(), sum = device_sum.values(), squares = device_squares.values();
        double worst_y = 0, worst_sum = 0, worst_squares = 0;
        for (std::size_t i = 0; i < y.size(); ++i) worst_y = std::max(worst_y, std::abs(y[i] - want[i]));
        for (std::size_t o = 0; o < want_sum.size(); ++o) {
          EXPECT_LE(std::abs(sum[o] - want_sum[o]), bound * magnitude[o]) << what << " channel " << o << " sum";
          EXPECT_LE(std::abs(squares[o] - want_squares[o]), 2 * bound * want_squares[o])
              << what << " channel " << o << " sum of squares";
          worst_sum = std::max(worst_sum, std::abs(sum[o] - want_sum[o]) / magnitude[o]);
          worst_squares = std::max(worst_squares, std::abs(squares[o] - want_squares[o]) / want_squares[o]);
        }
        EXPECT_LE(worst_y, bound * largest) << what << " plan " << graph->plan_name(plan);
        // Run again without zeroing: whether the plan writes its sums or adds to what the outputs hold, which
        // the engine must know before it takes them (a replayed CUDA graph would otherwise add up steps).
        ASSERT_TRUE(graph->run_with_statistics(handle.get(), plan, device_x.get(), device_w.get(), device_y.get(),
                                               static_cast<float*>(device_sum.get()),
                                               static_cast<float*>(device_squares.get()), workspace, false));
        const std::vector<float> again = device_sum.values();
        const double ratio = again[0] / want_sum[0];
        std::cerr << what << " plan " << graph->plan_name(plan) << ": worst |error| y " << worst_y / largest
                  << " of the largest |y|, sum " << worst_sum << " of the channel's sum of |y|, sum of squares "
                  << worst_squares << " of its own; run again unzeroed: channel 0's sum x" << ratio
                  << (std::abs(ratio - 2) < 0.1 ? " (accumulates)" : std::abs(ratio - 1) < 0.1 ? " (writes)" : "") << "\n";
      }
      if (workspace != nullptr) (void)cudaFree(workspace);
      if (ran == 0) skipped += what + ": " + std::to_string(graph->plan_count()) + " plans listed, none built and ran; ";
      checked += ran > 0;
    }
  if (!skipped.empty()) std::cerr << "not checked: " << skipped << "\n";
  if (checked == 0) GTEST_SKIP() << "cuDNN runs no plan of the graph in any precision here: " << skipped;
}

TEST(CudnnKernels, BiasActivationRefusesOtherLayouts) {
  const Dims dims{2, 4, 3, 5};
  EXPECT_FALSE(kernels::bias_activation_supported(dims, {60, 1, 20, 8}))
      << "an NHWC channel slice (pixel stride 8 > C) is not packed";
  EXPECT_TRUE(kernels::bias_activation_supported(dims, {60, 15, 5, 1}));
}

// The agreement check's measure (tensor_compare.hpp) and its reference epilogue, on the device, over
// an NHWC channel slice (a concat's part, elements strided): only the slice's elements count, the bytes
// between them not; one changed element gives its difference over the largest |value|; a NaN gives
// infinity; bias_relu_strided adds the bias and clamps the slice's elements alone.
TEST(CudnnKernels, DeviceReferenceAndStridedEpilogueTouchTheTensorsElementsOnly) {
  SKIP_WITHOUT_GPU();
  for (DType type : {DType::f32, DType::bf16}) {
    // 2 x 3 x 4 x 5 elements: channels [2, 5) of an NHWC tensor with 8 channels per pixel.
    const Tensor slice = Tensor::packed({2, 8, 4, 5}, type, true).channel_slice(2, 3);
    std::vector<std::size_t> at;  // the slice's elements, N, C, H, W order, from the buffer's start
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 3; ++c)
        for (std::int64_t h = 0; h < 4; ++h)
          for (std::int64_t w = 0; w < 5; ++w)
            at.push_back(static_cast<std::size_t>(2 + n * slice.strides[0] + c * slice.strides[1] +
                                                  h * slice.strides[2] + w * slice.strides[3]));
    std::vector<float> values = random_values(2 * 8 * 4 * 5, 11);
    for (float& v : values) v = stored(v, type);
    DeviceArray memory(values, type);
    std::vector<float> in_slice;
    for (std::size_t i : at) in_slice.push_back(values[i]);
    EXPECT_EQ(host_floats(memory.at(2), slice, nullptr, "the test"), in_slice);
    float largest = 0;
    for (float v : in_slice) largest = std::max(largest, std::fabs(v));
    DeviceArray storage(std::vector<float>(values.size(), 0.0f), type);
    DeviceArray counters(std::vector<float>(3, 0.0f), DType::f32);  // three unsigned counters' bytes
    const DeviceReference reference(memory.at(2), slice, storage.get(), static_cast<unsigned*>(counters.get()),
                                    nullptr);
    EXPECT_EQ(reference.difference_from(memory.at(2)), 0.0);

    // Every value between the slice's elements changed: no difference.
    std::vector<float> other(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) other[i] = stored(values[i] * 3.0f + 1.0f, type);
    for (std::size_t i : at) other[i] = values[i];
    EXPECT_EQ(reference.difference_from(DeviceArray(other, type).at(2)), 0.0) << "between the elements: not counted";
    // One element off: its difference over the largest |value|; a NaN: infinitely far.
    other[at[7]] = stored(values[at[7]] + 0.25f, type);
    EXPECT_NEAR(reference.difference_from(DeviceArray(other, type).at(2)),
                std::fabs(other[at[7]] - values[at[7]]) / largest, 1e-6);
    other[at[3]] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isinf(reference.difference_from(DeviceArray(other, type).at(2))));

    // The reference epilogue: y + bias[c], clamped at 0, the slice's elements alone.
    const std::vector<float> bias = {stored(0.5f, type), stored(-0.25f, type), stored(0.125f, type)};
    DeviceArray device_bias(bias, type);
    kernels::bias_relu_strided(memory.at(2), type, slice.dims, slice.strides, device_bias.get(), true, nullptr);
    const std::vector<float> got = memory.values();
    std::vector<bool> is_slice(values.size(), false);
    for (std::size_t k = 0; k < at.size(); ++k) {
      is_slice[at[k]] = true;
      const std::size_t channel = k / (4 * 5) % 3;
      const float want = stored(std::max(values[at[k]] + bias[channel], 0.0f), type);
      EXPECT_NEAR(got[at[k]], want, type == DType::bf16 ? 1e-2f : 1e-6f) << k;
    }
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!is_slice[i]) EXPECT_EQ(got[i], values[i]) << "outside the slice, element " << i;
  }
}

TEST(CudnnKernels, AddReluIsOnePassOfBoth) {
  SKIP_WITHOUT_GPU();
  for (DType type : {DType::f32, DType::bf16})
    for (std::size_t count : {std::size_t{4096}, std::size_t{1001}}) {  // vectorised and not
      std::vector<float> a = random_values(count, 3);
      const std::vector<float> b = random_values(count, 4);
      a[5] = std::numeric_limits<float>::quiet_NaN();
      DeviceArray device_a(a, type), device_b(b, type);
      kernels::add_relu(device_a.get(), device_b.get(), device_a.get(), type, static_cast<std::int64_t>(count),
                        nullptr);
      const std::vector<float> got = device_a.values();
      for (std::size_t i = 0; i < count; ++i) {
        const float sum = stored(a[i], type) + stored(b[i], type);
        if (std::isnan(sum)) {
          EXPECT_TRUE(std::isnan(got[i])) << i;
          continue;
        }
        ASSERT_NEAR(got[i], stored(sum < 0 ? 0.0f : sum, type), type == DType::bf16 ? 1e-2f : 1e-6f)
            << "count " << count << " element " << i;
      }
    }
}

// The relu kernels that replace cudnnActivation* on packed tensors: forward
// in place (NaN kept), backward writing over dy (the in-place first
// contribution) and accumulating into another gradient; each element exact
// (the forward and the masked write have no arithmetic; the accumulation is
// one add, rounded once).
TEST(CudnnKernels, ReluForwardAndBackwardMatchTheHost) {
  SKIP_WITHOUT_GPU();
  for (DType type : {DType::f32, DType::bf16})
    for (std::size_t count : {std::size_t{4096}, std::size_t{1001}}) {  // vectorised and not
      std::vector<float> x = random_values(count, 11);
      x[7] = std::numeric_limits<float>::quiet_NaN();
      const std::vector<float> dy = random_values(count, 12), previous = random_values(count, 13);
      DeviceArray device_x(x, type);
      kernels::relu(device_x.get(), device_x.get(), type, static_cast<std::int64_t>(count), nullptr);
      const std::vector<float> y = device_x.values();
      for (std::size_t i = 0; i < count; ++i) {
        const float want = stored(x[i], type);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(y[i])) << i;
          continue;
        }
        ASSERT_EQ(y[i], want < 0 ? 0.0f : want) << "count " << count << " element " << i;
      }
      DeviceArray in_place(dy, type), accumulated(previous, type);
      kernels::relu_backward(device_x.get(), in_place.get(), in_place.get(), type, static_cast<std::int64_t>(count),
                             0.0f, nullptr);
      kernels::relu_backward(device_x.get(), in_place.get(), accumulated.get(), type,
                             static_cast<std::int64_t>(count), 1.0f, nullptr);
      const std::vector<float> written = in_place.values(), sums = accumulated.values();
      for (std::size_t i = 0; i < count; ++i) {
        const float masked = y[i] > 0 ? stored(dy[i], type) : 0.0f;
        ASSERT_EQ(written[i], masked) << "count " << count << " element " << i;
        ASSERT_EQ(sums[i], stored(masked + stored(previous[i], type), type)) << "count " << count << " element " << i;
      }
    }
}

// ---- Fused training batch-norm + (add +) relu -------------------------------------

// One (rows x channels) NHWC tensor through the fused kernels against a host
// reference in double precision computed from the same stored inputs:
// saved statistics, running statistics, y, and (with the mask of the
// device's own y, so that a bf16 rounding at zero cannot flip it) dgamma,
// dbeta, dx and the residual's gradient, written and accumulated. Bounds:
// statistics and parameter gradients are fp32 sums in every data type, held
// to 1e-5 of their scale (mean: the spread of x; sums: the sum of the terms'
// magnitudes); y and dx to 1e-5 of the tensor's largest value in fp32, and
// in bf16 to one rounding of the element (2^-8 relative) plus that. Each
// pass runs twice on the same workspace (and the forward on the same tickets), as
// graph replays do: the results must be identical and every ticket counter back
// at 0 after each forward.
struct BatchNormCase {
  std::int64_t rows, channels;
  bool residual;
  float dresidual_beta, dx_beta;
  int multiprocessors = 0;  // the grid's SM count (few: few chunks, a single one); 0: the device's
};

// The ticket counters (32-bit, in an fp32 array), read back: every launch must leave them 0.
std::vector<unsigned> ticket_values(const DeviceArray& tickets) {
  const std::vector<float> raw = tickets.values();
  std::vector<unsigned> values(raw.size());
  std::memcpy(values.data(), raw.data(), raw.size() * sizeof(unsigned));
  return values;
}

// The fused forward's arguments over device arrays (x and y of `type`; the per-channel ones fp32).
kernels::BatchNormReluForward forward_arguments(const DeviceArray& x, const DeviceArray& y, DType type,
                                                const DeviceArray& gamma, const DeviceArray& beta,
                                                const DeviceArray& running_mean, const DeviceArray& running_variance,
                                                const DeviceArray& mean, const DeviceArray& inverse_std) {
  kernels::BatchNormReluForward forward;
  forward.x = x.get();
  forward.y = y.get();
  forward.type = type;
  forward.gamma = static_cast<const float*>(gamma.get());
  forward.beta = static_cast<const float*>(beta.get());
  forward.running_mean = static_cast<float*>(running_mean.get());
  forward.running_variance = static_cast<float*>(running_variance.get());
  forward.saved_mean = static_cast<float*>(mean.get());
  forward.saved_inverse_std = static_cast<float*>(inverse_std.get());
  return forward;
}

void expect_batch_norm_relu_matches_the_host(const BatchNormCase& c, DType type) {
  const std::int64_t rows = c.rows, channels = c.channels;
  const auto count = static_cast<std::size_t>(rows * channels);
  const std::string what = std::to_string(rows) + "x" + std::to_string(channels) + " " + name_of(type) +
                           (c.residual ? " +residual" : "") + " dres_beta " + std::to_string(c.dresidual_beta) +
                           " dx_beta " + std::to_string(c.dx_beta);
  // x far from zero mean (an offset per channel) and spread 3: the statistics must not cancel.
  std::vector<float> x = random_values(count, 21);
  for (std::size_t i = 0; i < count; ++i) x[i] = stored(3.0f * x[i] + 5.0f + static_cast<float>(i % channels % 7), type);
  std::vector<float> residual = random_values(count, 22), dy = random_values(count, 23),
                     previous_dres = random_values(count, 24), previous_dx = random_values(count, 25);
  for (auto* v : {&residual, &dy, &previous_dres, &previous_dx})
    for (float& e : *v) e = stored(e, type);
  std::vector<float> gamma = random_values(static_cast<std::size_t>(channels), 26),
                     beta = random_values(static_cast<std::size_t>(channels), 27);
  for (float& g : gamma) g = 1.0f + 0.5f * g;
  const std::vector<float> running_mean_before(static_cast<std::size_t>(channels), 0.5f),
      running_variance_before(static_cast<std::size_t>(channels), 2.0f);
  const float factor = 0.1f, epsilon = 1e-5f;

  DeviceArray d_x(x, type), d_residual(residual, type), d_y(std::vector<float>(count, 0.0f), type),
      d_dy(dy, type), d_dres(previous_dres, type), d_dx(previous_dx, type);
  DeviceArray d_gamma(gamma, DType::f32), d_beta(beta, DType::f32),
      d_running_mean(running_mean_before, DType::f32), d_running_variance(running_variance_before, DType::f32);
  const std::vector<float> zeros(static_cast<std::size_t>(channels), 0.0f);
  DeviceArray d_mean(zeros, DType::f32), d_inverse_std(zeros, DType::f32), d_dgamma(zeros, DType::f32),
      d_dbeta(zeros, DType::f32);
  int multiprocessors = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (c.multiprocessors > 0) multiprocessors = c.multiprocessors;
  const kernels::BatchNormGrid grid = kernels::batch_norm_grid(rows, channels, type, multiprocessors);
  // Garbage in the workspace, as the session's other ops leave it: the kernels must not read it before writing.
  DeviceArray workspace(std::vector<float>(grid.workspace_bytes() / sizeof(float), 1e30f), DType::f32);
  const std::int64_t tickets_per_pass = kernels::batch_norm_tickets(channels, type);
  ASSERT_EQ(tickets_per_pass, grid.tiles) << what;
  DeviceArray tickets(std::vector<float>(static_cast<std::size_t>(tickets_per_pass), 0.0f), DType::f32);
  const std::vector<unsigned> zero_tickets(static_cast<std::size_t>(tickets_per_pass), 0u);

  kernels::BatchNormReluForward forward = forward_arguments(d_x, d_y, type, d_gamma, d_beta, d_running_mean,
                                                            d_running_variance, d_mean, d_inverse_std);
  forward.residual = c.residual ? d_residual.get() : nullptr;
  forward.factor = 0.0f;  // check(): the running statistics stay as they are
  forward.epsilon = epsilon;
  forward.tickets = static_cast<unsigned*>(tickets.get());
  kernels::batch_norm_relu_forward(forward, grid, workspace.get(), nullptr);
  EXPECT_EQ(ticket_values(tickets), zero_tickets) << what << ": forward";
  EXPECT_EQ(d_running_mean.values(), running_mean_before) << what;
  EXPECT_EQ(d_running_variance.values(), running_variance_before) << what;
  const std::vector<float> first_y = d_y.values(), first_mean = d_mean.values();
  forward.factor = factor;
  kernels::batch_norm_relu_forward(forward, grid, workspace.get(), nullptr);
  EXPECT_EQ(ticket_values(tickets), zero_tickets) << what << ": forward";
  const std::vector<float> y = d_y.values(), mean = d_mean.values(), inverse_std = d_inverse_std.values(),
                           running_mean = d_running_mean.values(), running_variance = d_running_variance.values();
  EXPECT_EQ(y, first_y) << what << ": deterministic";
  EXPECT_EQ(mean, first_mean) << what << ": deterministic";

  kernels::BatchNormReluBackward backward;
  backward.x = d_x.get();
  backward.y = c.residual ? d_y.get() : nullptr;
  backward.dy = d_dy.get();
  backward.type = type;
  backward.gamma = forward.gamma;
  backward.beta = forward.beta;
  backward.saved_mean = forward.saved_mean;
  backward.saved_inverse_std = forward.saved_inverse_std;
  backward.dgamma = static_cast<float*>(d_dgamma.get());
  backward.dbeta = static_cast<float*>(d_dbeta.get());
  backward.dresidual = c.residual ? d_dres.get() : nullptr;
  backward.dresidual_beta = c.dresidual_beta;
  backward.dx = d_dx.get();
  backward.dx_beta = c.dx_beta;
  kernels::batch_norm_relu_backward(backward, grid, workspace.get(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  const std::vector<float> dgamma = d_dgamma.values(), dbeta = d_dbeta.values(), dres = d_dres.values(),
                           dx = d_dx.values();
  // Again, as a replay: the parameter gradients do not depend on dx's and the residual gradient's previous values.
  kernels::batch_norm_relu_backward(backward, grid, workspace.get(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  EXPECT_EQ(d_dgamma.values(), dgamma) << what << ": deterministic";
  EXPECT_EQ(d_dbeta.values(), dbeta) << what << ": deterministic";

  const double ulp = type == DType::bf16 ? std::ldexp(1.0, -8) : 0.0;
  double largest_y = 0, largest_dx = 0;
  std::vector<double> dx_want(count);
  for (std::int64_t ch = 0; ch < channels; ++ch) {
    const auto at = [&](std::int64_t r) { return static_cast<std::size_t>(r * channels + ch); };
    double sum = 0;
    for (std::int64_t r = 0; r < rows; ++r) sum += x[at(r)];
    const double m = sum / static_cast<double>(rows);
    double squares = 0;
    for (std::int64_t r = 0; r < rows; ++r) squares += (x[at(r)] - m) * (x[at(r)] - m);
    const double variance = squares / static_cast<double>(rows);
    const double spread = std::sqrt(variance);
    const double istd = 1.0 / std::sqrt(variance + epsilon);
    const auto k = static_cast<std::size_t>(ch);
    ASSERT_NEAR(mean[k], m, 1e-5 * (std::abs(m) + spread)) << what << " channel " << ch;
    ASSERT_NEAR(inverse_std[k], istd, 1e-5 * istd) << what << " channel " << ch;
    const double unbiased = rows > 1 ? squares / static_cast<double>(rows - 1) : variance;
    ASSERT_NEAR(running_mean[k], (1 - factor) * 0.5 + factor * m, 1e-5 * (std::abs(m) + spread)) << what;
    ASSERT_NEAR(running_variance[k], (1 - factor) * 2.0 + factor * unbiased, 1e-5 * (2.0 + unbiased)) << what;
    double sum_g = 0, sum_gx = 0, scale_g = 0, scale_gx = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::size_t i = at(r);
      const double xhat = (x[i] - m) * istd;
      double want = gamma[k] * xhat + beta[k] + (c.residual ? residual[i] : 0.0);
      want = want < 0 ? 0 : want;
      largest_y = std::max(largest_y, want);
      ASSERT_NEAR(y[i], want, ulp * want + 1e-5 * (1.0 + std::abs(want)) * 4) << what << " y row " << r << " channel " << ch;
      const double g = y[i] > 0 ? dy[i] : 0.0;
      sum_g += g;
      sum_gx += g * xhat;
      scale_g += std::abs(g);
      scale_gx += std::abs(g * xhat);
      if (c.residual) {
        const double want_dres = g + c.dresidual_beta * previous_dres[i];
        ASSERT_NEAR(dres[i], want_dres, ulp * std::abs(want_dres) + 1e-6) << what << " dres row " << r;
      }
    }
    ASSERT_NEAR(dbeta[k], sum_g, 1e-5 * scale_g + 1e-6) << what << " channel " << ch;
    ASSERT_NEAR(dgamma[k], sum_gx, 1e-5 * scale_gx + 1e-6) << what << " channel " << ch;
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::size_t i = at(r);
      const double xhat = (x[i] - m) * istd;
      const double g = y[i] > 0 ? dy[i] : 0.0;
      dx_want[i] = gamma[k] * istd * (g - sum_g / rows - xhat * sum_gx / rows) + c.dx_beta * previous_dx[i];
      largest_dx = std::max(largest_dx, std::abs(dx_want[i]));
    }
  }
  for (std::size_t i = 0; i < count; ++i)
    ASSERT_NEAR(dx[i], dx_want[i], ulp * std::abs(dx_want[i]) + 1e-5 * largest_dx)
        << what << " dx element " << i << " (largest |dx| " << largest_dx << ")";
}

TEST(CudnnKernels, FusedBatchNormReluMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  // ResNet shapes (layer4 at batch 1: 49 rows x 2048; conv1's 64 channels over many rows), a
  // channel count that leaves part of the last tile idle (24: 6 fp32 vectors, 3 bf16), and rows
  // that end inside a chunk and inside a block's row step; one chunk (a grid for 1 SM: the last
  // block is the only one) and many (~100 per channel tile, merged by each tile's last block).
  const std::vector<BatchNormCase> cases = {
      {49, 2048, false, 0, 0},    {49, 2048, true, 0, 0},     {12544, 64, false, 0, 1},
      {12544, 64, true, 0, 0},    {12544, 64, true, 1, 1},    {1001, 24, true, 1, 0},
      {7, 8, false, 0, 0},        {3137, 256, true, 0, 1},    {3137, 256, true, 0, 1, 1},
      {50177, 32, true, 1, 1, 132}, {50177, 32, false, 0, 0, 1},
  };
  for (DType type : {DType::f32, DType::bf16})
    for (const BatchNormCase& c : cases) {
      SCOPED_TRACE(std::to_string(c.rows) + "x" + std::to_string(c.channels) + " " + name_of(type));
      expect_batch_norm_relu_matches_the_host(c, type);
      if (HasFatalFailure()) return;
    }
}

// engine.conv_statistics: the fused forward finalizing a convolution's per-channel sums (Σx, Σx² in fp32,
// as cuDNN's genstats writes them) instead of its own pass over x: the saved mean and inverse std, the
// running statistics and y against the host's double-precision batch-norm of the same x (offset 5, spread 3:
// E[x²] - E[x]² must not cancel away the variance), and the sums left 0 for the next step. And
// kernels::channel_sums, the search's reference for a statistics plan, against the host's sums.
TEST(CudnnKernels, FusedBatchNormFromTheConvolutionsSumsMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{12544, 64}, {3137, 256}, {49, 2048}, {1001, 24}};
  for (DType type : {DType::f32, DType::bf16})
    for (const auto& [rows, channels] : shapes) {
      if (!kernels::batch_norm_relu_supported(channels, type)) continue;
      const std::string what = std::to_string(rows) + "x" + std::to_string(channels) + " " + name_of(type);
      const auto count = static_cast<std::size_t>(rows * channels);
      std::vector<float> x = random_values(count, 31);
      for (std::size_t i = 0; i < count; ++i) x[i] = stored(3.0f * x[i] + 5.0f + static_cast<float>(i % channels % 7), type);
      std::vector<double> sum(static_cast<std::size_t>(channels)), squares(static_cast<std::size_t>(channels));
      for (std::size_t i = 0; i < count; ++i) {
        sum[i % static_cast<std::size_t>(channels)] += x[i];
        squares[i % static_cast<std::size_t>(channels)] += static_cast<double>(x[i]) * x[i];
      }
      std::vector<float> sums32(2 * static_cast<std::size_t>(channels));
      for (std::size_t c = 0; c < sum.size(); ++c) {
        sums32[c] = static_cast<float>(sum[c]);
        sums32[sum.size() + c] = static_cast<float>(squares[c]);
      }
      std::vector<float> gamma = random_values(static_cast<std::size_t>(channels), 32),
                         beta = random_values(static_cast<std::size_t>(channels), 33);
      for (float& g : gamma) g = 1.0f + 0.5f * g;
      const std::vector<float> running_mean_before(static_cast<std::size_t>(channels), 0.5f),
          running_variance_before(static_cast<std::size_t>(channels), 2.0f);
      const std::vector<float> zeros(static_cast<std::size_t>(channels), 0.0f);
      DeviceArray d_x(x, type), d_y(std::vector<float>(count, 0.0f), type), d_sums(sums32, DType::f32);
      DeviceArray d_gamma(gamma, DType::f32), d_beta(beta, DType::f32), d_running_mean(running_mean_before, DType::f32),
          d_running_variance(running_variance_before, DType::f32), d_mean(zeros, DType::f32),
          d_inverse_std(zeros, DType::f32);
      int multiprocessors = 0;
      ASSERT_EQ(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
      const kernels::BatchNormGrid grid = kernels::batch_norm_grid(rows, channels, type, multiprocessors);
      DeviceArray workspace(std::vector<float>(grid.workspace_bytes() / sizeof(float), 1e30f), DType::f32);
      kernels::BatchNormReluForward forward = forward_arguments(d_x, d_y, type, d_gamma, d_beta, d_running_mean,
                                                                d_running_variance, d_mean, d_inverse_std);
      forward.factor = 0.1f;
      forward.epsilon = 1e-5f;
      forward.sum = static_cast<float*>(d_sums.get());
      forward.sum_of_squares = forward.sum + channels;
      // No tickets: the statistics pass does not run.
      kernels::batch_norm_relu_forward(forward, grid, workspace.get(), nullptr);
      const std::vector<float> y = d_y.values(), mean = d_mean.values(), inverse_std = d_inverse_std.values(),
                               running_mean = d_running_mean.values(), running_variance = d_running_variance.values();
      EXPECT_EQ(d_sums.values(), std::vector<float>(sums32.size(), 0.0f)) << what << ": the sums are left 0";
      const double ulp = type == DType::bf16 ? std::ldexp(1.0, -8) : 0.0;
      for (std::int64_t ch = 0; ch < channels; ++ch) {
        const auto k = static_cast<std::size_t>(ch);
        const double m = sum[k] / static_cast<double>(rows);
        double deviations = 0;
        for (std::int64_t r = 0; r < rows; ++r) deviations += (x[static_cast<std::size_t>(r * channels + ch)] - m) *
                                                             (x[static_cast<std::size_t>(r * channels + ch)] - m);
        const double variance = deviations / static_cast<double>(rows), spread = std::sqrt(variance);
        const double istd = 1.0 / std::sqrt(variance + 1e-5);
        // The fp32 sums carry one rounding each: about 6e-8 of E[x²] ≈ 40, against a variance of about 3.
        ASSERT_NEAR(mean[k], m, 1e-5 * (std::abs(m) + spread)) << what << " channel " << ch;
        ASSERT_NEAR(inverse_std[k], istd, 1e-5 * istd) << what << " channel " << ch;
        const double unbiased = rows > 1 ? deviations / static_cast<double>(rows - 1) : variance;
        ASSERT_NEAR(running_mean[k], 0.9 * 0.5 + 0.1 * m, 1e-5 * (std::abs(m) + spread)) << what;
        ASSERT_NEAR(running_variance[k], 0.9 * 2.0 + 0.1 * unbiased, 1e-5 * (2.0 + unbiased)) << what;
        for (std::int64_t r = 0; r < rows; ++r) {
          const auto i = static_cast<std::size_t>(r * channels + ch);
          double want = gamma[k] * (x[i] - m) * istd + beta[k];
          want = want < 0 ? 0 : want;
          ASSERT_NEAR(y[i], want, ulp * want + 4e-5 * (1.0 + std::abs(want))) << what << " y row " << r << " channel " << ch;
        }
      }
      // The search's reference: fp64 sums written (over garbage), not accumulated.
      DeviceArray d_reference(std::vector<float>(4 * static_cast<std::size_t>(channels), 1e30f), DType::f32);
      auto* reference = static_cast<double*>(d_reference.get());
      kernels::channel_sums(d_x.get(), type, rows, channels, reference, reference + channels, nullptr);
      const std::vector<float> raw = d_reference.values();
      std::vector<double> got(2 * static_cast<std::size_t>(channels));
      std::memcpy(got.data(), raw.data(), got.size() * sizeof(double));
      for (std::size_t c = 0; c < sum.size(); ++c) {
        ASSERT_NEAR(got[c], sum[c], 1e-9 * (std::abs(sum[c]) + 1.0)) << what << " channel_sums sum " << c;
        ASSERT_NEAR(got[sum.size() + c], squares[c], 1e-9 * squares[c]) << what << " channel_sums squares " << c;
      }
    }
}

TEST(CudnnKernels, FusedBatchNormGridFillsTheDevice) {
  // No GPU needed: the geometry is host arithmetic. H200: 132 SMs.
  for (const auto& [rows, channels] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {3136, 2048}, {200704, 64}, {802816, 64}, {12544, 1024}}) {
    for (DType type : {DType::f32, DType::bf16}) {
      const kernels::BatchNormGrid grid = kernels::batch_norm_grid(rows, channels, type, 132);
      const std::int64_t blocks = static_cast<std::int64_t>(grid.tiles) * grid.chunks;
      EXPECT_GE(blocks, 264) << rows << "x" << channels << ": at least two blocks per SM";
      EXPECT_EQ(kernels::batch_norm_tickets(channels, type), grid.tiles) << rows << "x" << channels;
      EXPECT_GE(static_cast<std::int64_t>(grid.chunks) * grid.rows_per_chunk, rows);
      EXPECT_LT(static_cast<std::int64_t>(grid.chunks - 1) * grid.rows_per_chunk, rows);
      // The apply pass: whole rows per tile (a contiguous range per block), the forward's wave.
      const kernels::BatchNormPassGrid& apply = grid.apply;
      const std::int64_t vectors = channels * static_cast<std::int64_t>(size_of(type)) / 16;
      EXPECT_EQ(apply.tile_vectors, std::min<std::int64_t>(vectors, 256)) << rows << "x" << channels;
      EXPECT_EQ(static_cast<std::int64_t>(apply.tiles) * apply.tile_vectors, vectors) << rows << "x" << channels;
      EXPECT_GE(static_cast<std::int64_t>(apply.tiles) * apply.chunks, 264) << rows << "x" << channels;
      EXPECT_GE(static_cast<std::int64_t>(apply.chunks) * apply.rows_per_chunk, rows);
      EXPECT_LT(static_cast<std::int64_t>(apply.chunks - 1) * apply.rows_per_chunk, rows);
      // The backward's own grid: wide tiles, more blocks.
      const kernels::BatchNormPassGrid& backward = grid.backward;
      EXPECT_GE(static_cast<std::int64_t>(backward.tiles) * backward.chunks, 264) << rows << "x" << channels;
      EXPECT_GE(backward.tile_vectors, grid.tile_vectors) << rows << "x" << channels;
      EXPECT_GE(static_cast<std::int64_t>(backward.chunks) * backward.rows_per_chunk, rows);
      EXPECT_LT(static_cast<std::int64_t>(backward.chunks - 1) * backward.rows_per_chunk, rows);
      // The partials stay a small share of the tensor's bytes.
      EXPECT_LT(static_cast<double>(grid.workspace_bytes()),
                0.1 * static_cast<double>(rows * channels * size_of(type)) + 65536.0)
          << rows << "x" << channels << " " << name_of(type);
    }
  }
  EXPECT_FALSE(kernels::batch_norm_relu_supported(12, DType::bf16));
  EXPECT_TRUE(kernels::batch_norm_relu_supported(12, DType::f32));
}

// Folding non-trivial statistics: the folded convolution's output equals
// batch-norm applied to the unfolded one, so weights and shift are checked
// against gamma (x - mean) / sqrt(var + eps) + beta on a 1x1 "convolution"
// (a dot product per output channel).
TEST(CudnnKernels, FoldBatchNormMatchesNormalisingTheOutput) {
  SKIP_WITHOUT_GPU();
  const std::int64_t out_channels = 5, per_output = 7;
  const double epsilon = 1e-3;
  const std::vector<float> w = random_values(static_cast<std::size_t>(out_channels * per_output), 5);
  const std::vector<float> conv_bias = random_values(static_cast<std::size_t>(out_channels), 6);
  const std::vector<float> gamma{0.5f, 1.5f, -2.0f, 1.0f, 0.25f}, beta{0.1f, -0.2f, 0.3f, 0.0f, 1.0f},
      mean{0.2f, -0.1f, 0.0f, 0.5f, -1.0f}, variance{1.0f, 0.25f, 4.0f, 0.01f, 2.0f};
  const std::vector<float> x = random_values(static_cast<std::size_t>(per_output), 7);
  for (bool with_bias : {false, true}) {
    DeviceArray device_w(w, DType::f32), device_bias(conv_bias, DType::f32),
        shift(std::vector<float>(static_cast<std::size_t>(out_channels)), DType::f32), g(gamma, DType::f32),
        b(beta, DType::f32), m(mean, DType::f32), v(variance, DType::f32);
    const kernels::BatchNormStatistics bn{static_cast<const float*>(g.get()), static_cast<const float*>(b.get()),
                                          static_cast<const float*>(m.get()), static_cast<const float*>(v.get()),
                                          epsilon};
    kernels::fold_batch_norm(device_w.get(), DType::f32, out_channels, per_output,
                             with_bias ? device_bias.get() : nullptr, shift.get(), bn, nullptr);
    const std::vector<float> folded_w = device_w.values(), folded_shift = shift.values();
    for (std::int64_t o = 0; o < out_channels; ++o) {
      double conv = with_bias ? conv_bias[static_cast<std::size_t>(o)] : 0.0, folded = folded_shift[static_cast<std::size_t>(o)];
      for (std::int64_t k = 0; k < per_output; ++k) {
        const auto i = static_cast<std::size_t>(o * per_output + k);
        conv += static_cast<double>(w[i]) * x[static_cast<std::size_t>(k)];
        folded += static_cast<double>(folded_w[i]) * x[static_cast<std::size_t>(k)];
      }
      const auto c = static_cast<std::size_t>(o);
      const double normalised = gamma[c] * (conv - mean[c]) / std::sqrt(variance[c] + epsilon) + beta[c];
      EXPECT_NEAR(folded, normalised, 1e-5 * (1 + std::abs(normalised)))
          << "output channel " << o << (with_bias ? " (convolution with a bias)" : "");
    }
  }
}

struct PoolCase {
  const char* name;
  std::int64_t n, c, h, w;
  kernels::PoolGeometry g;
  std::int64_t out_h, out_w;  // ceil mode may add a window that runs past the input
};

std::vector<PoolCase> pool_cases() {
  return {
      // Disjoint windows (kernel == stride, no padding): the backward's scatter path.
      {"2x2s2 vector", 2, 16, 6, 6, {2, 2, 0}, 3, 3},
      {"2x2s2 floor mode", 2, 16, 7, 7, {2, 2, 0}, 3, 3},  // row and column 6 in no window: dx 0 there
      {"2x2s2 ceil mode", 2, 16, 7, 7, {2, 2, 0}, 4, 4},   // the last windows hold one row or column
      {"2x2s2 several tiles per row", 2, 64, 4, 44, {2, 2, 0}, 2, 22},  // 22 * 64 / V vectors: > 128 threads
      {"3x3s3 scalar channels", 1, 6, 9, 9, {3, 3, 0}, 3, 3},
      // Overlapping windows: the gathering backward.
      {"3x3s2p1 overlapping", 2, 16, 7, 7, {3, 2, 1}, 4, 4},
      {"3x3s2 ceil mode", 2, 8, 6, 6, {3, 2, 0}, 3, 3},  // the last window covers rows 4..6 of 0..5
      {"3x3s2 alexnet", 2, 16, 13, 13, {3, 2, 0}, 6, 6},
      // 3x3 s2 runs a thread per 2 x 2 inputs: odd and even sizes, blocks past the last row and column, tiles.
      {"3x3s2p1 resnet, several tiles per row", 2, 64, 8, 42, {3, 2, 1}, 4, 21},
      {"3x3s2p1 odd input", 1, 16, 9, 11, {3, 2, 1}, 5, 6},
      {"3x3s2 ceil mode, even input", 1, 8, 8, 10, {3, 2, 0}, 4, 5},  // the last windows run past the input
      {"3x3s1p1 scalar channels", 2, 6, 5, 5, {3, 1, 1}, 5, 5},
      {"3x3s1p1 several tiles per row", 1, 64, 3, 20, {3, 1, 1}, 3, 20},
      // A window size the forward knows only at run time (2 and 3 are compiled in).
      {"5x5s2p2 run-time window", 2, 16, 9, 9, {5, 2, 2}, 5, 5},
      {"4x4s4 run-time window, disjoint", 1, 8, 8, 8, {4, 4, 0}, 2, 2},
  };
}

// Forward: the window maximum and where it is (first maximum; with the relu
// mask, kPoolNoPosition where the maximum is not > 0); backward: each input
// gets the gradients of the windows whose maximum it was, plus beta * dx. With
// the relu mask the input is a relu's output (half of it zeros, so some
// windows are all zeros) and dx is the relu's input gradient: a window whose
// maximum is 0 passes no gradient. Both offset widths (32-bit is what these
// sizes choose; 64-bit forced).
TEST(CudnnKernels, MaxPoolNhwcMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  for (DType type : {DType::f32, DType::bf16})
    for (float beta : {0.0f, 1.0f})  // beta 0 must not read dx (it holds NaNs then)
    for (bool relu_mask : {false, true})
    for (kernels::PoolIndex index : {kernels::PoolIndex::automatic, kernels::PoolIndex::wide})
    for (const PoolCase& c : pool_cases()) {
      SCOPED_TRACE(std::string(c.name) + " " + name_of(type) + " beta " + std::to_string(beta) +
                   (relu_mask ? " relu mask" : "") + (index == kernels::PoolIndex::wide ? " 64-bit" : " 32-bit"));
      const auto in_count = static_cast<std::size_t>(c.n * c.h * c.w * c.c);
      const auto out_count = static_cast<std::size_t>(c.n * c.out_h * c.out_w * c.c);
      std::vector<float> x = random_values(in_count, 8);
      if (relu_mask)
        for (float& v : x) v = std::max(v, 0.0f);
      const std::vector<float> dy = random_values(out_count, 9),
                               dx_before = beta == 0.0f
                                               ? std::vector<float>(in_count, std::numeric_limits<float>::quiet_NaN())
                                               : random_values(in_count, 10);
      DeviceArray device_x(x, type), device_y(std::vector<float>(out_count), type), device_dy(dy, type),
          device_dx(dx_before, type);
      std::uint8_t* argmax = nullptr;
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&argmax), out_count), cudaSuccess);
      const std::array<std::int64_t, 4> in{c.n, c.c, c.h, c.w}, out{c.n, c.c, c.out_h, c.out_w};
      kernels::max_pool_nhwc_forward(device_x.get(), device_y.get(), argmax, type, in, out, c.g, nullptr, relu_mask,
                                     index);
      kernels::max_pool_nhwc_backward(device_dy.get(), argmax, device_dx.get(), type, in, out, c.g, beta, nullptr,
                                      index);
      const std::vector<float> y = device_y.values(), dx = device_dx.values();
      std::vector<std::uint8_t> where_bytes(out_count);
      ASSERT_EQ(cudaMemcpy(where_bytes.data(), argmax, out_count, cudaMemcpyDeviceToHost), cudaSuccess);
      (void)cudaFree(argmax);
      std::vector<float> expected_dx(in_count);
      for (std::size_t i = 0; i < in_count; ++i) expected_dx[i] = beta == 0.0f ? 0.0f : stored(dx_before[i], type);
      const auto at = [&](std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t ch, std::int64_t height,
                          std::int64_t width) { return static_cast<std::size_t>(((n * height + h) * width + w) * c.c + ch); };
      int masked = 0;
      for (std::int64_t n = 0; n < c.n; ++n)
        for (std::int64_t oh = 0; oh < c.out_h; ++oh)
          for (std::int64_t ow = 0; ow < c.out_w; ++ow)
            for (std::int64_t ch = 0; ch < c.c; ++ch) {
              float best = -INFINITY;
              std::size_t where = 0;
              std::int64_t position = 0;
              for (std::int64_t kh = 0; kh < c.g.kernel; ++kh)
                for (std::int64_t kw = 0; kw < c.g.kernel; ++kw) {
                  const std::int64_t h = oh * c.g.stride - c.g.padding + kh, w = ow * c.g.stride - c.g.padding + kw;
                  if (h < 0 || w < 0 || h >= c.h || w >= c.w) continue;
                  const float v = stored(x[at(n, h, w, ch, c.h, c.w)], type);
                  if (v > best) {
                    best = v;
                    where = at(n, h, w, ch, c.h, c.w);
                    position = kh * c.g.kernel + kw;
                  }
                }
              const std::size_t o = at(n, oh, ow, ch, c.out_h, c.out_w);
              ASSERT_EQ(y[o], best) << "output " << o;
              const bool passes = !relu_mask || best > 0.0f;
              ASSERT_EQ(static_cast<int>(where_bytes[o]), passes ? position : kernels::kPoolNoPosition)
                  << "argmax byte of output " << o;
              if (passes) expected_dx[where] += stored(dy[o], type);
              else ++masked;
            }
      if (relu_mask && c.g.kernel == 2) EXPECT_GT(masked, 0) << "no all-zero window: the mask went untested";
      const float tolerance = type == DType::bf16 ? 3e-2f : 1e-5f;
      for (std::size_t i = 0; i < in_count; ++i) ASSERT_NEAR(dx[i], expected_dx[i], tolerance) << "input gradient " << i;
    }
}

// The windows one argmax byte can name next to kPoolNoPosition, and when the
// backward scatters per window: host arithmetic, no GPU needed.
TEST(CudnnKernels, MaxPoolNhwcWindowLimits) {
  EXPECT_TRUE(kernels::pool_kernel_supported(15));  // 225 positions
  EXPECT_FALSE(kernels::pool_kernel_supported(16));  // 256: one byte cannot name them and kPoolNoPosition
  EXPECT_TRUE(kernels::pool_windows_disjoint({2, 2, 0}));
  EXPECT_FALSE(kernels::pool_windows_disjoint({3, 2, 0}));
  EXPECT_FALSE(kernels::pool_windows_disjoint({2, 2, 1}));
}

// The bias gradient of a convolution: per-channel sums of dy in each layout
// channel_sum has a kernel for (packed NHWC, NCHW planes including a concat
// slice, and a layout with neither), fp32 and bf16 outputs.
TEST(CudnnKernels, ChannelSumMatchesTheHostInEveryLayout) {
  SKIP_WITHOUT_GPU();
  const std::vector<EpilogueCase> cases = {
      {"nhwc", {3, 6, 4, 5}, {6 * 20, 1, 5 * 6, 6}, 3 * 6 * 20},
      {"nchw", {3, 6, 4, 5}, {6 * 20, 20, 5, 1}, 3 * 6 * 20},
      {"nchw_slice", {3, 4, 4, 5}, {9 * 20, 20, 5, 1}, 3 * 9 * 20},
      {"strided_rows", {3, 4, 4, 5}, {4 * 4 * 7, 4 * 7, 7, 1}, 3 * 4 * 4 * 7},  // rows padded to 7
  };
  for (DType type : {DType::f32, DType::bf16})
    for (const EpilogueCase& c : cases) {
      SCOPED_TRACE(std::string(c.name) + " " + name_of(type));
      const std::vector<float> x = random_values(static_cast<std::size_t>(c.span), 31);
      DeviceArray device_x(x, type), accumulator(std::vector<float>(static_cast<std::size_t>(c.dims[1]), 5.0f),
                                                 DType::f32),
          out(std::vector<float>(static_cast<std::size_t>(c.dims[1]), 7.0f), type);
      kernels::channel_sum(device_x.get(), type, c.dims, c.strides, static_cast<float*>(accumulator.get()), out.get(),
                           type, nullptr);
      const std::vector<float> sums = out.values();
      for (std::int64_t ch = 0; ch < c.dims[1]; ++ch) {
        double want = 0;
        for (std::int64_t n = 0; n < c.dims[0]; ++n)
          for (std::int64_t h = 0; h < c.dims[2]; ++h)
            for (std::int64_t w = 0; w < c.dims[3]; ++w)
              want += stored(x[static_cast<std::size_t>(n * c.strides[0] + ch * c.strides[1] + h * c.strides[2] +
                                                        w * c.strides[3])],
                             type);
        const double tolerance = type == DType::bf16 ? 2e-2 : 1e-5;
        ASSERT_NEAR(sums[static_cast<std::size_t>(ch)], want, tolerance * (1 + std::abs(want)))
            << "channel " << ch << " (the accumulator's 5s must be zeroed first)";
      }
    }
}

// dW[o][i] = sum over pixels r of dy[r][o] * x[r][i], with x a channel slice
// (row stride wider than its channels) as a GoogLeNet branch may read.
TEST(CudnnKernels, GemmWeightGradientOfA1x1ConvolutionMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  // Both row strides wider than their channels: ld must follow them, not the channel count.
  const std::int64_t rows = 2 * 5 * 7, in = 24, out = 16, x_stride = 40, dy_stride = 20;
  const CublasHandle blas = make_cublas_handle();
  {
    const DType type = DType::bf16;  // fp16 takes the same cuBLAS call with CUDA_R_16F
    const std::vector<float> x = random_values(static_cast<std::size_t>(rows * x_stride), 11),
                             dy = random_values(static_cast<std::size_t>(rows * dy_stride), 12);
    DeviceArray device_x(x, type), device_dy(dy, type), device_dw(std::vector<float>(out * in, 7.0f), type);
    gemm_weight_gradient(blas, {type, rows, in, out, x_stride, dy_stride}, device_x.get(), device_dy.get(),
                         device_dw.get());
    const std::vector<float> dw = device_dw.values();
    for (std::int64_t o = 0; o < out; ++o)
      for (std::int64_t i = 0; i < in; ++i) {
        double sum = 0;
        for (std::int64_t r = 0; r < rows; ++r)
          sum += static_cast<double>(stored(dy[static_cast<std::size_t>(r * dy_stride + o)], type)) *
                 stored(x[static_cast<std::size_t>(r * x_stride + i)], type);
        ASSERT_NEAR(dw[static_cast<std::size_t>(o * in + i)], sum, 2e-2 * (1 + std::abs(sum)))
            << "dW[" << o << "][" << i << "] (the 7s before must all be overwritten: beta 0)";
      }
  }
}

void expect_im2col_gemm_matches_the_host(std::int64_t kernel, std::int64_t stride, std::int64_t pad) {
  const std::int64_t n = 2, c = 3, h = 13, w = 11, k = 5;
  const std::int64_t p = (h + 2 * pad - kernel) / stride + 1, q = (w + 2 * pad - kernel) / stride + 1;
  SCOPED_TRACE("window " + std::to_string(kernel) + ", stride " + std::to_string(stride) + ", padding " +
               std::to_string(pad));
  const std::int64_t buffer_channels = 8, first_channel = 2;  // y is channels 2..6 of 8
  const CublasHandle blas = make_cublas_handle();
  const std::vector<float> x = random_values(static_cast<std::size_t>(n * c * h * w), 21),
                           weights = random_values(static_cast<std::size_t>(k * c * kernel * kernel), 22),
                           dy_buffer = random_values(static_cast<std::size_t>(n * buffer_channels * p * q), 23);
  const auto x_at = [&](std::int64_t in, std::int64_t ic, std::int64_t ih, std::int64_t iw) -> double {
    if (ih < 0 || ih >= h || iw < 0 || iw >= w) return 0.0;
    return x[static_cast<std::size_t>(((in * c + ic) * h + ih) * w + iw)];
  };
  const auto slice_index = [&](std::int64_t in, std::int64_t o, std::int64_t op, std::int64_t oq) {
    return static_cast<std::size_t>(((in * buffer_channels + first_channel + o) * p + op) * q + oq);
  };
  for (Precision precision : {Precision::fp32, Precision::tf32}) {
    const double tolerance = precision == Precision::fp32 ? 1e-5 : 1e-2;
    Im2colGemm shape;
    shape.precision = precision;
    shape.x_dims = {n, c, h, w};
    shape.x_strides = {c * h * w, h * w, w, 1};
    shape.y_dims = {n, k, p, q};
    shape.y_strides = {buffer_channels * p * q, p * q, q, 1};
    shape.kernel = static_cast<int>(kernel);
    shape.stride = static_cast<int>(stride);
    shape.padding = static_cast<int>(pad);
    ASSERT_TRUE(shape.supported());
    DeviceArray device_x(x, DType::f32), device_w(weights, DType::f32), device_dy(dy_buffer, DType::f32),
        device_y(std::vector<float>(dy_buffer.size(), 7.0f), DType::f32),
        device_dw(std::vector<float>(weights.size(), 7.0f), DType::f32),
        workspace(std::vector<float>(
                      std::max(shape.weight_gradient_workspace_bytes(), shape.forward_workspace_bytes()) / 4 + 1, 0.0f),
                  DType::f32);
    im2col_gemm_forward(blas, shape, static_cast<const float*>(device_x.get()),
                        static_cast<const float*>(device_w.get()),
                        static_cast<float*>(device_y.get()) + first_channel * p * q,
                        workspace.get(), nullptr);
    im2col_gemm_weight_gradient(blas, shape, static_cast<const float*>(device_x.get()),
                                static_cast<const float*>(device_dy.get()) + first_channel * p * q,
                                static_cast<float*>(device_dw.get()), workspace.get(), nullptr);
    const std::vector<float> y = device_y.values(), dw = device_dw.values();
    for (std::int64_t in = 0; in < n; ++in)
      for (std::int64_t ch = 0; ch < buffer_channels; ++ch)
        for (std::int64_t op = 0; op < p; ++op)
          for (std::int64_t oq = 0; oq < q; ++oq) {
            const std::size_t at = static_cast<std::size_t>(((in * buffer_channels + ch) * p + op) * q + oq);
            if (ch < first_channel || ch >= first_channel + k) {
              ASSERT_EQ(y[at], 7.0f) << "the forward wrote outside its channel slice at channel " << ch;
              continue;
            }
            double sum = 0;
            for (std::int64_t ic = 0; ic < c; ++ic)
              for (std::int64_t r = 0; r < kernel; ++r)
                for (std::int64_t s = 0; s < kernel; ++s)
                  sum += weights[static_cast<std::size_t>(((ch - first_channel) * c + ic) * kernel * kernel +
                                                          r * kernel + s)] *
                         x_at(in, ic, op * stride - pad + r, oq * stride - pad + s);
            ASSERT_NEAR(y[at], sum, tolerance * (1 + std::abs(sum)))
                << "y[" << in << "][" << ch << "][" << op << "][" << oq << "], precision " << to_string(precision);
          }
    for (std::int64_t o = 0; o < k; ++o)
      for (std::int64_t ic = 0; ic < c; ++ic)
        for (std::int64_t r = 0; r < kernel; ++r)
          for (std::int64_t s = 0; s < kernel; ++s) {
            double sum = 0;
            for (std::int64_t in = 0; in < n; ++in)
              for (std::int64_t op = 0; op < p; ++op)
                for (std::int64_t oq = 0; oq < q; ++oq)
                  sum += dy_buffer[slice_index(in, o, op, oq)] *
                         x_at(in, ic, op * stride - pad + r, oq * stride - pad + s);
            const std::size_t at = static_cast<std::size_t>(((o * c + ic) * kernel + r) * kernel + s);
            ASSERT_NEAR(dw[at], sum, tolerance * (1 + std::abs(sum)))
                << "dW[" << o << "][" << ic << "][" << r << "][" << s << "], precision " << to_string(precision);
          }
  }
}

// A padded, strided 5x5 convolution and a 1x1 one (no columns: the GEMMs read
// the input), each with an output that is a channel slice of a wider NCHW
// buffer (as a GoogLeNet branch writes its part of a concat): the forward must
// write only its slice, and both directions must match direct sums on the
// host, strict fp32 to 1e-5 and tf32 to 1e-2.
TEST(CudnnKernels, Im2colGemmConvolutionMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  struct Window {
    std::int64_t kernel, stride, pad;
  };
  for (const Window window : {Window{5, 2, 2}, Window{1, 1, 0}})
    expect_im2col_gemm_matches_the_host(window.kernel, window.stride, window.pad);
}

// The NHWC forward as chunked im2col + GEMM (Im2colGemmNhwc): a first layer's
// three real channels stored as four or eight (the zero-padded input: x's and
// w's padding channels hold values here, which the columns must skip; a bf16
// pixel of eight channels and an fp32 pixel of four are one 16-byte vector,
// loaded whole, the others element by element), ResNet's 7x7 stride-2 window
// and AlexNet's 11x11 stride-4 one (64-row tiles in bf16), on small images and
// on ones of several 128-row tiles with a ragged last tile, chunks of 1, 2 and
// the whole batch (the last one ragged), an output whose pixels are wider than
// its channels (a concat slice: the other channels must stay untouched), in
// fp32, tf32 and bf16, each element against a double-precision host sum over
// the stored values.
TEST(CudnnKernels, Im2colGemmNhwcForwardMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  const CublasHandle blas = make_cublas_handle();
  const std::int64_t n = 3, real_c = 3, k = 12;
  const std::int64_t pixel_stride = 16, first_channel = 2;  // y is channels 2..13 of 16
  struct Window {
    std::int64_t kernel, stride, pad;
  };
  for (const Window window : {Window{7, 2, 3}, Window{11, 4, 2}})
    for (const std::int64_t h : {15, 40})
      for (const std::int64_t stored_c : {4, 8}) {
        const std::int64_t kernel = window.kernel, stride = window.stride, pad = window.pad;
        const std::int64_t w = h + 3, p = (h + 2 * pad - kernel) / stride + 1, q = (w + 2 * pad - kernel) / stride + 1;
        const std::vector<float> x = random_values(static_cast<std::size_t>(n * h * w * stored_c), 31),
                                 weights = random_values(static_cast<std::size_t>(k * kernel * kernel * stored_c), 32);
        for (Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16})
          for (const std::int64_t chunk : {std::int64_t{1}, std::int64_t{2}, n}) {
            SCOPED_TRACE("window " + std::to_string(kernel) + ", height " + std::to_string(h) + ", " +
                         std::to_string(stored_c) + " stored channels, " + std::string(to_string(precision)) +
                         ", chunks of " + std::to_string(chunk) + " images");
            const DType type = precision == Precision::bf16 ? DType::bf16 : DType::f32;
            const double tolerance = precision == Precision::fp32 ? 1e-5 : precision == Precision::tf32 ? 1e-2 : 2e-2;
            Im2colGemmNhwc shape;
            shape.precision = precision;
            shape.element_bytes = size_of(type);
            shape.x_dims = {n, stored_c, h, w};
            shape.x_strides = {h * w * stored_c, 1, w * stored_c, stored_c};
            shape.channels = real_c;
            shape.y_dims = {n, k, p, q};
            shape.y_strides = {p * q * pixel_stride, 1, q * pixel_stride, pixel_stride};
            shape.kernel = static_cast<int>(kernel);
            shape.stride = static_cast<int>(stride);
            shape.padding = static_cast<int>(pad);
            shape.chunk_images = chunk;
            ASSERT_TRUE(shape.supported());
            ASSERT_EQ(shape.padded_taps() % (16 / shape.element_bytes), 0);
            DeviceArray device_x(x, type), device_w(weights, type),
                device_y(std::vector<float>(static_cast<std::size_t>(n * p * q * pixel_stride), 7.0f), type),
                workspace(std::vector<float>(shape.forward_workspace_bytes() / 4 + 1, 5.0f), DType::f32);
            im2col_gemm_nhwc_forward(blas, shape, device_x.get(), device_w.get(),
                                     static_cast<char*>(device_y.get()) + first_channel * shape.element_bytes,
                                     workspace.get(), nullptr);
            const std::vector<float> y = device_y.values();
            const auto x_at = [&](std::int64_t in, std::int64_t ih, std::int64_t iw, std::int64_t ic) -> double {
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) return 0.0;
              return stored(x[static_cast<std::size_t>(((in * h + ih) * w + iw) * stored_c + ic)], type);
            };
            for (std::int64_t in = 0; in < n; ++in)
              for (std::int64_t op = 0; op < p; ++op)
                for (std::int64_t oq = 0; oq < q; ++oq)
                  for (std::int64_t ch = 0; ch < pixel_stride; ++ch) {
                    const std::size_t at = static_cast<std::size_t>(((in * p + op) * q + oq) * pixel_stride + ch);
                    if (ch < first_channel || ch >= first_channel + k) {
                      ASSERT_EQ(y[at], 7.0f) << "the forward wrote outside its channel slice at channel " << ch;
                      continue;
                    }
                    double sum = 0;
                    for (std::int64_t r = 0; r < kernel; ++r)
                      for (std::int64_t s = 0; s < kernel; ++s)
                        for (std::int64_t ic = 0; ic < real_c; ++ic)
                          sum += stored(weights[static_cast<std::size_t>(
                                            (((ch - first_channel) * kernel + r) * kernel + s) * stored_c + ic)],
                                        type) *
                                 x_at(in, op * stride - pad + r, oq * stride - pad + s, ic);
                    ASSERT_NEAR(y[at], sum, tolerance * (1 + std::abs(sum)))
                        << "y[" << in << "][" << op << "][" << oq << "][" << ch << "]";
                  }
          }
      }
}

// The same forward with each chunk's GEMM a cuBLASLt plan (branch stemlt):
// its heuristic's first plans, the bias (BIAS) or bias and relu (RELU_BIAS) in
// the epilogue, or none; chunks of 1 and 3 images of 3, three real channels
// stored as eight, a concat-slice output, fp32, tf32 and bf16, element by
// element against the host.
TEST(CudnnKernels, Im2colGemmNhwcCublasLtForwardMatchesTheHost) {
  SKIP_WITHOUT_GPU();
  const LtHandle lt = make_cublaslt_handle();
  const std::int64_t n = 3, real_c = 3, stored_c = 8, k = 12, kernel = 7, stride = 2, pad = 3, h = 16, w = 19;
  const std::int64_t p = (h + 2 * pad - kernel) / stride + 1, q = (w + 2 * pad - kernel) / stride + 1;
  const std::int64_t pixel_stride = 16, first_channel = 2;
  const std::vector<float> x = random_values(static_cast<std::size_t>(n * h * w * stored_c), 41),
                           weights = random_values(static_cast<std::size_t>(k * kernel * kernel * stored_c), 42),
                           bias = random_values(static_cast<std::size_t>(k), 43);
  for (Precision precision : {Precision::fp32, Precision::tf32, Precision::bf16})
    for (const cublasLtEpilogue_t epilogue :
         {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS})
      for (const std::int64_t chunk : {std::int64_t{1}, n}) {
        SCOPED_TRACE(std::string(to_string(precision)) + ", epilogue " + std::to_string(epilogue) + ", chunks of " +
                     std::to_string(chunk));
        const DType type = precision == Precision::bf16 ? DType::bf16 : DType::f32;
        const double tolerance = precision == Precision::fp32 ? 1e-5 : precision == Precision::tf32 ? 1e-2 : 2e-2;
        Im2colGemmNhwc shape;
        shape.precision = precision;
        shape.element_bytes = size_of(type);
        shape.x_dims = {n, stored_c, h, w};
        shape.x_strides = {h * w * stored_c, 1, w * stored_c, stored_c};
        shape.channels = real_c;
        shape.y_dims = {n, k, p, q};
        shape.y_strides = {p * q * pixel_stride, 1, q * pixel_stride, pixel_stride};
        shape.kernel = static_cast<int>(kernel);
        shape.stride = static_cast<int>(stride);
        shape.padding = static_cast<int>(pad);
        shape.chunk_images = chunk;
        const int align_y = alignment_of(static_cast<std::size_t>(first_channel * shape.element_bytes));
        const LtMatmul matmul = LtMatmul::create(im2col_nhwc_lt_shape(shape, epilogue, align_y, 256));
        const std::vector<LtPlan> plans = matmul.heuristic(lt.get(), 2, std::size_t{32} << 20);
        ASSERT_FALSE(plans.empty()) << "cuBLASLt lists no plan";
        for (const LtPlan& plan : plans) {
          SCOPED_TRACE(plan.name);
          DeviceArray device_x(x, type), device_w(weights, type), device_bias(bias, type),
              device_y(std::vector<float>(static_cast<std::size_t>(n * p * q * pixel_stride), 7.0f), type),
              workspace(std::vector<float>(im2col_nhwc_lt_workspace_bytes(shape, plan) / 4 + 1, 5.0f), DType::f32);
          ASSERT_EQ(im2col_gemm_nhwc_forward_lt(lt.get(), matmul, plan, shape, device_x.get(), device_w.get(),
                                                static_cast<char*>(device_y.get()) + first_channel * shape.element_bytes,
                                                epilogue == CUBLASLT_EPILOGUE_DEFAULT ? nullptr : device_bias.get(),
                                                workspace.get(), nullptr),
                    CUBLAS_STATUS_SUCCESS);
          const std::vector<float> y = device_y.values();
          for (std::int64_t in = 0; in < n; ++in)
            for (std::int64_t op = 0; op < p; ++op)
              for (std::int64_t oq = 0; oq < q; ++oq)
                for (std::int64_t ch = 0; ch < pixel_stride; ++ch) {
                  const std::size_t at = static_cast<std::size_t>(((in * p + op) * q + oq) * pixel_stride + ch);
                  if (ch < first_channel || ch >= first_channel + k) {
                    ASSERT_EQ(y[at], 7.0f) << "the forward wrote outside its channel slice at channel " << ch;
                    continue;
                  }
                  double sum = 0;
                  for (std::int64_t r = 0; r < kernel; ++r)
                    for (std::int64_t s = 0; s < kernel; ++s) {
                      const std::int64_t ih = op * stride - pad + r, iw = oq * stride - pad + s;
                      if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                      for (std::int64_t ic = 0; ic < real_c; ++ic)
                        sum += stored(weights[static_cast<std::size_t>(
                                          (((ch - first_channel) * kernel + r) * kernel + s) * stored_c + ic)],
                                      type) *
                               stored(x[static_cast<std::size_t>(((in * h + ih) * w + iw) * stored_c + ic)], type);
                    }
                  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
                    sum += stored(bias[static_cast<std::size_t>(ch - first_channel)], type);
                  if (epilogue == CUBLASLT_EPILOGUE_RELU_BIAS) sum = std::max(sum, 0.0);
                  ASSERT_NEAR(y[at], sum, tolerance * (1 + std::abs(sum)))
                      << "y[" << in << "][" << op << "][" << oq << "][" << ch << "]";
                }
        }
      }
}

}  // namespace
}  // namespace crossbench::cudnn
