#include "cluster/cost_model.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

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
// [s] a fresh worker starts (python, the framework's import, its CUDA context), builds the model and
// moves it to the device: preparation_s less the compile (`compile=` in decisions) in the H200 study
// (bench/results/2026-12-02/study, segments 3-5): torch 7-9 s (pytorch-compile; eager resnet152 7.7 s),
// jax 3.3-4.2 s. (The first model's 2 s, from the 2026-12-01 cubes, was a worker serving many cells.)
constexpr double kTorchWorkerPreparationSeconds = 8.0;
// [s] the same for a pytorch-compile worker (Inductor's imports and caches): preparation_s less the compile
// in the study's segments 0-10, 56 cells, a median 9 s (6.5-13.2 s).
constexpr double kTorchCompileWorkerPreparationSeconds = 9.0;
constexpr double kJaxWorkerPreparationSeconds = 3.5;
// [s] a cell served by a worker that is already running (engine.worker_per_cell = false): the model
// alone (the 2026-12-01 cube20: eager 0.2-0.9 s)
constexpr double kSharedWorkerPreparationSeconds = 1.0;
// [s] a cell's end, after its last timed step: the check, the worker's exit and its group's kill, the
// Runner's sweep for strays; the H200 study's cells after 2a50465 (a worker ends with exit alone; segments
// 11-12, finished_utc - started_utc - preparation_s - timed_s, warm-up included): cudnn median 0.04 s
// (0.01-0.2), eager PyTorch 0.12 s (0.10-0.17), JAX 0.33 s (0.22-0.53). pytorch-compile (reduce-overhead):
// 0.13 s (0.10-0.18, six cells of bench/results/2026-12-03/call45's harness check; before the cut 5-6 s, the
// interpreter's shutdown waiting on Inductor's compile pool, which the cut skips).
// [s] eager PyTorch on a GPU: cudnn.benchmark times every algorithm of each convolution shape at its first
// step, inside the warm-up: a base + per distinct convolution and direction. Fitted to the H200 study's 56
// eager cells (timed_s less steps x median: inference 0.4-3.2 s, training 0.9-24 s): 1.0 + 0.07 s; with
// it 41 of the 56 cells are within 25% of their wall (30 without; in-sample).
constexpr double kTorchBenchmarkBaseSeconds = 1.0;
constexpr double kTorchBenchmarkSecondsPerConvolution = 0.07;
constexpr double kNativeFinishSeconds = 0.04;
constexpr double kTorchFinishSeconds = 0.12;
constexpr double kJaxFinishSeconds = 0.33;
constexpr double kTorchCompileFinishSeconds = 0.13;
// [s] exhaustive search per convolution search a process has not measured yet (convolution_searches' keys:
// one per distinct convolution, direction, precision and batch): the H200's three cold processes of seed2017 x
// fp32, tf32, bf16 (bench/results/2026-12-03/call38, repro_*.h5) searched 801 such keys in 63.4, 69.5 and
// 76.7 s of search_s. (The first model, 0.125 s per convolution and direction of every cell, cold.h5's 194 s
// over 1548, counted a repeated layer and every later cell's replays again: it planned that run at 10m53s.)
constexpr double kSearchSecondsPerConvolution = 0.087;

double precision_speedup(const Device& device, Precision precision) {
  if (device.kind == DeviceKind::cpu)
    return precision == Precision::bf16 || precision == Precision::amp_bf16 ? 2.0 : 1.0;
  // The H200 study's cells (bench/results/2026-12-02/study, segments 0-10): the median over engines, networks
  // and phases of the fp32 step time over the precision's, tf32 2.99 (30 pairs), bf16 5.64 (26), amp-bf16 5.58
  // (21); eager PyTorch gains less (tf32 2.2, bf16 2.9: launch-bound), pytorch-compile more (3.4, 6.1).
  switch (precision) {
    case Precision::fp32: return 1.0;
    case Precision::tf32: return 3.0;
    case Precision::fp16:
    case Precision::bf16: return 5.6;
    case Precision::amp_fp16:
    case Precision::amp_bf16: return 5.6;  // 16-bit math; the casts and fp32 master weights cost about nothing
  }
  return 1.0;
}

// Preparation and search by engine: a native engine builds primitives (and,
// on a GPU with algo = exhaustive, times every convolution's candidates in
// each direction it runs); a worker builds its model, and pytorch-compile and
// jax compile the step once per cell.
void add_preparation(CellEstimate& estimate, const Network& network, const CellSpec& cell, const Device& device,
                     const EngineConfig& engine, bool native, const CompileCacheState& cache,
                     const AlgorithmCacheState& algorithms) {
  if (!native) {
    estimate.preparation_s = engine.setting("engine.worker_per_cell") == "false" ? kSharedWorkerPreparationSeconds
                             : cell.engine == "jax"                               ? kJaxWorkerPreparationSeconds
                             : cell.engine == "pytorch-compile"                   ? kTorchCompileWorkerPreparationSeconds
                                                                                  : kTorchWorkerPreparationSeconds;
    estimate.finish_s = cell.engine == "jax"               ? kJaxFinishSeconds
                        : cell.engine == "pytorch-compile" ? kTorchCompileFinishSeconds
                                                           : kTorchFinishSeconds;
    const std::string mode = engine.setting("engine.compile_mode");
    for (const CompileModel& model : compile_models()) {
      if (model.engine != cell.engine || model.phase != cell.phase) continue;
      if (*model.compile_mode != '\0' && model.compile_mode != mode) continue;
      const double cold_s = cold_compile_seconds(model, network);
      const bool warm = cache.entries_for(cell.engine) > 0;
      estimate.cold_compile_s = cold_s;
      estimate.search_s = warm ? warm_compile_seconds(cold_s) : cold_s;
      estimate.search_kind = std::string(model.kind) + (warm ? " (warm cache)" : " (cold)");
    }
    return;
  }
  estimate.preparation_s = kNativePreparationSeconds;
  estimate.finish_s = kNativeFinishSeconds;
  if (device.kind == DeviceKind::gpu && engine.setting("engine.algo") == "exhaustive") {
    if (const auto held = algorithms.records_for(device, cell.batch); held > 0) {
      // Replayed: which layers the file lacks is the engine's to know (signatures of its descriptors);
      // a file that holds this device's records at this batch is taken to hold the cell's.
      estimate.search_kind = "exhaustive search (replayed: " + std::to_string(held) + " records for this device at batch " +
                             std::to_string(cell.batch) + " in " + algorithms.file + ")";
      return;
    }
    estimate.searches = convolution_searches(network, cell);
    estimate.search_s = kSearchSecondsPerConvolution * static_cast<double>(estimate.searches.size());
    estimate.search_kind = "exhaustive search";
  }
}

std::int64_t files_under(const std::filesystem::path& directory) {
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) return 0;
  std::int64_t files = 0;
  // An unreadable part of the cache counts as absent (cold): the estimate, not the run, depends on it.
  for (std::filesystem::recursive_directory_iterator it(directory, std::filesystem::directory_options::skip_permission_denied,
                                                         error), end;
       !error && it != end; it.increment(error))
    if (it->is_regular_file(error)) ++files;
  return files;
}

}  // namespace

const std::vector<CompileModel>& compile_models() {
  // engine, phase, base [s], per distinct layer [s], per layer [s]; the fit is in cost_model.hpp.
  // pytorch-compile training: a least-squares fit to the median cold compile (`compile=` in decisions)
  // of the H200's cubes up to bench/results/2026-12-02 (alexnet 35, overfeat 23, vgg11 37, googlenet 88,
  // resnet50 66, resnet101 100, resnet152 105 s); modelled alexnet 31, overfeat 31, vgg11 34, googlenet
  // 89, resnet50 68, resnet101 89, resnet152 111 s (the first fit, 20 + 0.25 d + 0.15 L, had googlenet at
  // 69 and resnet101 at 86). Inference 7-25 s; jax training 7-23 s, inference 1-4 s.
  // max-autotune benchmarks Triton templates for every GEMM and convolution it may lower. Training: per
  // layer, fitted to the H200's cold max-autotune compiles alone: alexnet bf16 training 114 s (23 layers;
  // bench/results/2026-12-03/call47) and resnet50 tf32 training, which had not finished after 435 s and
  // 421 s more from the first call's whole cache (177 layers; 2026-12-10 calls 66-67): a lower bound of
  // 856 s. 5 + 4.85 s a layer: alexnet and overfeat 117 s (overfeat 114-136 s two to four side by side,
  // 2026-12-08), resnet50 864 s, so ResNet and GoogLeNet training plan past the 600 s cell limit, as
  // they run. Neither distinct layers nor distinct GEMMs fit both (a negative base): ResNet-50's forward
  // graph alone autotuned its 24 GEMMs for over 7 minutes. The first model, reduce-overhead's x4.5, said
  // 306 s for resnet50. Inference: per distinct convolution and fully-connected layer, each autotuned, fitted
  // to the cold compiles alone on the H200: alexnet tf32 57-63 s (8 such layers), overfeat bf16 69 s (8;
  // 2026-12-09 call65), googlenet bf16 over 346 s (50: stopped by the call's limit; the first model, the
  // reduce-overhead one x8, said 144 s); vgg11 bf16 95 s four side by side (10; overfeat there 93 s).
  static const std::vector<CompileModel> models{
      {"pytorch-compile", Phase::training, 18.0, 0.49, 0.125, "torch.compile", "reduce-overhead"},
      {"pytorch-compile", Phase::inference, 5.0, 0.08, 0.03, "torch.compile", "reduce-overhead"},
      {"pytorch-compile", Phase::training, 5.0, 0.0, 4.85, "torch.compile max-autotune", "max-autotune"},
      {"pytorch-compile", Phase::inference, 10.0, 0.0, 0.1, "torch.compile max-autotune", "max-autotune", 6.5},
      {"jax", Phase::training, 5.0, 0.05, 0.03, "jax.jit"},
      {"jax", Phase::inference, 0.3, 0.03, 0.0, "jax.jit"},
  };
  return models;
}

double cold_compile_seconds(const CompileModel& model, const Network& network) {
  double seconds = model.base_s + model.per_distinct_layer_s * distinct_layers(network) +
                   model.per_layer_s * static_cast<double>(network.layers().size());
  if (model.per_distinct_gemm_s > 0)
    seconds += model.per_distinct_gemm_s * (distinct_layers(network, LayerKind::convolution) +
                                            distinct_layers(network, LayerKind::fully_connected));
  return seconds;
}

double warm_compile_seconds(double cold_s) {
  return std::min(cold_s, std::max(kWarmCompileFloorSeconds, cold_s * kWarmCompileFraction));
}

bool compile_shared_across_batches(const std::string& engine) { return engine == "pytorch-compile"; }

// A layer's kind, input and output shapes and parameters: equal for layers a framework or an
// engine treats alike.
std::string layer_signature(const Network& network, const Layer& layer) {
  const auto& layers = network.layers();
  const auto shape = [](const TensorShape& s) {
    return std::to_string(s.channels) + "x" + std::to_string(s.height) + "x" + std::to_string(s.width);
  };
  const LayerParams& p = layer.params;
  std::string signature = std::string(to_string(layer.kind)) + ":" + shape(layer.output);
  // Appended piece by piece: GCC 12 warns (-Wrestrict, a false positive) on "<" + std::string&&.
  for (const int input : layer.inputs) {
    signature += '<';
    signature += shape(layers[static_cast<std::size_t>(input)].output);
  }
  for (const double value : {static_cast<double>(p.out_channels), static_cast<double>(p.kernel),
                             static_cast<double>(p.stride), static_cast<double>(p.padding), p.bias ? 1.0 : 0.0,
                             p.ceil_mode ? 1.0 : 0.0, static_cast<double>(p.lrn_size), p.lrn_alpha, p.lrn_beta,
                             p.lrn_k, p.dropout_rate, p.bn_epsilon})
  {
    signature += ',';
    signature += std::to_string(value);
  }
  return signature;
}

int distinct_layers(const Network& network, std::optional<LayerKind> only) {
  std::set<std::string> signatures;
  for (const Layer& layer : network.layers())
    if (!only || layer.kind == *only) signatures.insert(layer_signature(network, layer));
  return static_cast<int>(signatures.size());
}

std::vector<std::string> convolution_searches(const Network& network, const CellSpec& cell) {
  std::vector<const char*> directions{"forward"};
  if (cell.phase == Phase::training) directions = {"forward", "backward_data", "backward_filter"};
  std::set<std::string> keys;
  for (const Layer& layer : network.layers()) {
    if (layer.kind != LayerKind::convolution) continue;
    const std::string signature = layer_signature(network, layer);
    for (const char* direction : directions)
      keys.insert(std::string(to_string(cell.precision)) + " b" + std::to_string(cell.batch) + " " + direction + " " +
                  signature);
  }
  return {keys.begin(), keys.end()};
}

double search_seconds_per_convolution() { return kSearchSecondsPerConvolution; }

std::int64_t CompileCacheState::entries_for(const std::string& engine) const {
  if (engine == "pytorch-compile") return inductor_entries;
  if (engine == "jax") return jax_entries;
  return 0;
}

std::int64_t AlgorithmCacheState::records_for(const Device& device) const {
  const auto found = records.find(measurement_device(device));
  std::int64_t count = 0;
  if (found != records.end())
    for (const auto& [batch, records_at_batch] : found->second) count += records_at_batch;
  return count;
}

std::int64_t AlgorithmCacheState::records_for(const Device& device, std::int64_t batch) const {
  const auto found = records.find(measurement_device(device));
  if (found == records.end()) return 0;
  const auto at = found->second.find(batch);
  return at == found->second.end() ? 0 : at->second;
}

AlgorithmCacheState read_algorithm_cache_state(const std::string& setting) {
  AlgorithmCacheState state;
  if (setting.empty() || setting == "none") return state;
  state.file = setting;
  std::ifstream file(setting);
  if (!file) return state;
  const auto json = nlohmann::json::parse(file, nullptr, false);
  if (json.is_discarded() || !json.is_object() || !json.contains("records") || !json["records"].is_array()) return state;
  // "... x=bf16[64,16,14,14/...] ..." (a forward or filter search) or "dx=..." (backward data).
  static const std::regex input_batch(R"((?:^|[ .])d?x=[A-Za-z0-9]+\[(\d+),)");
  for (const auto& record : json["records"]) {
    if (!record.is_object() || !record.contains("device") || !record["device"].is_string()) continue;
    std::int64_t batch = 0;
    std::smatch match;
    const std::string signature = record.value("signature", "");
    if (std::regex_search(signature, match, input_batch)) batch = std::stoll(match[1].str());
    ++state.records[record["device"].get<std::string>()][batch];
  }
  return state;
}

CompileCacheState read_compile_cache_state(const std::string& setting) {
  CompileCacheState state;
  state.directory = setting.empty() ? "none" : setting;
  if (state.directory == "none") return state;
  const std::filesystem::path root(state.directory);
  // The workers' layout (src/workers/common/compile_cache.py): one subdirectory per framework cache.
  state.inductor_entries = files_under(root / "inductor") + files_under(root / "triton");
  state.jax_entries = files_under(root / "jax");
  return state;
}

CellEstimate model_cell_estimate(const Network& network, const CellSpec& cell, const Device& device,
                                 const MeasureOptions& measure, const EngineConfig& engine,
                                 const CompileCacheState& cache, const AlgorithmCacheState& algorithms) {
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
  if (native && is_mixed_precision(cell.precision)) {  // cell.hpp: only framework workers run amp-*
    unsupported.unsupported = mixed_precision_refusal(cell.precision, cell.engine,
                                                      cell.precision == Precision::amp_fp16 ? "fp16" : "bf16");
    return unsupported;
  }
  if (cell.gpus > 1 && cell.phase != Phase::training) {  // single-device only
    unsupported.unsupported = "data-parallel (gpus > 1) cells are training only";
    return unsupported;
  }
  if (native) {  // what the engine itself will refuse at once (cuDNN: a tensor of 2^31 elements or more)
    if (const Support support = native_engine_support(cell.engine, device, cell, engine); !support.supported) {
      unsupported.unsupported = support.reason;
      return unsupported;
    }
  }

  CellEstimate estimate;
  add_preparation(estimate, network, cell, device, engine, native, cache, algorithms);
  const double flops_per_image = cell.phase == Phase::training ? network.training_flops_per_image()
                                                               : network.forward_flops_per_image();
  const double steps = measure.warmup_steps + measure.min_steps;
  const double flops_per_second =
      std::max(device.peak_fp32_tflops, 1e-3) * 1e12 * kAssumedEfficiency * precision_speedup(device, cell.precision);
  estimate.steps_s = steps * flops_per_image * static_cast<double>(cell.batch) / flops_per_second;
  // measure.warmup_ms: the warm-up lasts at least that long, whatever its steps take [s].
  const double warmup_steps_s = measure.warmup_steps * flops_per_image * static_cast<double>(cell.batch) / flops_per_second;
  estimate.steps_s += std::max(0.0, measure.warmup_ms / 1e3 - warmup_steps_s);
  estimate.steps_s += measure.cooldown_ms / 1e3;  // measure.cooldown_ms: the device idle before the warm-up [s]
  if (cell.engine == "pytorch" && device.kind == DeviceKind::gpu) {  // cudnn.benchmark in the first warm-up step
    const int directions = cell.phase == Phase::training ? 3 : 1;
    estimate.steps_s += kTorchBenchmarkBaseSeconds + kTorchBenchmarkSecondsPerConvolution * directions *
                                                         distinct_layers(network, LayerKind::convolution);
  }
  // The cell time limit includes preparation: nothing runs longer than it.
  const double limit_s = measure.cell_time_limit_s;
  if (estimate.total_s() > limit_s) {  // the limit cuts the cell off: no check, a killed worker
    estimate.capped = true;
    estimate.finish_s = 0;
    estimate.preparation_s = std::min(estimate.preparation_s, limit_s);
    estimate.search_s = std::min(estimate.search_s, std::max(0.0, limit_s - estimate.preparation_s));
    estimate.steps_s = std::max(0.0, limit_s - estimate.preparation_s - estimate.search_s);
  }
  // --repetitions: a single-device cell runs whole (each a fresh session, each within the limit) N times.
  if (cell.gpus == 1 && measure.repetitions > 1) {
    const double n = measure.repetitions;
    estimate.preparation_s *= n;
    estimate.search_s *= n;
    estimate.cold_compile_s *= n;
    estimate.steps_s *= n;
    estimate.finish_s *= n;
  }
  return estimate;
}

}  // namespace crossbench
