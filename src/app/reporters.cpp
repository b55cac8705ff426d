#include "app/reporters.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "crossbench/build_info.hpp"
#include "crossbench/error.hpp"
#include "crossbench/options_schema.hpp"
#include "cluster/cube_assembly.hpp"

namespace crossbench {

ConsoleReporter::ConsoleReporter(const RunOptions& options, const Plan& plan, const std::vector<Device>& rank_devices,
                                 int ranks, std::size_t earlier_cells)
    : options_(options),
      legend_(rank_devices),
      progress_(std::cerr, legend_, plan.cells.size(), plan.total_s, options.quiet, options.measure.target_ci) {
  // Context (what runs, progress) on stderr; the legend and the table, the results, on stdout.
  if (!options.quiet) {
    std::cerr << "crossbench: " << plan.cells.size() << " cells to run on " << ranks << " rank(s), "
              << plan.groups.size() << " device group(s); predicted makespan " << format_duration(plan.makespan_s);
    if (options.resume) std::cerr << "; resuming: " << earlier_cells << " cells already in the journal";
    std::cerr << "\n";
  }
  legend_.print(std::cout);
}

void ConsoleReporter::report_cell(const CellResult& result, double estimated_s) { progress_.finished(result, estimated_s); }

void ConsoleReporter::finish(const std::vector<CellResult>& results, const RunEnd& end) {
  // The table in matrix order, whatever order the cells finished in.
  std::vector<CellResult> ordered = results;
  const auto position = [](const auto& list, const auto& value) {
    return std::find(list.begin(), list.end(), value) - list.begin();
  };
  const MatrixOptions& matrix = options_.matrix;
  std::stable_sort(ordered.begin(), ordered.end(), [&](const CellResult& a, const CellResult& b) {
    const auto rank_of = [&](const CellResult& r) {
      return std::make_tuple(r.device_key, r.cell.engine, position(matrix.networks, r.cell.network),
                             position(matrix.precisions, r.cell.precision), r.cell.batch,
                             position(matrix.phases, r.cell.phase), r.cell.gpus, r.cell.replica);
    };
    return rank_of(a) < rank_of(b);
  });
  add_scaling_efficiency(ordered);
  std::cout << "\n";
  print_table(std::cout, legend_, ordered, options_.measure.target_ci);
  if (options_.measure.layer_times)
    print_layer_times(std::cout, ordered, options_.measure.layer_time_repetitions, options_.layer_times_shown);
  std::cout << std::flush;

  // The closing context, after the table, as one write on one stream (stderr):
  // under mpirun the ranks' streams are forwarded in pieces, and a line written
  // piece by piece came out split by the table.
  std::map<Status, int> counts;
  for (const auto& result : results) ++counts[result.status];
  std::ostringstream epilogue;
  epilogue << "\ncrossbench: wrote " << options_.output.string() << " (" << results.size() << " cells:";
  for (const auto& [status, count] : counts) epilogue << " " << count << " " << to_string(status);
  epilogue << ")\n";
  if (!end.complete)
    epilogue << "crossbench: incomplete: " << end.cells_not_run
             << " cells not run; continue with the same command and --resume\n";
  const std::string report_dir = (options_.output.parent_path() / (options_.output.stem().string() + "-report")).string();
  epilogue << "next: " << report_command() << " report " << options_.output.string() << " -o "
           << (report_dir.empty() ? "report" : report_dir) << "\n";
  const std::string text = epilogue.str();
  std::cerr.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::cerr.flush();
}

JsonlReporter::JsonlReporter(const RunOptions& options, const std::vector<Device>& rank_devices)
    : options_(options), rank_devices_(rank_devices) {
  errno = 0;
  out_.open(options.jsonl, std::ios::app);
  if (!out_) {
    // A missing directory or no permission is the user's to fix (exit 2); a full or read-only disk is not.
    const int code = errno;
    const std::string message = "--jsonl '" + options.jsonl.string() + "': cannot open it for appending" +
                                (code != 0 ? std::string(": ") + std::strerror(code) : std::string());
    if (is_storage_failure(code)) throw Error(message);
    throw UsageError(message);
  }
}

void JsonlReporter::report_cell(const CellResult& result, double /*estimated_s*/) {
  nlohmann::json record = to_json(result);
  nlohmann::json settings = nlohmann::json::object();
  for (const RecordedSetting& setting : recorded_settings(options_.settings)) settings[setting.key] = setting.value;
  record["provenance"] = {{"crossbench_version", build_info::version},
                          {"git_revision", build_info::git_revision},
                          {"job", options_.job_name},
                          {"output", options_.output.string()},
                          {"settings", settings}};
  if (result.rank >= 0 && static_cast<std::size_t>(result.rank) < rank_devices_.size())
    record["provenance"]["device"] = to_json(rank_devices_[static_cast<std::size_t>(result.rank)]);
  out_ << record.dump() << "\n" << std::flush;
  if (!out_) throw Error("--jsonl '" + options_.jsonl.string() + "': writing failed: " + std::strerror(errno));
}

}  // namespace crossbench
