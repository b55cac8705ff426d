// Cell results travelling to rank 0, each as soon as its cell ends.
//
// A result is its JSON record (the journal's format) sent with MPI_Isend, so
// a rank never waits for rank 0 to be between cells; rank 0 polls between its
// own cells and blocks only once its own cells are done. When a rank has no
// more cells (or was asked to stop) it sends one `finished` message saying how
// many results it sent, so rank 0 knows when everything has arrived.
#pragma once

#include <deque>
#include <optional>
#include <string>

#include "crossbench/result.hpp"
#include "cluster/mpi_session.hpp"

namespace crossbench {

struct ChannelMessage {
  enum class Kind { result, finished } kind = Kind::result;
  int source = 0;
  CellResult result;        // kind == result
  int results_sent = 0;     // kind == finished
  bool interrupted = false; // kind == finished: stopped early on a signal
  int stop_signal = 0;      // kind == finished: the stop signal that rank knows of, 0 if none
};

class ResultChannel {
 public:
  explicit ResultChannel(const MpiSession& mpi) : mpi_(mpi) {}
  ~ResultChannel();  // completes outstanding sends
  ResultChannel(const ResultChannel&) = delete;
  ResultChannel& operator=(const ResultChannel&) = delete;

  void send_result(const CellResult& result);                 // any rank but 0
  void send_finished(int results_sent, bool interrupted, int stop_signal);  // any rank but 0; then completes all sends
  std::optional<ChannelMessage> poll();                       // rank 0: a message if one has arrived
  ChannelMessage receive();                                   // rank 0: blocks for the next message

 private:
  struct Pending {
    std::string payload;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  void send(std::string payload, int tag);
  ChannelMessage receive_probed(MPI_Message& message, const MPI_Status& status);
  void complete_sends();

  const MpiSession& mpi_;
  std::deque<Pending> pending_;  // deque: payload addresses stay valid while MPI reads them
};

}  // namespace crossbench
