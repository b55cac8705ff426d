#include "engines/cudnn/graph_convolution_cache.hpp"

#include <chrono>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "crossbench/clock.hpp"
#include "crossbench/error.hpp"

namespace crossbench::cudnn {

namespace {

void append_tensor(std::ostringstream& key, const char* role, const Tensor& t) {
  key << role << '=' << name_of(t.type);
  for (const std::int64_t d : t.dims) key << ',' << d;
  key << '/';
  for (const std::int64_t s : t.strides) key << ',' << s;
  key << ';';
}

}  // namespace

std::string graph_problem_key(const GraphConvolutionProblem& p) {
  std::ostringstream key;
  key << static_cast<int>(p.direction) << ';' << to_string(p.precision) << ';';
  append_tensor(key, "x", p.x);
  append_tensor(key, "w", p.w);
  append_tensor(key, "y", p.y);
  if (p.bias_relu) {  // the graph reads the bias (and the residual) only with its epilogue
    append_tensor(key, "bias", p.bias);
    if (p.residual.valid()) append_tensor(key, "residual", p.residual);
  }
  if (p.statistics) key << "statistics;";  // the graph also writes y's per-channel sums
  key << "pad=" << p.padding << ";stride=" << p.stride << ";workspace<=" << p.workspace_limit_bytes;
  return key.str();
}

std::shared_ptr<GraphConvolution> GraphConvolutionCache::get(cudnnHandle_t handle,
                                                             const GraphConvolutionProblem& problem) {
  const std::string key = graph_problem_key(problem);
  if (!requested_.insert(key).second) ++shared_;
  if (const auto found = graphs_.find(key); found != graphs_.end()) {
    if (!found->second.graph) throw Error(found->second.refusal);
    return found->second.graph;
  }
  Entry entry;
  const auto start = std::chrono::steady_clock::now();
  try {
    entry.graph = GraphConvolution::create(handle, problem);
  } catch (const OutOfMemory&) {
    throw;  // not a property of the problem: never remembered
  } catch (const Error& e) {
    create_seconds_ += seconds_since(start);
    entry.refusal = e.what();
    graphs_.emplace(key, std::move(entry));
    throw;
  }
  create_seconds_ += seconds_since(start);
  return graphs_.emplace(key, std::move(entry)).first->second.graph;
}

void GraphConvolutionCache::count_request(const GraphConvolutionProblem& problem) {
  if (!requested_.insert(graph_problem_key(problem)).second) ++shared_;
}

std::string graph_plan_key(const GraphConvolutionProblem& problem, const std::string& plan_name) {
  return graph_problem_key(problem) + ";plan=" + plan_name;
}

std::shared_ptr<GraphConvolution> GraphConvolutionCache::restored(cudnnHandle_t handle,
                                                                  const GraphConvolutionProblem& problem,
                                                                  const std::string& plan_name,
                                                                  const GraphPlanStore& store) {
  const std::string key = graph_plan_key(problem, plan_name);
  // Identical layers share the restored graph as they share a created one (get() counted the request).
  if (const auto found = restored_.find(key); found != restored_.end()) return found->second;
  const std::vector<std::uint8_t>* bytes = store.find(key);
  if (bytes == nullptr) return nullptr;  // nothing kept yet: not remembered, a later layer may find it
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<GraphConvolution> graph =
      GraphConvolution::restore(handle, *bytes, plan_name, graph_runtime_compiled(problem));
  restore_seconds_ += seconds_since(start);
  if (graph) ++plans_restored_;
  return restored_.emplace(key, std::move(graph)).first->second;
}

void GraphConvolutionCache::keep(const GraphConvolutionProblem& problem, const std::string& plan_name,
                                 GraphConvolution& graph, int plan, GraphPlanStore& store) {
  const std::string key = graph_plan_key(problem, plan_name);
  if (store.find(key) != nullptr) return;
  std::vector<std::uint8_t> bytes = graph.serialized(plan);
  if (bytes.empty()) return;
  store.keep(key, std::move(bytes));
  ++plans_kept_;
}

std::shared_ptr<GraphConvolution> GraphConvolutionCache::configured(cudnnHandle_t handle,
                                                                    const GraphConvolutionProblem& problem,
                                                                    const std::string& plan_name, GraphPlanStore* store) {
  const std::string key = graph_plan_key(problem, plan_name);
  if (const auto found = restored_.find(key); found != restored_.end()) return found->second;
  std::shared_ptr<GraphConvolution> graph;
  if (store != nullptr && graph_runtime_compiled(problem))
    if (const std::vector<std::uint8_t>* bytes = store->find(key); bytes != nullptr) {
      const auto start = std::chrono::steady_clock::now();
      graph = GraphConvolution::restore(handle, *bytes, plan_name, true);
      restore_seconds_ += seconds_since(start);
      if (graph) ++plans_restored_;
    }
  if (!graph) {
    const auto start = std::chrono::steady_clock::now();
    graph = GraphConvolution::create_for_plan(handle, problem, plan_name);
    const double seconds = seconds_since(start);
    create_seconds_ += seconds;
    configure_seconds_ += seconds;
    if (graph) {
      ++plans_configured_;
      if (!graph->build(0)) {
        graph.reset();  // refused to build here: the whole graph says why
      } else if (store != nullptr && graph->runtime_compiled()) {
        keep(problem, plan_name, *graph, 0, *store);
      }
    }
  }
  return restored_.emplace(key, std::move(graph)).first->second;
}

GraphConvolutionCache::SetupCost GraphConvolutionCache::setup_cost() const {
  SetupCost cost;
  cost.create_seconds = create_seconds_;
  cost.plans_restored = plans_restored_;
  cost.restore_seconds = restore_seconds_;
  cost.plans_kept = plans_kept_;
  cost.plans_configured = plans_configured_;
  cost.configure_seconds = configure_seconds_;
  const auto add_builds = [&](const GraphConvolution& graph) {
    cost.plans_built += graph.plans_built();
    cost.build_seconds += graph.build_seconds();
    if (graph.runtime_compiled()) {
      cost.runtime_plans_built += graph.plans_built();
      cost.runtime_build_seconds += graph.build_seconds();
    }
  };
  for (const auto& [key, entry] : graphs_)
    if (entry.graph) add_builds(*entry.graph);
  for (const auto& [key, graph] : restored_)  // restored graphs built nothing; configured ones their plan
    if (graph) add_builds(*graph);
  return cost;
}

}  // namespace crossbench::cudnn
