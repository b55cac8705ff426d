// The Runner: warm-up, timed steps, stopping rule, statistics (DESIGN.md "Measurement").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "crossbench/engine.hpp"
#include "crossbench/measure.hpp"
#include "crossbench/result.hpp"

namespace crossbench {

// The ranks of a data-parallel group measure together: every step's time is
// the slowest rank's, and every decision (out of time, stop) is taken on the
// same values on all ranks, so that none is left waiting in a collective.
class StepAgreement {
 public:
  virtual ~StepAgreement() = default;
  // Replaces each of `values` by its maximum over the group (blocking).
  virtual void max_over_group(std::span<double> values) = 0;
};

class TelemetrySampler;

// Times steps of a prepared session by the rules above: warm-up, then batches
// of timed steps (min_steps, then 10% more, at least 10, up to max_steps)
// with the stopping rule checked after each batch. A worker session runs
// each batch in its process (RemoteSteps::run_steps); the rule is this
// one either way. `seconds_already_spent` counts preparation against the
// cell's time limit [s]. With `agreement`, the samples are the group's
// per-step maxima. With `telemetry`, it samples the device over the timed steps.
[[nodiscard]] Measurement measure(Session& session, const MeasureOptions& options, double seconds_already_spent = 0,
                    StepAgreement* agreement = nullptr, TelemetrySampler* telemetry = nullptr);

// The statistics and rates of a measured, checked session: `result` gets its
// status (ok, failed, timeout), samples, statistics, images/s (batch *
// `devices` per step), TFLOP/s, telemetry and message.
void summarize_cell(CellResult& result, const Network& network, const Measurement& measurement,
                    const OutputCheck& check, const MeasureOptions& options, double preparation_s, int devices = 1);

// Why `engine` cannot run `cell` on `device` at all, known before anything is
// prepared: the engine is not built into this binary (nullptr), does not run
// on the device's kind (naming `rank`, the rank bound to it), or its
// supports() says no. Empty: it may run. Used by run_cell and `check`.
[[nodiscard]] std::string unsupported_reason(const Engine* engine, const std::string& engine_name,
                                             const Device& device, const CellSpec& cell, int rank);

// Runs one cell end to end: supports(), prepare(), measure(), check(); turns
// every failure into a status (oom, unsupported, failed, timeout) and never
// throws for a cell's own failure. A data-parallel cell (gpus > 1) needs the
// group's `communicator` and `agreement` (src/cluster/data_parallel.hpp makes them).
[[nodiscard]] CellResult run_cell(Engine* engine, const std::string& engine_name, const Network& network,
                    const CellSpec& cell, const Device& device, const MeasureOptions& options,
                    int rank, Communicator* communicator = nullptr, StepAgreement* agreement = nullptr);

}  // namespace crossbench
