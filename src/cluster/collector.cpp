#include "cluster/collector.hpp"

#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "cluster/cube_assembly.hpp"
#include "core/utc_time.hpp"

namespace crossbench {

std::string RunEnd::run_state() const {
  if (complete) return "complete";
  const std::string stopped_by = stop_signal != 0 ? "stopped by signal " + std::to_string(stop_signal) : "stopped";
  return "incomplete: " + stopped_by + " with " + std::to_string(cells_not_run) + " cells not run; resume with --resume";
}

Collector::Collector(const Plan& plan, std::vector<CellResult> earlier, std::vector<std::unique_ptr<Reporter>> reporters,
                     std::int32_t segment)
    : results_(std::move(earlier)), earlier_count_(results_.size()), reporters_(std::move(reporters)), segment_(segment) {
  for (const auto& planned : plan.cells) estimates_[cell_key(planned.device_key, planned.cell)] = planned.estimated_s;
}

void Collector::add(CellResult result) {
  const auto estimate = estimates_.find(cell_key(result.device_key, result.cell));
  if (estimate == estimates_.end())
    throw Error("rank 0 received a result for a cell that is not in the plan: " + describe(result.cell) + " on " +
                result.device_key + " from rank " + std::to_string(result.rank));
  const double estimated_s = estimate->second;
  result.segment = segment_;  // measured by this run
  estimates_.erase(estimate);  // a second result for the same cell is an error too
  for (const auto& reporter : reporters_) reporter->report_cell(result, estimated_s);
  results_.push_back(std::move(result));
}

void Collector::idle() {
  for (const auto& reporter : reporters_) reporter->idle();
}

void Collector::finish(const RunEnd& end) {
  for (const auto& reporter : reporters_) reporter->finish(results_, end);
}

std::size_t Collector::new_final_results() const {
  std::size_t count = 0;
  for (std::size_t i = earlier_count_; i < results_.size(); ++i) count += results_[i].status != Status::not_run;
  return count;
}

CubeReporter::CubeReporter(const JobOptions& job, double checkpoint_s, const Plan& plan, std::vector<RunSegment> segments,
                           std::map<std::string, std::string> attributes, std::vector<CellResult> earlier,
                           JournalWriter journal)
    : job_(job),
      checkpoint_s_(checkpoint_s),
      plan_(plan),
      segments_(std::move(segments)),
      attributes_(std::move(attributes)),
      results_(std::move(earlier)),
      journal_(std::move(journal)) {
  if (segments_.empty()) throw Error("internal: a run without its run segment");
  journal_.append_segment(segment_record(segments_.back(), static_cast<int>(segments_.size()) - 1));
}

void CubeReporter::end_segment(const std::string& run_state) {
  const int index = static_cast<int>(segments_.size()) - 1;
  auto& attributes = segments_.back().attributes;
  attributes["ended"] = utc_now();
  attributes["run_state"] = run_state;
  journal_.append_segment(segment_end_record(index, attributes["ended"], run_state));
}

void CubeReporter::report_cell(const CellResult& result, double /*estimated_s*/) {
  if (result.status != Status::not_run) journal_.append(result);  // durable before anything else happens with it
  results_.push_back(result);
  idle();
}

void CubeReporter::idle() {
  const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_checkpoint_).count();
  if (since >= checkpoint_s_) write_cube("incomplete: checkpoint while running");
}

void CubeReporter::finish(const std::vector<CellResult>& /*results*/, const RunEnd& end) {
  end_segment(end.run_state());
  write_cube(end.run_state());
}

void CubeReporter::write_cube(const std::string& run_state) {
  auto attributes = attributes_;
  attributes["run_state"] = run_state;
  if (job_.output.has_parent_path()) std::filesystem::create_directories(job_.output.parent_path());
  try {
    crossbench::write_cube(job_.output, assemble_cube(job_, plan_, segments_, results_, attributes));
  } catch (const Error& error) {
    throw Error(std::string(error.what()) + "\ncrossbench: nothing finished is lost: the journal '" +
                journal_path(job_.output).string() + "' holds every finished cell; free space and continue "
                "with the same command and --resume");
  }
  last_checkpoint_ = std::chrono::steady_clock::now();
}

}  // namespace crossbench
