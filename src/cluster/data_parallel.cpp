#include "cluster/data_parallel.hpp"

#include <array>

#include <chrono>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "comm/make_communicator.hpp"
#include "crossbench/error.hpp"
#include "crossbench/stop_flag.hpp"
#include "crossbench/runner.hpp"

namespace crossbench {
namespace {

// The MPI communicator of one group: made by its members only
// (MPI_Comm_create_group), so ranks outside the group never wait for it.
class GroupCommunicator {
 public:
  GroupCommunicator(MPI_Comm world, const std::vector<int>& ranks, int tag) {
    MPI_Group world_group = MPI_GROUP_NULL;
    CB_CHECK_MPI(MPI_Comm_group(world, &world_group));
    MPI_Group group = MPI_GROUP_NULL;
    const int status = MPI_Group_incl(world_group, static_cast<int>(ranks.size()), ranks.data(), &group);
    MPI_Group_free(&world_group);
    CB_CHECK_MPI(status);
    const int created = MPI_Comm_create_group(world, group, tag, &comm_);
    MPI_Group_free(&group);
    CB_CHECK_MPI(created);
  }
  ~GroupCommunicator() {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  GroupCommunicator(const GroupCommunicator&) = delete;
  GroupCommunicator& operator=(const GroupCommunicator&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// Per-step maxima over the group, with the collective timeout: a peer that
// never arrives ends the cell as `timeout` instead of hanging this rank.
class MpiStepAgreement final : public StepAgreement {
 public:
  MpiStepAgreement(MPI_Comm group, double timeout_s) : group_(group), timeout_s_(timeout_s) {}
  void max_over_group(std::span<double> values) override {
    MPI_Request request = MPI_REQUEST_NULL;
    CB_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                                group_, &request));
    const auto start = std::chrono::steady_clock::now();
    while (true) {
      int done = 0;
      CB_CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s_)
        throw CellTimeout("the ranks of the data-parallel group did not meet within " + std::to_string(timeout_s_) +
                          " s (a rank is stuck or gone)");
      std::this_thread::yield();
    }
  }

 private:
  MPI_Comm group_;
  double timeout_s_;
};

// Every member's result, as JSON, on the group's first rank.
std::vector<CellResult> gather_to_first(MPI_Comm group, const CellResult& mine) {
  int rank = 0, size = 1;
  CB_CHECK_MPI(MPI_Comm_rank(group, &rank));
  CB_CHECK_MPI(MPI_Comm_size(group, &size));
  const std::string text = to_json(mine).dump();
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(static_cast<std::size_t>(size)), offsets(static_cast<std::size_t>(size));
  CB_CHECK_MPI(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, group));
  std::string all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) {
      offsets[static_cast<std::size_t>(r)] = total;
      total += lengths[static_cast<std::size_t>(r)];
    }
    all.resize(static_cast<std::size_t>(total));
  }
  CB_CHECK_MPI(MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, group));
  std::vector<CellResult> results;
  if (rank != 0) return results;
  for (int r = 0; r < size; ++r)
    results.push_back(cell_result_from_json(nlohmann::json::parse(
        all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(r)]),
                   static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)])))));
  return results;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (const int rank : ranks) text += (text.empty() ? "" : ",") + std::to_string(rank);
  return text;
}

}  // namespace

CellResult run_data_parallel_cell(Engine* engine, const Network& network, const PlannedCell& planned,
                                  const Device& device, const MeasureOptions& options, const MpiSession& mpi) {
  const GroupCommunicator group(mpi.groups(), planned.group_ranks, planned.group_tag);
  // A stop on any member stops the group before the cell: a member that
  // stopped alone would leave the others waiting in the first all-reduce.
  std::array<int, 2> stop{stop_flag::level(), stop_flag::signal_number()};
  CB_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, stop.data(), 2, MPI_INT, MPI_MAX, group.get()));
  if (stop[0] > 0) {
    stop_flag::raise(stop[1], 1);
    CellResult stopped;
    stopped.device_key = device.key();
    stopped.cell = planned.cell;
    stopped.rank = mpi.rank();
    stopped.status = Status::not_run;
    stopped.message = "not started: the run was asked to stop; it runs on --resume";
    stopped.group_ranks.assign(planned.group_ranks.begin(), planned.group_ranks.end());
    return stopped;
  }
  const double timeout_s = options.cell_time_limit_s;
  MpiStepAgreement agreement(group.get(), timeout_s);
  CellResult result;
  {
    std::unique_ptr<Communicator> communicator;
    std::string setup_failure;
    try {
      communicator = make_communicator(device.kind, group.get(), device.index, timeout_s);
    } catch (const std::exception& error) {
      setup_failure = error.what();
    }
    if (communicator) {
      result = run_cell(engine, planned.cell.engine, network, planned.cell, device, options, mpi.rank(),
                        communicator.get(), &agreement);
    } else {
      result.device_key = device.key();
      result.cell = planned.cell;
      result.rank = mpi.rank();
      result.status = Status::failed;
      result.message = "could not set up the data-parallel communicator: " + setup_failure;
    }
  }  // the communicator is destroyed (or aborted) before the group's results are gathered
  result.group_ranks.assign(planned.group_ranks.begin(), planned.group_ranks.end());

  const std::vector<CellResult> members = gather_to_first(group.get(), result);
  if (members.empty()) return result;  // not the first rank: the first one reports
  // The first rank's own failure, else the first failing member's.
  if (result.status == Status::ok)
    for (const CellResult& member : members)
      if (member.status != Status::ok) {
        result = member;
        result.message = "rank " + std::to_string(member.rank) + ": " + member.message;
        break;
      }
  result.rank = mpi.rank();
  result.group_ranks.assign(planned.group_ranks.begin(), planned.group_ranks.end());
  result.decisions = "data parallel over ranks " + rank_list(planned.group_ranks) +
                     (result.decisions.empty() ? "" : "; " + result.decisions);
  return result;
}

}  // namespace crossbench
