#include "engines/cudnn/im2col_gemm.hpp"

#include <algorithm>
#include <limits>

#include "core/cuda/cudnn_check.hpp"
#include "engines/cudnn/kernels_im2col.hpp"

namespace crossbench::cudnn {

cublasComputeType_t gemm_compute_type(Precision precision) {
  return precision == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

namespace {

kernels::ConvolutionGeometry geometry(const Im2colGemm& g) {
  return {g.kernel, g.stride, g.padding, g.y_dims[2], g.y_dims[3]};
}

int to_int(std::int64_t value) { return static_cast<int>(value); }

// The column matrices, one padded_taps x PQ block per image, and the elements
// between blocks: the input itself for a direct (1x1) convolution, else
// im2col's output at the start of the workspace.
struct Columns {
  const float* data;
  std::int64_t image_stride;
};
Columns columns_of(const Im2colGemm& g, const float* x, void* workspace, cudaStream_t stream) {
  if (g.direct()) return {x, g.x_strides[0]};
  auto* columns = static_cast<float*>(workspace);
  kernels::im2col(x, g.x_dims, g.x_strides, geometry(g), g.padded_taps(), columns, stream);
  return {columns, g.padded_taps() * g.positions()};
}

}  // namespace

bool Im2colGemm::supported() const {
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  const std::int64_t images = x_dims[0], rows = images * positions();
  const bool planes = x_strides[3] == 1 && y_strides[3] == 1 && y_strides[2] == y_dims[3] &&
                      y_strides[1] == positions() &&
                      (!direct() || (x_strides[2] == x_dims[3] && x_strides[1] == x_dims[2] * x_dims[3]));
  return planes && precision != Precision::fp16 && precision != Precision::bf16 && rows <= kIntMax &&
         padded_taps() * positions() <= kIntMax && y_strides[1] <= kIntMax &&
         x_dims[0] * y_dims[1] * padded_taps() <= kIntMax && x_dims[2] * x_strides[2] <= kIntMax;
}

void im2col_gemm_forward(cublasHandle_t blas, const Im2colGemm& g, const float* x, const float* w, float* y,
                         void* workspace, cudaStream_t stream) {
  const Columns columns = columns_of(g, x, workspace, stream);
  if (g.padded_taps() != g.taps()) {  // the weights padded as the columns are
    auto* padded = reinterpret_cast<float*>(static_cast<char*>(workspace) + g.column_bytes());
    kernels::pad_rows(w, g.y_dims[1], g.taps(), g.padded_taps(), padded, stream);
    w = padded;
  }
  // Column-major: Y_n (PQ x K, ld = the channel stride) = col_n (PQ x CRS', ld PQ) W'^T (CRS' x K, ld CRS'),
  // CRS' = the padded taps.
  const float one = 1.0f, zero = 0.0f;
  CB_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
      blas, CUBLAS_OP_N, CUBLAS_OP_N, to_int(g.positions()), to_int(g.y_dims[1]), to_int(g.padded_taps()), &one,
      columns.data, CUDA_R_32F, to_int(g.positions()), columns.image_stride, w, CUDA_R_32F, to_int(g.padded_taps()),
      0, &zero, y, CUDA_R_32F, to_int(g.y_strides[1]), g.y_strides[0], to_int(g.x_dims[0]),
      gemm_compute_type(g.precision), CUBLAS_GEMM_DEFAULT));
}

void im2col_gemm_weight_gradient(cublasHandle_t blas, const Im2colGemm& g, const float* x, const float* dy, float* dw,
                                 void* workspace, cudaStream_t stream) {
  const std::int64_t images = g.x_dims[0];
  auto* partials = reinterpret_cast<float*>(static_cast<char*>(workspace) + g.column_bytes());
  const Columns columns = columns_of(g, x, workspace, stream);
  // Column-major, per image: dW_n (CRS x K, ld CRS': a K x CRS' row-major
  // matrix) = op_T(col_n: PQ x CRS, ld PQ) dY_n (PQ x K, ld = the channel stride).
  const float one = 1.0f, zero = 0.0f;
  CB_CHECK_CUBLAS(cublasGemmStridedBatchedEx(
      blas, CUBLAS_OP_T, CUBLAS_OP_N, to_int(g.taps()), to_int(g.y_dims[1]), to_int(g.positions()), &one,
      columns.data, CUDA_R_32F, to_int(g.positions()), columns.image_stride, dy, CUDA_R_32F, to_int(g.y_strides[1]),
      g.y_strides[0], &zero, partials, CUDA_R_32F, to_int(g.padded_taps()), g.y_dims[1] * g.padded_taps(),
      to_int(images), gemm_compute_type(g.precision), CUBLAS_GEMM_DEFAULT));
  // The sum over images in fp32, whatever the precision.
  kernels::sum_padded_matrices(partials, images, g.y_dims[1], g.taps(), g.padded_taps(), dw, stream);
}

namespace {

cudaDataType_t cuda_data_type(const Im2colGemmNhwc& g) {
  if (g.element_bytes == 4) return CUDA_R_32F;
  return g.precision == Precision::fp16 ? CUDA_R_16F : CUDA_R_16BF;
}

}  // namespace

std::int64_t Im2colGemmNhwc::images_within(std::int64_t bytes) const {
  const std::int64_t per_image = std::max<std::int64_t>(1, column_bytes_per_image());
  return std::clamp<std::int64_t>(bytes / per_image, 1, std::max<std::int64_t>(1, x_dims[0]));
}

bool Im2colGemmNhwc::supported() const {
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  const bool nhwc = x_strides[1] == 1 && y_strides[1] == 1 && y_strides[3] >= y_dims[1] &&
                    y_strides[2] == y_dims[3] * y_strides[3] && y_strides[0] == y_dims[2] * y_strides[2];
  const bool sizes = element_bytes == (precision == Precision::fp16 || precision == Precision::bf16 ? 2 : 4) &&
                     channels >= 1 && channels <= x_dims[1] && chunk_images >= 1 && chunk_images <= x_dims[0];
  return nhwc && sizes && chunk_images * positions() <= kIntMax && padded_taps() <= kIntMax &&
         y_strides[3] <= kIntMax && x_dims[2] * x_strides[2] <= kIntMax;
}

void im2col_gemm_nhwc_forward(cublasHandle_t blas, const Im2colGemmNhwc& g, const void* x, const void* w, void* y,
                              void* workspace, cudaStream_t stream) {
  if (!g.supported()) throw Error("im2col_gemm_nhwc_forward: a shape or layout it does not take");
  const kernels::ConvolutionGeometry geometry{g.kernel, g.stride, g.padding, g.y_dims[2], g.y_dims[3]};
  void* packed = static_cast<char*>(workspace) + g.column_bytes();
  kernels::pack_filter_taps(w, g.element_bytes, g.y_dims[1], g.kernel * g.kernel, g.x_dims[1], g.channels,
                            g.padded_taps(), packed, stream);
  const cudaDataType_t type = cuda_data_type(g);
  const float one = 1.0f, zero = 0.0f;
  for (std::int64_t first = 0; first < g.x_dims[0]; first += g.chunk_images) {
    const std::int64_t images = std::min(g.chunk_images, g.x_dims[0] - first);
    kernels::im2col_nhwc(x, g.element_bytes, g.x_dims, g.x_strides, g.channels, geometry, first, images,
                         g.padded_taps(), workspace, stream);
    // Column-major: Y^T (K x rows, ld = the pixel stride) = op_T(W': CRS' x K, ld CRS') columns^T (CRS' x rows, ld CRS').
    CB_CHECK_CUBLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, to_int(g.y_dims[1]), to_int(images * g.positions()),
                                 to_int(g.padded_taps()), &one, packed, type, to_int(g.padded_taps()), workspace, type,
                                 to_int(g.padded_taps()), &zero,
                                 static_cast<char*>(y) + first * g.y_strides[0] * g.element_bytes, type,
                                 to_int(g.y_strides[3]), gemm_compute_type(g.precision), CUBLAS_GEMM_DEFAULT));
  }
}

LtGemmShape im2col_nhwc_lt_shape(const Im2colGemmNhwc& g, cublasLtEpilogue_t epilogue, int align_y, int align_bias) {
  if (!g.supported() || g.x_dims[0] % g.chunk_images != 0)
    throw Error("im2col_nhwc_lt_shape: a shape it does not take, or chunks that do not divide the batch");
  LtGemmShape s;
  // Column-major, as im2col_gemm_nhwc_forward: Y^T (K x rows, ld the pixel stride) = op_T(W') columns^T.
  s.trans_a = CUBLAS_OP_T;
  s.trans_b = CUBLAS_OP_N;
  s.m = to_int(g.y_dims[1]);
  s.n = to_int(g.chunk_images * g.positions());
  s.k = to_int(g.padded_taps());
  s.a_type = s.b_type = s.d_type = s.bias_type = cuda_data_type(g);
  s.lda = s.ldb = to_int(g.padded_taps());
  s.ldd = to_int(g.y_strides[3]);
  s.compute = gemm_compute_type(g.precision);
  s.epilogue = epilogue;
  // The packed filter sits at column_bytes() (a multiple of 256) and the columns at the workspace's start;
  // each chunk's output starts chunk_images images after the previous one's.
  s.align_a = s.align_b = 256;
  s.align_d = std::min(align_y, alignment_of(static_cast<std::size_t>(g.chunk_images * g.y_strides[0] * g.element_bytes)));
  s.align_bias = align_bias;
  return s;
}

std::size_t im2col_nhwc_lt_workspace_bytes(const Im2colGemmNhwc& g, const LtPlan& plan) {
  return (g.forward_workspace_bytes() + 255) / 256 * 256 + plan.workspace_bytes;
}

cublasStatus_t im2col_gemm_nhwc_forward_lt(cublasLtHandle_t lt, const LtMatmul& matmul, const LtPlan& plan,
                                           const Im2colGemmNhwc& g, const void* x, const void* w, void* y,
                                           const void* bias, void* workspace, cudaStream_t stream) {
  if (!g.supported() || g.x_dims[0] % g.chunk_images != 0)
    throw Error("im2col_gemm_nhwc_forward_lt: a shape it does not take, or chunks that do not divide the batch");
  const kernels::ConvolutionGeometry geometry{g.kernel, g.stride, g.padding, g.y_dims[2], g.y_dims[3]};
  void* packed = static_cast<char*>(workspace) + g.column_bytes();
  void* lt_workspace = static_cast<char*>(workspace) + (g.forward_workspace_bytes() + 255) / 256 * 256;
  kernels::pack_filter_taps(w, g.element_bytes, g.y_dims[1], g.kernel * g.kernel, g.x_dims[1], g.channels,
                            g.padded_taps(), packed, stream);
  for (std::int64_t first = 0; first < g.x_dims[0]; first += g.chunk_images) {
    kernels::im2col_nhwc(x, g.element_bytes, g.x_dims, g.x_strides, g.channels, geometry, first, g.chunk_images,
                         g.padded_taps(), workspace, stream);
    const cublasStatus_t status =
        matmul.run(lt, plan, packed, workspace, static_cast<char*>(y) + first * g.y_strides[0] * g.element_bytes,
                   const_cast<void*>(bias), lt_workspace, stream);
    if (status != CUBLAS_STATUS_SUCCESS) return status;
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace crossbench::cudnn
