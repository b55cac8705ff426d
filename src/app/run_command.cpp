// `crossbench run`: every rank binds its device, runs its share of the plan
// and streams each result to rank 0, which writes the cube.
#include <chrono>
#include <ctime>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/console.hpp"
#include "crossbench/build_info.hpp"
#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "crossbench/options.hpp"
#include "crossbench/runner.hpp"
#include "dist/binding.hpp"
#include "dist/cube_assembly.hpp"
#include "dist/mpi_session.hpp"
#include "dist/plan.hpp"
#include "dist/result_channel.hpp"

namespace crossbench {
namespace {

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::vector<Device> gather_devices(const MpiSession& mpi, const Device& mine) {
  std::vector<Device> devices;
  for (const auto& text : mpi.allgather(to_json(mine).dump())) devices.push_back(device_from_json(nlohmann::json::parse(text)));
  return devices;
}

// The facts of this run that the cube records, so that every decision can be read back.
std::map<std::string, std::string> run_attributes(const Options& options, const MpiSession& mpi, const Plan& plan) {
  std::map<std::string, std::string> attributes{
      {"created", utc_now()},
      {"command_line", options.command_line},
      {"job_file", options.job_text},
      {"job_path", options.job_file.string()},
      {"crossbench_version", build_info::version},
      {"git_revision", build_info::git_revision},
      {"mpi_version", mpi.library_version()},
      {"mpi_ranks", std::to_string(mpi.size())},
      {"device_groups", std::to_string(plan.groups.size())},
      {"measure_warmup_steps", std::to_string(options.measure.warmup_steps)},
      {"measure_min_steps", std::to_string(options.measure.min_steps)},
      {"measure_max_steps", std::to_string(options.measure.max_steps)},
      {"measure_target_ci", std::to_string(options.measure.target_ci)},
      {"measure_cell_time_limit_s", std::to_string(options.measure.cell_time_limit_s)},
      {"seed", std::to_string(options.engine.seed)},
      {"update", options.engine.update == Update::sgd ? "sgd" : "none"},
      {"learning_rate", std::to_string(options.engine.learning_rate)},
      {"replicas", std::to_string(options.replicas)},
      {"statistics", "median of per-step times; 95% CI of the median from order statistics; "
                     "percentiles by linear interpolation"},
  };
  for (const auto& [name, version] : engine_library_versions()) attributes[name] = version;
  return attributes;
}

// Rank 0's bookkeeping of the results as they arrive.
class Collector {
 public:
  Collector(const Plan& plan, bool quiet)
      : expected_(plan.cells.size()), progress_(std::cout, plan.cells.size(), plan.total_s, quiet) {
    for (const auto& planned : plan.cells) estimates_[planned.device_key + "|" + describe(planned.cell)] = planned.estimated_s;
  }
  void add(CellResult result) {
    const auto estimate = estimates_.find(result.device_key + "|" + describe(result.cell));
    if (estimate == estimates_.end())
      throw Error("rank 0 received a result for a cell that is not in the plan: " + describe(result.cell) + " on " +
                  result.device_key + " from rank " + std::to_string(result.rank));
    progress_.finished(result, estimate->second);
    results_.push_back(std::move(result));
  }
  bool complete() const { return results_.size() >= expected_; }
  const std::vector<CellResult>& results() const { return results_; }

 private:
  std::size_t expected_;
  Progress progress_;
  std::map<std::string, double> estimates_;
  std::vector<CellResult> results_;
};

int run_on_ranks(const Options& options, const MpiSession& mpi) {
  const Device device = bind_device(mpi, options.device_tag);
  const std::vector<Device> devices = gather_devices(mpi, device);
  const Plan plan = make_plan(options, devices);

  EngineConfig engine_config = options.engine;
  engine_config.threads = device.kind == DeviceKind::cpu ? device.compute_units : 1;
  std::map<std::string, std::unique_ptr<Engine>> engines;
  std::map<std::string, Network> networks;
  ResultChannel channel(mpi);
  std::unique_ptr<Collector> collector;
  if (mpi.rank() == 0) {
    collector = std::make_unique<Collector>(plan, options.quiet);
    if (!options.quiet)
      std::cout << "crossbench: " << plan.cells.size() << " cells on " << mpi.size() << " rank(s), "
                << plan.groups.size() << " device group(s); predicted makespan "
                << format_duration(plan.makespan_s) << "\n";
  }

  for (const auto& planned : plan.cells_of(mpi.rank())) {
    const std::string& engine_name = planned.cell.engine;
    if (!engines.count(engine_name)) engines[engine_name] = make_engine(engine_name, device, engine_config);
    if (!networks.count(planned.cell.network)) networks.emplace(planned.cell.network, make_network(planned.cell.network));
    CellResult result = run_cell(engines[engine_name].get(), engine_name, networks.at(planned.cell.network),
                                 planned.cell, device, options.measure, mpi.rank());
    if (mpi.rank() == 0) {
      collector->add(std::move(result));
      for (auto& arrived : channel.poll()) collector->add(std::move(arrived));
    } else {
      channel.send_to_root(result);
    }
  }

  if (mpi.rank() != 0) {
    channel.complete_sends();
    return 0;
  }
  while (!collector->complete()) collector->add(channel.receive());
  const CubeContents cube = assemble_cube(options, plan, devices, collector->results(), run_attributes(options, mpi, plan));
  if (options.output.has_parent_path()) std::filesystem::create_directories(options.output.parent_path());
  write_cube(options.output, cube);

  std::map<Status, int> counts;
  for (const auto& result : collector->results()) ++counts[result.status];
  std::cout << "\n";
  print_table(std::cout, collector->results());
  std::cout << "\ncrossbench: wrote " << options.output.string() << " (" << collector->results().size() << " cells:";
  for (const auto& [status, count] : counts) std::cout << " " << count << " " << to_string(status);
  std::cout << ")\n" << std::flush;
  return 0;
}

}  // namespace

int run_command(const CommandContext& context) {
  // Parsed before MPI starts: bad input never reaches the device or the output.
  const Options options = parse_run_options(context.arguments, context.default_job, context.command_line);
  MpiSession mpi;
  try {
    return run_on_ranks(options, mpi);
  } catch (const UsageError&) {
    throw;  // every rank sees the same bad input and stops the same way
  } catch (const std::exception& error) {
    // One rank failing outside a cell would leave the others waiting for it.
    if (mpi.size() > 1) mpi.abort(error.what());
    throw;
  }
}

}  // namespace crossbench
