#include "cluster/cost_model.hpp"

#include <algorithm>

#include "crossbench/engine.hpp"
#include "crossbench/options_schema.hpp"

namespace crossbench {
namespace {

// Fraction of the fp32 peak that a step reaches, and how much faster the
// reduced precisions run on a GPU's tensor cores: rough, but only the ratios
// between cells matter for the balance.
constexpr double kAssumedEfficiency = 0.4;
// Preparation and search, from the H200 cubes of bench/results/2026-12-01 (median cells):
constexpr double kNativePreparationSeconds = 0.2;    // [s] cuDNN/oneDNN primitives and buffers (after_heuristic: 0.02-2.5 s)
constexpr double kWorkerPreparationSeconds = 2.0;    // [s] a framework builds the model and moves it to the device
constexpr double kSearchSecondsPerConvolution = 0.125; // [s] exhaustive search per convolution and direction (cold.h5: 194 s / 1548)
constexpr double kCompileSeconds = 12.0;             // [s] torch.compile of one cell (workers_r50_bf16.h5: 12.4 s)
constexpr double kJitSeconds = 10.0;                 // [s] jax.jit of one cell's step (workers_r50_bf16.h5: 10.9 s)

double precision_speedup(const Device& device, Precision precision) {
  if (device.kind == DeviceKind::cpu)
    return precision == Precision::bf16 || precision == Precision::amp_bf16 ? 2.0 : 1.0;
  switch (precision) {
    case Precision::fp32: return 1.0;
    case Precision::tf32: return 4.0;
    case Precision::fp16:
    case Precision::bf16: return 8.0;
    case Precision::amp_fp16:
    case Precision::amp_bf16: return 6.0;  // 16-bit math plus the casts and fp32 gradients
  }
  return 1.0;
}

int convolutions(const Network& network) {
  return static_cast<int>(std::count_if(network.layers().begin(), network.layers().end(),
                                        [](const Layer& layer) { return layer.kind == LayerKind::convolution; }));
}

// Preparation and search by engine: a native engine builds primitives (and,
// on a GPU with algo = exhaustive, times every convolution's candidates in
// each direction it runs); a worker builds its model, and pytorch-compile and
// jax compile the step once per cell.
void add_preparation(CellEstimate& estimate, const Network& network, const CellSpec& cell, const Device& device,
                     const EngineConfig& engine, bool native) {
  if (!native) {
    estimate.preparation_s = kWorkerPreparationSeconds;
    if (cell.engine == "pytorch-compile") estimate.search_s = kCompileSeconds;
    if (cell.engine == "jax") estimate.search_s = kJitSeconds;
    return;
  }
  estimate.preparation_s = kNativePreparationSeconds;
  if (device.kind == DeviceKind::gpu && engine.setting("engine.algo") == "exhaustive") {
    const int directions = cell.phase == Phase::training ? 3 : 1;  // forward; backward data and filter
    estimate.search_s = kSearchSecondsPerConvolution * convolutions(network) * directions;
  }
}

}  // namespace

CellEstimate model_cell_estimate(const Network& network, const CellSpec& cell, const Device& device,
                                 const MeasureOptions& measure, const EngineConfig& engine) {
  const auto& catalog = engine_catalog();
  const auto info = std::find_if(catalog.begin(), catalog.end(), [&](const EngineInfo& e) { return e.name == cell.engine; });
  const bool native = info != catalog.end();
  CellEstimate unsupported;
  unsupported.steps_s = kUnsupportedCellSeconds;
  const char* kind_name = device.kind == DeviceKind::gpu ? "GPU" : "CPU";
  if (native && !info->built) {
    unsupported.unsupported = cell.engine + " is not built into this binary (crossbench list engines)";
    return unsupported;
  }
  if (native && info->device_kind != device.kind) {
    unsupported.unsupported = cell.engine + " runs on a " + (info->device_kind == DeviceKind::gpu ? "GPU" : "CPU") +
                              "; this device is a " + kind_name;
    return unsupported;
  }
  if (cell.gpus > 1 && cell.phase != Phase::training) {  // single-device only
    unsupported.unsupported = "data-parallel (gpus > 1) cells are training only";
    return unsupported;
  }

  CellEstimate estimate;
  add_preparation(estimate, network, cell, device, engine, native);
  const double flops_per_image = cell.phase == Phase::training ? network.training_flops_per_image()
                                                               : network.forward_flops_per_image();
  const double steps = measure.warmup_steps + measure.min_steps;
  const double flops_per_second =
      std::max(device.peak_fp32_tflops, 1e-3) * 1e12 * kAssumedEfficiency * precision_speedup(device, cell.precision);
  estimate.steps_s = steps * flops_per_image * static_cast<double>(cell.batch) / flops_per_second;
  // The cell time limit includes preparation: nothing runs longer than it.
  const double limit_s = measure.cell_time_limit_s;
  if (estimate.total_s() > limit_s) {
    estimate.capped = true;
    estimate.search_s = std::min(estimate.search_s, std::max(0.0, limit_s - estimate.preparation_s));
    estimate.steps_s = std::max(0.0, limit_s - estimate.preparation_s - estimate.search_s);
  }
  // --repetitions: a single-device cell runs whole (each a fresh session, each within the limit) N times.
  if (cell.gpus == 1 && measure.repetitions > 1) {
    const double n = measure.repetitions;
    estimate.preparation_s *= n;
    estimate.search_s *= n;
    estimate.steps_s *= n;
  }
  return estimate;
}

}  // namespace crossbench
