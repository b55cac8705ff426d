// `crossbench run`: every rank binds its device, runs its share of the plan
// and streams each result to rank 0, which journals it and writes the cube.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <iostream>
#include <memory>
#include <map>
#include <thread>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "app/reporters.hpp"
#include "core/device_health.hpp"
#include "crossbench/build_info.hpp"
#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "crossbench/options.hpp"
#include "crossbench/options_schema.hpp"
#include "crossbench/runner.hpp"
#include "cluster/binding.hpp"
#include "cluster/collector.hpp"
#include "cluster/data_parallel.hpp"
#include "cluster/journal.hpp"
#include "cluster/mpi_session.hpp"
#include "cluster/oom_boundary.hpp"
#include "cluster/output_lock.hpp"
#include "cluster/plan.hpp"
#include "cluster/reporter.hpp"
#include "cluster/resume.hpp"
#include "cluster/result_channel.hpp"
#include "cluster/run_segment.hpp"
#include "cluster/stop_request.hpp"
#include "core/utc_time.hpp"

namespace crossbench {
namespace {

// The facts of this run that the cube records, so that every decision can be read back.
std::map<std::string, std::string> run_attributes(const RunOptions& options, const MpiSession& mpi, const Plan& plan) {
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

// Rank 0 takes the output's lock and, holding it, checks again that the
// output is free (another run may have finished meanwhile); every rank learns
// the verdict, so that all of them stop the same way: a UsageError (exit 2)
// for what the user can fix, an Error (exit 1) when writing the lock file
// failed (a full or read-only disk: retry once it is fixed).
std::unique_ptr<OutputLock> lock_output(const RunOptions& options, const MpiSession& mpi) {
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
      refusal = std::string("U") + error.what();
    } catch (const std::filesystem::filesystem_error& error) {  // creating the output's directory
      refusal = std::string(is_storage_failure(error.code().value()) ? "E" : "U") + "cannot lock output '" +
                options.output.string() + "': " + error.what();
    } catch (const std::exception& error) {
      refusal = std::string("E") + "cannot lock output '" + options.output.string() + "': " + error.what();
    }
  }
  const std::string agreed = mpi.broadcast_from_root(refusal);  // first character: U usage, E error
  if (agreed.empty()) return lock;
  if (agreed[0] == 'U') throw UsageError(agreed.substr(1));
  throw Error(agreed.substr(1));
}

// Rank 0's reporters, in the order they receive each cell: the cube (the
// journal first), the console, then --jsonl.
// The cube's reporter journals this run's segment (`segment`, after the
// resumed journal's segments) before any cell.
std::vector<std::unique_ptr<Reporter>> make_reporters(const RunOptions& options, const MpiSession& mpi, const Plan& plan,
                                                      const std::vector<Device>& devices, ResumeState& resume,
                                                      RunSegment segment) {
  auto console = std::make_unique<ConsoleReporter>(options, plan, devices, mpi.size(), resume.earlier.size());
  std::unique_ptr<Reporter> jsonl;
  if (!options.jsonl.empty()) jsonl = std::make_unique<JsonlReporter>(options, devices);
  const auto journal = journal_path(options.output);
  if (options.output.has_parent_path()) std::filesystem::create_directories(options.output.parent_path());
  if (options.overwrite && ::unlink(journal.c_str()) != 0 && errno != ENOENT)
    throw Error("--overwrite: removing the old journal '" + journal.string() + "' failed: " + std::strerror(errno));
  JournalWriter writer = options.resume ? JournalWriter::append_to(journal)
                                        : JournalWriter::create(journal, JournalHeader::for_run(options, device_keys_of(devices)));
  if (!resume.new_devices.empty()) writer.append_devices(resume.new_devices);
  std::string build_change;
  for (const auto& change : resume.build_changes) build_change += (build_change.empty() ? "" : "; ") + change;
  if (!build_change.empty()) segment.attributes["allowed_build_change"] = build_change;
  std::string setting_change;
  for (const auto& change : resume.setting_changes) setting_change += (setting_change.empty() ? "" : "; ") + change;
  if (!setting_change.empty()) segment.attributes["allowed_setting_change"] = setting_change;
  std::vector<RunSegment> segments = resume.segments;
  segments.push_back(std::move(segment));
  std::vector<std::unique_ptr<Reporter>> reporters;
  reporters.push_back(std::make_unique<CubeReporter>(options, options.checkpoint_s, plan, std::move(segments), run_attributes(options, mpi, plan),
                                                     resume.earlier, std::move(writer)));
  reporters.push_back(std::move(console));
  if (jsonl) reporters.push_back(std::move(jsonl));
  return reporters;
}

// What reaches rank 0 from the other ranks: their results (to the collector)
// and each rank's `finished` message.
struct RankZeroInbox {
  Collector& collector;
  int ranks_finished = 1;  // rank 0 itself, once its own cells are done, plus each `finished` message
  bool interrupted = false;

  void take(ChannelMessage message) {
    if (message.kind == ChannelMessage::Kind::result) {
      collector.add(std::move(message.result));
      return;
    }
    ++ranks_finished;
    interrupted = interrupted || message.interrupted;
    if (message.stop_signal != 0) stop_flag::raise(message.stop_signal, 1);  // the signal recorded is the one received
  }
};

// This rank's cells of the plan, in order, each result to rank 0 (rank 0:
// to its collector, reading what other ranks sent between its cells).
// Returns whether a stop request ended them early, and how many results it sent.
struct RankCellsDone {
  bool interrupted = false;
  int results_sent = 0;
};
// `earlier`: the results a resumed journal keeps (rank 0's), from which the OOM boundary starts.
RankCellsDone run_rank_cells(const RunOptions& options, const MpiSession& mpi, const StopRequest& stop,
                             StopBroadcast& stop_broadcast, const Plan& plan, const Device& device,
                             ResultChannel& channel, RankZeroInbox* inbox, const std::vector<CellResult>& earlier) {
  EngineConfig engine_config = options.engine;
  engine_config.threads = device.kind == DeviceKind::cpu ? device.compute_units : 1;
  std::map<std::string, std::unique_ptr<Engine>> engines;
  std::map<std::string, Network> networks;
  RankCellsDone done;
  OomBoundary oom_boundary;  // measure.oom_boundary = stop
  for (const CellResult& result : earlier) oom_boundary.note(result);
  for (const auto& planned : plan.cells_of(mpi.rank())) {
    stop_broadcast.poll();
    // The ranks of a data-parallel cell decide together (run_data_parallel_cell).
    if (stop.requested() && !planned.data_parallel()) {
      done.interrupted = true;
      break;
    }
    const std::string& engine_name = planned.cell.engine;
    if (!engines.count(engine_name)) engines[engine_name] = make_engine(engine_name, device, engine_config);
    if (!networks.count(planned.cell.network)) networks.emplace(planned.cell.network, make_network(planned.cell.network));
    CellResult result;
    const auto oom_batch = options.measure.stop_at_oom_boundary && !planned.data_parallel()
                               ? oom_boundary.exceeded_by(device.key(), planned.cell)
                               : std::nullopt;
    if (oom_batch && planned.unrunnable_reason.empty()) {
      result = OomBoundary::past_boundary(device.key(), planned.cell, mpi.rank(), *oom_batch);
    } else {
      const Heartbeat heartbeat(options.quiet ? 0.0 : options.heartbeat_s, mpi.rank(), describe(planned.cell));
      if (!planned.unrunnable_reason.empty()) {
        result.device_key = device.key();
        result.cell = planned.cell;
        result.rank = mpi.rank();
        result.status = Status::unsupported;
        result.message = planned.unrunnable_reason;
      } else if (const std::string lost = device_health::lost(); !lost.empty() && !planned.data_parallel()) {
        // A sticky CUDA error poisoned this rank's context: nothing more runs on
        // it (DESIGN.md "Measurement"); not_run cells run again on --resume.
        result.device_key = device.key();
        result.cell = planned.cell;
        result.rank = mpi.rank();
        result.status = Status::not_run;
        result.message = "not run: this rank's GPU context was lost to a sticky CUDA error in an earlier cell (" + lost +
                         "); resume with --resume on a healthy device";
      } else if (planned.data_parallel()) {
        result = run_data_parallel_cell(engines[engine_name].get(), networks.at(planned.cell.network), planned, device,
                                        options.measure, mpi);
      } else {
        result = run_cell(engines[engine_name].get(), engine_name, networks.at(planned.cell.network), planned.cell,
                          device, options.measure, mpi.rank());
      }
    }
    oom_boundary.note(result);
    if (planned.unrunnable_reason.empty() && planned.data_parallel() && planned.rank != mpi.rank())
      continue;  // the group's first rank reports the cell
    if (inbox == nullptr) {
      channel.send_result(result);
      ++done.results_sent;
      continue;
    }
    inbox->collector.add(std::move(result));
    while (auto message = channel.poll()) inbox->take(std::move(*message));
  }
  return done;
}

int run_on_ranks(const RunOptions& options, const MpiSession& mpi, const StopRequest& stop) {
  StopBroadcast stop_broadcast(mpi);  // a stop on any rank reaches every rank
  stop_flag::set_grace_seconds(options.stop_grace_s);
  const Device device = bind_device(mpi, options.device_tag, options.bind_near_gpu);
  const std::vector<Device> devices = gather_devices(mpi, device);
  RunSegment segment = start_segment(options.command_line, options.resume, mpi, devices);  // rank 0's cube reporter journals it
  ResumeState resume = agree_on_resume(options, mpi, devices, segment);
  const Plan plan = make_plan(options, devices, resume.done);
  ResultChannel channel(mpi);

  if (mpi.rank() != 0) {
    const RankCellsDone done = run_rank_cells(options, mpi, stop, stop_broadcast, plan, device, channel, nullptr, {});
    stop_broadcast.poll();
    const bool interrupted = done.interrupted || stop.requested();
    channel.send_finished(done.results_sent, interrupted, stop.signal_number());
    return interrupted ? kExitIncomplete : 0;
  }

  // Rank 0: its own cells, then everything the other ranks send until each says it has finished.
  const auto this_segment = static_cast<std::int32_t>(resume.segments.size());  // after the journal's segments
  Collector collector(plan, resume.earlier, make_reporters(options, mpi, plan, devices, resume, std::move(segment)),
                      this_segment);
  RankZeroInbox inbox{collector};
  const bool stopped_early =
      run_rank_cells(options, mpi, stop, stop_broadcast, plan, device, channel, &inbox, resume.earlier).interrupted;
  inbox.interrupted = inbox.interrupted || stopped_early;
  while (inbox.ranks_finished < mpi.size()) {
    if (auto message = channel.poll()) {
      inbox.take(std::move(*message));
    } else {
      stop_broadcast.poll();
      collector.idle();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // between polls: rank 0 has no cells left
    }
  }
  RunEnd end;
  end.cells_not_run = plan.cells.size() - collector.new_final_results();
  end.complete = !(inbox.interrupted || stop.requested() || end.cells_not_run > 0);
  end.stop_signal = stop.signal_number();
  collector.finish(end);
  return end.complete ? 0 : kExitIncomplete;
}

}  // namespace

int run_command(const CommandContext& context) {
  // Parsed before MPI starts: bad input never reaches the device or the output.
  const std::optional<RunOptions> parsed = command_options_or_help<RunOptions>(context);
  if (!parsed) return 0;  // --help
  const RunOptions& options = *parsed;
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
