// `crossbench plan`: the cells to run, per rank, with their estimated cost.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/console.hpp"
#include "crossbench/error.hpp"
#include "dist/binding.hpp"
#include "dist/mpi_session.hpp"
#include "dist/plan.hpp"

namespace crossbench {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (const int rank : ranks) text += (text.empty() ? "" : ",") + std::to_string(rank);
  return text;
}

void print_plan(const Plan& plan, int ranks) {
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
        std::cout << "    " << std::left << std::setw(52) << describe(planned.cell) << std::right << std::fixed
                  << std::setprecision(2) << std::setw(10) << planned.estimated_s << " s";
        if (planned.data_parallel()) std::cout << "  data parallel with ranks " << rank_list(planned.group_ranks);
        if (!planned.unrunnable_reason.empty()) std::cout << "  unsupported: " << planned.unrunnable_reason;
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
  const double ideal = ranks > 0 ? plan.total_s / ranks : 0;
  std::cout << std::fixed << std::setprecision(1) << "\ntotal estimated " << plan.total_s << " s; predicted makespan "
            << plan.makespan_s << " s (" << format_duration(plan.makespan_s) << "); ideal " << ideal << " s; makespan/ideal "
            << std::setprecision(3) << (ideal > 0 ? plan.makespan_s / ideal : 1.0) << "\n";
}

}  // namespace

int plan_command(const CommandContext& context) {
  // --ranks N plans for N ranks like this process, without MPI; --device-json FILE
  // makes them N ranks of another device (a what-if for a cluster you are not on).
  std::vector<std::string> arguments;
  int simulated_ranks = 0;
  std::string device_json;
  for (std::size_t i = 0; i < context.arguments.size(); ++i) {
    const std::string& argument = context.arguments[i];
    if (argument == "--device-json") {
      if (i + 1 >= context.arguments.size()) throw UsageError("--device-json needs a file (crossbench list devices --json)");
      device_json = context.arguments[++i];
    } else if (argument == "--ranks" || argument.rfind("--ranks=", 0) == 0) {
      const std::string value = argument == "--ranks" ? (i + 1 < context.arguments.size() ? context.arguments[++i] : "")
                                                       : argument.substr(8);
      try {
        std::size_t used = 0;
        simulated_ranks = std::stoi(value, &used);
        if (used != value.size()) simulated_ranks = 0;
      } catch (const std::exception&) {
        simulated_ranks = 0;
      }
      if (simulated_ranks < 1 || simulated_ranks > 1 << 20)
        throw UsageError("--ranks '" + value + "': expected a number of ranks from 1 to 1048576");
    } else {
      arguments.push_back(argument);
    }
  }
  const Options options = parse_run_options(arguments, context.default_job, context.command_line);
  if (!device_json.empty() && simulated_ranks == 0) throw UsageError("--device-json needs --ranks N");
  if (simulated_ranks > 0) {
    const int gpus = visible_gpu_count();
    Device device = gpus > 0 ? probe_gpu(0, options.device_tag) : probe_cpu(cpu_threads_of_binding(), options.device_tag);
    if (!device_json.empty()) {
      std::ifstream file(device_json);
      if (!file) throw UsageError("--device-json: cannot read '" + device_json + "'");
      try {
        device = device_from_json(nlohmann::json::parse(file));
      } catch (const std::exception& error) {
        throw UsageError("--device-json '" + device_json + "': " + error.what());
      }
    }
    print_plan(make_plan(options, std::vector<Device>(static_cast<std::size_t>(simulated_ranks), device)), simulated_ranks);
    return 0;
  }
  MpiSession mpi;
  const Device mine = bind_device(mpi, options.device_tag);
  const Plan plan = make_plan(options, gather_devices(mpi, mine));
  if (mpi.rank() == 0) print_plan(plan, mpi.size());
  return 0;
}

}  // namespace crossbench
