// One cuBLASLt GEMM with an epilogue (RAII): its handle, matmul descriptor,
// matrix layouts and heuristic preference, every call checked by
// CB_CHECK_CUBLAS (cuBLASLt returns cublasStatus_t). The fully-connected
// layers use it (layer_fully_connected.cpp): the forward with the bias (and
// the relu of an fc_bias_relu group) in the GEMM's epilogue, the weight
// gradient with the bias gradient reduced in its epilogue (BGRADB).
//
// An execution plan is a cublasLtMatmulAlgo_t, an opaque 8 x uint64 blob that
// cuBLASLt's heuristic fills. It is named (and saved in the algorithm cache)
// by its configuration attributes, `algo=6 tile=20 stages=8 splitk=1
// reduction=0 swizzle=0 custom=0 inner=0 cluster=0`, from which algo_from_name
// rebuilds it (cublasLtMatmulAlgoInit + the attributes) and
// cublasLtMatmulAlgoCheck re-validates it for the problem.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "engines/cudnn/handles.hpp"

namespace crossbench::cudnn {

using LtHandle = Owner<cublasLtHandle_t, cublasLtDestroy>;
using LtMatmulDesc = Owner<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtMatrixLayout = Owner<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using LtPreference = Owner<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

[[nodiscard]] LtHandle make_cublaslt_handle();

// D (m x n, ld ldd) = epilogue(op_a(A) op_b(B)) in cuBLAS's column-major
// terms, alpha 1 and beta 0 (C is D). `bias_type`: the bias (or bias
// gradient) vector's type where the epilogue has one.
struct LtGemmShape {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0;
  cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, d_type = CUDA_R_32F, bias_type = CUDA_R_32F;
  int lda = 0, ldb = 0, ldd = 0;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  // The smallest alignment [bytes] of A, B and D's addresses and of the bias (power of two, at most 256).
  int align_a = 256, align_b = 256, align_d = 256, align_bias = 256;
};

// A heuristic's candidate: the plan, its workspace and its name (the attributes above).
struct LtPlan {
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace_bytes = 0;
  std::string name;
};

class LtMatmul {
 public:
  [[nodiscard]] static LtMatmul create(const LtGemmShape& shape);

  // Up to `count` of cuBLASLt's heuristic candidates that need at most `workspace_limit` bytes, in its order.
  [[nodiscard]] std::vector<LtPlan> heuristic(cublasLtHandle_t handle, int count, std::size_t workspace_limit) const;
  // The plan named `name` (LtPlan::name), rebuilt and validated for this problem by
  // cublasLtMatmulAlgoCheck, or nullopt where cuBLASLt refuses it.
  [[nodiscard]] std::optional<LtPlan> from_name(cublasLtHandle_t handle, const std::string& name) const;

  // Enqueues D = epilogue(op(A) op(B)) on `stream`: `bias` is the bias (BIAS,
  // RELU_BIAS) or the bias gradient written (BGRADA, BGRADB), else null.
  // Returns cuBLASLt's status: the caller checks it (CB_CHECK_CUBLAS), or
  // falls back where a refusal is allowed (prepare()'s validation pass, the search).
  [[nodiscard]] cublasStatus_t run(cublasLtHandle_t handle, const LtPlan& plan, const void* a, const void* b, void* d,
                                   void* bias, void* workspace, cudaStream_t stream) const;

  [[nodiscard]] const LtGemmShape& shape() const { return shape_; }

 private:
  LtMatmul() = default;
  void set_bias(const void* bias) const;
  LtGemmShape shape_;
  LtMatmulDesc desc_;
  LtMatrixLayout a_, b_, d_;
};

// The largest power of two (at most 256) that divides `address` [bytes].
[[nodiscard]] int alignment_of(std::size_t address);
// The plan's configuration attributes as text (LtPlan::name).
[[nodiscard]] std::string lt_plan_name(const cublasLtMatmulAlgo_t& algo);
// "32F", "32F_FAST_TF32" (for signatures and decisions).
[[nodiscard]] const char* compute_type_name(cublasComputeType_t compute);

}  // namespace crossbench::cudnn
