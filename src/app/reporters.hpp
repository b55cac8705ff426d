// The reporters of `crossbench run` that rank 0's console and files show
// (cluster/reporter.hpp; the cube's is cluster/collector.hpp's CubeReporter).
#pragma once

#include <cstddef>
#include <fstream>
#include <vector>

#include "app/console.hpp"
#include "crossbench/options.hpp"
#include "cluster/plan.hpp"
#include "cluster/reporter.hpp"

namespace crossbench {

// The console: what runs and its progress on stderr (not with --quiet); the
// device legend, then at the end the table in matrix order (and the layer
// times) on stdout, also with --quiet; what was written and what is next on stderr.
class ConsoleReporter final : public Reporter {
 public:
  // Prints what runs and the legend. `rank_devices` must outlive the reporter;
  // `earlier_cells`: results a resumed journal already holds.
  ConsoleReporter(const RunOptions& options, const Plan& plan, const std::vector<Device>& rank_devices, int ranks,
                  std::size_t earlier_cells);
  void report_cell(const CellResult& result, double estimated_s) override;
  void finish(const std::vector<CellResult>& results, const RunEnd& end) override;

 private:
  const RunOptions& options_;
  DeviceLegend legend_;
  Progress progress_;
};

// run --jsonl FILE: one JSON line per finished cell, appended and flushed:
// the journal's record plus the provenance a script needs without the cube
// (the device of the rank, the build, the recorded settings).
class JsonlReporter final : public Reporter {
 public:
  // Opens the file for appending; UsageError when it cannot.
  JsonlReporter(const RunOptions& options, const std::vector<Device>& rank_devices);
  void report_cell(const CellResult& result, double estimated_s) override;

 private:
  const RunOptions& options_;
  const std::vector<Device>& rank_devices_;
  std::ofstream out_;
};

}  // namespace crossbench
