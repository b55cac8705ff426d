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
#include <unordered_map>
#include <unordered_set>
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

// Everything a graph depends on, and nothing of where its tensors live: direction, precision, the dims,
// strides and types of x, w, y (and of the bias and residual the graph reads), padding, stride and the
// workspace limit. Two problems with the same key have the same graph and the same engine configurations.
[[nodiscard]] std::string graph_problem_key(const GraphConvolutionProblem& problem);

// engine.graph_plan_reuse: the process's runtime-compiled plans as bytes, one per problem and plan name,
// kept by the first session that built one and restored by later sessions (GraphConvolutionCache::restored)
// instead of compiling it again. Lives as long as the engine (a rank's cells); bytes hold no device memory,
// so any session's handle can restore them.
class GraphPlanStore {
 public:
  void keep(const std::string& key, std::vector<std::uint8_t> bytes);
  [[nodiscard]] const std::vector<std::uint8_t>* find(const std::string& key) const;
  [[nodiscard]] int plans() const { return static_cast<int>(plans_.size()); }

 private:
  std::unordered_map<std::string, std::vector<std::uint8_t>> plans_;
};
// The store's key of a problem's plan: graph_problem_key and the plan's name.
[[nodiscard]] std::string graph_plan_key(const GraphConvolutionProblem& problem, const std::string& plan_name);

// A session's Graph API graphs, one per distinct problem (graph_problem_key): identical convolutions
// share one graph and the plans built in it. Why: the residual graph of a conv_bn_add_relu group has only
// runtime-compiled (NVRTC) engines, and creating and building one again for every identical block cost
// 0.17-0.19 s per residual block in tf32, 13 s of ResNet-152 inference's search on an H200 with every
// measured choice a cache hit (bench/results/2026-12-03/call43). A refusal is remembered like a graph.
class GraphConvolutionCache {
 public:
  // The graph of `problem`, created on the first request; throws Error (cuDNN's refusal, on every request).
  [[nodiscard]] std::shared_ptr<GraphConvolution> get(cudnnHandle_t handle, const GraphConvolutionProblem& problem);
  // engine.graph_plan_reuse: the plan `plan_name` of `problem` restored from the store's bytes, once per
  // session (identical layers share it); null where the store has none or cuDNN refuses them.
  [[nodiscard]] std::shared_ptr<GraphConvolution> restored(cudnnHandle_t handle, const GraphConvolutionProblem& problem,
                                                           const std::string& plan_name, const GraphPlanStore& store);
  // Keeps a plan this session built in the store, where cuDNN can serialize it (once per key).
  void keep(const GraphConvolutionProblem& problem, const std::string& plan_name, GraphConvolution& graph, int plan,
            GraphPlanStore& store);
  // engine.graph_from_cache: the one-plan graph of `problem`'s plan `plan_name`, its plan built, once per
  // session (identical layers share it): restored from `store`'s bytes where it holds them
  // (engine.graph_plan_reuse; null: off), else created with that configuration alone
  // (GraphConvolution::create_for_plan) and built, and a runtime-compiled build kept in `store`. Null
  // where neither works, remembered, so that identical layers create the whole graph (get) at once.
  [[nodiscard]] std::shared_ptr<GraphConvolution> configured(cudnnHandle_t handle, const GraphConvolutionProblem& problem,
                                                             const std::string& plan_name, GraphPlanStore* store);
  // A request answered without get(), from the algorithm cache's record (engine.graph_from_cache): counted
  // as get() counts it, so that graphs() and shared() read the same in a search and in its replay.
  void count_request(const GraphConvolutionProblem& problem);
  [[nodiscard]] int graphs() const { return static_cast<int>(requested_.size()); }  // distinct problems asked for
  [[nodiscard]] int shared() const { return shared_; }  // requests for a problem asked for before
  // Where a session's Graph API set-up goes, for its decisions: the graphs' creation (operation graph,
  // heuristics, support checks) and their plans' builds, each [s], the runtime-compiled graphs' builds
  // apart. A search replayed from the algorithm cache still creates its graphs and builds its chosen
  // plans, in every process: this is that cost.
  struct SetupCost {
    double create_seconds = 0;
    int plans_built = 0;
    double build_seconds = 0;
    int runtime_plans_built = 0;
    double runtime_build_seconds = 0;
    int plans_restored = 0;     // engine.graph_plan_reuse: plans restored from the process's store
    double restore_seconds = 0;  // [s]
    int plans_kept = 0;          // plans this session added to the store
    int plans_configured = 0;        // engine.graph_from_cache: graphs created with their chosen configuration alone
    double configure_seconds = 0;    // their creation [s] (in create_seconds too)
  };
  [[nodiscard]] SetupCost setup_cost() const;

 private:
  struct Entry {
    std::shared_ptr<GraphConvolution> graph;
    std::string refusal;  // cuDNN's reason, where graph is null
  };
  std::unordered_map<std::string, Entry> graphs_;
  std::unordered_set<std::string> requested_;  // graph_problem_key of every problem asked for (get, count_request)
  int shared_ = 0;
  double create_seconds_ = 0;  // [s]
  // One-plan graphs by graph_plan_key (restored, or configured under engine.graph_from_cache); null: refused.
  std::unordered_map<std::string, std::shared_ptr<GraphConvolution>> restored_;
  int plans_restored_ = 0;
  int plans_configured_ = 0;
  double configure_seconds_ = 0;  // [s]
  double restore_seconds_ = 0;  // [s]
  int plans_kept_ = 0;
};

}  // namespace crossbench::cudnn
