// The NHWC im2col + GEMM forward's sizes (im2col_gemm.hpp's Im2colGemmNhwc),
// host arithmetic only (label `cpu`): the padded taps, the columns a chunk
// needs, the chunk the search offers for a byte budget, and the shapes and
// layouts it refuses. The GPU runs it in cudnn_kernels_test.
#include <gtest/gtest.h>

#include <cstdint>

#include "crossbench/error.hpp"
#include "engines/cudnn/im2col_gemm.hpp"

namespace crossbench::cudnn {
namespace {

// ResNet-50's conv1 at `batch`: 3 real channels stored as `stored` (bf16: 8), 224 -> 112, 64 filters.
Im2colGemmNhwc resnet_stem(std::int64_t batch, Precision precision, std::int64_t stored) {
  Im2colGemmNhwc g;
  g.precision = precision;
  g.element_bytes = precision == Precision::bf16 || precision == Precision::fp16 ? 2 : 4;
  g.x_dims = {batch, stored, 224, 224};
  g.x_strides = {224 * 224 * stored, 1, 224 * stored, stored};
  g.channels = 3;
  g.y_dims = {batch, 64, 112, 112};
  g.y_strides = {112 * 112 * 64, 1, 112 * 64, 64};
  g.kernel = 7;
  g.stride = 2;
  g.padding = 3;
  g.chunk_images = batch;
  return g;
}

TEST(Im2colGemmNhwcShape, ColumnsSkipThePaddingChannelsAndAreWholeVectors) {
  const Im2colGemmNhwc bf16 = resnet_stem(256, Precision::bf16, 8);
  EXPECT_EQ(bf16.taps(), 147);          // 7 x 7 x 3, not 7 x 7 x 8
  EXPECT_EQ(bf16.padded_taps(), 152);   // 16-byte rows: a multiple of 8 bf16 elements
  EXPECT_EQ(bf16.positions(), 112 * 112);
  EXPECT_EQ(bf16.column_bytes_per_image(), 112 * 112 * 152 * 2);
  // The batch's columns (256-byte rounded), then the packed filter (64 x 152 bf16).
  EXPECT_EQ(bf16.column_bytes(), (256LL * 112 * 112 * 152 * 2 + 255) / 256 * 256);
  EXPECT_EQ(bf16.forward_workspace_bytes(), static_cast<std::size_t>(bf16.column_bytes() + 64 * 152 * 2));
  EXPECT_TRUE(bf16.supported());
  const Im2colGemmNhwc tf32 = resnet_stem(64, Precision::tf32, 3);
  EXPECT_EQ(tf32.padded_taps(), 148);  // 4 fp32 elements a vector
  EXPECT_TRUE(tf32.supported());
}

TEST(Im2colGemmNhwcShape, ChunksFitTheirBudgetWithinTheBatch) {
  const Im2colGemmNhwc g = resnet_stem(256, Precision::bf16, 8);
  const std::int64_t per_image = g.column_bytes_per_image();  // 3.81 MB
  EXPECT_EQ(g.images_within(16LL << 20), (16LL << 20) / per_image);
  EXPECT_EQ(g.images_within(40LL << 20), (40LL << 20) / per_image);
  EXPECT_EQ(g.images_within(1), 1);                // at least one image
  EXPECT_EQ(g.images_within(1LL << 40), 256);      // at most the batch
  Im2colGemmNhwc chunked = g;
  chunked.chunk_images = 4;
  EXPECT_EQ(chunked.column_bytes(), (4 * per_image + 255) / 256 * 256);
  EXPECT_TRUE(chunked.supported());
}

TEST(Im2colGemmNhwcShape, RefusesWhatItCannotRun) {
  Im2colGemmNhwc g = resnet_stem(8, Precision::bf16, 8);
  ASSERT_TRUE(g.supported());
  Im2colGemmNhwc bad = g;
  bad.x_strides = {8 * 224 * 224, 224 * 224, 224, 1};  // NCHW
  EXPECT_FALSE(bad.supported());
  bad = g;
  bad.channels = 9;  // more real channels than stored
  EXPECT_FALSE(bad.supported());
  bad = g;
  bad.element_bytes = 4;  // bf16 data is 2 bytes
  EXPECT_FALSE(bad.supported());
  bad = g;
  bad.chunk_images = 9;  // a chunk beyond the batch
  EXPECT_FALSE(bad.supported());
  bad = g;
  bad.chunk_images = 0;
  EXPECT_FALSE(bad.supported());
  // A concat slice: pixels wider than the channels are fine, rows that are not whole pixels are not.
  Im2colGemmNhwc slice = g;
  slice.y_strides = {112 * 112 * 96, 1, 112 * 96, 96};
  EXPECT_TRUE(slice.supported());
  slice.y_strides[2] = 112 * 96 + 1;
  EXPECT_FALSE(slice.supported());
  // A chunk whose GEMM rows exceed cuBLAS's 32-bit sizes.
  Im2colGemmNhwc huge = resnet_stem(200000, Precision::bf16, 8);
  EXPECT_FALSE(huge.supported());
  huge.chunk_images = 1000;
  EXPECT_TRUE(huge.supported());
}

// The cuBLASLt GEMM of one chunk (branch stemlt): Y^T (K x rows, ld the pixel stride) = W'^T columns^T.
TEST(Im2colGemmNhwcShape, CublasLtChunkGemmIsTheChunksRowsAndDividesTheBatch) {
  Im2colGemmNhwc g = resnet_stem(256, Precision::bf16, 8);
  g.chunk_images = 8;
  const LtGemmShape s = im2col_nhwc_lt_shape(g, CUBLASLT_EPILOGUE_RELU_BIAS, 256, 128);
  EXPECT_EQ(s.trans_a, CUBLAS_OP_T);
  EXPECT_EQ(s.trans_b, CUBLAS_OP_N);
  EXPECT_EQ(s.m, 64);
  EXPECT_EQ(s.n, 8 * 112 * 112);
  EXPECT_EQ(s.k, 152);
  EXPECT_EQ(s.lda, 152);
  EXPECT_EQ(s.ldb, 152);
  EXPECT_EQ(s.ldd, 64);
  EXPECT_EQ(s.a_type, CUDA_R_16BF);
  EXPECT_EQ(s.d_type, CUDA_R_16BF);
  EXPECT_EQ(s.bias_type, CUDA_R_16BF);
  EXPECT_EQ(s.compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(s.epilogue, CUBLASLT_EPILOGUE_RELU_BIAS);
  EXPECT_EQ(s.align_bias, 128);
  EXPECT_EQ(s.align_d, 256);  // 8 images of 112 x 112 x 64 bf16: a multiple of 256 bytes
  // A concat slice starting 32 channels in (64 bytes) keeps its alignment through every chunk.
  Im2colGemmNhwc slice = g;
  slice.y_strides = {112 * 112 * 96, 1, 112 * 96, 96};
  EXPECT_EQ(im2col_nhwc_lt_shape(slice, CUBLASLT_EPILOGUE_BIAS, 64, 256).align_d, 64);
  EXPECT_EQ(im2col_nhwc_lt_shape(slice, CUBLASLT_EPILOGUE_BIAS, 64, 256).ldd, 96);
  // tf32: fp32 data, TF32 compute.
  Im2colGemmNhwc tf32 = resnet_stem(64, Precision::tf32, 3);
  tf32.chunk_images = 16;
  const LtGemmShape t = im2col_nhwc_lt_shape(tf32, CUBLASLT_EPILOGUE_DEFAULT, 256, 256);
  EXPECT_EQ(t.a_type, CUDA_R_32F);
  EXPECT_EQ(t.compute, CUBLAS_COMPUTE_32F_FAST_TF32);
  EXPECT_EQ(t.k, 148);
  // Every chunk is one GEMM shape: a chunk that does not divide the batch is refused.
  g.chunk_images = 10;
  EXPECT_THROW((void)im2col_nhwc_lt_shape(g, CUBLASLT_EPILOGUE_DEFAULT, 256, 256), Error);
}

}  // namespace
}  // namespace crossbench::cudnn
