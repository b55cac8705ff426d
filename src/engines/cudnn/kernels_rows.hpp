// Copies and accumulations of pitched rows: a concat's channel slices in
// NHWC (each pixel's C_in channels, a row, inside the C channels of the
// concat's output) and in NCHW (each image's C_in * H * W elements), forward
// and the backward's slices of the output gradient.
// All run on the caller's stream and are asynchronous (capturable in CUDA graphs).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {

// `rows` rows of `width` contiguous elements; row r of x starts at element
// r * x_pitch, row r of y at r * y_pitch (pitches >= width).
struct Rows {
  std::int64_t rows, width, x_pitch, y_pitch;
};

// y = x + beta * y over the rows. beta 0: one cudaMemcpyAsync where the rows
// are contiguous, else add_rows (cudaMemcpy2DAsync for types it does not
// take: it is slow on narrow rows); beta != 0: add_rows.
void copy_rows(const void* x, void* y, DType type, Rows r, float beta, cudaStream_t stream);
// The kernel: one thread per 16 bytes of a row where the width, the pitches
// and both pointers allow it (else per element), fp32 arithmetic, 32-bit
// index math (the launcher splits larger copies into whole rows). fp32, fp16
// and bf16 (the other types: an Error).
void add_rows(const void* x, void* y, DType type, Rows r, float beta, cudaStream_t stream);

}  // namespace crossbench::cudnn::kernels
