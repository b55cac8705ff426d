// The Runner: warm-up, timed steps, stopping rule, statistics (DESIGN.md "Measurement").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "crossbench/engine.hpp"
#include "crossbench/measure.hpp"
#include "crossbench/result.hpp"

namespace crossbench {

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
