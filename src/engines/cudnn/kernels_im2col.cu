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

// ---- im2col over NHWC: a thread per 16-byte vector of a column row -------------------

// Word: the element's bits (uint16_t for 16-bit data, uint32_t for fp32), copied.
// Vector v of row `row` covers taps [v*V, v*V + V); the thread finds (r, s, c)
// of its first tap once and steps c, s, r after each (no division per element);
// consecutive threads write consecutive 16-byte vectors of the columns.
// Measured against a tiled version (a thread building a whole row in shared
// memory, pixels loaded as 16-byte vectors, the tile written out coalesced) on
// an H200 (bench/results/2026-12-03/call41 and call42): the tiled one was no
// faster for ResNet-50's conv1 at batch 256 (1.42 ms, against 1.40 on another
// GPU whose clock ran 5% higher) and slower at
// batch 64 (AlexNet's conv1 in bf16 0.204 -> 0.309 ms, GoogLeNet's 0.363 ->
// 0.377, tf32 twice as slow). Why is not measured (no profiler on the machine).
template <typename Word>
__global__ void im2col_nhwc_kernel(const Word* x, std::int64_t vectors, int vectors_per_row, int channels,
                                   int height, int width, std::int64_t x_image_stride, int x_row_stride,
                                   int x_pixel_stride, ConvolutionGeometry g, std::int64_t first_image,
                                   Word* columns) {
  constexpr int kV = 16 / sizeof(Word);
  const int taps = channels * g.kernel * g.kernel;
  const int out_w = static_cast<int>(g.out_w), positions = static_cast<int>(g.out_h * g.out_w);
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < vectors;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / vectors_per_row;
    const int v = static_cast<int>(i - row * vectors_per_row);
    const std::int64_t n = row / positions;
    const int pq = static_cast<int>(row - n * positions);
    const int p = pq / out_w, q = pq - p * out_w;
    const Word* image = x + (first_image + n) * x_image_stride;
    int tap = v * kV;
    int c = tap % channels, rs = tap / channels;
    int r = rs / g.kernel, s = rs - r * g.kernel;
    union {
      uint4 vector;
      Word words[kV];
    } out;
#pragma unroll
    for (int e = 0; e < kV; ++e, ++tap) {
      Word value = 0;
      if (tap < taps) {
        const int ih = p * g.stride - g.padding + r, iw = q * g.stride - g.padding + s;
        if (ih >= 0 && ih < height && iw >= 0 && iw < width) value = image[ih * x_row_stride + iw * x_pixel_stride + c];
        if (++c == channels) {
          c = 0;
          if (++s == g.kernel) {
            s = 0;
            ++r;
          }
        }
      }
      out.words[e] = value;
    }
    reinterpret_cast<uint4*>(columns)[i] = out.vector;
  }
}

template <typename Word>
__global__ void pack_filter_taps_kernel(const Word* w, std::int64_t filters, int window_taps, int stored_channels,
                                        int channels, int padded_taps, Word* packed) {
  const int taps = window_taps * channels;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < filters * padded_taps;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t k = i / padded_taps;
    const int t = static_cast<int>(i - k * padded_taps);
    packed[i] = t < taps ? w[(k * window_taps + t / channels) * stored_channels + t % channels] : Word{0};
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

void im2col_nhwc(const void* x, std::int64_t element_bytes, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> x_strides, std::int64_t channels, ConvolutionGeometry g,
                 std::int64_t first_image, std::int64_t images, std::int64_t padded_taps, void* columns,
                 cudaStream_t stream) {
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  if (element_bytes != 2 && element_bytes != 4) throw Error("im2col_nhwc: elements of 2 or 4 bytes only");
  const std::int64_t vector_elements = 16 / element_bytes;
  if (x_strides[1] != 1) throw Error("im2col_nhwc: the input's channels are not contiguous (not NHWC)");
  if (channels < 1 || channels > dims[1] || channels > x_strides[3] || padded_taps < channels * g.kernel * g.kernel ||
      padded_taps % vector_elements != 0)
    throw Error("im2col_nhwc: the real channels exceed the stored ones, or the padded taps are too few or not whole "
                "16-byte vectors");
  if (dims[2] * x_strides[2] > kIntMax || g.out_h * g.out_w > kIntMax || padded_taps / vector_elements > kIntMax)
    throw Error("im2col_nhwc: an image beyond 2^31 - 1 elements");
  if (first_image < 0 || images < 0 || first_image + images > dims[0])
    throw Error("im2col_nhwc: images outside the batch");
  if (reinterpret_cast<std::uintptr_t>(columns) % 16 != 0) throw Error("im2col_nhwc: columns not 16-byte aligned");
  const std::int64_t vectors_per_row = padded_taps / vector_elements;
  const std::int64_t vectors = images * g.out_h * g.out_w * vectors_per_row;
  if (vectors == 0) return;
  const auto launch = [&](auto word) {
    using Word = decltype(word);
    im2col_nhwc_kernel<Word><<<blocks_for(vectors), kThreads, 0, stream>>>(
        static_cast<const Word*>(x), vectors, static_cast<int>(vectors_per_row), static_cast<int>(channels),
        static_cast<int>(dims[2]), static_cast<int>(dims[3]), x_strides[0], static_cast<int>(x_strides[2]),
        static_cast<int>(x_strides[3]), g, first_image, static_cast<Word*>(columns));
  };
  if (element_bytes == 2) launch(std::uint16_t{});
  else launch(std::uint32_t{});
  check_launch("im2col_nhwc");
}

void pack_filter_taps(const void* w, std::int64_t element_bytes, std::int64_t filters, std::int64_t window_taps,
                      std::int64_t stored_channels, std::int64_t channels, std::int64_t padded_taps, void* packed,
                      cudaStream_t stream) {
  if (element_bytes != 2 && element_bytes != 4) throw Error("pack_filter_taps: elements of 2 or 4 bytes only");
  if (channels < 1 || channels > stored_channels || padded_taps < window_taps * channels)
    throw Error("pack_filter_taps: the real channels exceed the stored ones, or the padded taps are too few");
  const std::int64_t count = filters * padded_taps;
  if (count == 0) return;
  const auto launch = [&](auto word) {
    using Word = decltype(word);
    pack_filter_taps_kernel<Word><<<blocks_for(count), kThreads, 0, stream>>>(
        static_cast<const Word*>(w), filters, static_cast<int>(window_taps), static_cast<int>(stored_channels),
        static_cast<int>(channels), static_cast<int>(padded_taps), static_cast<Word*>(packed));
  };
  if (element_bytes == 2) launch(std::uint16_t{});
  else launch(std::uint32_t{});
  check_launch("pack_filter_taps");
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
