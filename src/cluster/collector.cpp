#include "cluster/collector.hpp"

#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "cluster/cube_assembly.hpp"

namespace crossbench {

Collector::Collector(const Options& options, const Plan& plan, std::vector<RunSegment> segments,
                     std::map<std::string, std::string> attributes, std::vector<CellResult> earlier,
                     JournalWriter journal, OnResult on_result)
    : options_(options),
      plan_(plan),
      segments_(std::move(segments)),
      attributes_(std::move(attributes)),
      results_(std::move(earlier)),
      earlier_count_(results_.size()),
      journal_(std::move(journal)),
      on_result_(std::move(on_result)) {
  for (const auto& planned : plan.cells) estimates_[cell_key(planned.device_key, planned.cell)] = planned.estimated_s;
  if (segments_.empty()) throw Error("internal: a run without its run segment");
  journal_.append_segment(segment_record(segments_.back(), static_cast<int>(segments_.size()) - 1));
}

void Collector::end_segment(const std::string& run_state) {
  const int index = static_cast<int>(segments_.size()) - 1;
  auto& attributes = segments_.back().attributes;
  attributes["ended"] = utc_now_text();
  attributes["run_state"] = run_state;
  journal_.append_segment(segment_end_record(index, attributes["ended"], run_state));
}

void Collector::add(CellResult result) {
  const auto estimate = estimates_.find(cell_key(result.device_key, result.cell));
  if (estimate == estimates_.end())
    throw Error("rank 0 received a result for a cell that is not in the plan: " + describe(result.cell) + " on " +
                result.device_key + " from rank " + std::to_string(result.rank));
  const double estimated_s = estimate->second;
  result.segment = static_cast<std::int32_t>(segments_.size()) - 1;  // measured by this run
  estimates_.erase(estimate);  // a second result for the same cell is an error too
  if (result.status != Status::not_run) journal_.append(result);  // durable before anything else happens with it
  if (on_result_) on_result_(result, estimated_s);
  results_.push_back(std::move(result));
  checkpoint_if_due();
}

std::size_t Collector::new_final_results() const {
  std::size_t count = 0;
  for (std::size_t i = earlier_count_; i < results_.size(); ++i) count += results_[i].status != Status::not_run;
  return count;
}

void Collector::checkpoint_if_due() {
  const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_checkpoint_).count();
  if (since >= options_.checkpoint_s) write_cube("incomplete: checkpoint while running");
}

void Collector::write_cube(const std::string& run_state) {
  auto attributes = attributes_;
  attributes["run_state"] = run_state;
  if (options_.output.has_parent_path()) std::filesystem::create_directories(options_.output.parent_path());
  try {
    crossbench::write_cube(options_.output, assemble_cube(options_, plan_, segments_, results_, attributes));
  } catch (const Error& error) {
    throw Error(std::string(error.what()) + "\ncrossbench: nothing finished is lost: the journal '" +
                journal_path(options_.output).string() + "' holds every finished cell; free space and continue "
                "with the same command and --resume");
  }
  last_checkpoint_ = std::chrono::steady_clock::now();
}

}  // namespace crossbench
