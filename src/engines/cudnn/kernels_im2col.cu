// kernels_im2col.hpp: the kernels and their launchers.
#include "engines/cudnn/kernels_im2col.hpp"

#include "engines/cudnn/kernel_support.cuh"

namespace crossbench::cudnn::kernels {
namespace {

// ---- im2col: one block per (image, filter tap) row ----------------------------------

// Row t = (n, crs) of the column matrix holds the P*Q positions contiguously at
// t * P*Q; rows crs >= C*R*S (the padding to `padded_taps`) are zero. In-plane
// arithmetic is 32-bit (im2col() keeps planes below 2^31 elements): 64-bit
// division per element made this kernel compute-bound.
__global__ void im2col_kernel(const float* x, std::int64_t rows, int channels_taps, int padded_taps, int height,
                              int width, std::int64_t x_image_stride, std::int64_t x_channel_stride, int x_row_stride,
                              ConvolutionGeometry g, float* columns) {
  const int taps = g.kernel * g.kernel;
  const int out_w = static_cast<int>(g.out_w), positions = static_cast<int>(g.out_h * g.out_w);
  for (std::int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    const std::int64_t n = t / padded_taps;
    const int crs = static_cast<int>(t - n * padded_taps);
    float* row = columns + t * positions;
    if (crs >= channels_taps) {
      for (int pq = threadIdx.x; pq < positions; pq += blockDim.x) row[pq] = 0.0f;
      continue;
    }
    const int c = crs / taps, r = (crs % taps) / g.kernel, s = crs % g.kernel;
    const float* plane = x + n * x_image_stride + c * x_channel_stride;
    for (int pq = threadIdx.x; pq < positions; pq += blockDim.x) {
      const int p = pq / out_w, q = pq - p * out_w;
      const int ih = p * g.stride - g.padding + r, iw = q * g.stride - g.padding + s;
      row[pq] = ih >= 0 && ih < height && iw >= 0 && iw < width ? plane[ih * x_row_stride + iw] : 0.0f;
    }
  }
}

__global__ void pad_rows_kernel(const float* src, std::int64_t rows, std::int64_t length, std::int64_t padded_length,
                                float* dst) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows * padded_length;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / padded_length, column = i % padded_length;
    dst[i] = column < length ? src[row * length + column] : 0.0f;
  }
}

// dst[row][column] = sum over m of partials[m][row][column] (padded rows), in order of m.
__global__ void sum_padded_matrices_kernel(const float* partials, std::int64_t matrices, std::int64_t rows,
                                           std::int64_t length, std::int64_t padded_length, float* dst) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows * length;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / length, column = i % length;
    const float* from = partials + row * padded_length + column;
    float sum = 0;
    for (std::int64_t m = 0; m < matrices; ++m) sum += from[m * rows * padded_length];
    dst[i] = sum;
  }
}

}  // namespace

void im2col(const float* x, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> x_strides,
            ConvolutionGeometry g, std::int64_t padded_taps, float* columns, cudaStream_t stream) {
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  if (x_strides[3] != 1) throw Error("im2col: the input's rows are not contiguous");
  const std::int64_t channels_taps = dims[1] * g.kernel * g.kernel, rows = dims[0] * padded_taps;
  if (padded_taps < channels_taps || padded_taps > kIntMax || dims[2] * x_strides[2] > kIntMax ||
      g.out_h * g.out_w > kIntMax)
    throw Error("im2col: a plane beyond 2^31 - 1 elements, or fewer padded taps than taps");
  if (rows == 0 || g.out_h * g.out_w == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(rows, std::int64_t{1} << 30));
  im2col_kernel<<<blocks, kThreads, 0, stream>>>(x, rows, static_cast<int>(channels_taps),
                                                 static_cast<int>(padded_taps), static_cast<int>(dims[2]),
                                                 static_cast<int>(dims[3]), x_strides[0], x_strides[1],
                                                 static_cast<int>(x_strides[2]), g, columns);
  check_launch("im2col");
}

void pad_rows(const float* src, std::int64_t rows, std::int64_t length, std::int64_t padded_length, float* dst,
              cudaStream_t stream) {
  const std::int64_t count = rows * padded_length;
  if (count == 0) return;
  pad_rows_kernel<<<blocks_for(count), kThreads, 0, stream>>>(src, rows, length, padded_length, dst);
  check_launch("pad_rows");
}

void sum_padded_matrices(const float* partials, std::int64_t matrices, std::int64_t rows, std::int64_t length,
                         std::int64_t padded_length, float* dst, cudaStream_t stream) {
  const std::int64_t count = rows * length;
  if (count == 0) return;
  sum_padded_matrices_kernel<<<blocks_for(count), kThreads, 0, stream>>>(partials, matrices, rows, length,
                                                                         padded_length, dst);
  check_launch("sum_padded_matrices");
}

}  // namespace crossbench::cudnn::kernels
