// A session's Graph API graphs (graph_api_convolution.hpp builds and runs one graph): the key that makes
// identical convolutions share one graph, and the cache that holds a session's graphs (created whole,
// restored from the plan store's bytes, graph_plan_store.hpp, or created with a cached configuration alone). Plain C++: no cudnn-frontend type, so the key and the
// plan names are tested on the CPU.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engines/cudnn/graph_api_convolution.hpp"
#include "engines/cudnn/graph_plan_store.hpp"

namespace crossbench::cudnn {

// Everything a graph depends on, and nothing of where its tensors live: direction, precision, the dims,
// strides and types of x, w, y (and of the bias and residual the graph reads), padding, stride and the
// workspace limit. Two problems with the same key have the same graph and the same engine configurations.
[[nodiscard]] std::string graph_problem_key(const GraphConvolutionProblem& problem);

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
  // Whether this session created (or was refused) `problem`'s whole graph already: an identical layer's
  // search. engine.graph_from_cache then takes that graph (get) rather than create a one-plan graph beside it.
  [[nodiscard]] bool created(const GraphConvolutionProblem& problem) const {
    return graphs_.count(graph_problem_key(problem)) != 0;
  }
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
