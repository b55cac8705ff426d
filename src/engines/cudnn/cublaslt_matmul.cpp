#include "engines/cudnn/cublaslt_matmul.hpp"

#include <cstdint>
#include <cstring>
#include <sstream>

#include "core/cuda/cudnn_check.hpp"

namespace crossbench::cudnn {
namespace {

// The configuration attributes that name a plan, with their sizes (cublasLt.h).
struct ConfigAttribute {
  cublasLtMatmulAlgoConfigAttributes_t attribute;
  const char* name;
  std::size_t bytes;
};
constexpr ConfigAttribute kConfig[] = {
    {CUBLASLT_ALGO_CONFIG_ID, "algo", 4},
    {CUBLASLT_ALGO_CONFIG_TILE_ID, "tile", 4},
    {CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages", 4},
    {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "splitk", 4},
    {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction", 4},
    {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "swizzle", 4},
    {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, "custom", 4},
    {CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, "inner", 2},
    {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster", 2},
};

std::uint64_t read_config(const cublasLtMatmulAlgo_t& algo, const ConfigAttribute& a) {
  std::uint64_t value = 0;  // little-endian: the attribute's bytes are its low bytes
  std::size_t written = 0;
  CB_CHECK_CUBLAS(cublasLtMatmulAlgoConfigGetAttribute(&algo, a.attribute, &value, a.bytes, &written));
  return value;
}

LtMatrixLayout make_layout(cudaDataType_t type, int rows, int columns, int ld) {
  cublasLtMatrixLayout_t layout = nullptr;
  CB_CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                             static_cast<std::uint64_t>(columns), ld));
  return LtMatrixLayout(layout);
}

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  CB_CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}

template <typename T>
void set_preference(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  CB_CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value));
}

bool has_bias(cublasLtEpilogue_t epilogue) { return epilogue != CUBLASLT_EPILOGUE_DEFAULT && epilogue != CUBLASLT_EPILOGUE_RELU; }

}  // namespace

LtHandle make_cublaslt_handle() {
  cublasLtHandle_t h = nullptr;
  CB_CHECK_CUBLAS(cublasLtCreate(&h));
  return LtHandle(h);
}

int alignment_of(std::size_t address) {
  int alignment = 1;
  while (alignment < 256 && address % static_cast<std::size_t>(2 * alignment) == 0) alignment *= 2;
  return alignment;
}

const char* compute_type_name(cublasComputeType_t compute) {
  switch (compute) {
    case CUBLAS_COMPUTE_32F: return "32F";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "32F_FAST_TF32";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "32F_FAST_16F";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "32F_FAST_16BF";
    default: return "other";
  }
}

std::string lt_plan_name(const cublasLtMatmulAlgo_t& algo) {
  std::ostringstream text;
  for (const ConfigAttribute& a : kConfig)
    text << (a.attribute == CUBLASLT_ALGO_CONFIG_ID ? "" : " ") << a.name << "=" << read_config(algo, a);
  return text.str();
}

LtMatmul LtMatmul::create(const LtGemmShape& shape) {
  LtMatmul m;
  m.shape_ = shape;
  cublasLtMatmulDesc_t desc = nullptr;
  CB_CHECK_CUBLAS(cublasLtMatmulDescCreate(&desc, shape.compute, CUDA_R_32F));
  m.desc_ = LtMatmulDesc(desc);
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<std::int32_t>(shape.trans_a));
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<std::int32_t>(shape.trans_b));
  set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(shape.epilogue));
  if (has_bias(shape.epilogue)) {
    if (shape.bias_type != shape.d_type)
      set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<std::int32_t>(shape.bias_type));
    // The heuristic reads only the bias pointer's alignment: a stand-in with the real one's (see run()).
    m.set_bias(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(shape.align_bias)));
  }
  const bool a_t = shape.trans_a != CUBLAS_OP_N, b_t = shape.trans_b != CUBLAS_OP_N;
  m.a_ = make_layout(shape.a_type, a_t ? shape.k : shape.m, a_t ? shape.m : shape.k, shape.lda);
  m.b_ = make_layout(shape.b_type, b_t ? shape.n : shape.k, b_t ? shape.k : shape.n, shape.ldb);
  m.d_ = make_layout(shape.d_type, shape.m, shape.n, shape.ldd);
  return m;
}

void LtMatmul::set_bias(const void* bias) const {
  set_desc(desc_.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
}

std::vector<LtPlan> LtMatmul::heuristic(cublasLtHandle_t handle, int count, std::size_t workspace_limit) const {
  cublasLtMatmulPreference_t raw = nullptr;
  CB_CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&raw));
  const LtPreference preference(raw);
  set_preference(raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<std::uint64_t>(workspace_limit));
  set_preference(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<std::uint32_t>(shape_.align_a));
  set_preference(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<std::uint32_t>(shape_.align_b));
  set_preference(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<std::uint32_t>(shape_.align_d));
  set_preference(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<std::uint32_t>(shape_.align_d));
  std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<std::size_t>(count));
  int returned = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(handle, desc_, a_, b_, d_, d_, raw, count, results.data(), &returned);
  std::vector<LtPlan> plans;
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return plans;  // no plan for this problem: the caller's fallback
  CB_CHECK_CUBLAS(status);
  for (int i = 0; i < returned; ++i) {
    const cublasLtMatmulHeuristicResult_t& r = results[static_cast<std::size_t>(i)];
    if (r.state != CUBLAS_STATUS_SUCCESS || r.workspaceSize > workspace_limit) continue;
    plans.push_back(LtPlan{r.algo, r.workspaceSize, lt_plan_name(r.algo)});
  }
  return plans;
}

std::optional<LtPlan> LtMatmul::from_name(cublasLtHandle_t handle, const std::string& name) const {
  std::istringstream text(name);
  std::uint64_t values[std::size(kConfig)] = {};
  for (std::size_t i = 0; i < std::size(kConfig); ++i) {
    std::string field;
    if (!(text >> field)) return std::nullopt;
    const std::string prefix = std::string(kConfig[i].name) + "=";
    if (field.rfind(prefix, 0) != 0) return std::nullopt;
    try {
      values[i] = std::stoull(field.substr(prefix.size()));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  LtPlan plan;
  const cublasStatus_t init =
      cublasLtMatmulAlgoInit(handle, shape_.compute, CUDA_R_32F, shape_.a_type, shape_.b_type, shape_.d_type,
                             shape_.d_type, static_cast<int>(values[0]), &plan.algo);
  if (init != CUBLAS_STATUS_SUCCESS) return std::nullopt;
  for (std::size_t i = 1; i < std::size(kConfig); ++i) {
    const std::uint64_t value = values[i];
    if (cublasLtMatmulAlgoConfigSetAttribute(&plan.algo, kConfig[i].attribute, &value, kConfig[i].bytes) !=
        CUBLAS_STATUS_SUCCESS)
      return std::nullopt;
  }
  cublasLtMatmulHeuristicResult_t check{};
  if (cublasLtMatmulAlgoCheck(handle, desc_, a_, b_, d_, d_, &plan.algo, &check) != CUBLAS_STATUS_SUCCESS ||
      check.state != CUBLAS_STATUS_SUCCESS)
    return std::nullopt;
  plan.workspace_bytes = check.workspaceSize;
  plan.name = lt_plan_name(plan.algo);
  if (plan.name != name) return std::nullopt;  // an attribute cuBLASLt did not take as given
  return plan;
}

cublasStatus_t LtMatmul::run(cublasLtHandle_t handle, const LtPlan& plan, const void* a, const void* b, void* d,
                             void* bias, void* workspace, cudaStream_t stream) const {
  static const float one = 1.0f, zero = 0.0f;
  if (has_bias(shape_.epilogue)) set_bias(bias);
  return cublasLtMatmul(handle, desc_, &one, a, a_, b, b_, &zero, d, d_, d, d_, &plan.algo, workspace,
                        plan.workspace_bytes, stream);
}

}  // namespace crossbench::cudnn
