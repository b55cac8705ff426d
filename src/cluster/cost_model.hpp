// The plan's cost model (DESIGN.md "Distribution"): a cell's wall time
// estimated from its FLOPs and the device's peak, plus its preparation and
// its search, before anything has run. `plan --calibrate` replaces or scales
// it with recorded wall times (cluster/calibration.hpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crossbench/device.hpp"
#include "crossbench/network.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/measure.hpp"

namespace crossbench {

// What a cell that cannot run costs: it is recorded at once [s].
inline constexpr double kUnsupportedCellSeconds = 0.001;

// A framework engine's compile in preparation, by phase (the worker's start and model build,
// kWorkerPreparationSeconds, come on top) [s]:
//   compile_s = base_s + per_distinct_layer_s x distinct layers + per_layer_s x layers
// "distinct layers" are the layers of different kind, shapes or parameters (distinct_layers()):
// Inductor and XLA generate and compile code per distinct kernel and trace every layer, which is
// why googlenet (144 layers, 109 distinct) compiles longer than resnet50 (177 layers, 57 distinct).
// Fitted to the cold compiles the H200 cubes recorded (bench/results/2026-12-01: cube20,
// fusion/call2 fwcmp, final/frameworks; the `compile=` of each cell's decisions): pytorch-compile
// training 23-114 s (alexnet 32-37, vgg11 29-57, resnet50 46-71, googlenet 83-114, resnet152 112),
// inference 9-23 s; jax training 7-22 s, inference 1-5 s. The per-cell preparation, start
// included: pytorch-compile 16-122 s, jax 7-17 s.
struct CompileModel {
  const char* engine;
  Phase phase;
  double base_s;
  double per_distinct_layer_s;
  double per_layer_s;
  const char* kind;  // what compiles: "torch.compile", "torch.compile max-autotune", "jax.jit"
  // engine.compile_mode the model is for (pytorch-compile); empty: any (jax).
  const char* compile_mode = "";
  // Per distinct convolution and fully-connected layer [s]: max-autotune benchmarks Triton's templates for
  // each GEMM it may lower (distinct_gemm_layers); 0 for the other models.
  double per_distinct_gemm_s = 0;
};
[[nodiscard]] const std::vector<CompileModel>& compile_models();

// A compile model's cold estimate of one network [s].
[[nodiscard]] double cold_compile_seconds(const CompileModel& model, const Network& network);

// A warm compile cache (engine.compile_cache) leaves this fraction of a cold compile: tracing,
// lowering and CUDA-graph recording still run, code generation and the compiler do not.
// Measured for torch.compile on the H200 with Inductor's cache warm from an earlier call
// (fusion/call3 against call2: overfeat 6.2 s / 22.7 s, vgg11 7.2 s / 29.3 s: 0.25-0.27); JAX's
// is assumed the same until a warm study run measures it.
inline constexpr double kWarmCompileFraction = 0.25;
// ... but not below this [s]: a warm compile of a small graph is its fixed costs (tracing, the cache's
// lookups, CUDA-graph recording). The H200 study's warm compiles (`compile=` of cells whose caches hit,
// segments 0-10): pytorch-compile 4.2-6.7 s for AlexNet, OverFeat and VGG-11 inference, where a quarter
// of the cold model is 1.5-2.5 s; JAX 4.8 s and up.
inline constexpr double kWarmCompileFloorSeconds = 4.5;
// A framework cell's compile from a warm cache [s]: kWarmCompileFraction of its cold compile, at least
// kWarmCompileFloorSeconds, at most the cold compile itself.
[[nodiscard]] double warm_compile_seconds(double cold_s);
// A pytorch-compile cell whose graph the cache does not hold, but which another batch of its series (the
// same network, precision, phase and compile mode) compiled into it earlier in the run, compiles at this
// fraction of cold: Inductor's generated kernels, their autotuned configurations and its dynamic-shape
// profile carry over from one batch to the next, the graph does not. Fitted to the H200's batch sweep
// (bench/results/2026-12-06/sweep-pytorch-compile, 30 cells: such compiles took 0.38-0.91 of the cold
// model, median 0.55; with 0.6, 24 of the 30 cells' walls are within 25% of the plan, 16 without). JAX's
// persistent cache keeps whole executables, one per batch, so its series compile cold.
inline constexpr double kSeriesCompileFraction = 0.6;
// Whether `engine`'s compiles share work across the batches of a series through the compile cache.
[[nodiscard]] bool compile_shared_across_batches(const std::string& engine);

// The layers of a network that differ in kind, input and output shapes or parameters; of one kind only
// where `only` names it.
[[nodiscard]] int distinct_layers(const Network& network, std::optional<LayerKind> only = std::nullopt);

// What a native GPU engine's exhaustive search times for a cell: one key per distinct convolution
// (distinct_layers' signature) and direction it runs (forward; in training also the data and filter
// gradients), "<precision> b<batch> <direction> <layer>". The engine keeps what it measured for the
// rest of its process (its in-memory algorithm cache), so a convolution repeated in the network is
// searched once, and one a later cell of the same rank meets again at the same precision and batch
// is replayed (Plan: account_search_reuse).
[[nodiscard]] std::vector<std::string> convolution_searches(const Network& network, const CellSpec& cell);
// [s] per key of convolution_searches that the process has not searched yet.
[[nodiscard]] double search_seconds_per_convolution();

// What the plan knows of the run's compile cache (engine.compile_cache, resolved): the files in
// each framework's part of it. "warm" is the directory's, not each cell's: a cell whose graph it
// does not hold still compiles cold, so `plan --calibrate` on a cube of the cache's run is the
// closer estimate.
struct CompileCacheState {
  std::string directory = "none";   // none: no persistent cache, every compile cold
  std::int64_t inductor_entries = 0;  // inductor/ and triton/ (pytorch-compile)
  std::int64_t jax_entries = 0;       // jax/
  [[nodiscard]] std::int64_t entries_for(const std::string& engine) const;
};
// Counts the cache's files; a directory that does not exist is an empty (cold) cache.
[[nodiscard]] CompileCacheState read_compile_cache_state(const std::string& setting);

// engine.algo_cache as the plan finds it: a native GPU engine with algo =
// exhaustive replays the records the file holds for the cell's device and
// searches only the rest, so a warm file costs no search (the H200 study's
// cudnn cells took 0.18 of an estimate that searched every convolution). A
// cell counts as replayed where the file holds records of its device at its
// batch (the layers' signatures are the engine's to build, not the plan's).
struct AlgorithmCacheState {
  std::string file = "none";  // none: no file, every search measured
  // Records per measurement_device() text and batch (the first dimension of the signature's input
  // tensor, x= or dx=; 0 where the signature names none, e.g. a cuBLASLt record).
  std::map<std::string, std::map<std::int64_t, std::int64_t>> records;
  [[nodiscard]] std::int64_t records_for(const Device& device) const;
  [[nodiscard]] std::int64_t records_for(const Device& device, std::int64_t batch) const;
};
// Reads the file's records per device; a missing or unreadable file is an
// empty cache (the run, not the plan, names a malformed one).
[[nodiscard]] AlgorithmCacheState read_algorithm_cache_state(const std::string& setting);

// One cell's estimate in the parts a cube records (preparation_s, search_s, timed_s) and the rest of its
// wall time (finished_utc - started_utc) [s].
struct CellEstimate {
  double preparation_s = 0;  // prepare() without the search: primitives, buffers, a worker's start and model
  double search_s = 0;       // measured choices: exhaustive algorithm search, torch.compile, jit
  double steps_s = 0;        // warm-up + min_steps steps at an assumed fraction of the device's peak (eager on a GPU: + cudnn.benchmark's first-step search)
  double cold_compile_s = 0; // a framework cell's compile from a cold cache (search_s when cold); 0: none
  // A native engine's measured search: its convolution_searches keys, of which the plan counts those
  // new to the rank's process (search_s); empty where nothing is searched (heuristic, a replayed file).
  std::vector<std::string> searches;
  // What search_s is: "exhaustive search", "torch.compile (cold)", "jax.jit (warm cache)"; empty: none.
  std::string search_kind;
  // Why the cell cannot run on the device ("cudnn is a GPU engine; this device is a CPU"); empty: it can.
  // `plan` prints it instead of the cell's token cost.
  std::string unsupported;
  double finish_s = 0;       // the cell's end: the check, a worker's exit (its group killed), the sweep for strays
  bool capped = false;       // the model exceeded the cell time limit and was cut to it
  double total_s() const { return preparation_s + search_s + steps_s + finish_s; }
};

// The model's estimate of a cell on a device, at most the cell time limit
// (which includes preparation); kUnsupportedCellSeconds (all in steps_s) for
// a cell the engine cannot run there. It reads the measurement's steps and
// time limit and the engines' algorithm policy (engine.algo).
// A framework cell's compile is cut to warm_compile_seconds() where `cache` holds entries of its framework.
[[nodiscard]] CellEstimate model_cell_estimate(const Network& network, const CellSpec& cell, const Device& device,
                                               const MeasureOptions& measure, const EngineConfig& engine,
                                               const CompileCacheState& cache = {},
                                               const AlgorithmCacheState& algorithms = {});

}  // namespace crossbench
