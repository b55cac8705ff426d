// Rank 0's side of a run: every result goes to the journal first (fsync'd),
// then to the in-memory list; the cube is rewritten atomically at checkpoints
// and at the end.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "crossbench/options.hpp"
#include "cluster/journal.hpp"
#include "cluster/plan.hpp"
#include "cluster/run_segment.hpp"

namespace crossbench {

class Collector {
 public:
  using OnResult = std::function<void(const CellResult& result, double estimated_s)>;

  // `earlier` holds the results of a resumed journal; they go into the cube but not to `on_result`.
  // `segments`: the journal's run segments and, last, this run's, which the
  // constructor journals; every new result is recorded as measured by it.
  Collector(const Options& options, const Plan& plan, std::vector<RunSegment> segments,
            std::map<std::string, std::string> attributes, std::vector<CellResult> earlier, JournalWriter journal,
            OnResult on_result);

  // Journal, then memory; throws Error for a cell not in the plan. A `not_run`
  // result (a cell a stop interrupted) goes into the cube but not the journal,
  // so that --resume runs it again.
  void add(CellResult result);
  void checkpoint_if_due();             // rewrites the cube when checkpoint_s has passed
  void write_cube(const std::string& run_state);  // "complete", "incomplete: ..." → root attribute run_state
  // Journals the end of this run's segment (when, and how: run_state); the next write_cube records it.
  void end_segment(const std::string& run_state);
  const std::vector<CellResult>& results() const { return results_; }
  std::size_t new_results() const { return results_.size() - earlier_count_; }
  // New results with a final status (not the `not_run` of a cell a stop interrupted).
  std::size_t new_final_results() const;

 private:
  const Options& options_;
  const Plan& plan_;
  std::vector<RunSegment> segments_;
  std::map<std::string, std::string> attributes_;
  std::vector<CellResult> results_;
  std::size_t earlier_count_;
  JournalWriter journal_;
  OnResult on_result_;
  std::map<std::string, double> estimates_;  // cell key → planned cost [s]
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
};

}  // namespace crossbench
