// The Runner: warm-up, timed steps, stopping rule, statistics (DESIGN.md "Measurement").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crossbench/engine.hpp"
#include "crossbench/result.hpp"

namespace crossbench {

struct MeasureOptions {
  int warmup_steps = 10;             // untimed
  int min_steps = 100;               // timed steps before the stopping rule applies
  int max_steps = 10000;             // timed steps at most
  double target_ci = 0.01;           // stop when the relative half-width of the median's 95% CI is below this
  double cell_time_limit_s = 600;    // [s] wall time per cell, preparation included
};

// Raw timed samples and why the measurement stopped.
struct Measurement {
  std::vector<double> samples_ms;
  std::string stop_reason;  // "ci_target", "max_steps", "time_limit"
  bool reached_min_steps = false;
};

// Times steps of a prepared session by the rules above. `seconds_already_spent`
// counts preparation against the cell's time limit [s].
Measurement measure(Session& session, const MeasureOptions& options, double seconds_already_spent = 0);

// Runs one cell end to end: supports(), prepare(), measure(), check(); turns
// every failure into a status (oom, unsupported, failed, timeout) and never
// throws for a cell's own failure.
CellResult run_cell(Engine* engine, const std::string& engine_name, const Network& network,
                    const CellSpec& cell, const Device& device, const MeasureOptions& options,
                    int rank);

}  // namespace crossbench
