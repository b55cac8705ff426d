#include "engines/cudnn/graph_api_convolution.hpp"

#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "crossbench/clock.hpp"
#include "crossbench/error.hpp"

// The Graph API path needs cudnn-frontend (CMake: CROSSBENCH_CUDNN_FRONTEND_ROOT, fetched by
// scripts/common.sh) and cuDNN 9; builds without them (the CUDA 11.8 + cuDNN 8.9 one) keep the legacy API.
#if defined(CROSSBENCH_HAVE_CUDNN_FRONTEND) && CUDNN_MAJOR >= 9
#define CROSSBENCH_GRAPH_API 1
#include <cudnn_frontend.h>
#else
#define CROSSBENCH_GRAPH_API 0
#endif

namespace crossbench::cudnn {

#if CROSSBENCH_GRAPH_API

namespace fe = cudnn_frontend;

namespace {

// A frontend call's error, named like every checked library call.
#define CB_CHECK_CUDNN_FRONTEND(expr)                                                                      \
  do {                                                                                                     \
    auto cb_fe_status_ = (expr);                                                                     \
    if (cb_fe_status_.is_bad())                                                                            \
      ::crossbench::throw_library_error("cuDNN Graph API", #expr, __FILE__, __LINE__,                      \
                                        cb_fe_status_.get_message(), false);                               \
  } while (false)

fe::DataType_t data_type(DType type) {
  switch (type) {
    case DType::f32: return fe::DataType_t::FLOAT;
    case DType::f16: return fe::DataType_t::HALF;
    case DType::bf16: return fe::DataType_t::BFLOAT16;
    default: throw Error("cuDNN Graph API: no convolution for data type " + std::string(name_of(type)));
  }
}

std::vector<std::int64_t> dims_of(const Tensor& t) { return {t.dims[0], t.dims[1], t.dims[2], t.dims[3]}; }
std::vector<std::int64_t> strides_of(const Tensor& t) {
  return {t.strides[0], t.strides[1], t.strides[2], t.strides[3]};
}

enum Uid : std::int64_t { kX = 1, kW = 2, kY = 3, kBias = 4, kResidual = 5, kSum = 6, kSumOfSquares = 7 };

}  // namespace

struct GraphConvolution::Impl {
  fe::graph::Graph graph;
  std::vector<char> built;  // per plan: built (1)
  std::string restored_name;  // a restored graph's one plan (index 0); empty: a graph created here
};

bool graph_api_available() { return true; }
const char* graph_api_unavailable_reason() { return ""; }

namespace {

// The operation graph of `p` (its tensors and operations, validated and built on the handle): what create()
// and create_for_plan() share; the engine configurations come after.
void define_operation_graph(fe::graph::Graph& g, cudnnHandle_t handle, const GraphConvolutionProblem& p) {
  if (p.statistics && (p.direction != GraphDirection::forward || p.bias_relu))
    throw Error("cuDNN Graph API: a convolution's statistics (genstats) are built for the plain forward only");
  const fe::DataType_t io = data_type(p.x.type);
  g.set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
  const auto tensor = [&](const char* name, Uid uid, const Tensor& t) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim(dims_of(t))
                        .set_stride(strides_of(t))
                        .set_data_type(data_type(t.type)));
  };
  const std::vector<std::int64_t> padding{p.padding, p.padding}, stride{p.stride, p.stride}, dilation{1, 1};
  switch (p.direction) {
    case GraphDirection::forward: {
      auto x = tensor("x", kX, p.x);
      auto w = tensor("w", kW, p.w);
      auto y = g.conv_fprop(x, w,
                            fe::graph::Conv_fprop_attributes().set_padding(padding).set_stride(stride).set_dilation(dilation));
      if (p.bias_relu) {
        y->set_data_type(fe::DataType_t::FLOAT);  // the epilogue reads the fp32 accumulator
        auto bias = tensor("bias", kBias, p.bias);
        auto biased = g.pointwise(y, bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
        biased->set_data_type(fe::DataType_t::FLOAT);
        if (p.residual.valid()) {
          // conv_bn_add_relu: the skip connection added before the relu, in the same epilogue.
          auto residual = tensor("residual", kResidual, p.residual);
          biased = g.pointwise(biased, residual, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD));
          biased->set_data_type(fe::DataType_t::FLOAT);
        }
        y = g.pointwise(biased, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD));
      }
      y->set_output(true).set_uid(kY).set_dim(dims_of(p.y)).set_stride(strides_of(p.y)).set_data_type(io);
      if (p.statistics) {
        // Per channel over N*H*W, as a training batch-norm's statistics: fp32 (1, C, 1, 1) each.
        auto [sum, sum_of_squares] =
            g.genstats(y, fe::graph::Genstats_attributes().set_name("statistics").set_compute_data_type(fe::DataType_t::FLOAT));
        sum->set_output(true).set_uid(kSum).set_data_type(fe::DataType_t::FLOAT);
        sum_of_squares->set_output(true).set_uid(kSumOfSquares).set_data_type(fe::DataType_t::FLOAT);
      }
      break;
    }
    case GraphDirection::backward_data: {
      auto dy = tensor("dy", kY, p.y);
      auto w = tensor("w", kW, p.w);
      auto dx = g.conv_dgrad(
          dy, w, fe::graph::Conv_dgrad_attributes().set_padding(padding).set_stride(stride).set_dilation(dilation));
      dx->set_output(true).set_uid(kX).set_dim(dims_of(p.x)).set_stride(strides_of(p.x)).set_data_type(io);
      break;
    }
    case GraphDirection::backward_filter: {
      auto dy = tensor("dy", kY, p.y);
      auto x = tensor("x", kX, p.x);
      auto dw = g.conv_wgrad(
          dy, x, fe::graph::Conv_wgrad_attributes().set_padding(padding).set_stride(stride).set_dilation(dilation));
      dw->set_output(true).set_uid(kW).set_dim(dims_of(p.w)).set_stride(strides_of(p.w)).set_data_type(io);
      break;
    }
  }
  CB_CHECK_CUDNN_FRONTEND(g.validate());
  CB_CHECK_CUDNN_FRONTEND(g.build_operation_graph(handle));
}

// The filters every engine configuration of `p` passes, whether listed by the heuristics or created from a
// plan's name. As PyTorch filters its cuDNN engine configurations: never one that converts its inputs down,
// and for strict fp32 (no allow_tf32) none that uses tensor cores (TF32); none whose workspace is above the
// limit. Precompiled kernels only: a runtime-compiled engine's build takes seconds, in every cold process.
// Except the residual graph (conv + bias + residual + relu): the H200 lists no precompiled engine for it
// ("No execution plans support the graph", bench/results/2026-12-02/call6), only cuDNN's runtime fusion
// engines (NVRTC); the search builds at most kResidualGraphCandidates of them. A graph with statistics
// likewise: cuDNN's genstats fusions are runtime fusion engines.
void deselect_barred(fe::graph::Graph& g, const GraphConvolutionProblem& p) {
  std::vector<fe::NumericalNote_t> barred{fe::NumericalNote_t::DOWN_CONVERT_INPUTS};
  if (p.precision == Precision::fp32) barred.push_back(fe::NumericalNote_t::TENSOR_CORE);
  g.deselect_numeric_notes(barred);
  g.deselect_workspace_greater_than(p.workspace_limit_bytes);
  if (!graph_runtime_compiled(p)) g.deselect_behavior_notes({fe::BehaviorNote_t::RUNTIME_COMPILATION});
}

}  // namespace

std::unique_ptr<GraphConvolution> GraphConvolution::create(cudnnHandle_t handle, const GraphConvolutionProblem& p) {
  auto impl = std::make_unique<Impl>();
  fe::graph::Graph& g = impl->graph;
  define_operation_graph(g, handle, p);
  CB_CHECK_CUDNN_FRONTEND(g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}));
  deselect_barred(g, p);
  CB_CHECK_CUDNN_FRONTEND(g.check_support(handle));
  impl->built.assign(static_cast<std::size_t>(g.get_execution_plan_count()), 0);
  return std::unique_ptr<GraphConvolution>(new GraphConvolution(std::move(impl), graph_runtime_compiled(p)));
}

std::unique_ptr<GraphConvolution> GraphConvolution::create_for_plan(cudnnHandle_t handle, const GraphConvolutionProblem& p,
                                                                    const std::string& plan_name) {
  const std::optional<GraphPlanConfiguration> configuration = parse_graph_plan_name(plan_name);
  if (!configuration) return nullptr;
  std::unordered_map<fe::KnobType_t, std::int64_t> knobs;
  for (const auto& [type, choice] : configuration->knobs)
    knobs[fe::convert_from_backend_knob_type(static_cast<cudnnBackendKnobType_t>(type))] = choice;
  auto impl = std::make_unique<Impl>();
  fe::graph::Graph& g = impl->graph;
  try {
    define_operation_graph(g, handle, p);
    if (g.create_execution_plan(configuration->engine, knobs).is_bad()) return nullptr;
    deselect_barred(g, p);
    if (g.check_support(handle).is_bad() || g.get_execution_plan_count() != 1) return nullptr;
  } catch (const OutOfMemory&) {
    throw;
  } catch (const Error&) {
    return nullptr;  // cuDNN refuses the graph here: the caller creates it whole, and that says why
  } catch (const std::exception&) {
    return nullptr;  // the frontend's JSON library: likewise
  }
  impl->built.assign(1, 0);
  auto graph = std::unique_ptr<GraphConvolution>(new GraphConvolution(std::move(impl), graph_runtime_compiled(p)));
  if (graph->plan_name(0) != plan_name) return nullptr;  // another configuration than the one cached
  return graph;
}

int GraphConvolution::plan_count() const {
  if (!impl_->restored_name.empty()) return 1;
  return static_cast<int>(impl_->graph.get_execution_plan_count());
}

std::string GraphConvolution::plan_name(int plan) const {
  if (!impl_->restored_name.empty()) return plan == 0 ? impl_->restored_name : "plan" + std::to_string(plan);
  std::string name;
  if (impl_->graph.get_plan_name_at_index(plan, name).is_bad()) return "plan" + std::to_string(plan);
  return name;
}

bool GraphConvolution::build(int plan) {
  if (plan < 0 || plan >= plan_count()) return false;
  char& built = impl_->built[static_cast<std::size_t>(plan)];
  if (!built) {
    const auto start = std::chrono::steady_clock::now();
    built = impl_->graph.build_plan_at_index(plan).is_good() ? 1 : 0;
    build_seconds_ += seconds_since(start);
    ++plans_built_;
  }
  return built != 0;
}

bool GraphConvolution::is_built(int plan) const {
  return plan >= 0 && plan < plan_count() && impl_->built[static_cast<std::size_t>(plan)] != 0;
}

std::vector<std::uint8_t> GraphConvolution::serialized(int plan) {
  std::vector<std::uint8_t> bytes;
  if (plan < 0 || plan >= plan_count() || !impl_->built[static_cast<std::size_t>(plan)]) return bytes;
  // Graph::serialize writes the graph's current candidate: building a built plan again only selects it.
  try {
    if (impl_->graph.build_plan_at_index(plan).is_bad() || impl_->graph.serialize(bytes, false).is_bad()) bytes.clear();
  } catch (const std::exception&) {  // the frontend's JSON library throws; no bytes is the answer
    bytes.clear();
  }
  return bytes;
}

std::unique_ptr<GraphConvolution> GraphConvolution::restore(cudnnHandle_t handle, const std::vector<std::uint8_t>& bytes,
                                                            const std::string& plan_name, bool runtime_compiled) {
  auto impl = std::make_unique<Impl>();
  // No warm-up capture: the session's validation pass runs every op once before anything is timed.
  try {
    if (bytes.empty() || impl->graph.deserialize(handle, bytes, false, false).is_bad()) return nullptr;
  } catch (const std::exception&) {  // bytes the frontend's JSON library cannot read: build instead
    return nullptr;
  }
  impl->built.assign(1, 1);
  impl->restored_name = plan_name;
  return std::unique_ptr<GraphConvolution>(new GraphConvolution(std::move(impl), runtime_compiled));
}

std::int64_t GraphConvolution::workspace_bytes(int plan) const {
  std::int64_t bytes = 0;
  CB_CHECK_CUDNN_FRONTEND(impl_->graph.get_workspace_size_plan_at_index(plan, bytes));
  return bytes;
}

bool GraphConvolution::run(cudnnHandle_t handle, int plan, void* x, void* w, void* y, void* bias, void* residual,
                           void* workspace, bool refusal_allowed) const {
  std::unordered_map<std::int64_t, void*> pack{{kX, x}, {kW, w}, {kY, y}};
  if (bias != nullptr) pack.emplace(kBias, bias);
  if (residual != nullptr) pack.emplace(kResidual, residual);
  auto status = impl_->graph.execute_plan_at_index(handle, pack, workspace, plan);
  if (status.is_good()) return true;
  if (refusal_allowed) return false;
  throw_library_error("cuDNN Graph API", "execute_plan_at_index(" + plan_name(plan) + ")", __FILE__, __LINE__,
                      status.get_message(), false);
}

bool GraphConvolution::run_with_statistics(cudnnHandle_t handle, int plan, void* x, void* w, void* y, float* sum,
                                           float* sum_of_squares, void* workspace, bool refusal_allowed) const {
  std::unordered_map<std::int64_t, void*> pack{{kX, x}, {kW, w}, {kY, y}, {kSum, sum}, {kSumOfSquares, sum_of_squares}};
  auto status = impl_->graph.execute_plan_at_index(handle, pack, workspace, plan);
  if (status.is_good()) return true;
  if (refusal_allowed) return false;
  throw_library_error("cuDNN Graph API", "execute_plan_at_index(" + plan_name(plan) + ", statistics)", __FILE__,
                      __LINE__, status.get_message(), false);
}

#else  // no Graph API in this build

struct GraphConvolution::Impl {};

bool graph_api_available() { return false; }
const char* graph_api_unavailable_reason() {
#if CUDNN_MAJOR < 9
  return "cuDNN 8 build: the legacy API only";
#else
  return "built without cudnn-frontend (CROSSBENCH_CUDNN_FRONTEND_ROOT)";
#endif
}

std::unique_ptr<GraphConvolution> GraphConvolution::create(cudnnHandle_t, const GraphConvolutionProblem&) {
  throw Error(std::string("cuDNN Graph API unavailable: ") + graph_api_unavailable_reason());
}
std::unique_ptr<GraphConvolution> GraphConvolution::create_for_plan(cudnnHandle_t, const GraphConvolutionProblem&,
                                                                    const std::string&) {
  return nullptr;
}
int GraphConvolution::plan_count() const { return 0; }
std::string GraphConvolution::plan_name(int) const { return {}; }
bool GraphConvolution::build(int) { return false; }
bool GraphConvolution::is_built(int) const { return false; }
std::vector<std::uint8_t> GraphConvolution::serialized(int) { return {}; }
std::unique_ptr<GraphConvolution> GraphConvolution::restore(cudnnHandle_t, const std::vector<std::uint8_t>&,
                                                            const std::string&, bool) {
  return nullptr;
}
std::int64_t GraphConvolution::workspace_bytes(int) const { return 0; }
bool GraphConvolution::run(cudnnHandle_t, int, void*, void*, void*, void*, void*, void*, bool) const { return false; }
bool GraphConvolution::run_with_statistics(cudnnHandle_t, int, void*, void*, void*, float*, float*, void*, bool) const {
  return false;
}

#endif

bool graph_runtime_compiled(const GraphConvolutionProblem& problem) {
  return problem.residual.valid() || problem.statistics;
}

std::optional<GraphPlanConfiguration> parse_graph_plan_name(const std::string& name) {
  // "eng<index>" then "_k<type>=<choice>" per knob; a choice may be negative.
  const auto number = [&](std::size_t& at, bool may_be_negative, std::int64_t& value) {
    const std::size_t begin = at;
    if (may_be_negative && at < name.size() && name[at] == '-') ++at;
    const std::size_t digits = at;
    while (at < name.size() && name[at] >= '0' && name[at] <= '9') ++at;
    if (at == digits || at - digits > 18) return false;  // no digits, or beyond int64
    value = std::stoll(name.substr(begin, at - begin));
    return true;
  };
  if (name.rfind("eng", 0) != 0) return std::nullopt;
  GraphPlanConfiguration configuration;
  std::size_t at = 3;
  if (!number(at, false, configuration.engine)) return std::nullopt;
  while (at < name.size()) {
    if (name.compare(at, 2, "_k") != 0) return std::nullopt;
    at += 2;
    std::int64_t type = 0, choice = 0;
    if (!number(at, false, type) || type > 1000 || at >= name.size() || name[at] != '=') return std::nullopt;
    ++at;
    if (!number(at, true, choice)) return std::nullopt;
    configuration.knobs.emplace_back(static_cast<int>(type), choice);
  }
  return configuration;
}

GraphConvolution::GraphConvolution(std::unique_ptr<Impl> impl, bool runtime_compiled)
    : impl_(std::move(impl)), runtime_compiled_(runtime_compiled) {}
GraphConvolution::~GraphConvolution() = default;

}  // namespace crossbench::cudnn
