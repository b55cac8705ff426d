#include "crossbench/runner.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <new>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

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

// --layer-times: the profiling pass of an ok cell, run after its statistics
// are final, so it cannot change them. A failure here costs the layer times,
// never the cell: the headline stays as measured, the message says why.
void profile_layers(Session& session, int repetitions, CellResult& result) {
  try {
    result.layer_times = session.layer_times(repetitions);
  } catch (const std::exception& error) {
    result.layer_times.clear();
    result.message += std::string("; layer times not measured: ") + error.what();
  }
}

}  // namespace

Measurement measure(Session& session, const MeasureOptions& options, double seconds_already_spent) {
  const auto start = Clock::now();
  const auto out_of_time = [&] { return seconds_already_spent + seconds_since(start) >= options.cell_time_limit_s; };

  // Warm-up goes through the timer too, so that an asynchronous engine has
  // finished its warm-up work before the first timed step starts.
  for (int i = 0; i < options.warmup_steps && !out_of_time(); ++i) timed_step(session);

  Measurement measurement;
  measurement.samples_ms.reserve(static_cast<std::size_t>(std::max(options.min_steps, 1)));
  // The stopping rule sorts the samples; checking it after every step would
  // cost O(n² log n), so it is checked at min_steps and then every 10% more steps.
  std::size_t next_check = static_cast<std::size_t>(options.min_steps);
  session.begin_timed_steps();
  while (true) {
    if (out_of_time()) {
      measurement.stop_reason = "time_limit";
      break;
    }
    measurement.samples_ms.push_back(timed_step(session));
    const std::size_t steps = measurement.samples_ms.size();
    if (steps >= static_cast<std::size_t>(options.max_steps)) {
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
  measurement.telemetry = session.end_timed_steps();
  measurement.reached_min_steps =
      measurement.samples_ms.size() >= static_cast<std::size_t>(options.min_steps);
  return measurement;
}

CellResult run_cell(Engine* engine, const std::string& engine_name, const Network& network,
                    const CellSpec& cell, const Device& device, const MeasureOptions& options,
                    int rank) {
  CellResult result;
  result.cell = cell;
  result.device_key = device.key();
  result.rank = rank;
  if (engine == nullptr) {
    result.status = Status::unsupported;
    result.message = "engine '" + engine_name + "' is not built into this crossbench binary "
                     "(`crossbench list engines` says why)";
    return result;
  }
  if (!engine->runs_on(device.kind)) {
    result.status = Status::unsupported;
    result.message = "engine '" + engine_name + "' runs on " +
                     (engine->device_kind() == DeviceKind::gpu ? "GPUs" : "CPUs") + "; rank " +
                     std::to_string(rank) + " is bound to " + device.key();
    return result;
  }
  const Support support = engine->supports(device, cell);
  if (!support.supported) {
    result.status = Status::unsupported;
    result.message = support.reason;
    return result;
  }
  try {
    const auto start = Clock::now();
    std::unique_ptr<Session> session = engine->prepare(network, cell);
    const double preparation_s = seconds_since(start);
    const auto measured_itself = session->measure_itself(options, preparation_s);
    const Measurement measurement = measured_itself ? *measured_itself : measure(*session, options, preparation_s);
    const OutputCheck check = session->check();
    result.samples_ms = measurement.samples_ms;
    result.steps = static_cast<std::int32_t>(measurement.samples_ms.size());
    result.peak_memory_bytes = static_cast<double>(session->memory().peak_bytes);
    result.decisions = session->decisions();

    if (!check.finite) {
      result.status = Status::failed;
      result.message = format("non-finite output after the timed steps (loss %g, logits checksum %g)",
                              check.loss, check.logits_checksum);
      return result;
    }
    if (!measurement.reached_min_steps) {
      result.status = Status::timeout;
      result.message = format("only %.0f of %.0f timed steps fitted in the cell time limit of %g s",
                              static_cast<double>(result.steps), options.min_steps, options.cell_time_limit_s) +
                       format(" (preparation took %.3g s)", preparation_s);
      return result;
    }
    result.status = Status::ok;
    result.statistics = summarize(result.samples_ms);
    const double step_s = result.statistics.median_ms / 1e3;
    const double flops_per_image = cell.phase == Phase::training ? network.training_flops_per_image()
                                                                 : network.forward_flops_per_image();
    result.images_per_s = static_cast<double>(cell.batch) / step_s;
    const Telemetry& telemetry = measurement.telemetry;
    result.energy_j_per_image = telemetry.energy_j / (static_cast<double>(result.steps) * static_cast<double>(cell.batch));
    result.mean_sm_clock_mhz = telemetry.mean_sm_clock_mhz;
    result.throttled = telemetry.throttled;
    result.tflops = flops_per_image * static_cast<double>(cell.batch) / step_s / 1e12;
    result.message = "stopped by " + measurement.stop_reason +
                     format(" after %.0f steps (95%% CI of the median ±%.2f%%); loss %.6g",
                            static_cast<double>(result.steps),
                            100.0 * relative_ci_half_width(result.statistics), check.loss);
    if (options.layer_times) profile_layers(*session, options.layer_time_repetitions, result);
  } catch (const Unsupported& error) {
    return without_measurements(result, Status::unsupported, error.what());
  } catch (const CellTimeout& error) {
    return without_measurements(result, Status::timeout, error.what());
  } catch (const OutOfMemory& error) {
    return without_measurements(result, Status::oom, error.what());
  } catch (const std::bad_alloc&) {
    return without_measurements(result, Status::oom, "host allocation failed (std::bad_alloc)");
  } catch (const std::exception& error) {
    return without_measurements(result, Status::failed, error.what());
  }
  return result;
}

}  // namespace crossbench
