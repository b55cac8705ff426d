// Rank 0's side of a run: every finished cell is checked against the plan
// (each planned cell once), kept, and handed to the reporters (reporter.hpp)
// in order. The cube's reporter comes first, so that the journal holds a
// cell (fsync'd) before anything else is done with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crossbench/options.hpp"
#include "cluster/journal.hpp"
#include "cluster/plan.hpp"
#include "cluster/reporter.hpp"
#include "cluster/run_segment.hpp"

namespace crossbench {

class Collector {
 public:
  // `earlier` holds the results of a resumed journal: they are kept (and are
  // the first of finish()'s results) but not reported again.
  // `segment`: the index of this run's segment (cluster/run_segment.hpp); every
  // new result is recorded as measured by it.
  Collector(const Plan& plan, std::vector<CellResult> earlier, std::vector<std::unique_ptr<Reporter>> reporters,
            std::int32_t segment = 0);

  // Throws Error for a cell not in the plan, or one reported twice.
  void add(CellResult result);
  void idle();                       // while waiting for other ranks: each reporter's idle()
  void finish(const RunEnd& end);    // each reporter's finish(), with every result
  [[nodiscard]] const std::vector<CellResult>& results() const { return results_; }
  // New results with a final status (not the `not_run` of a cell a stop interrupted).
  [[nodiscard]] std::size_t new_final_results() const;

 private:
  std::vector<CellResult> results_;
  std::size_t earlier_count_;
  std::vector<std::unique_ptr<Reporter>> reporters_;
  std::map<std::string, double> estimates_;  // cell key → planned cost [s]; a reported cell leaves it
  std::int32_t segment_;
};

// The results cube and its journal (DESIGN.md "Distribution"): every result
// goes to the journal first, durable when report_cell returns (a `not_run`
// result, a cell a stop interrupted, goes into the cube but not the journal,
// so that --resume runs it again); the cube is rewritten atomically at
// checkpoints (every checkpoint_s) and at the end. The journal also records
// this run's segment (DESIGN.md "Run segments"): its start when the reporter
// is made, its end (when, and how: run_state) at finish().
class CubeReporter final : public Reporter {
 public:
  // `earlier`: a resumed journal's results, which the cube holds too.
  // `segments`: the journal's run segments and, last, this run's, which the
  // constructor journals.
  // `job`: the matrix, settings and output the cube is assembled from;
  // `checkpoint_s`: run --checkpoint-s.
  CubeReporter(const JobOptions& job, double checkpoint_s, const Plan& plan, std::vector<RunSegment> segments,
               std::map<std::string, std::string> attributes, std::vector<CellResult> earlier, JournalWriter journal);
  void report_cell(const CellResult& result, double estimated_s) override;
  void idle() override;  // rewrites the cube when checkpoint_s has passed
  // Journals the end of this run's segment, then writes the cube.
  void finish(const std::vector<CellResult>& results, const RunEnd& end) override;

 private:
  void write_cube(const std::string& run_state);  // "complete", "incomplete: ..." → root attribute run_state
  void end_segment(const std::string& run_state);
  const JobOptions& job_;
  double checkpoint_s_;
  const Plan& plan_;
  std::vector<RunSegment> segments_;
  std::map<std::string, std::string> attributes_;
  std::vector<CellResult> results_;
  JournalWriter journal_;
  std::chrono::steady_clock::time_point last_checkpoint_ = std::chrono::steady_clock::now();
};

}  // namespace crossbench
