#include "cluster/result_channel.hpp"

#include <nlohmann/json.hpp>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {
constexpr int kResultTag = 17;
constexpr int kFinishedTag = 18;
}  // namespace

ResultChannel::~ResultChannel() {
  try {
    complete_sends();
  } catch (...) {
    // A destructor must not throw; the job is already failing if this fails.
  }
}

void ResultChannel::send(std::string payload, int tag) {
  pending_.push_back({std::move(payload), MPI_REQUEST_NULL});
  Pending& sent = pending_.back();
  CB_CHECK_MPI(MPI_Isend(sent.payload.data(), static_cast<int>(sent.payload.size()), MPI_CHAR, 0, tag, mpi_.world(),
                         &sent.request));
  // Drop the sends that have completed, oldest first.
  while (!pending_.empty()) {
    int done = 0;
    CB_CHECK_MPI(MPI_Test(&pending_.front().request, &done, MPI_STATUS_IGNORE));
    if (!done) break;
    pending_.pop_front();
  }
}

void ResultChannel::send_result(const CellResult& result) { send(to_json(result).dump(), kResultTag); }

void ResultChannel::send_finished(int results_sent, bool interrupted, int stop_signal) {
  send(nlohmann::json{{"results_sent", results_sent}, {"interrupted", interrupted}, {"stop_signal", stop_signal}}.dump(),
       kFinishedTag);
  complete_sends();
}

ChannelMessage ResultChannel::receive_probed(MPI_Message& message, const MPI_Status& status) {
  int length = 0;
  CB_CHECK_MPI(MPI_Get_count(&status, MPI_CHAR, &length));
  std::string payload(static_cast<std::size_t>(length), '\0');
  CB_CHECK_MPI(MPI_Mrecv(payload.data(), length, MPI_CHAR, &message, MPI_STATUS_IGNORE));
  ChannelMessage received;
  received.source = status.MPI_SOURCE;
  try {
    const auto json = nlohmann::json::parse(payload);
    if (status.MPI_TAG == kFinishedTag) {
      received.kind = ChannelMessage::Kind::finished;
      received.results_sent = json.at("results_sent").get<int>();
      received.interrupted = json.at("interrupted").get<bool>();
      received.stop_signal = json.value("stop_signal", 0);
    } else {
      received.result = cell_result_from_json(json);
    }
  } catch (const std::exception& error) {
    throw Error("rank 0 received a malformed message from rank " + std::to_string(status.MPI_SOURCE) + ": " +
                error.what());
  }
  return received;
}

std::optional<ChannelMessage> ResultChannel::poll() {
  int flag = 0;
  MPI_Message message;
  MPI_Status status;
  CB_CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, mpi_.world(), &flag, &message, &status));
  if (!flag) return std::nullopt;
  return receive_probed(message, status);
}

ChannelMessage ResultChannel::receive() {
  MPI_Message message;
  MPI_Status status;
  CB_CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, mpi_.world(), &message, &status));
  return receive_probed(message, status);
}

void ResultChannel::complete_sends() {
  for (auto& sent : pending_) CB_CHECK_MPI(MPI_Wait(&sent.request, MPI_STATUS_IGNORE));
  pending_.clear();
}

}  // namespace crossbench
