#include "dist/result_channel.hpp"

#include <nlohmann/json.hpp>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {
constexpr int kResultTag = 17;
}

ResultChannel::~ResultChannel() {
  try {
    complete_sends();
  } catch (...) {
    // A destructor must not throw; the job is already failing if this fails.
  }
}

void ResultChannel::send_to_root(const CellResult& result) {
  pending_.push_back({to_json(result).dump(), MPI_REQUEST_NULL});
  Pending& sent = pending_.back();
  CB_CHECK_MPI(MPI_Isend(sent.payload.data(), static_cast<int>(sent.payload.size()), MPI_CHAR, 0, kResultTag,
                         mpi_.world(), &sent.request));
  // Drop the sends that have completed, oldest first.
  while (!pending_.empty()) {
    int done = 0;
    CB_CHECK_MPI(MPI_Test(&pending_.front().request, &done, MPI_STATUS_IGNORE));
    if (!done) break;
    pending_.pop_front();
  }
}

CellResult ResultChannel::receive_probed(MPI_Message& message, const MPI_Status& status) {
  int length = 0;
  CB_CHECK_MPI(MPI_Get_count(&status, MPI_CHAR, &length));
  std::string payload(static_cast<std::size_t>(length), '\0');
  CB_CHECK_MPI(MPI_Mrecv(payload.data(), length, MPI_CHAR, &message, MPI_STATUS_IGNORE));
  try {
    return cell_result_from_json(nlohmann::json::parse(payload));
  } catch (const nlohmann::json::exception& error) {
    throw Error("rank 0 received a malformed result from rank " + std::to_string(status.MPI_SOURCE) + ": " +
                error.what());
  }
}

std::vector<CellResult> ResultChannel::poll() {
  std::vector<CellResult> arrived;
  while (true) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    CB_CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, kResultTag, mpi_.world(), &flag, &message, &status));
    if (!flag) return arrived;
    arrived.push_back(receive_probed(message, status));
  }
}

CellResult ResultChannel::receive() {
  MPI_Message message;
  MPI_Status status;
  CB_CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, kResultTag, mpi_.world(), &message, &status));
  return receive_probed(message, status);
}

void ResultChannel::complete_sends() {
  for (auto& sent : pending_) CB_CHECK_MPI(MPI_Wait(&sent.request, MPI_STATUS_IGNORE));
  pending_.clear();
}

}  // namespace crossbench
