// Rank 0's consumers of finished cells (DESIGN.md "Reporters"), as
// google/benchmark's BenchmarkReporter: the cube (with its journal), the
// console and the JSONL stream each receive the stream of finished cells
// through this one interface; a results database would be one more.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "crossbench/result.hpp"

namespace crossbench {

// How a run ended, as the reporters tell it.
struct RunEnd {
  bool complete = true;           // every planned cell has a final status
  std::size_t cells_not_run = 0;  // planned cells without one (a stop, a rank that ended early)
  int stop_signal = 0;            // the signal that stopped the run; 0: none

  // The cube's root attribute `run_state`: "complete", or "incomplete:
  // stopped by signal 15 with 4 cells not run; resume with --resume".
  [[nodiscard]] std::string run_state() const;
};

class Reporter {
 public:
  virtual ~Reporter() = default;
  // One finished cell, as rank 0 received it, in the order cells finish;
  // `estimated_s` is its planned cost [s].
  virtual void report_cell(const CellResult& result, double estimated_s) = 0;
  // Called while rank 0 waits for the other ranks' cells: periodic work (the
  // cube's checkpoint) goes here.
  virtual void idle() {}
  // The run has ended: every result (a resumed run's earlier ones first).
  virtual void finish(const std::vector<CellResult>& results, const RunEnd& end) {}
};

}  // namespace crossbench
