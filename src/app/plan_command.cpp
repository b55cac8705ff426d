// `crossbench plan`: the cells to run, per rank, with their estimated cost.
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/console.hpp"
#include "crossbench/error.hpp"
#include "cluster/binding.hpp"
#include "cluster/mpi_session.hpp"
#include "cluster/plan.hpp"

namespace crossbench {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (const int rank : ranks) text += (text.empty() ? "" : ",") + std::to_string(rank);
  return text;
}

// How the estimates were made: the model's parts, and with --calibrate what
// each (device key, engine) was calibrated from.
std::string estimate_legend(const Plan& plan) {
  std::ostringstream text;
  text << "estimates: model = preparation + search (exhaustive algorithm search, torch.compile, jit) + "
          "warm-up and min_steps steps at 40% of the device's peak + the cell's end (check, a worker's exit) "
          "(src/cluster/cost_model.cpp)\n"
          "  a framework cell's compile, cold [s] = base + per distinct layer x distinct layers + per layer x layers "
          "(fitted to the H200's recorded compiles):\n";
  for (const CompileModel& model : compile_models()) {
    text << "    " << model.engine << " " << to_string(model.phase) << " (" << model.kind
         << (*model.compile_mode != '\0' ? std::string(", engine.compile_mode = ") + model.compile_mode : std::string())
         << "): " << std::fixed
         << std::setprecision(2) << model.base_s << " + " << model.per_distinct_layer_s << " x distinct + "
         << model.per_layer_s << " x layers";
    if (model.per_distinct_gemm_s > 0)
      text << " + " << model.per_distinct_gemm_s << " x distinct convolutions and fully-connected layers";
    text << "\n";
  }
  const CompileCacheState& cache = plan.compile_cache;
  text << "  compile cache (engine.compile_cache): ";
  if (cache.directory == "none") text << "none: every compile cold\n";
  else
    text << cache.directory << ": Inductor/Triton " << cache.inductor_entries << " files, JAX " << cache.jax_entries
         << " files; a framework with files there is estimated warm (x" << std::setprecision(2)
         << kWarmCompileFraction << " of its cold compile, at least " << kWarmCompileFloorSeconds
         << " s); in an empty one, a pytorch-compile cell after the first batch of its series compiles at x"
         << kSeriesCompileFraction << " of cold (another batch cached)\n";
  if (plan.algorithm_cache.file != "none") {
    text << "  algorithm cache (engine.algo_cache): " << plan.algorithm_cache.file << ": ";
    std::int64_t total = 0;
    for (const auto& [device, batches] : plan.algorithm_cache.records)
      for (const auto& [batch, count] : batches) total += count;
    text << total << " records; a native engine's exhaustive search of a cell whose device and batch it holds "
            "records for is estimated replayed (no search)\n";
  }
  if (plan.calibration_cubes.empty()) return text.str();
  std::string cubes;
  for (const auto& cube : plan.calibration_cubes) cubes += (cubes.empty() ? "" : ", ") + cube.string();
  text << "calibrated from " << cubes << " (recorded = the cell's wall seconds there, start to end; "
          "recorded preparation = that wall less the timed steps, of the same engine, network and phase at another batch "
          "or precision + the model's steps x the steps factor):\n";
  for (const auto& fit : plan.calibration) {
    text << "  " << fit.engine << " on " << fit.device_key << ": ";
    if (fit.matched_cells == 0) text << "no recorded cell matched";
    else
      text << fit.matched_cells << " recorded cell(s); steps factor " << std::fixed << std::setprecision(3)
           << (std::isfinite(fit.steps_factor) ? fit.steps_factor : 1.0) << "; the others: scaled model = model x "
           << fit.factor;
    if (fit.recorded_preparations > 0) text << "; " << fit.recorded_preparations << " from a recorded preparation";
    else if (fit.matched_cells == 0) text << "; the model as it is";
    text << "\n";
  }
  return text.str();
}

// Why a planned cell cannot run here: too few ranks for its data-parallel group,
// or the cost model's answer (an engine for another device kind, one not built).
std::string unsupported_reason(const PlannedCell& planned) {
  return planned.unrunnable_reason.empty() ? planned.model.unsupported : planned.unrunnable_reason;
}

// The estimate is the cell time limit because the model (or its scaled form)
// exceeded it: the cell will stop there, and may end `timeout`. A recorded
// estimate is what a run took, never cut.
bool capped(const PlannedCell& planned, double cell_time_limit_s) {
  if (planned.estimate_source == kEstimateModel) return planned.model.capped;
  return planned.estimate_source != kEstimateRecorded && planned.estimated_s >= cell_time_limit_s * (1 - 1e-9);
}

void print_plan(const Plan& plan, int ranks, double cell_time_limit_s) {
  std::cout << "crossbench plan: " << plan.cells.size() << " cells, " << ranks << " rank(s), " << plan.groups.size()
            << " device group(s)\n";
  for (const auto& group : plan.groups) {
    std::cout << "\ndevice " << group.key << ": ranks";
    for (const int rank : group.ranks) std::cout << " " << rank;
    std::cout << "\n";
    for (const int rank : group.ranks) {
      const auto cells = plan.cells_of(rank);
      std::cout << "  rank " << rank << ": " << cells.size() << " cells, estimated "
                << format_duration(plan.rank_load_s[static_cast<std::size_t>(rank)]) << "\n";
      for (const auto& planned : cells) {
        std::cout << "    " << std::left << std::setw(52) << describe(planned.cell) << std::right;
        // A cell that cannot run costs nothing worth printing: say why instead of "0.00 s".
        if (const std::string why = unsupported_reason(planned); !why.empty()) {
          std::cout << std::setw(12) << "-" << "  unsupported: " << why << "\n";
          continue;
        }
        std::cout << std::fixed << std::setprecision(2) << std::setw(10) << planned.estimated_s << " s  "
                  << planned.estimate_source;
        if (capped(planned, cell_time_limit_s)) std::cout << " (capped at the cell time limit)";
        if (planned.taken_first) std::cout << " (--first)";
        std::cout << "  [model: preparation " << std::setprecision(1) << planned.model.preparation_s;
        if (!planned.model.search_kind.empty()) std::cout << " + " << planned.model.search_kind << " " << planned.model.search_s;
        std::cout << " + steps " << planned.model.steps_s << " + end " << planned.model.finish_s << " s]";
        if (planned.data_parallel()) std::cout << "  data parallel with ranks " << rank_list(planned.group_ranks);
        std::cout << "\n";
      }
    }
  }
  // Which ranks train which multi-device cell together (they run first, in this order).
  bool header = false;
  for (const auto& planned : plan.cells) {
    if (!planned.data_parallel()) continue;
    if (!header) std::cout << "\ndata-parallel cells (run first, in this order; disjoint groups at the same time):\n";
    header = true;
    std::cout << "  " << std::left << std::setw(52) << describe(planned.cell) << std::right << " ranks "
              << rank_list(planned.group_ranks) << "\n";
  }
  std::size_t unsupported = 0, capped_cells = 0;
  for (const auto& planned : plan.cells) {
    if (!unsupported_reason(planned).empty()) ++unsupported;
    else if (capped(planned, cell_time_limit_s)) ++capped_cells;
  }
  std::cout << "\n" << plan.cells.size() - unsupported << " cells can run here, " << unsupported
            << " are unsupported (recorded at once, with the reason)";
  if (capped_cells > 0)
    std::cout << "; " << capped_cells << " estimate(s) capped at the cell time limit of " << std::fixed
              << std::setprecision(0) << cell_time_limit_s << " s (measure.cell_time_limit_s)";
  std::cout << "\n\n" << estimate_legend(plan);
  const double ideal = ranks > 0 ? plan.total_s / ranks : 0;
  std::cout << std::fixed << std::setprecision(1) << "\ntotal estimated " << plan.total_s << " s; predicted makespan "
            << plan.makespan_s << " s (" << format_duration(plan.makespan_s) << "); ideal " << ideal << " s; makespan/ideal "
            << std::setprecision(3) << (ideal > 0 ? plan.makespan_s / ideal : 1.0) << "\n";
}

// The plan as one JSON document (plan --json): what a script or a Slurm
// wrapper needs to size a job.
nlohmann::json plan_json(const Plan& plan, int ranks, double cell_time_limit_s) {
  nlohmann::json groups = nlohmann::json::array(), cells = nlohmann::json::array();
  for (const auto& group : plan.groups) groups.push_back({{"device_key", group.key}, {"ranks", group.ranks}, {"device", to_json(group.device)}});
  for (const auto& planned : plan.cells)
    cells.push_back({{"name", describe(planned.cell)},
                     {"device_key", planned.device_key},
                     {"engine", planned.cell.engine},
                     {"network", planned.cell.network},
                     {"precision", to_string(planned.cell.precision)},
                     {"batch", planned.cell.batch},
                     {"phase", to_string(planned.cell.phase)},
                     {"gpus", planned.cell.gpus},
                     {"replica", planned.cell.replica},
                     {"rank", planned.rank},
                     {"group_ranks", planned.group_ranks},
                     {"estimated_s", planned.estimated_s},
                     {"estimate_source", planned.estimate_source},
                     {"first", planned.taken_first},  // --first named it: taken before the others
                     {"model", {{"preparation_s", planned.model.preparation_s},
                                {"search_s", planned.model.search_s},
                                {"steps_s", planned.model.steps_s},
                                {"finish_s", planned.model.finish_s},
                                {"cold_compile_s", planned.model.cold_compile_s}}},
                     {"search_kind", planned.model.search_kind},  // what model.search_s is; "" for none
                     {"unsupported", unsupported_reason(planned)},
                     {"capped", unsupported_reason(planned).empty() && capped(planned, cell_time_limit_s)}});
  nlohmann::json result{{"ranks", ranks},         {"groups", groups},        {"cells", cells},
                        {"total_s", plan.total_s}, {"makespan_s", plan.makespan_s}, {"rank_load_s", plan.rank_load_s}};
  result["compile_cache"] = {{"directory", plan.compile_cache.directory},
                             {"inductor_entries", plan.compile_cache.inductor_entries},
                             {"jax_entries", plan.compile_cache.jax_entries}};
  nlohmann::json algorithm_records = nlohmann::json::object();
  for (const auto& [device, batches] : plan.algorithm_cache.records)
    for (const auto& [batch, count] : batches) algorithm_records[device][std::to_string(batch)] = count;
  result["algorithm_cache"] = {{"file", plan.algorithm_cache.file}, {"records_by_batch", algorithm_records}};
  if (!plan.calibration_cubes.empty()) {
    nlohmann::json cubes = nlohmann::json::array(), fits = nlohmann::json::array();
    for (const auto& cube : plan.calibration_cubes) cubes.push_back(cube.string());
    for (const auto& fit : plan.calibration)
      fits.push_back({{"device_key", fit.device_key},
                      {"engine", fit.engine},
                      {"matched_cells", fit.matched_cells},
                      {"factor", fit.matched_cells > 0 ? nlohmann::json(fit.factor) : nlohmann::json()},
                      {"steps_factor", std::isfinite(fit.steps_factor) ? nlohmann::json(fit.steps_factor) : nlohmann::json()},
                      {"recorded_preparations", fit.recorded_preparations}});
    result["calibration"] = {{"cubes", cubes}, {"fits", fits}};
  }
  return result;
}

void print_plan_as_asked(const PlanOptions& options, const Plan& plan, int ranks) {
  const double limit_s = options.measure.cell_time_limit_s;
  if (options.json) std::cout << plan_json(plan, ranks, limit_s).dump(1) << "\n";
  else print_plan(plan, ranks, limit_s);
}

// --device-json FILE: one device (an object), or what `crossbench list devices --json`
// writes (an array: the GPUs it saw, then the CPU). From an array the ranks bind
// what `run` would bind on that machine: its GPUs, or the CPU where it has none.
// A what-if device the cost model can plan for: with no threads or no peak,
// every cell's estimate would be infinite or zero.
void check_what_if_device(const Device& device, const std::string& path) {
  if (device.compute_units < 1)
    throw UsageError("--device-json '" + path + "': compute_units is " + std::to_string(device.compute_units) +
                     "; a device has at least 1 (SMs of a GPU, threads of a CPU)");
  if (!std::isfinite(device.peak_fp32_tflops) || device.peak_fp32_tflops <= 0)
    throw UsageError("--device-json '" + path + "': peak_fp32_tflops must be a number above 0 [TFLOP/s]");
  if (device.memory_bytes <= 0) throw UsageError("--device-json '" + path + "': memory_bytes must be above 0");
}

std::vector<Device> read_device_json(const std::string& path) {
  std::ifstream file(path);
  if (!file) throw UsageError("--device-json: cannot read '" + path + "'");
  std::vector<Device> gpus, cpus;
  try {
    const nlohmann::json document = nlohmann::json::parse(file);
    if (!document.is_array()) return {device_from_json(document)};
    for (const auto& entry : document) {
      const Device device = device_from_json(entry);
      (device.kind == DeviceKind::gpu ? gpus : cpus).push_back(device);
    }
  } catch (const std::exception& error) {
    throw UsageError("--device-json '" + path + "': " + error.what() +
                     " (expected a device object, or the array of crossbench list devices --json)");
  }
  if (gpus.empty() && cpus.empty()) throw UsageError("--device-json '" + path + "': the array holds no device");
  return gpus.empty() ? std::vector<Device>{cpus.front()} : gpus;
}

}  // namespace

int plan_command(const CommandContext& context) {
  // --ranks N plans for N ranks like this process, without MPI; --device-json FILE
  // makes them N ranks of another device (a what-if for a cluster you are not on).
  const std::optional<PlanOptions> parsed = command_options_or_help<PlanOptions>(context);
  if (!parsed) return 0;  // --help
  const PlanOptions& options = *parsed;
  // Read before MPI starts: a missing or unreadable cube is bad input (exit 2) on every rank alike.
  std::optional<RecordedWallTimes> recorded;
  if (!options.calibrate.empty()) recorded = read_recorded_wall_times(options.calibrate);
  const RecordedWallTimes* calibration = recorded ? &*recorded : nullptr;
  const int simulated_ranks = options.simulated_ranks;
  const std::string& device_json = options.device_json;
  if (simulated_ranks > 0) {
    const int gpus = visible_gpu_count();
    std::vector<Device> candidates{gpus > 0 ? probe_gpu(0, options.device_tag)
                                            : probe_cpu(cpu_threads_of_binding(), options.device_tag)};
    if (!device_json.empty()) candidates = read_device_json(device_json);
    for (const Device& device : candidates) check_what_if_device(device, device_json);
    // The ranks take the candidates in turn (a what-if node of several GPUs).
    std::vector<Device> devices;
    for (int rank = 0; rank < simulated_ranks; ++rank) devices.push_back(candidates[static_cast<std::size_t>(rank) % candidates.size()]);
    print_plan_as_asked(options, make_plan(options, devices, {}, calibration), simulated_ranks);
    return 0;
  }
  MpiSession mpi;
  const Device mine = bind_device(mpi, options.device_tag);
  const Plan plan = make_plan(options, gather_devices(mpi, mine), {}, calibration);
  if (mpi.rank() == 0) print_plan_as_asked(options, plan, mpi.size());
  return 0;
}

}  // namespace crossbench
