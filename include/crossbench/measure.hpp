// Measurement settings and raw results of the Runner (src/runner/runner.cpp),
// the one owner of the stopping rule for every engine, framework workers included.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace crossbench {

struct MeasureOptions {
  int warmup_steps = 10;             // untimed
  // [ms] untimed warm-up of at least this long after the warm-up steps, so that the device's clocks
  // settle for the cell's own work before the first timed step; 0: the steps only.
  int warmup_ms = 0;
  // [ms] before the warm-up, the device left idle this long (the session prepared, nothing running),
  // so that each cell's steps start from a device that rested alike whatever ran before; 0: none.
  int cooldown_ms = 0;
  int min_steps = 100;               // timed steps before the stopping rule applies
  int max_steps = 10000;             // timed steps at most
  double target_ci = 0.01;           // stop when the relative half-width of the median's 95% CI is below this
  double cell_time_limit_s = 600;    // [s] wall time per cell, preparation included
  // --layer-times: a separate profiling pass after the timed steps and the
  // output check of an ok cell. It never feeds the headline statistics.
  bool layer_times = false;
  int layer_time_repetitions = 10;   // profiled steps; each layer's time is their median
  // [ms] between two telemetry samples (clocks, power, temperature) during the timed steps;
  // 0: a sample at each end of them only, no sampling thread (src/core/telemetry.cpp).
  int telemetry_interval_ms = 10;
  // --repetitions N: each single-device cell measured N times on the same device, each
  // in a fresh session (and a fresh worker process for worker engines); the cell's
  // headline is the repetition whose median is the median of the N medians, and every
  // repetition's median is kept (CellResult::repetition_medians_ms).
  int repetitions = 1;
  // measure.oom_boundary = stop: a batch sweep's cells past the first batch of their series that ran out
  // of memory are recorded oom without running (src/cluster/oom_boundary.hpp); false: every cell runs.
  bool stop_at_oom_boundary = false;
};

// Device telemetry over the timed steps of a cell (any engine on a GPU: the
// Runner's NVML sampler, include/crossbench/telemetry.hpp). NaN (or -1) where
// the device cannot tell.
struct Telemetry {
  double energy_j = std::numeric_limits<double>::quiet_NaN();               // energy counter difference [J]
  double mean_sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();      // [MHz]
  double min_sm_clock_mhz = std::numeric_limits<double>::quiet_NaN();       // [MHz] the lowest sample
  double mean_memory_clock_mhz = std::numeric_limits<double>::quiet_NaN();  // [MHz]
  double mean_power_w = std::numeric_limits<double>::quiet_NaN();           // [W]
  double max_temperature_c = std::numeric_limits<double>::quiet_NaN();      // [°C]
  std::int8_t throttled = -1;  // 1: a power/thermal/slowdown throttle reason fired; 0: none; -1: unknown
  int samples = 0;             // clock/power samples taken
};

// Raw timed samples and why the measurement stopped.
struct Measurement {
  std::vector<double> samples_ms;
  // Consecutive steps each sample averages: 1, except a worker's batch measurement
  // (RemoteBatch); the same for every timed batch of a cell.
  int steps_per_sample = 1;
  std::vector<double> exposed_communication_ms;  // data parallel: per timed step [ms]
  Telemetry telemetry;      // over the timed steps
  std::string stop_reason;  // "ci_target", "max_steps", "time_limit"
  // Untimed steps run before the first timed one (a worker's samples times its steps per sample;
  // a batch cut short by the time limit: the steps it ran).
  int warmup_steps = 0;
  // [ms] their time: the steps' own times, each the group's maximum in a data-parallel group
  // (what measure.warmup_ms is compared with); a worker's batches: the host's wall time of each request.
  double warmup_ms = 0;
  bool reached_min_steps = false;
};

}  // namespace crossbench
