#include "crossbench/runner.hpp"
#include "crossbench/stop_flag.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <cstdio>
#include <exception>
#include <optional>
#include <thread>

#include "core/nvtx.hpp"
#include "core/process_tree.hpp"
#include "core/utc_time.hpp"
#include "crossbench/clock.hpp"
#include "crossbench/error.hpp"
#include "crossbench/statistics.hpp"
#include "crossbench/telemetry.hpp"

namespace crossbench {
namespace {

using Clock = std::chrono::steady_clock;

std::string format(const char* pattern, double a, double b = 0, double c = 0) {
  char buffer[256];
  std::snprintf(buffer, sizeof buffer, pattern, a, b, c);
  return buffer;
}

double timed_step(Session& session) {
  StepTimer& timer = session.timer();
  timer.start();
  session.step();
  timer.stop();
  return timer.elapsed_ms();
}

// A cell that failed part-way keeps its identity and nothing it measured.
CellResult without_measurements(const CellResult& partial, Status status, std::string message) {
  CellResult result;
  result.device_key = partial.device_key;
  result.cell = partial.cell;
  result.rank = partial.rank;
  result.status = status;
  result.message = std::move(message);
  return result;
}

// The status and message of a cell whose preparation or measurement threw (cell_failure).
CellResult failed_cell(const CellResult& partial, std::exception_ptr thrown) {
  CellFailure failure = cell_failure(thrown);
  return without_measurements(partial, failure.status, std::move(failure.message));
}

// --layer-times: the profiling pass of an ok cell, run after its statistics
// are final, so it cannot change them. A failure here costs the layer times,
// never the cell: the headline stays as measured, the message says why.
void profile_layers(Session& session, int repetitions, CellResult& result) {
  try {
    const nvtx::Range range("profile");
    result.layer_times = layer_medians(session.profile(repetitions));
  } catch (const std::exception& error) {
    result.layer_times.clear();
    result.message += std::string("; layer times not measured: ") + error.what();
  }
}

}  // namespace

std::vector<LayerTime> layer_medians(const OpSamples& samples) {
  if (samples.ops.empty()) return {};
  const std::size_t layers = samples.layers.size();
  // Per layer, one sum per repetition [ms].
  std::vector<std::vector<double>> forward(layers), backward(layers);
  for (const std::vector<double>& repetition : samples.ms) {
    std::vector<double> f(layers, 0.0), b(layers, 0.0);
    for (std::size_t i = 0; i < samples.ops.size() && i < repetition.size(); ++i) {
      const OpTag& op = samples.ops[i];
      const auto layer = static_cast<std::size_t>(op.layer);
      (op.stage == OpStage::forward || op.stage == OpStage::loss ? f : b).at(layer) += repetition[i];
    }
    for (std::size_t l = 0; l < layers; ++l) {
      forward[l].push_back(f[l]);
      backward[l].push_back(b[l]);
    }
  }
  std::vector<LayerTime> times;
  times.reserve(layers);
  for (std::size_t l = 0; l < layers; ++l)
    times.push_back({samples.layers[l].name, samples.layers[l].kind, summarize(forward[l]).median_ms,
                     summarize(backward[l]).median_ms});
  return times;
}

std::vector<std::pair<std::string, double>> op_medians(const OpSamples& samples) {
  std::vector<std::pair<std::string, double>> times;
  for (std::size_t i = 0; i < samples.ops.size(); ++i) {
    std::vector<double> per_repetition;
    for (const std::vector<double>& repetition : samples.ms) per_repetition.push_back(repetition.at(i));
    times.emplace_back(samples.ops[i].label, summarize(per_repetition).median_ms);
  }
  return times;
}

Measurement measure(Session& session, const MeasureOptions& options, double seconds_already_spent,
                    StepAgreement* agreement, TelemetrySampler* telemetry) {
  const auto start = Clock::now();
  const auto seconds_left = [&] { return options.cell_time_limit_s - seconds_already_spent - seconds_since(start); };
  // One step timed here: its time [ms], its exposed communication [ms],
  // whether this rank is out of time and whether a stop request ends the cell
  // now, each the group's maximum when ranks train together (so they end together).
  struct StepFacts {
    double ms, exposed_ms;
    bool out_of_time;
  };
  const auto agreed_step = [&]() -> StepFacts {
    const double ms = timed_step(session);
    std::array<double, 4> facts{ms, session.timer().exposed_communication_ms(), seconds_left() <= 0 ? 1.0 : 0.0,
                                stop_flag::cell_must_end() ? 1.0 : 0.0};
    if (agreement != nullptr) agreement->max_over_group(facts);
    if (facts[3] > 0) throw CellInterrupted(stop_flag::reason());
    return {facts[0], facts[1], facts[2] > 0};
  };

  Measurement measurement;
  // Runs up to `count` steps in one go, keeping their times unless they are
  // warm-up; returns whether the cell is out of time. A session whose steps
  // run in a worker process (RemoteSteps) runs the whole batch there (one
  // request, one reply); any other session is timed here, step by step. Warm-up goes
  // through the timer too, so that an asynchronous engine has finished its
  // warm-up work before the first timed step starts.
  RemoteSteps* const remote = session.remote_steps();
  double warmup_ms = 0;  // [ms] the warm-up's step time so far: the steps' own times (agreed over a group)
  // The warm-up's batches so far in run_batch's unit (a step here, a sample of a worker), as run:
  // a batch cut short by the time limit counts what it ran.
  std::size_t warmup_units = 0;
  const auto run_batch = [&](std::size_t count, bool warmup) -> bool {
    if (remote != nullptr) {
      const auto batch_start = Clock::now();
      const RemoteBatch elsewhere = remote->run_steps(static_cast<int>(count), std::max(seconds_left(), 0.0), warmup);
      if (warmup) warmup_ms += seconds_since(batch_start) * 1e3;  // a worker is one device: no group to agree with
      if (elsewhere.steps_per_sample < 1)
        throw Error("the worker's batch says " + std::to_string(elsewhere.steps_per_sample) + " steps per sample");
      if (warmup) {  // a sample of the JAX worker's marks spans steps_per_sample steps
        warmup_units += elsewhere.samples_ms.size();
        measurement.warmup_steps += static_cast<int>(elsewhere.samples_ms.size()) * elsewhere.steps_per_sample;
      }
      if (!warmup) {
        // Samples of different lengths would not be one distribution: one cell, one kind of sample.
        if (!measurement.samples_ms.empty() && elsewhere.steps_per_sample != measurement.steps_per_sample)
          throw Error("the worker changed its steps per sample from " + std::to_string(measurement.steps_per_sample) +
                      " to " + std::to_string(elsewhere.steps_per_sample) + " within the cell's timed steps");
        measurement.steps_per_sample = elsewhere.steps_per_sample;
        measurement.samples_ms.insert(measurement.samples_ms.end(), elsewhere.samples_ms.begin(),
                                      elsewhere.samples_ms.end());
      }
      return elsewhere.samples_ms.size() < count || seconds_left() <= 0;
    }
    for (std::size_t i = 0; i < count; ++i) {
      const StepFacts step = agreed_step();
      if (warmup) {
        warmup_ms += step.ms;
        ++warmup_units;
        ++measurement.warmup_steps;
      }
      if (!warmup) {
        measurement.samples_ms.push_back(step.ms);
        if (!std::isnan(step.exposed_ms)) measurement.exposed_communication_ms.push_back(step.exposed_ms);
      }
      if (step.out_of_time) return true;
    }
    return false;
  };

  if (options.cooldown_ms > 0) {
    // measure.cooldown_ms: nothing runs on the device; the wait is sliced so that a stop request (or
    // the cell's time limit) ends it at once. It only ends the wait: the first warm-up step then ends
    // the cell as any step does, agreed over a data-parallel group (a rank that threw here would leave
    // its peers waiting in that step's agreement).
    const nvtx::Range range("cool-down");
    const auto until = Clock::now() + std::chrono::milliseconds(options.cooldown_ms);
    while (Clock::now() < until && seconds_left() > 0 && !stop_flag::cell_must_end())
      std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(20), until - Clock::now()));
  }

  bool no_time_left = false;
  {
    const nvtx::Range range("warm-up");
    no_time_left = options.warmup_steps > 0 && run_batch(static_cast<std::size_t>(options.warmup_steps), true);
    // measure.warmup_ms: more untimed steps until the warm-up has lasted that long, so that the device's
    // clocks settle for this cell's own work (a short step's 10 warm-up steps last a few ms, spent in
    // whatever power state the previous cell left). Each batch is sized from the time per step (per
    // sample of a worker) seen so far, so a worker needs few requests; none seen yet: one step first.
    // "Lasted" is the steps' own times here, not each rank's host clock: in a data-parallel group those
    // are the agreed ones (agreed_step, the group's maximum per step), identical on every rank, and so
    // are out_of_time and the counts sized from them; every rank runs the same warm-up steps and no
    // collective waits for a rank that stopped. A worker (one device, no group) counts its requests'
    // host wall time.
    while (!no_time_left && warmup_ms < options.warmup_ms) {
      const double ms_per_unit = warmup_units > 0 ? warmup_ms / static_cast<double>(warmup_units) : 0;
      const double wanted = ms_per_unit > 0 ? std::ceil((options.warmup_ms - warmup_ms) / ms_per_unit) : 1;
      no_time_left = run_batch(static_cast<std::size_t>(std::clamp(wanted, 1.0, 10000.0)), true);
    }
    measurement.warmup_ms = warmup_ms;
  }

  const auto min_steps = static_cast<std::size_t>(std::max(options.min_steps, 1));
  const auto max_steps = static_cast<std::size_t>(std::max(options.max_steps, 1));
  measurement.samples_ms.reserve(min_steps);
  // The stopping rule sorts the samples; checking it after every step would
  // cost O(n² log n), so it is checked at min_steps and then every 10% more
  // steps (at least 10). The steps between two checks are one batch.
  std::size_t next_check = min_steps;
  const nvtx::Range timed_range("timed steps");
  if (telemetry != nullptr) telemetry->begin();
  while (true) {
    if (no_time_left) {
      measurement.stop_reason = "time_limit";
      break;
    }
    no_time_left = run_batch(std::min(next_check, max_steps) - measurement.samples_ms.size(), false);
    const std::size_t steps = measurement.samples_ms.size();
    if (steps >= max_steps) {
      measurement.stop_reason = "max_steps";
      break;
    }
    if (steps >= next_check) {
      if (relative_ci_half_width(summarize(measurement.samples_ms)) <= options.target_ci) {
        measurement.stop_reason = "ci_target";
        break;
      }
      next_check = steps + std::max<std::size_t>(10, steps / 10);
    }
  }
  if (telemetry != nullptr) measurement.telemetry = telemetry->end();
  measurement.reached_min_steps = measurement.samples_ms.size() >= static_cast<std::size_t>(options.min_steps);
  return measurement;
}

void summarize_cell(CellResult& result, const Network& network, const Measurement& measurement,
                    const OutputCheck& check, const MeasureOptions& options, double preparation_s, int devices) {
  const CellSpec& cell = result.cell;
  result.samples_ms = measurement.samples_ms;
  result.steps = static_cast<std::int32_t>(measurement.samples_ms.size());
  if (!check.finite) {
    result.status = Status::failed;
    result.message = format("non-finite output after the timed steps (loss %g, logits checksum %g)",
                            check.loss, check.logits_checksum);
    return;
  }
  if (!measurement.reached_min_steps) {
    result.status = Status::timeout;
    result.message = format("only %.0f of %.0f timed steps fitted in the cell time limit of %g s",
                            static_cast<double>(result.steps), options.min_steps, options.cell_time_limit_s) +
                     format(" (preparation took %.3g s)", preparation_s);
    return;
  }
  result.status = Status::ok;
  result.statistics = summarize(result.samples_ms);
  const double step_s = result.statistics.median_ms / 1e3;
  const double flops_per_image = cell.phase == Phase::training ? network.training_flops_per_image()
                                                               : network.forward_flops_per_image();
  const double images_per_step = static_cast<double>(cell.batch) * devices;
  result.images_per_s = images_per_step / step_s;
  const Telemetry& telemetry = measurement.telemetry;
  // Over every step the timed samples spanned (a sample may average several steps).
  const double steps_run = static_cast<double>(result.steps) * measurement.steps_per_sample;
  result.energy_j_per_image = telemetry.energy_j / (steps_run * static_cast<double>(cell.batch));
  result.mean_sm_clock_mhz = telemetry.mean_sm_clock_mhz;
  result.min_sm_clock_mhz = telemetry.min_sm_clock_mhz;
  result.mean_power_w = telemetry.mean_power_w;
  result.max_temperature_c = telemetry.max_temperature_c;
  result.throttled = telemetry.throttled;
  result.tflops = flops_per_image * images_per_step / step_s / 1e12;
  if (!measurement.exposed_communication_ms.empty())
    result.exposed_communication_ms = summarize(measurement.exposed_communication_ms).median_ms;
  const std::string sample_kind = measurement.steps_per_sample > 1
                                      ? " samples of " + std::to_string(measurement.steps_per_sample) + " steps each"
                                      : " steps";
  result.message = "stopped by " + measurement.stop_reason + format(" after %.0f", static_cast<double>(result.steps)) +
                   sample_kind +
                   format(" (95%% CI of the median ±%.2f%%)", 100.0 * relative_ci_half_width(result.statistics));
  if (options.warmup_ms > 0)  // measure.warmup_ms: what the warm-up took to last that long
    result.message += format("; warm-up %.0f steps in %.0f ms", measurement.warmup_steps, measurement.warmup_ms);
  result.message += format("; loss %.6g", check.loss);  // last: readers take the number after "loss "
}

std::string unsupported_reason(const Engine* engine, const std::string& engine_name, const Device& device,
                               const CellSpec& cell, int rank) {
  if (engine == nullptr)
    return "engine '" + engine_name + "' is not built into this crossbench binary (`crossbench list engines` says why)";
  if (!engine->runs_on(device.kind))
    return "engine '" + engine_name + "' runs on " + (engine->device_kind() == DeviceKind::gpu ? "GPUs" : "CPUs") +
           "; rank " + std::to_string(rank) + " is bound to " + device.key();
  Support support = engine->supports(device, cell);
  return support.supported ? std::string() : std::move(support.reason);
}

namespace {

CellResult run_cell_unstamped(Engine* engine, const std::string& engine_name, const Network& network,
                              const CellSpec& cell, const Device& device, const MeasureOptions& options,
                              int rank, Communicator* communicator, StepAgreement* agreement) {
  CellResult result;
  result.cell = cell;
  result.device_key = device.key();
  result.rank = rank;
  if (std::string reason = unsupported_reason(engine, engine_name, device, cell, rank); !reason.empty()) {
    result.status = Status::unsupported;
    result.message = std::move(reason);
    return result;
  }
  const bool data_parallel = cell.gpus > 1;
  if (data_parallel && cell.phase != Phase::training) {
    result.status = Status::unsupported;
    result.message = "inference is single-device: gpus > 1 applies to training cells only";
    return result;
  }
  if (data_parallel && (communicator == nullptr || communicator->size() != cell.gpus)) {
    result.status = Status::unsupported;
    result.message = "data-parallel cell over " + std::to_string(cell.gpus) + " devices run without a group of " +
                     std::to_string(cell.gpus) + " ranks";
    return result;
  }

  const nvtx::Range cell_range(describe(cell));  // named like the cell, for Nsight Systems
  const auto start = Clock::now();
  std::unique_ptr<Session> session;
  std::optional<CellResult> failure;
  try {
    const nvtx::Range range("prepare");
    session = engine->prepare(network, cell, data_parallel ? communicator : nullptr);
    if (!session)
      failure = without_measurements(result, Status::unsupported,
                                     "engine '" + engine_name + "' cannot train data parallel (gpus > 1)");
  } catch (...) {
    failure = failed_cell(result, std::current_exception());
  }
  // The ranks of a group go on together or not at all: a rank that measured
  // alone would wait for its peers in the first all-reduce.
  if (agreement != nullptr) {
    std::array<double, 1> failed{failure ? 1.0 : 0.0};
    agreement->max_over_group(failed);
    if (failed[0] > 0 && !failure)
      failure = without_measurements(result, Status::failed, "another rank of the data-parallel group could not prepare the cell");
  }
  const double prepare_call_s = seconds_since(start);
  if (session) {
    result.search_s = session->record().search_s;
    result.preparation_s = std::isfinite(result.search_s) ? prepare_call_s - result.search_s : prepare_call_s;
  }
  if (failure) {
    failure->preparation_s = prepare_call_s;
    return *failure;
  }
  const auto timed_start = Clock::now();
  try {
    const double preparation_s = seconds_since(start);
    // Telemetry on the rank's device (a worker runs on it too), for every engine.
    TelemetrySampler telemetry(device, std::chrono::milliseconds(options.telemetry_interval_ms));
    const Measurement measurement = measure(*session, options, preparation_s, agreement, &telemetry);
    const OutputCheck check = session->check();
    result.peak_memory_bytes = static_cast<double>(session->memory().peak_bytes);
    // Read after the steps: a worker's decisions include what happened during them.
    result.decisions = session->record().decisions;
    result.versions = session->record().versions;
    summarize_cell(result, network, measurement, check, options, preparation_s, data_parallel ? cell.gpus : 1);
    result.timed_s = seconds_since(timed_start);
    if (result.status == Status::ok && options.layer_times) profile_layers(*session, options.layer_time_repetitions, result);
  } catch (...) {
    CellResult failed = failed_cell(result, std::current_exception());
    failed.timed_s = seconds_since(timed_start);
    return failed;
  }
  return result;
}

}  // namespace

CellResult run_cell(Engine* engine, const std::string& engine_name, const Network& network,
                    const CellSpec& cell, const Device& device, const MeasureOptions& options,
                    int rank, Communicator* communicator, StepAgreement* agreement) {
  const std::string started = utc_now();
  const GpuMemoryWatch gpu_memory(device);  // the level before the cell; NaN (unchecked) on a CPU
  CellResult result = run_cell_unstamped(engine, engine_name, network, cell, device, options, rank, communicator, agreement);
  // --repetitions: the same cell again in fresh sessions (prepare() each time: a new
  // session, and a new worker process for worker engines), on this rank's device.
  // Data-parallel cells (a communicator) are measured once.
  if (options.repetitions > 1 && communicator == nullptr && result.status == Status::ok) {
    std::vector<CellResult> repetitions;
    repetitions.push_back(std::move(result));
    while (static_cast<int>(repetitions.size()) < options.repetitions && !stop_flag::cell_must_end() &&
           stop_flag::level() == 0) {
      CellResult again = run_cell_unstamped(engine, engine_name, network, cell, device, options, rank, nullptr, nullptr);
      if (again.status != Status::ok) {
        again.message = "repetition " + std::to_string(repetitions.size() + 1) + " of " +
                        std::to_string(options.repetitions) + ": " + again.message;
        repetitions = {std::move(again)};
        break;
      }
      repetitions.push_back(std::move(again));
    }
    std::vector<double> medians;
    for (const CellResult& repetition : repetitions) medians.push_back(repetition.statistics.median_ms);
    // The headline: the repetition whose median is the (lower) median of the medians, so that
    // its samples, CI and telemetry belong together.
    std::vector<std::size_t> order(repetitions.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return medians[a] < medians[b]; });
    const std::size_t chosen = order[(order.size() - 1) / 2];
    const double preparation_s = [&] {
      double total = 0;
      for (const auto& repetition : repetitions) total += std::isnan(repetition.preparation_s) ? 0 : repetition.preparation_s;
      return total;
    }();
    double timed_s = 0;
    for (const auto& repetition : repetitions) timed_s += std::isnan(repetition.timed_s) ? 0 : repetition.timed_s;
    // The search too: the first repetition searches and the later ones replay its choices, so the chosen
    // repetition's own search_s would drop the cell's search whenever another repetition is the median.
    double search_s = std::numeric_limits<double>::quiet_NaN();  // NaN: no repetition reports one
    for (const auto& repetition : repetitions)
      if (!std::isnan(repetition.search_s)) search_s = (std::isnan(search_s) ? 0 : search_s) + repetition.search_s;
    result = std::move(repetitions[chosen]);
    if (result.status == Status::ok) {
      result.repetition_medians_ms = medians;
      result.message += "; repetition " + std::to_string(chosen + 1) + " of " + std::to_string(medians.size()) +
                        " (the median of the repetitions' medians)";
    }
    result.preparation_s = preparation_s;  // every repetition's, summed [s]: the cell's wall time is theirs
    result.search_s = search_s;
    result.timed_s = timed_s;
  }
  // Nothing outlives its cell: the session is gone, and with it the worker
  // (worker_per_cell) and its process group; a helper that left the group
  // (setsid) is ended here and named. A live worker's own tree is left alone.
  try {
    const auto strays = process_tree::end_strays();
    if (!strays.empty()) {
      std::string named;
      for (const auto& process : strays) named += (named.empty() ? "" : ", ") + process_tree::describe(process);
      result.decisions += std::string(result.decisions.empty() ? "" : "; ") + "ended " + std::to_string(strays.size()) +
                          " process" + (strays.size() == 1 ? "" : "es") + " that outlived the cell: " + named;
    }
  } catch (const std::exception& error) {
    result.decisions += std::string(result.decisions.empty() ? "" : "; ") + "processes left by the cell not checked: " + error.what();
  }
  // ... and the GPU memory the cell took is given back (the session and its
  // worker are gone): a cell that leaks fails with that reason, so that the
  // next cell (or the next user of the node) does not measure with less.
  if (const std::string leak = gpu_memory.leak_after(); !leak.empty()) {
    if (result.status == Status::ok) {
      CellResult failed = without_measurements(result, Status::failed, leak);
      failed.decisions = result.decisions;  // what ran, and the wall times it took, stay known
      failed.versions = result.versions;
      failed.preparation_s = result.preparation_s;
      failed.search_s = result.search_s;
      failed.timed_s = result.timed_s;
      result = std::move(failed);
    } else {
      result.message += "; " + leak;
    }
  }
  result.started_utc = started;
  result.finished_utc = utc_now();
  return result;
}

}  // namespace crossbench
