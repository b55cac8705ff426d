// engine.search_in_step (DESIGN.md "The clocks the search times at" and "Near-ties inside the step"):
// after the step's CUDA graph is captured, the Graph API configurations the search found near-tied with
// its choice are timed again as the step runs them, the whole graphed step replayed with each, and the
// step's fastest is kept. A configuration's time alone is not its time in the step: on the H200 the
// OverFeat tf32 conv5 configuration the search timed 0.6% faster made the step 3% slower.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

#include "crossbench/error.hpp"
#include "engines/cudnn/cudnn_session.hpp"

namespace crossbench::cudnn {
namespace {

// Choices timed in the step per cell, the most expensive first (their search time x how many layers
// share them): a bound on what the refinement adds to a cold cell (each option: a validation pass, a
// capture and kStepWarmReplays + kStepTimedReplays step replays).
constexpr std::size_t kInStepChoices = 8;
constexpr int kStepWarmReplays = 3;
constexpr int kStepTimedReplays = 15;
// An option replaces the one kept so far only where its step median is faster by more than this: step
// medians of one process agree within about 0.2-0.3% (the H200's repro cubes), the inversions it is for
// are 3%.
constexpr double kInStepTie = 0.005;

}  // namespace

double CudnnSession::median_graphed_step_ms() {
  std::vector<Event> events;
  for (int i = 0; i <= kStepTimedReplays; ++i) events.push_back(make_event());
  for (int i = 0; i < kStepWarmReplays; ++i) CB_CHECK_CUDA(cudaGraphLaunch(graph_exec_, stream_));
  for (int i = 0; i < kStepTimedReplays; ++i) {
    CB_CHECK_CUDA(cudaEventRecord(events[static_cast<std::size_t>(i)], stream_));
    CB_CHECK_CUDA(cudaGraphLaunch(graph_exec_, stream_));
  }
  CB_CHECK_CUDA(cudaEventRecord(events.back(), stream_));
  CB_CHECK_CUDA(cudaEventSynchronize(events.back()));
  std::vector<double> samples;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    float ms = 0;
    CB_CHECK_CUDA(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
    samples.push_back(ms);
  }
  return median_ms(std::move(samples));
}

std::string CudnnSession::choose_in_step(AlgorithmCache& cache, const std::string& cell_key) {
  // One choice per key: identical layers sharing a Graph API problem and direction move together.
  struct Group {
    std::vector<StepChoice> members;
    double weight_ms = 0;  // [ms] the search's time of the kept option, summed over the members
  };
  std::map<std::string, Group> by_key;
  std::vector<std::string> order;
  for (auto& impl : impls_)
    for (StepChoice& choice : impl->step_choices()) {
      auto [at, added] = by_key.try_emplace(choice.key);
      if (added) order.push_back(choice.key);
      else if (at->second.members.front().options != choice.options) continue;  // not alike after all: its search's own
      at->second.weight_ms += choice.search_ms.front();
      at->second.members.push_back(std::move(choice));
    }
  if (order.empty()) return {};
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return by_key[a].weight_ms > by_key[b].weight_ms; });
  if (order.size() > kInStepChoices) order.resize(kInStepChoices);

  const auto use = [&](Group& group, std::size_t option) {
    for (StepChoice& member : group.members) member.use(option);
  };
  // Switches the group to `option` and captures the step again; the validation pass first runs every op
  // once eagerly as prepare() did (loading the option's kernels, outside the capture).
  const auto switch_to = [&](Group& group, std::size_t option) {
    use(group, option);
    run(0, training_ ? backward_end_ : loss_end_, true, true);
    CB_CHECK_CUDA(cudaStreamSynchronize(stream_));
    capture_graph();
  };
  std::ostringstream text;
  text << std::setprecision(4);
  double kept_ms = NAN;  // [ms] the step's median with every choice kept so far (measured on first need)
  for (const std::string& key : order) {
    Group& group = by_key[key];
    const StepChoice& first = group.members.front();
    const std::string signature = "in_step " + cell_key + " " + key;
    std::vector<double> step_ms(first.options.size(), NAN);
    bool measured = false;
    if (const MeasuredChoice* record = cache.find(signature)) {  // replayed: nothing is timed
      for (const MeasuredCandidate& c : record->candidates)
        for (std::size_t i = 0; i < first.options.size(); ++i)
          if (c.name == first.options[i]) step_ms[i] = c.median_ms;
    } else {
      if (std::isnan(kept_ms)) kept_ms = median_graphed_step_ms();
      step_ms[0] = kept_ms;
      for (std::size_t i = 1; i < first.options.size(); ++i) {
        switch_to(group, i);
        step_ms[i] = median_graphed_step_ms();
      }
      measured = true;
      MeasuredChoice times;
      for (std::size_t i = 0; i < first.options.size(); ++i) {
        MeasuredCandidate c;
        c.name = first.options[i];
        c.median_ms = step_ms[i];
        c.repetitions = kStepTimedReplays;
        times.candidates.push_back(c);
      }
      cache.insert(signature, std::move(times));
    }
    std::size_t best = 0;  // the search's choice unless an option is clearly faster in the step
    for (std::size_t i = 1; i < step_ms.size(); ++i)
      if (clearly_faster(step_ms[i], step_ms[best], kInStepTie)) best = i;
    const std::size_t captured = measured ? first.options.size() - 1 : 0;  // the option the step graph holds now
    if (best != captured) switch_to(group, best);
    if (measured) kept_ms = step_ms[best];
    else if (best != 0) kept_ms = NAN;  // a replayed switch: the step the next measured choice starts from is new
    // One token, no spaces: "conv4:fwd(x3)[eng51_a=1.406ms*|eng51_b=1.449ms]", x3: three alike layers,
    // the options' step medians, * the one kept.
    text << (text.tellp() > 0 ? "," : "") << first.what;
    if (group.members.size() > 1) text << "(x" << group.members.size() << ")";
    text << "[";
    for (std::size_t i = 0; i < step_ms.size(); ++i)
      text << (i > 0 ? "|" : "") << first.options[i] << "=" << step_ms[i] << "ms" << (i == best ? "*" : "");
    text << "]";
  }
  return "in_step=" + text.str();
}

}  // namespace crossbench::cudnn
