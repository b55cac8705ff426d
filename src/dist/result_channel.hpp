// Cell results travelling to rank 0, each as soon as its cell ends.
//
// A result is its JSON record (the journal's line format) sent with MPI_Isend,
// so a rank never waits for rank 0 to be between cells; rank 0 polls between
// its own cells and blocks only once its own cells are done.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "crossbench/result.hpp"
#include "dist/mpi_session.hpp"

namespace crossbench {

class ResultChannel {
 public:
  explicit ResultChannel(const MpiSession& mpi) : mpi_(mpi) {}
  ~ResultChannel();  // completes outstanding sends
  ResultChannel(const ResultChannel&) = delete;
  ResultChannel& operator=(const ResultChannel&) = delete;

  void send_to_root(const CellResult& result);    // any rank but 0
  std::vector<CellResult> poll();                 // rank 0: every result that has arrived
  CellResult receive();                           // rank 0: blocks for the next result
  void complete_sends();                          // waits until rank 0 has every sent result

 private:
  struct Pending {
    std::string payload;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  CellResult receive_probed(MPI_Message& message, const MPI_Status& status);

  const MpiSession& mpi_;
  std::deque<Pending> pending_;  // deque: payload addresses stay valid while MPI reads them
};

}  // namespace crossbench
