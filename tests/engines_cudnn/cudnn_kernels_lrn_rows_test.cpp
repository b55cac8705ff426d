// Part of cudnn_kernels_test (label `gpu`; skips with a reason when no GPU is
// visible): the LRN kernels (kernels_lrn.hpp) against a double-precision host
// reference of the same definition, element by element, on both paths (the
// vectorised packed-NHWC kernels and the warp-per-pixel fallback), and the
// pitched row copies and accumulations of concat slices (kernels_rows.hpp).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engines/cudnn/kernels_lrn.hpp"
#include "engines/cudnn/kernels_rows.hpp"
#include "engines_cudnn/kernels_test_support.hpp"

namespace crossbench::cudnn {
namespace {

using Dims = std::array<std::int64_t, 4>;
using test::DeviceArray, test::random_values, test::stored;

Dims nhwc_strides(Dims d) { return {d[1] * d[2] * d[3], 1, d[3] * d[1], d[1]}; }
Dims nchw_strides(Dims d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// Relative error of one rounding to `type`, with margin for the fp32 arithmetic.
double relative_tolerance(DType type) {
  switch (type) {
    case DType::bf16: return 8e-3;
    case DType::f16: return 2e-3;
    default: return 2e-5;
  }
}

// The definition the kernels implement (layer_pooling.cpp): window of channel c
// [c - (size - 1) / 2, c + size / 2] clipped, s_c = k + alpha / size * sum x^2,
// y = x s^-beta; dx_c = dy_c s_c^-beta - 2 alpha beta / size * x_c * sum over the
// windows j containing c of dy_j y_j / s_j, plus beta_dx * dx_c.
struct LrnReference {
  int size;
  double alpha, beta, k;
  int before() const { return (size - 1) / 2; }
  int after() const { return size - 1 - before(); }

  // Scales of every channel of one pixel, from x (a pixel's channels).
  std::vector<double> scales(const std::vector<double>& x) const {
    const int channels = static_cast<int>(x.size());
    std::vector<double> s(x.size());
    for (int c = 0; c < channels; ++c) {
      double sum = 0;
      for (int j = std::max(0, c - before()); j <= std::min(channels - 1, c + after()); ++j) sum += x[j] * x[j];
      s[static_cast<std::size_t>(c)] = k + alpha / size * sum;
    }
    return s;
  }
};

struct LrnCase {
  int size;
  float alpha, beta, k;
  std::int64_t channels;
};

std::string describe(const LrnCase& c, DType type, bool nhwc) {
  return std::string(name_of(type)) + (nhwc ? " nhwc" : " nchw") + " C=" + std::to_string(c.channels) +
         " size=" + std::to_string(c.size) + " alpha=" + std::to_string(c.alpha) + " k=" + std::to_string(c.k);
}

// Forward, then backward (beta_dx 0 and 1) from the forward's own output, on
// one layout; expects the path `vectorised` (kernels::lrn_vectorized).
void check_lrn(const LrnCase& c, DType type, bool nhwc, bool vectorised) {
  const Dims dims{2, c.channels, 3, 5};
  const Dims strides = nhwc ? nhwc_strides(dims) : nchw_strides(dims);
  const std::string what = describe(c, type, nhwc);
  ASSERT_EQ(kernels::lrn_vectorized(type, dims, strides, c.size), vectorised) << what;
  const auto count = static_cast<std::size_t>(dims[0] * dims[1] * dims[2] * dims[3]);
  // Values up to 3 in magnitude: with alpha 0.5 the normalisation changes them markedly.
  std::vector<float> x = random_values(count, 21), dy = random_values(count, 22);
  for (float& v : x) v *= 3.0f;
  const kernels::LrnParameters p{c.size, c.alpha, c.beta, c.k};
  const LrnReference reference{c.size, c.alpha, c.beta, c.k};
  DeviceArray device_x(x, type), device_y(std::vector<float>(count), type), device_dy(dy, type);
  kernels::lrn_forward(device_x.get(), device_y.get(), type, dims, strides, p, nullptr);
  const std::vector<float> y = device_y.values();
  const auto at = [&](std::int64_t n, std::int64_t ch, std::int64_t h, std::int64_t w) {
    return static_cast<std::size_t>(n * strides[0] + ch * strides[1] + h * strides[2] + w * strides[3]);
  };
  const double tolerance = relative_tolerance(type);
  for (float beta_dx : {0.0f, 1.0f}) {  // beta_dx 0 must not read dx (it holds NaNs then)
    const std::vector<float> dx_before =
        beta_dx == 0.0f ? std::vector<float>(count, std::numeric_limits<float>::quiet_NaN()) : random_values(count, 23);
    DeviceArray device_dx(dx_before, type);
    kernels::lrn_backward(device_x.get(), device_y.get(), device_dy.get(), device_dx.get(), type, dims, strides, p,
                          beta_dx, nullptr);
    const std::vector<float> dx = device_dx.values();
    for (std::int64_t n = 0; n < dims[0]; ++n)
      for (std::int64_t h = 0; h < dims[2]; ++h)
        for (std::int64_t w = 0; w < dims[3]; ++w) {
          std::vector<double> xs(static_cast<std::size_t>(c.channels)), ys(xs.size()), dys(xs.size());
          for (std::int64_t ch = 0; ch < c.channels; ++ch) {
            xs[static_cast<std::size_t>(ch)] = stored(x[at(n, ch, h, w)], type);
            ys[static_cast<std::size_t>(ch)] = y[at(n, ch, h, w)];  // the forward's output, as the kernel reads it
            dys[static_cast<std::size_t>(ch)] = stored(dy[at(n, ch, h, w)], type);
          }
          const std::vector<double> s = reference.scales(xs);
          const double factor = 2.0 * reference.alpha * reference.beta / reference.size;
          for (int ch = 0; ch < static_cast<int>(c.channels); ++ch) {
            const auto i = static_cast<std::size_t>(ch);
            const std::size_t o = at(n, ch, h, w);
            if (beta_dx == 0.0f) {
              const double expected_y = xs[i] * std::pow(s[i], -reference.beta);
              ASSERT_NEAR(y[o], expected_y, tolerance * std::abs(expected_y) + 1e-6)
                  << what << " y at n=" << n << " c=" << ch << " h=" << h << " w=" << w;
            }
            double sum = 0;
            for (int j = std::max(0, ch - reference.after());
                 j <= std::min(static_cast<int>(c.channels) - 1, ch + reference.before()); ++j)
              sum += dys[static_cast<std::size_t>(j)] * ys[static_cast<std::size_t>(j)] / s[static_cast<std::size_t>(j)];
            const double first = dys[i] * std::pow(s[i], -reference.beta), second = factor * xs[i] * sum;
            const double old = beta_dx == 0.0f ? 0.0 : beta_dx * static_cast<double>(stored(dx_before[o], type));
            const double expected = first - second + old;
            // The terms' magnitudes bound the fp32 arithmetic's error (the difference may cancel).
            const double magnitude = std::abs(first) + std::abs(second) + std::abs(old);
            ASSERT_NEAR(dx[o], expected, tolerance * magnitude + 1e-6)
                << what << " beta_dx " << beta_dx << " dx at n=" << n << " c=" << ch << " h=" << h << " w=" << w;
          }
        }
  }
}

// GoogLeNet's and AlexNet's LRN (size 5, alpha 1e-4, beta 0.75, k 1 and 2),
// a strong normalisation, size 3 and an even size (the window's convention);
// channels 64 and 192 (whole vectors: the NHWC kernels) and 10 (no whole
// vectors in any type: the fallback), in fp32, fp16 and bf16.
TEST(CudnnKernels, LrnNhwcMatchesTheHostOnBothPaths) {
  SKIP_WITHOUT_GPU();
  const std::vector<LrnCase> cases = {
      {5, 1e-4f, 0.75f, 1.0f, 64},  {5, 1e-4f, 0.75f, 2.0f, 192}, {5, 0.5f, 0.75f, 2.0f, 64},
      {5, 0.5f, 0.75f, 2.0f, 192},  {3, 0.9f, 0.75f, 2.0f, 64},   {3, 0.9f, 0.75f, 2.0f, 192},
      {4, 0.5f, 0.75f, 2.0f, 64},   {5, 0.5f, 0.75f, 2.0f, 10},   {3, 0.9f, 0.75f, 2.0f, 10},
  };
  for (DType type : {DType::f32, DType::f16, DType::bf16})
    for (const LrnCase& c : cases) {
      const std::int64_t vector = type == DType::f32 ? 4 : 8;
      check_lrn(c, type, true, c.channels % vector == 0);
      if (HasFatalFailure()) return;
    }
}

// Sizes past the vector's reach (size - 1 > 8 channels in 16-bit, > 4 in
// fp32) and NCHW take the warp-per-pixel kernel.
TEST(CudnnKernels, LrnFallsBackOutsideTheVectorKernels) {
  SKIP_WITHOUT_GPU();
  check_lrn({9, 0.5f, 0.75f, 2.0f, 64}, DType::bf16, true, true);  // size - 1 = 8: the widest the vectors take
  check_lrn({11, 0.5f, 0.75f, 2.0f, 64}, DType::bf16, true, false);
  check_lrn({7, 0.5f, 0.75f, 2.0f, 64}, DType::f32, true, false);
  check_lrn({5, 0.5f, 0.75f, 2.0f, 64}, DType::bf16, false, false);
  check_lrn({5, 0.5f, 0.75f, 2.0f, 64}, DType::f32, false, false);
}

// ---- Pitched rows -------------------------------------------------------------------

struct RowCase {
  const char* name;
  std::int64_t rows, width, wide, first;  // a row of `width` at element `first` of a row of `wide`
};

// y = x + beta * y where one side is `width` packed per row and the other a
// slice of a wider row: the concat's forward (into the slice) and backward
// (out of it). Elements outside the slice must stay as they were.
void check_rows(const RowCase& c, DType type, bool into_slice, float beta, bool kernel_only) {
  const auto narrow = static_cast<std::size_t>(c.rows * c.width), wide = static_cast<std::size_t>(c.rows * c.wide);
  const std::vector<float> packed = random_values(narrow, 31), sliced = random_values(wide, 32);
  DeviceArray device_packed(packed, type), device_sliced(sliced, type);
  kernels::Rows r{c.rows, c.width, into_slice ? c.width : c.wide, into_slice ? c.wide : c.width};
  const void* x = into_slice ? device_packed.get() : device_sliced.at(static_cast<std::size_t>(c.first));
  void* y = into_slice ? device_sliced.at(static_cast<std::size_t>(c.first)) : device_packed.get();
  if (kernel_only) kernels::add_rows(x, y, type, r, beta, nullptr);
  else kernels::copy_rows(x, y, type, r, beta, nullptr);
  const std::vector<float> got = into_slice ? device_sliced.values() : device_packed.values();
  const std::string what = std::string(c.name) + " " + name_of(type) + (into_slice ? " into" : " out of") +
                           " the slice, beta " + std::to_string(beta) + (kernel_only ? " (kernel)" : "");
  for (std::int64_t row = 0; row < c.rows; ++row)
    for (std::int64_t e = 0; e < (into_slice ? c.wide : c.width); ++e) {
      float expected;
      if (into_slice) {
        const std::size_t o = static_cast<std::size_t>(row * c.wide + e);
        expected = stored(sliced[o], type);
        if (e >= c.first && e < c.first + c.width) {
          float v = stored(packed[static_cast<std::size_t>(row * c.width + e - c.first)], type);
          if (beta != 0.0f) v += beta * expected;
          expected = stored(v, type);
        }
        ASSERT_EQ(got[o], expected) << what << " row " << row << " element " << e;
      } else {
        const std::size_t o = static_cast<std::size_t>(row * c.width + e);
        float v = stored(sliced[static_cast<std::size_t>(row * c.wide + c.first + e)], type);
        if (beta != 0.0f) v += beta * stored(packed[o], type);
        ASSERT_EQ(got[o], stored(v, type)) << what << " row " << row << " element " << e;
      }
    }
}

// NHWC concat slices (a row per pixel: 64 of GoogLeNet's 256 channels at 64,
// whole 16-byte vectors), rows that are not whole vectors (6 of 13 at 3), a
// slice whose start is not 16-byte aligned (8 of 24 at 1), an NCHW slice (a
// row per image), and more rows than one block.
TEST(CudnnKernels, PitchedRowsCopyAndAccumulateConcatSlices) {
  SKIP_WITHOUT_GPU();
  const std::vector<RowCase> cases = {
      {"nhwc_vectors", 2 * 7 * 7, 64, 256, 64}, {"scalar", 30, 6, 13, 3}, {"misaligned", 30, 8, 24, 1},
      {"nchw_images", 2, 4 * 15, 9 * 15, 2 * 15}, {"many_rows", 3000, 16, 48, 32},
  };
  for (DType type : {DType::f32, DType::f16, DType::bf16})
    for (const RowCase& c : cases)
      for (bool into_slice : {true, false})
        for (float beta : {0.0f, 1.0f})
          for (bool kernel_only : {false, true}) {
            check_rows(c, type, into_slice, beta, kernel_only);
            if (HasFatalFailure()) return;
          }
}

// A copy of pitched rows is one library call that a CUDA graph captures and replays.
TEST(CudnnKernels, PitchedRowCopiesReplayInACudaGraph) {
  SKIP_WITHOUT_GPU();
  const RowCase c{"nhwc_vectors", 2 * 7 * 7, 64, 256, 64};
  const auto narrow = static_cast<std::size_t>(c.rows * c.width), wide = static_cast<std::size_t>(c.rows * c.wide);
  const std::vector<float> packed = random_values(narrow, 41);
  DeviceArray device_packed(packed, DType::bf16), device_sliced(std::vector<float>(wide), DType::bf16),
      device_back(std::vector<float>(narrow), DType::bf16);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  kernels::copy_rows(device_packed.get(), device_sliced.at(static_cast<std::size_t>(c.first)), DType::bf16,
                     {c.rows, c.width, c.width, c.wide}, 0.0f, stream);
  kernels::copy_rows(device_sliced.at(static_cast<std::size_t>(c.first)), device_back.get(), DType::bf16,
                     {c.rows, c.width, c.wide, c.width}, 0.0f, stream);
  kernels::copy_rows(device_sliced.at(static_cast<std::size_t>(c.first)), device_back.get(), DType::bf16,
                     {c.rows, c.width, c.wide, c.width}, 1.0f, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> back = device_back.values();
  for (std::size_t i = 0; i < narrow; ++i)
    ASSERT_EQ(back[i], stored(2.0f * stored(packed[i], DType::bf16), DType::bf16)) << "element " << i;
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(graph);
  (void)cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace crossbench::cudnn
