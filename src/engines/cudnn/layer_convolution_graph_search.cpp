// The measured search (exhaustive) also times the direction as a cuDNN Graph
// API graph (graph_api_convolution.hpp): the first kGraphCandidates engine
// configurations of cuDNN's heuristics (modes A and fallback; none that needs
// runtime compilation; strict fp32 without tensor cores) on the search arena,
// in context, cached like the algorithms; the fastest replaces the legacy
// choice where it is clearly faster. The forward of a conv_bias_relu group is
// timed as one graph with its bias and relu epilogue, against the legacy
// choice plus the epilogue pass it saves. Decisions say "fwd=graph(NAME ...)".
// `--algo heuristic` keeps the legacy API alone (the 2017 frameworks' way).
//
// Under the measured search a choice must first compute the convolution: the
// fastest legacy candidate is held to a reference algorithm (IMPLICIT_GEMM,
// ALGO_1), a winning graph plan to the legacy choice, on the search arena,
// after its output and workspace are poisoned (agreeing_candidates,
// graph_plan_difference; DESIGN.md). Decisions say "[refused NAME (differs by
// X)]" and "[graph NAME ... refused: ...]".
#include "engines/cudnn/layer_convolution.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "crossbench/error.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/graph_refusal.hpp"
#include "engines/cudnn/kernels_batch_norm.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"
#include "engines/cudnn/tensor_compare.hpp"

namespace crossbench::cudnn {

// conv_bn_add_relu: the fused graph against the unfused ops (the faster plain forward, legacy or graph,
// plus the bias pass and the add+relu pass: read and write y, then read y and the residual and write y,
// less the graph's own read of the residual). It replaces the plain choice where clearly faster.
void Convolution::choose_residual_graph(SetupContext& ctx, const std::string& forward_signature) {
  const double plain_ms = graph_forward.graph ? graph_forward.time_ms : forward.time_ms;
  const double saved_ms = 4.0 * static_cast<double>(y.bytes()) / kMemoryBandwidth * 1e3;
  GraphPlan fused_graph;
  choose_graph_plan(ctx, GraphDirection::forward, true, "forward+bias+add+relu " + forward_signature,
                    plain_ms + saved_ms, fused_graph, true);
  if (!fused_graph.graph) {
    residual_note = fused_graph.note.empty() ? "no fused graph measured" : "graph " + fused_graph.note;
    return;
  }
  graph_forward = std::move(fused_graph);
  residual_graph = true;
}

// engine.conv_statistics (training): the statistics graph (conv → y, and y's per-channel Σy and Σy² for the
// batch-norm after it) against the plain forward chosen so far plus the pass it saves: our statistics pass
// reads y once. It replaces the plain choice where clearly faster and its sums agree with those of its own
// output (statistics_difference); else the batch-norm computes its own, and the decisions say why.
void Convolution::choose_statistics_graph(SetupContext& ctx, const std::string& forward_signature) {
  const double plain_ms = graph_forward.graph ? graph_forward.time_ms
                          : forward_im2col   ? forward_im2col_ms
                                             : forward.time_ms;
  const double saved_ms = static_cast<double>(y.bytes()) / kMemoryBandwidth * 1e3;
  GraphPlan statistics_plan;
  choose_graph_plan(ctx, GraphDirection::forward, false, "forward+statistics " + forward_signature, plain_ms + saved_ms,
                    statistics_plan, false, true);
  search_sums.reset();  // the search's sums: no longer needed
  if (!statistics_plan.graph) {
    statistics_note = statistics_plan.note.empty() ? "no statistics graph measured" : "graph " + statistics_plan.note;
    return;
  }
  graph_forward = std::move(statistics_plan);
  statistics_graph = true;
  statistics->written = true;
  forward_im2col = false;  // the graph computes y: run_forward takes it first, the legacy choice is its fallback
  fused = false;
}

// Times the first kGraphCandidates plans of a Graph API graph of one direction on the search arena
// (cached under `signature` like every measured choice) and keeps the fastest where it is clearly
// faster than `incumbent_ms`, the legacy choice's time; else `note` says why not. A runtime-compiled
// graph (the residual epilogue, the statistics) times its first kResidualGraphCandidates.
void Convolution::choose_graph_plan(SetupContext& ctx, GraphDirection direction, bool bias_relu,
                                    const std::string& signature, double incumbent_ms, GraphPlan& out,
                                    bool with_residual, bool with_statistics) {
  if (ctx.config.algorithm != AlgorithmPolicy::exhaustive || !ctx.config.graph_api) return;
  if (!graph_api_available()) {
    out.note = graph_api_unavailable_reason();
    return;
  }
  GraphConvolutionProblem problem;
  problem.direction = direction;
  problem.precision = precision;
  problem.x = direction == GraphDirection::backward_data ? dx : x;
  problem.w = direction == GraphDirection::backward_filter ? dw : w;
  problem.y = direction == GraphDirection::forward ? y : dy;
  problem.bias = bias;
  problem.bias_relu = bias_relu;
  if (with_residual) problem.residual = residual;
  problem.statistics = with_statistics;
  problem.padding = static_cast<int>(padding);
  problem.stride = static_cast<int>(stride);
  problem.workspace_limit_bytes = ctx.config.workspace_limit_bytes;
  if (replay_graph_plan(ctx, problem, signature, incumbent_ms, out)) return;
  std::shared_ptr<GraphConvolution> graph;
  try {
    // One graph per distinct problem in the session: a plan an identical layer built is built here too.
    graph = ctx.graph_convolutions != nullptr ? ctx.graph_convolutions->get(ctx.dnn, problem)
                                              : std::shared_ptr<GraphConvolution>(GraphConvolution::create(ctx.dnn, problem));
  } catch (const OutOfMemory&) {
    throw;
  } catch (const Error& e) {
    out.note = "refused: " + graph_refusal_summary(e.what());  // one line in the decisions, not cuDNN's log
    return;
  }
  std::vector<std::string> names;
  const int candidates = graph_runtime_compiled(problem) ? kResidualGraphCandidates : kGraphCandidates;
  for (int i = 0; i < graph->plan_count() && i < candidates; ++i) names.push_back(graph->plan_name(i));
  if (names.empty()) {
    out.note = "no engine configuration fits";
    return;
  }
  const std::vector<float> times = measured_times_ms(ctx, "graph_api." + signature, names, [&] {
    std::vector<float> measured(names.size(), NAN);
    const SetupContext::Arena& a = ctx.arena();
    for (std::size_t i = 0; i < names.size(); ++i) {
      const int plan = static_cast<int>(i);
      if (!graph->build(plan) || graph->workspace_bytes(plan) > static_cast<std::int64_t>(a.workspace_bytes)) continue;
      measured[i] = static_cast<float>(
          median_in_context_ms(ctx, [&] { return run_graph_on_arena(ctx, *graph, plan, problem); }));
    }
    return measured;
  });
  int best = -1;
  for (std::size_t i = 0; i < times.size(); ++i)
    if (!std::isnan(times[i]) && (best < 0 || times[i] < times[static_cast<std::size_t>(best)])) best = static_cast<int>(i);
  if (best < 0) {
    out.note = "no plan ran";
    return;
  }
  std::ostringstream why;
  const std::string& best_name = names[static_cast<std::size_t>(best)];
  why << best_name << " " << times[static_cast<std::size_t>(best)] << "ms";
  if (!clearly_faster(times[static_cast<std::size_t>(best)], incumbent_ms, ctx.config.search_tie)) {
    out.note = why.str() + ">=" + std::to_string(incumbent_ms) + "ms";
    return;
  }
  // engine.graph_plan_reuse: a runtime-compiled plan an earlier session of the process built is restored
  // from its bytes, not compiled again (not with search_in_step, whose options are the graph's other plans);
  // one this session built already (its search, an identical layer) is used as it is.
  std::shared_ptr<GraphConvolution> chosen = graph;
  int chosen_plan = best;
  const bool reuse = ctx.graph_plans != nullptr && graph->runtime_compiled() && !ctx.config.search_in_step &&
                     ctx.graph_convolutions != nullptr;
  if (reuse && !graph->is_built(best))
    if (auto restored = ctx.graph_convolutions->restored(ctx.dnn, problem, best_name, *ctx.graph_plans)) {
      chosen = std::move(restored);
      chosen_plan = 0;
    }
  if (chosen == graph && !graph->build(best)) {
    out.note = why.str() + ">=" + std::to_string(incumbent_ms) + "ms";
    return;
  }
  if (reuse && chosen == graph) ctx.graph_convolutions->keep(problem, best_name, *graph, best, *ctx.graph_plans);
  if (!plan_agrees(ctx, problem, *chosen, chosen_plan, best_name, signature, why.str(), out)) return;
  out.plan = chosen_plan;
  out.incumbent_ms = incumbent_ms;
  out.time_ms = times[static_cast<std::size_t>(best)];
  out.name = best_name;
  out.graph = std::move(chosen);
  ctx.need_workspace(static_cast<std::size_t>(out.graph->workspace_bytes(out.plan)));
  if (ctx.config.search_in_step) add_step_options(ctx, problem, signature, names, times, out);
}

// Whether a chosen plan computes what it must: its output agrees with the legacy choice's
// (graph_plan_difference), and a statistics plan's sums with those of its own output
// (statistics_difference). Each difference is measured like the times and cached with them, so a replay
// allocates no search arena and its decisions read the same; else `out.note` says why not.
bool Convolution::plan_agrees(SetupContext& ctx, const GraphConvolutionProblem& problem, const GraphConvolution& graph,
                              int plan, const std::string& name, const std::string& signature, const std::string& why,
                              GraphPlan& out) {
  const double difference = measured_times_ms(ctx, "agreement.graph_api." + name + " " + signature, {name}, [&] {
    return std::vector<float>{cacheable_difference(graph_plan_difference(ctx, graph, plan, problem))};
  })[0];
  if (difference > plan_agreement_bound(precision)) {
    out.note = why + " refused: differs from " + legacy_choice_name(problem.direction) + " by " +
               difference_text(difference) + " of the largest value (bound " +
               difference_text(plan_agreement_bound(precision)) + ")";
    return false;
  }
  out.unchecked = std::isnan(difference);
  if (!problem.statistics) return true;
  const double statistics_off =
      measured_times_ms(ctx, "agreement.statistics.graph_api." + name + " " + signature, {name}, [&] {
        return std::vector<float>{cacheable_difference(statistics_difference(ctx, graph, plan, problem))};
      })[0];
  if (!(statistics_off <= kStatisticsAgreementBound)) {  // NaN: nothing held them to anything, so not taken
    out.note = why + " refused: its statistics differ from its output's by " + difference_text(statistics_off) +
               " (bound " + difference_text(kStatisticsAgreementBound) + ")";
    return false;
  }
  return true;
}

// engine.graph_from_cache: where the algorithm cache holds the graph's measured candidates (a replay: the
// file of --algo-cache, or an earlier session of the process), the choice follows from the record as
// choose_graph_plan makes it from the graph's list (the record keeps the heuristics' order, the first of
// equal times wins), and only the chosen configuration is created (GraphConvolutionCache::configured), or
// no graph at all where the legacy choice stays (a graph an identical layer of the session created whole is
// shared instead, as the search shares it). Its agreement is the record's too. true where `out` is
// decided (a plan, or the note why none); false where the whole graph must be created: no record, or cuDNN
// refuses the configuration here (choose_graph_plan then finds the record itself, counting it once).
bool Convolution::replay_graph_plan(SetupContext& ctx, const GraphConvolutionProblem& problem,
                                    const std::string& signature, double incumbent_ms, GraphPlan& out) {
  if (!ctx.config.graph_from_cache || ctx.config.search_in_step || ctx.graph_convolutions == nullptr) return false;
  // An identical layer of this session created the whole graph (its search, in the searching session): its
  // plans are there, built, and choose_graph_plan shares them as the search does, creating nothing.
  if (ctx.graph_convolutions->created(problem)) return false;
  const MeasuredChoice* record = peek_measured(ctx, "graph_api." + signature);
  if (record == nullptr) return false;
  const std::size_t candidates = graph_runtime_compiled(problem) ? kResidualGraphCandidates : kGraphCandidates;
  int best = -1;
  for (std::size_t i = 0; i < record->candidates.size() && i < candidates; ++i) {
    const double ms = record->candidates[i].median_ms;
    if (!std::isnan(ms) && (best < 0 || ms < record->candidates[static_cast<std::size_t>(best)].median_ms))
      best = static_cast<int>(i);
  }
  const auto answered = [&] {  // what choose_graph_plan's own lookups would have counted
    ctx.algorithm_cache->count_hit();
    ctx.graph_convolutions->count_request(problem);
  };
  if (best < 0) {
    answered();
    out.note = "no plan ran";
    return true;
  }
  const std::string best_name = record->candidates[static_cast<std::size_t>(best)].name;
  const auto best_ms = static_cast<float>(record->candidates[static_cast<std::size_t>(best)].median_ms);
  std::ostringstream why;
  why << best_name << " " << best_ms << "ms";
  if (!clearly_faster(best_ms, incumbent_ms, ctx.config.search_tie)) {
    answered();
    out.note = why.str() + ">=" + std::to_string(incumbent_ms) + "ms";
    return true;
  }
  std::shared_ptr<GraphConvolution> graph =
      ctx.graph_convolutions->configured(ctx.dnn, problem, best_name, ctx.graph_plans);
  if (!graph) return false;
  answered();
  if (!plan_agrees(ctx, problem, *graph, 0, best_name, signature, why.str(), out)) return true;
  out.plan = 0;
  out.incumbent_ms = incumbent_ms;
  out.time_ms = best_ms;
  out.name = best_name;
  out.graph = std::move(graph);
  ctx.need_workspace(static_cast<std::size_t>(out.graph->workspace_bytes(out.plan)));
  return true;
}

// One run of a graph plan on the search arena's roles, as the legacy search's: x the input (or dx), w the
// filter (or dw), y the output (or dy); the bias from arena w, the residual (y's shape, which plan_search
// sized arena x for) from arena x, a statistics graph's sums into arena_sums(). false where it refuses.
bool Convolution::run_graph_on_arena(SetupContext& ctx, const GraphConvolution& graph, int plan,
                                     const GraphConvolutionProblem& problem) {
  const SetupContext::Arena& a = ctx.arena();
  if (problem.statistics) {
    float* sums = arena_sums();
    return graph.run_with_statistics(ctx.dnn, plan, a.x, a.w, a.y, sums, sums + y.c(), a.workspace, true);
  }
  return graph.run(ctx.dnn, plan, a.x, a.w, a.y, problem.bias_relu ? a.w : nullptr,
                   problem.residual.valid() ? a.x : nullptr, a.workspace, true);
}

// The search's sums of a statistics graph: 2 C floats (the plan's Σy, Σy²), then 2 C doubles (the
// reference), allocated on first use and freed with the layer's search (setup's end).
float* Convolution::arena_sums() {
  const auto channels = static_cast<std::size_t>(y.c());
  if (search_sums.bytes() == 0)
    search_sums = DeviceBuffer(2 * channels * (sizeof(float) + sizeof(double)), "a statistics plan's sums (search)");
  return reinterpret_cast<float*>(search_sums.data());
}

// How far a statistics plan's sums are from those of its own output (statistics_agreement: per channel,
// the mean's difference in standard deviations and the variance's relative difference; the worst), run
// once on the search arena with its sums zeroed first; infinity where it refuses to run; NaN where the
// arena's values give nothing to hold them to.
double Convolution::statistics_difference(SetupContext& ctx, const GraphConvolution& graph, int plan,
                                          const GraphConvolutionProblem& problem) {
  const SetupContext::Arena& a = ctx.arena();
  const auto channels = static_cast<std::size_t>(y.c());
  float* sums = arena_sums();
  auto* reference = reinterpret_cast<double*>(sums + 2 * channels);
  refill_check_inputs(ctx, GraphDirection::forward);
  CB_CHECK_CUDA(cudaMemsetAsync(sums, 0, 2 * channels * sizeof(float), ctx.stream));
  const bool ran = run_graph_on_arena(ctx, graph, plan, problem);
  double difference = std::numeric_limits<double>::infinity();
  if (ran) {
    kernels::channel_sums(a.y, y.type, y.n() * y.h() * y.w(), y.c(), reference, reference + channels, ctx.stream);
    std::vector<float> plan_sums(2 * channels);
    std::vector<double> reference_sums(2 * channels);
    CB_CHECK_CUDA(cudaMemcpyAsync(plan_sums.data(), sums, plan_sums.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                  ctx.stream));
    CB_CHECK_CUDA(cudaMemcpyAsync(reference_sums.data(), reference, reference_sums.size() * sizeof(double),
                                  cudaMemcpyDeviceToHost, ctx.stream));
    CB_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    difference = statistics_agreement(plan_sums, reference_sums, y.n() * y.h() * y.w());
  }
  ctx.refill_arena(a.y, static_cast<std::size_t>(y.span_bytes()));  // the plan's output is no data for later layers
  return difference;
}

// engine.search_in_step: the plans of out.graph the search timed within kInStepWindow of out's, each
// agreeing with the reference as out's does (the same cached check), nearest first, at most
// kInStepOptions in all; their workspaces are reserved so that any of them can run in the step.
void Convolution::add_step_options(SetupContext& ctx, const GraphConvolutionProblem& problem,
                                   const std::string& signature, const std::vector<std::string>& names,
                                   const std::vector<float>& times, GraphPlan& out) {
  out.signature = signature;
  out.options = {{out.plan, out.name, out.time_ms}};
  std::vector<int> near;
  for (std::size_t i = 0; i < times.size(); ++i)
    if (static_cast<int>(i) != out.plan && !std::isnan(times[i]) && times[i] <= out.time_ms * (1 + kInStepWindow))
      near.push_back(static_cast<int>(i));
  std::stable_sort(near.begin(), near.end(), [&](int a, int b) { return times[static_cast<std::size_t>(a)] < times[static_cast<std::size_t>(b)]; });
  for (const int plan : near) {
    if (out.options.size() >= kInStepOptions) break;
    const std::string& plan_name = names[static_cast<std::size_t>(plan)];
    if (!out.graph->build(plan)) continue;
    GraphPlan checked;  // plan_agrees' note, unused: a near tie that does not agree is left out
    if (!plan_agrees(ctx, problem, *out.graph, plan, plan_name, signature, plan_name, checked)) continue;
    out.options.push_back({plan, plan_name, times[static_cast<std::size_t>(plan)]});
    ctx.need_workspace(static_cast<std::size_t>(out.graph->workspace_bytes(plan)));
  }
  if (out.options.size() < 2) out.options.clear();  // nothing near-tied: no choice to make in the step
}

// The step choice of one direction's graph plan, where it has near-tied options.
void Convolution::add_step_choice(std::vector<StepChoice>& choices, GraphPlan& plan, const std::string& what) {
  if (!plan.graph || plan.options.size() < 2) return;
  StepChoice choice;
  choice.key = plan.signature;
  choice.what = what;
  for (const GraphPlan::Option& option : plan.options) {
    choice.options.push_back(option.name);
    choice.search_ms.push_back(option.time_ms);
  }
  choice.use = [&plan](std::size_t i) {
    const GraphPlan::Option& option = plan.options.at(i);
    plan.plan = option.plan;
    plan.name = option.name;
    plan.time_ms = option.time_ms;
  };
  choices.push_back(std::move(choice));
}

std::vector<StepChoice> Convolution::step_choices() {
  std::vector<StepChoice> choices;
  add_step_choice(choices, graph_forward, name + ":fwd");
  add_step_choice(choices, graph_data, name + ":bwd_data");
  add_step_choice(choices, graph_filter, name + ":bwd_filter");
  return choices;
}

// The measured candidates (fastest first) less the faster ones whose output on the search arena,
// run over a poison of its output and workspace (all-ones bytes: a NaN in every float type), differs
// from the reference algorithm's (IMPLICIT_GEMM forward, ALGO_1 backward: no workspace-dependent
// tricks, no atomics) by more than plan_agreement_bound: checked in order until one agrees, so the
// choice is the fastest candidate that computes the convolution. The differences are measured
// choices like the times (cached under `signature`). `refused` names
// the refused ones for decisions. (On an H200 the strict-fp32 AlexNet cells of FullyConnectedFusion
// differed between two sessions running the same choices, bench/results/2026-12-02/call14.)
std::vector<AlgorithmChoice> Convolution::agreeing_candidates(SetupContext& ctx,
                                                              std::vector<AlgorithmChoice> candidates,
                                                              GraphDirection direction, const std::string& signature,
                                                              std::string& refused) {
  if (ctx.config.algorithm != AlgorithmPolicy::exhaustive || candidates.size() < 2) return candidates;
  const auto name_of = [&](const AlgorithmChoice& c) {
    const char* algorithm = direction == GraphDirection::forward         ? forward_algorithm_name(c.algorithm)
                            : direction == GraphDirection::backward_data ? backward_data_algorithm_name(c.algorithm)
                                                                         : backward_filter_algorithm_name(c.algorithm);
    return std::string(algorithm) + "/" + math(c);
  };
  std::vector<std::string> names;
  for (const AlgorithmChoice& c : candidates) names.push_back(name_of(c));
  // Each candidate's difference from the reference (relative_difference), measured in order until one
  // agrees, NaN for those not checked: cached like the times, so a replay chooses and reads the same.
  const std::vector<float> differences = measured_times_ms(ctx, "agreement." + signature, names, [&] {
    std::vector<float> measured(candidates.size(), NAN);
    const SetupContext::Arena& a = ctx.arena();
    const bool forward_direction = direction == GraphDirection::forward;
    const Tensor& output = forward_direction ? y : direction == GraphDirection::backward_data ? dx : dw;
    void* output_at = forward_direction ? a.y : direction == GraphDirection::backward_data ? a.x : a.w;
    const AlgorithmChoice reference = reference_choice(direction);
    if (candidates.front().algorithm == reference.algorithm && candidates.front().math == reference.math) {
      measured.front() = 0.0f;  // the fastest is the reference itself
      return measured;
    }
    refill_check_inputs(ctx, direction);
    if (run_legacy_on_arena(ctx, direction, reference) != CUDNN_STATUS_SUCCESS) return measured;  // nothing to hold them to
    const DeviceReference reference_output(output_at, output, a.reference, a.counters, ctx.stream);
    const auto difference = [&] { return reference_output.difference_from(output_at); };
    if (std::isinf(difference())) return measured;  // the arena's values overflow this problem: nothing to hold them to
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      // Its output and workspace poisoned first with all-ones bytes (a NaN in every float type): a
      // candidate that reads what it did not write shows as infinitely far.
      CB_CHECK_CUDA(cudaMemsetAsync(output_at, 0xff, static_cast<std::size_t>(output.span_bytes()), ctx.stream));
      if (candidates[i].workspace_bytes > 0 && candidates[i].workspace_bytes <= a.workspace_bytes)
        CB_CHECK_CUDA(cudaMemsetAsync(a.workspace, 0xff, candidates[i].workspace_bytes, ctx.stream));
      const double worst =
          run_legacy_on_arena(ctx, direction, candidates[i]) == CUDNN_STATUS_SUCCESS ? difference() : NAN;
      if (std::isnan(worst)) continue;  // not run here: not held against it
      measured[i] = cacheable_difference(worst);
      if (worst <= plan_agreement_bound(precision)) break;
    }
    ctx.refill_arena(output_at, static_cast<std::size_t>(output.span_bytes()));  // no poison left for later layers
    return measured;
  });
  std::vector<AlgorithmChoice> kept;
  std::ostringstream text;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (differences[i] > plan_agreement_bound(precision)) {  // false for NaN: not checked
      text << (text.tellp() > 0 ? ", " : "") << names[i] << " (differs by " << difference_text(differences[i]) << ")";
      continue;
    }
    kept.push_back(candidates[i]);
  }
  if (kept.empty()) return candidates;  // none agrees (the reference's own limits): the measured order, none refused
  refused = text.str();
  return kept;
}

// One legacy call of `direction` with `c` on the search arena's roles (x, w, y as choose_graph_plan's):
// its status (a refusal is no error here).
cudnnStatus_t Convolution::run_legacy_on_arena(SetupContext& ctx, GraphDirection direction, const AlgorithmChoice& c) {
  const SetupContext::Arena& a = ctx.arena();
  if (c.workspace_bytes > a.workspace_bytes) return CUDNN_STATUS_NOT_SUPPORTED;
  if (direction == GraphDirection::forward) {
    adopt(forward_cd, c);
    return cudnnConvolutionForward(ctx.dnn, &kOne, xd, a.x, wd, a.w, forward_cd,
                                   static_cast<cudnnConvolutionFwdAlgo_t>(c.algorithm), a.workspace,
                                   a.workspace_bytes, &kZero, yd, a.y);
  }
  if (direction == GraphDirection::backward_data) {
    adopt(data_cd, c);
    return cudnnConvolutionBackwardData(ctx.dnn, &kOne, wd, a.w, dyd, a.y, data_cd,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algorithm), a.workspace,
                                        a.workspace_bytes, &kZero, dxd, a.x);
  }
  adopt(filter_cd, c);
  return cudnnConvolutionBackwardFilter(ctx.dnn, &kOne, xd, a.x, dyd, a.y, filter_cd,
                                        static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algorithm), a.workspace,
                                        a.workspace_bytes, &kZero, wd, a.w);
}

// How far a measured Graph API plan's output on the search arena is from the legacy choice's (with the
// bias, the residual and the relu applied in its strides by kernels::bias_relu_strided and
// strided_add), as relative_difference: the plan run twice over different poison in its output
// and workspace (all-ones bytes, a NaN in every float type, then 0x7f bytes), the worse run; infinity
// where it refuses to run again; NaN where nothing can be held to it (the reference overflows on the
// arena's values). choose_graph_plan refuses it beyond plan_agreement_bound.
double Convolution::graph_plan_difference(SetupContext& ctx, const GraphConvolution& graph, int plan,
                                          const GraphConvolutionProblem& problem) {
  const GraphDirection direction = problem.direction;
  const bool bias_relu = problem.bias_relu, with_residual = problem.residual.valid();
  const SetupContext::Arena& a = ctx.arena();
  const bool forward_direction = direction == GraphDirection::forward;
  const Tensor& output = forward_direction ? y : direction == GraphDirection::backward_data ? dx : dw;
  void* output_at = forward_direction ? a.y : direction == GraphDirection::backward_data ? a.x : a.w;
  // The reference: the legacy choice on the same arena roles as choose_graph_plan's runs, with the graph's
  // epilogue (+ bias, + residual, relu: the bias from arena w, the residual, of y's shape, from arena x), in
  // y's own strides; where the legacy choice does not run here or overflows on the arena's values, the
  // reference algorithm agreeing_candidates holds the legacy candidates to.
  const AlgorithmChoice& legacy = forward_direction ? forward : direction == GraphDirection::backward_data ? data : filter;
  const auto reference_run = [&](const AlgorithmChoice& c) {
    refill_check_inputs(ctx, direction);
    if (run_legacy_on_arena(ctx, direction, c) != CUDNN_STATUS_SUCCESS) return false;
    if (forward_direction && bias_relu) {
      kernels::bias_relu_strided(a.y, y.type, y.dims, y.strides, a.w, !with_residual, ctx.stream);
      if (with_residual) {
        kernels::strided_add(a.x, residual.strides, a.y, y.strides, y.dims, y.type, 1.0f, ctx.stream);
        kernels::bias_relu_strided(a.y, y.type, y.dims, y.strides, nullptr, true, ctx.stream);
      }
    }
    return true;
  };
  std::optional<DeviceReference> reference;
  for (const AlgorithmChoice& c : {legacy, reference_choice(direction)}) {
    if (!reference_run(c)) continue;
    reference.emplace(output_at, output, a.reference, a.counters, ctx.stream);
    if (!std::isinf(reference->difference_from(output_at))) break;
    reference.reset();
  }
  if (!reference) return NAN;  // nothing to hold it to
  const auto workspace_bytes = static_cast<std::size_t>(graph.workspace_bytes(plan));
  double worst = 0;
  for (const int poison : {0xff, 0x7f}) {
    CB_CHECK_CUDA(cudaMemsetAsync(output_at, poison, static_cast<std::size_t>(output.span_bytes()), ctx.stream));
    if (workspace_bytes > 0) CB_CHECK_CUDA(cudaMemsetAsync(a.workspace, poison, workspace_bytes, ctx.stream));
    if (!run_graph_on_arena(ctx, graph, plan, problem)) {
      ctx.refill_arena(output_at, static_cast<std::size_t>(output.span_bytes()));
      return std::numeric_limits<double>::infinity();  // refused to run again
    }
    worst = std::max(worst, reference->difference_from(output_at));
  }
  ctx.refill_arena(output_at, static_cast<std::size_t>(output.span_bytes()));  // no poison left for later layers
  return worst;
}

// The inputs `direction` reads on the search arena (x and the residual from arena x, w and the bias from
// arena w, dy from arena y) put back to the arena's synthetic values before an agreement check runs its
// reference. The timed runs leave their outputs where the next layer's inputs are read: a backward
// filter's dw is a sum over N·H·W products, some hundreds of times its inputs, and the next layer's w.
// Over a deep network's search the values grew until the reference overflowed, and a check with nothing
// to hold its plans to takes them unchecked: every fp16 Graph API plan of ResNet-50 at batch 256, 33
// strict-fp32 GoogLeNet checks, and every statistics plan refused as "nan" (bench/results/2026-12-14).
void Convolution::refill_check_inputs(SetupContext& ctx, GraphDirection direction) {
  const SetupContext::Arena& a = ctx.arena();
  const auto bytes = [](const Tensor& t) { return static_cast<std::size_t>(t.span_bytes()); };
  // The regions as plan_search reserved them: the residual has y's shape, the bias follows w.
  if (direction != GraphDirection::backward_data) ctx.refill_arena(a.x, adds_residual ? std::max(bytes(x), bytes(y)) : bytes(x));
  if (direction != GraphDirection::backward_filter)
    ctx.refill_arena(a.w, static_cast<std::size_t>(round_up_256(w.bytes()) + (has_bias ? bias.bytes() : 0)));
  if (direction != GraphDirection::forward) ctx.refill_arena(a.y, bytes(dy));
}

// The algorithm the search holds the others of `direction` to: IMPLICIT_GEMM forward, ALGO_1 backward
// (no workspace-dependent tricks, no atomics), in the precision's first math type.
AlgorithmChoice Convolution::reference_choice(GraphDirection direction) const {
  AlgorithmChoice reference;
  reference.algorithm = direction == GraphDirection::forward         ? static_cast<int>(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM)
                        : direction == GraphDirection::backward_data ? static_cast<int>(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1)
                                                                     : static_cast<int>(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
  reference.math = initial_math_type(precision);
  return reference;
}

// The legacy choice of `direction` by name (what an agreement check held a candidate to).
std::string Convolution::legacy_choice_name(GraphDirection direction) const {
  return direction == GraphDirection::forward         ? forward_algorithm_name(forward.algorithm)
         : direction == GraphDirection::backward_data ? backward_data_algorithm_name(data.algorithm)
                                                      : backward_filter_algorithm_name(filter.algorithm);
}

}  // namespace crossbench::cudnn
