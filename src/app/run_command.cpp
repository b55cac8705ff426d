// `crossbench run`: every rank binds its device, runs its share of the plan
// and streams each result to rank 0, which journals it and writes the cube.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <tuple>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/console.hpp"
#include "crossbench/build_info.hpp"
#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "crossbench/options.hpp"
#include "crossbench/options_schema.hpp"
#include "crossbench/runner.hpp"
#include "cluster/binding.hpp"
#include "cluster/collector.hpp"
#include "cluster/cube_assembly.hpp"
#include "cluster/data_parallel.hpp"
#include "cluster/journal.hpp"
#include "cluster/mpi_session.hpp"
#include "cluster/output_lock.hpp"
#include "cluster/plan.hpp"
#include "cluster/resume.hpp"
#include "cluster/result_channel.hpp"
#include "cluster/stop_request.hpp"

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

// The facts of this run that the cube records, so that every decision can be read back.
std::map<std::string, std::string> run_attributes(const Options& options, const MpiSession& mpi, const Plan& plan) {
  std::map<std::string, std::string> attributes{
      {"created", utc_now()},
      {"command_line", options.command_line},
      {"job_file", options.job_text},
      {"crossbench_version", build_info::version},
      {"git_revision", build_info::git_revision},
      {"mpi_version", mpi.library_version()},
      {"mpi_ranks", std::to_string(mpi.size())},
      {"device_groups", std::to_string(plan.groups.size())},
      {"statistics", "median of per-step times; 95% CI of the median from order statistics; "
                     "percentiles by linear interpolation"},
  };
  for (const auto& [name, version] : engine_library_versions()) attributes[name] = version;
  // Every recorded setting, under the name the options schema gives it.
  for (const RecordedSetting& setting : recorded_settings(options.settings)) attributes[setting.recorded_as] = setting.value;
  return attributes;
}

// run --jsonl: one line per finished cell, the journal's record plus the
// provenance a script needs without the cube (device of the rank, build, settings).
void write_jsonl_record(std::ofstream& out, const Options& options, const CellResult& result,
                        const std::vector<Device>& devices) {
  nlohmann::json record = to_json(result);
  nlohmann::json settings = nlohmann::json::object();
  for (const RecordedSetting& setting : recorded_settings(options.settings)) settings[setting.key] = setting.value;
  record["provenance"] = {{"crossbench_version", build_info::version},
                          {"git_revision", build_info::git_revision},
                          {"job", options.job_name},
                          {"output", options.output.string()},
                          {"settings", settings}};
  if (result.rank >= 0 && static_cast<std::size_t>(result.rank) < devices.size())
    record["provenance"]["device"] = to_json(devices[static_cast<std::size_t>(result.rank)]);
  out << record.dump() << "\n" << std::flush;
  if (!out) throw Error("--jsonl '" + options.jsonl.string() + "': writing failed");
}

// While a cell runs, a line on stderr every `period_s` (the progress stream):
// a cell can take minutes (a search, a compile, a slow device), and a run that
// prints nothing for that long looks hung. Every rank prints its own cell's.
class Heartbeat {
 public:
  Heartbeat(double period_s, int rank, std::string cell) {
    if (period_s <= 0) return;
    thread_ = std::thread([this, period_s, rank, cell = std::move(cell)] {
      const auto start = std::chrono::steady_clock::now();
      std::unique_lock<std::mutex> lock(mutex_);
      while (!done_.wait_for(lock, std::chrono::duration<double>(period_s), [this] { return finished_; })) {
        const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // One write per line: under mpirun several ranks share the terminal.
        const std::string line = "crossbench: rank " + std::to_string(rank) + " still running " + cell + " (" +
                                 format_duration(elapsed_s) + ")\n";
        std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
        std::cerr.flush();
      }
    });
  }
  ~Heartbeat() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    done_.notify_all();
    thread_.join();
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;
};

// Rank 0 takes the output's lock and, holding it, checks again that the
// output is free (another run may have finished meanwhile); every rank learns
// the verdict, so that all of them stop with the same UsageError.
std::unique_ptr<OutputLock> lock_output(const Options& options, const MpiSession& mpi) {
  std::unique_ptr<OutputLock> lock;
  std::string refusal;
  if (mpi.rank() == 0) {
    try {
      if (options.output.empty() || options.output.filename().empty())
        throw UsageError("the output path '" + options.output.string() + "' names no file; give --output FILE.h5 "
                         "or [output] path in the job file");
      if (!options.output_from_command_line && options.output.has_parent_path())
        std::filesystem::create_directories(options.output.parent_path());
      const auto directory = options.output.has_parent_path() ? options.output.parent_path() : std::filesystem::path(".");
      std::error_code ignored;
      if (std::filesystem::is_directory(directory, ignored)) lock = std::make_unique<OutputLock>(options.output);
      check_output_is_free(options);  // names a missing directory, an earlier run's files
      const auto journal = journal_path(options.output);
      if (options.resume && (std::filesystem::is_symlink(journal, ignored) ||
                             !std::filesystem::is_regular_file(journal, ignored)))
        throw UsageError("--resume refused: journal '" + journal.string() + "' is not a regular file (a symbolic "
                         "link, a FIFO or a device); crossbench writes its journal only as a regular file");
    } catch (const UsageError& error) {
      refusal = error.what();
    } catch (const std::exception& error) {
      refusal = std::string("cannot lock output '") + options.output.string() + "': " + error.what();
    }
  }
  const std::string agreed = mpi.broadcast_from_root(refusal);
  if (!agreed.empty()) throw UsageError(agreed);
  return lock;
}

int run_on_ranks(const Options& options, const MpiSession& mpi, const StopRequest& stop) {
  StopBroadcast stop_broadcast(mpi);  // a stop on any rank reaches every rank
  stop_flag::set_grace_seconds(options.stop_grace_s);
  const Device device = bind_device(mpi, options.device_tag);
  const std::vector<Device> devices = gather_devices(mpi, device);
  ResumeState resume = agree_on_resume(options, mpi, devices);
  const Plan plan = make_plan(options, devices, resume.done);

  EngineConfig engine_config = options.engine;
  engine_config.threads = device.kind == DeviceKind::cpu ? device.compute_units : 1;
  std::map<std::string, std::unique_ptr<Engine>> engines;
  std::map<std::string, Network> networks;
  ResultChannel channel(mpi);

  std::unique_ptr<Progress> progress;
  std::unique_ptr<Collector> collector;
  DeviceLegend legend(devices);
  std::ofstream jsonl;
  // Rank 0's console: context (what runs, progress) on stderr; the legend and
  // the table, the results, on stdout, also with --quiet.
  if (mpi.rank() == 0) {
    if (!options.quiet) {
      std::cerr << "crossbench: " << plan.cells.size() << " cells to run on " << mpi.size() << " rank(s), "
                << plan.groups.size() << " device group(s); predicted makespan " << format_duration(plan.makespan_s);
      if (options.resume) std::cerr << "; resuming: " << resume.earlier.size() << " cells already in the journal";
      std::cerr << "\n";
    }
    legend.print(std::cout);
    if (!options.jsonl.empty()) {
      jsonl.open(options.jsonl, std::ios::app);
      if (!jsonl) throw UsageError("--jsonl '" + options.jsonl.string() + "': cannot open it for appending");
    }
    progress = std::make_unique<Progress>(std::cerr, legend, plan.cells.size(), plan.total_s, options.quiet);
    const auto journal = journal_path(options.output);
    if (options.output.has_parent_path()) std::filesystem::create_directories(options.output.parent_path());
    if (options.overwrite && ::unlink(journal.c_str()) != 0 && errno != ENOENT)
      throw Error("--overwrite: removing the old journal '" + journal.string() + "' failed: " + std::strerror(errno));
    JournalWriter writer = options.resume ? JournalWriter::append_to(journal)
                                          : JournalWriter::create(journal, JournalHeader::for_run(options, device_keys_of(devices)));
    if (!resume.new_devices.empty()) writer.append_devices(resume.new_devices);
    collector = std::make_unique<Collector>(options, plan, devices, run_attributes(options, mpi, plan),
                                            std::move(resume.earlier), std::move(writer),
                                            [&](const CellResult& result, double estimated_s) {
                                              progress->finished(result, estimated_s);
                                              if (jsonl.is_open()) write_jsonl_record(jsonl, options, result, devices);
                                            });
  }

  // Every rank: its cells, stopping between cells when a signal asks.
  int results_sent = 0;
  bool interrupted = false;
  int ranks_finished = 1;  // rank 0: itself, once its own cells are done, plus each `finished` message
  const auto handle = [&](ChannelMessage message) {
    if (message.kind == ChannelMessage::Kind::result) {
      collector->add(std::move(message.result));
    } else {
      ++ranks_finished;
      interrupted = interrupted || message.interrupted;
      if (message.stop_signal != 0) stop_flag::raise(message.stop_signal, 1);  // the signal recorded is the one received
    }
  };
  for (const auto& planned : plan.cells_of(mpi.rank())) {
    stop_broadcast.poll();
    // The ranks of a data-parallel cell decide together (run_data_parallel_cell).
    if (stop.requested() && !planned.data_parallel()) {
      interrupted = true;
      break;
    }
    const std::string& engine_name = planned.cell.engine;
    if (!engines.count(engine_name)) engines[engine_name] = make_engine(engine_name, device, engine_config);
    if (!networks.count(planned.cell.network)) networks.emplace(planned.cell.network, make_network(planned.cell.network));
    CellResult result;
    {
      const Heartbeat heartbeat(options.quiet ? 0.0 : options.heartbeat_s, mpi.rank(), describe(planned.cell));
      if (!planned.unrunnable_reason.empty()) {
        result.device_key = device.key();
        result.cell = planned.cell;
        result.rank = mpi.rank();
        result.status = Status::unsupported;
        result.message = planned.unrunnable_reason;
      } else if (planned.data_parallel()) {
        result = run_data_parallel_cell(engines[engine_name].get(), networks.at(planned.cell.network), planned, device,
                                        options.measure, mpi);
      } else {
        result = run_cell(engines[engine_name].get(), engine_name, networks.at(planned.cell.network), planned.cell,
                          device, options.measure, mpi.rank());
      }
    }
    if (planned.unrunnable_reason.empty() && planned.data_parallel() && planned.rank != mpi.rank())
      continue;  // the group's first rank reports the cell
    if (mpi.rank() != 0) {
      channel.send_result(result);
      ++results_sent;
      continue;
    }
    collector->add(std::move(result));
    while (auto message = channel.poll()) handle(std::move(*message));
  }
  if (mpi.rank() != 0) {
    stop_broadcast.poll();
    channel.send_finished(results_sent, interrupted || stop.requested(), stop.signal_number());
    return interrupted || stop.requested() ? kExitIncomplete : 0;
  }
  interrupted = interrupted || stop.requested();

  // Rank 0: everything the other ranks send, until each says it has finished.
  while (ranks_finished < mpi.size()) {
    if (auto message = channel.poll()) {
      handle(std::move(*message));
    } else {
      stop_broadcast.poll();
      collector->checkpoint_if_due();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // between polls: rank 0 has no cells left
    }
  }
  const std::size_t missing = plan.cells.size() - collector->new_final_results();
  interrupted = interrupted || stop.requested() || missing > 0;
  const std::string stopped_by = stop.signal_number() != 0 ? "stopped by signal " + std::to_string(stop.signal_number())
                                                            : "stopped";
  collector->write_cube(interrupted ? "incomplete: " + stopped_by + " with " + std::to_string(missing) +
                                          " cells not run; resume with --resume"
                                    : "complete");

  std::map<Status, int> counts;
  for (const auto& result : collector->results()) ++counts[result.status];
  {
    // The table in matrix order, whatever order the cells finished in.
    std::vector<CellResult> ordered = collector->results();
    const auto position = [](const auto& list, const auto& value) {
      return std::find(list.begin(), list.end(), value) - list.begin();
    };
    std::stable_sort(ordered.begin(), ordered.end(), [&](const CellResult& a, const CellResult& b) {
      const auto rank_of = [&](const CellResult& r) {
        return std::make_tuple(r.device_key, r.cell.engine, position(options.matrix.networks, r.cell.network),
                               position(options.matrix.precisions, r.cell.precision), r.cell.batch,
                               position(options.matrix.phases, r.cell.phase), r.cell.gpus, r.cell.replica);
      };
      return rank_of(a) < rank_of(b);
    });
    add_scaling_efficiency(ordered);
    std::cout << "\n";
    print_table(std::cout, legend, ordered);
    if (options.measure.layer_times) print_layer_times(std::cout, ordered, options.measure.layer_time_repetitions, options.layer_times_shown);
  }
  std::cout << std::flush;
  // The closing context, after the table, as one write on one stream (stderr):
  // under mpirun the ranks' streams are forwarded in pieces, and a line written
  // piece by piece came out split by the table.
  std::ostringstream epilogue;
  epilogue << "\ncrossbench: wrote " << options.output.string() << " (" << collector->results().size() << " cells:";
  for (const auto& [status, count] : counts) epilogue << " " << count << " " << to_string(status);
  epilogue << ")\n";
  if (interrupted)
    epilogue << "crossbench: incomplete: " << missing << " cells not run; continue with the same command and --resume\n";
  const std::string report_dir = (options.output.parent_path() / (options.output.stem().string() + "-report")).string();
  epilogue << "next: " << report_command() << " report " << options.output.string() << " -o "
           << (report_dir.empty() ? "report" : report_dir) << "\n";
  const std::string text = epilogue.str();
  std::cerr.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::cerr.flush();
  return interrupted ? kExitIncomplete : 0;
}

}  // namespace

int run_command(const CommandContext& context) {
  // Parsed before MPI starts: bad input never reaches the device or the output.
  const Options options = parse_command_options("run", context.arguments, context.default_job, context.command_line);
  if (options.help) {
    std::cout << command_help("run");
    return 0;
  }
  StopRequest stop;
  MpiSession mpi;
  try {
    const auto lock = lock_output(options, mpi);  // rank 0 holds it until the run ends
    return run_on_ranks(options, mpi, stop);
  } catch (const UsageError&) {
    throw;  // every rank sees the same bad input and stops the same way
  } catch (const std::exception& error) {
    // One rank failing outside a cell would leave the others waiting for it.
    if (mpi.size() > 1) mpi.abort(error.what());
    throw;
  }
}

}  // namespace crossbench
