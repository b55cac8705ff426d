// One convolution direction as a cuDNN Graph API graph (cudnn-frontend v1,
// pinned in scripts/common.sh), with every engine configuration cuDNN's
// heuristics (modes A and fallback) list for it. The legacy API reaches eight
// algorithms per direction; the Graph API's engine configurations (tile
// sizes, split-K and other knobs) are what PyTorch's cuDNN path searches.
// The forward may carry the fused epilogue of a conv_bias_relu group: y =
// relu(conv(x, w) + bias) in one kernel, and of a conv_bn_add_relu group:
// y = relu(conv(x, w) + bias + residual), the residual a tensor of y's shape.
// The plain forward may also write y's per-channel sum and sum of squares
// (cuDNN's genstats, fp32), the statistics a training batch-norm after the
// convolution needs, so that the batch-norm need not read y to compute them
// (issue 24: MLPerf's ResNet-50 computes them in the convolution's epilogue).
// Not yet in the engine: a GPU test asks cuDNN which plans it has for it.
//
// The layer measures the plans (plan_count/plan_name/build/run) with the same
// in-context timing and algorithm cache as the legacy algorithms
// (algorithms.hpp) and keeps the faster. The frontend's types stay in the one
// .cpp that includes it (it costs ~40 s of compile time per file).
#pragma once

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "crossbench/cell.hpp"
#include "engines/cudnn/tensor.hpp"

namespace crossbench::cudnn {

enum class GraphDirection { forward, backward_data, backward_filter };

struct GraphConvolutionProblem {
  GraphDirection direction = GraphDirection::forward;
  Precision precision = Precision::fp32;
  Tensor x, w, y;        // forward: inputs x, w and output y; backward data: dy (y), w → dx (x); filter: x, dy (y) → dw (w)
  Tensor bias;           // forward with epilogue: y = relu(conv + bias) (a (1, C, 1, 1) tensor)
  bool bias_relu = false;
  Tensor residual;       // with bias_relu: y = relu(conv + bias + residual) (y's shape), where valid
  // Forward without bias_relu: also y's per-channel sum and sum of squares (cuDNN's genstats over the
  // N*H*W values of each channel), fp32, C values each (run_with_statistics).
  bool statistics = false;
  int padding = 0, stride = 1;
  std::int64_t workspace_limit_bytes = 0;
};

// Whether this build has the Graph API path (cudnn-frontend found at build time, cuDNN 9 or later);
// else the reason, for the decisions.
[[nodiscard]] bool graph_api_available();
[[nodiscard]] const char* graph_api_unavailable_reason();

// Whether the problem's graph admits runtime-compiled (NVRTC) engines: the residual graph of a
// conv_bn_add_relu group (the H200 lists no precompiled engine for it) and a graph with statistics
// (cuDNN's genstats fusions are runtime fusion engines).
[[nodiscard]] bool graph_runtime_compiled(const GraphConvolutionProblem& problem);

// An engine configuration as a plan's name spells it (cudnn-frontend's engine tag: "eng41_k2=7_k13=1",
// the engine's global index, then each knob's cuDNN backend type and choice, ordered by type).
struct GraphPlanConfiguration {
  std::int64_t engine = -1;
  std::vector<std::pair<int, std::int64_t>> knobs;  // (cudnnBackendKnobType_t, choice)
};
// The configuration a plan name spells; nullopt for a name that is not an engine tag ("plan3", "",
// "INVALID_ENGINE_NAME_CFG"). Plain text: tested on the CPU.
[[nodiscard]] std::optional<GraphPlanConfiguration> parse_graph_plan_name(const std::string& name);

class GraphConvolution {
 public:
  // The graph with its heuristics' engine configurations that fit the workspace limit (strict fp32:
  // none that uses tensor cores, as PyTorch without allow_tf32). Throws Error where cuDNN refuses the graph.
  [[nodiscard]] static std::unique_ptr<GraphConvolution> create(cudnnHandle_t handle,
                                                                const GraphConvolutionProblem& problem);
  // engine.graph_from_cache: the graph of `problem` with the one engine configuration `plan_name` spells
  // (cudnn-frontend's create_execution_plan(engine, knobs)), not the heuristics' list: a replay whose
  // algorithm cache names its choice asks cuDNN's heuristics nothing. Its one plan (index 0) is not built
  // yet. Null where the name does not parse, cuDNN refuses the configuration, the filters of create()
  // bar it, or the plan's name reads otherwise (the caller then creates the whole graph); throws
  // OutOfMemory.
  [[nodiscard]] static std::unique_ptr<GraphConvolution> create_for_plan(cudnnHandle_t handle,
                                                                         const GraphConvolutionProblem& problem,
                                                                         const std::string& plan_name);
  ~GraphConvolution();
  GraphConvolution(const GraphConvolution&) = delete;
  GraphConvolution& operator=(const GraphConvolution&) = delete;

  [[nodiscard]] int plan_count() const;
  [[nodiscard]] std::string plan_name(int plan) const;  // engine and knobs, stable for one cuDNN version
  // Builds a plan (compiles its kernels); false where cuDNN refuses it.
  [[nodiscard]] bool build(int plan);
  // Whether the plan is built already (by this layer's search or an identical layer's).
  [[nodiscard]] bool is_built(int plan) const;
  // What building cost this graph: the plans built (refusals included) and their wall time [s].
  [[nodiscard]] int plans_built() const { return plans_built_; }
  [[nodiscard]] double build_seconds() const { return build_seconds_; }
  // Whether the graph admits runtime-compiled (NVRTC) engines: the residual graph of a conv_bn_add_relu
  // group, whose every engine on the H200 is one, so its builds compile kernels in every process; and a
  // graph with statistics (cuDNN's genstats fusions are runtime fusion engines).
  [[nodiscard]] bool runtime_compiled() const { return runtime_compiled_; }
  [[nodiscard]] std::int64_t workspace_bytes(int plan) const;
  // A built plan as bytes (cudnn-frontend's Graph::serialize, the plan only); empty where the plan is not
  // built or cuDNN cannot serialize it (serialization covers runtime-compiled engines).
  [[nodiscard]] std::vector<std::uint8_t> serialized(int plan);
  // A graph of one plan (index 0, named `plan_name`) restored from serialized() bytes on this handle,
  // its kernels not compiled again; null where cuDNN refuses the bytes (another cuDNN, another GPU).
  [[nodiscard]] static std::unique_ptr<GraphConvolution> restore(cudnnHandle_t handle,
                                                                 const std::vector<std::uint8_t>& bytes,
                                                                 const std::string& plan_name, bool runtime_compiled);
  // Enqueues the plan on the handle's stream; x, w, y, bias, residual as in the problem (null where it
  // has none). false where the execution is refused and `refusal_allowed` (the measurement), else throws Error.
  bool run(cudnnHandle_t handle, int plan, void* x, void* w, void* y, void* bias, void* residual, void* workspace,
           bool refusal_allowed) const;
  // The same for a graph with `statistics`: sum and sum_of_squares receive C floats each.
  bool run_with_statistics(cudnnHandle_t handle, int plan, void* x, void* w, void* y, float* sum,
                           float* sum_of_squares, void* workspace, bool refusal_allowed) const;

 private:
  struct Impl;
  GraphConvolution(std::unique_ptr<Impl> impl, bool runtime_compiled);
  std::unique_ptr<Impl> impl_;
  bool runtime_compiled_ = false;
  int plans_built_ = 0;
  double build_seconds_ = 0;  // [s]
};

}  // namespace crossbench::cudnn
