// Stopping a run (DESIGN.md "Distribution", stopping).
//
// SIGTERM, SIGUSR1 (Slurm's warning before the time limit) and SIGINT ask a
// run to stop: the rank that receives one runs no new cell and tells every
// other rank (StopBroadcast), which do the same; rank 0 writes the cube and
// every rank exits 3 ("incomplete, resume me"). A second signal, or the stop
// grace time (--stop-grace-s) passing, ends the running cell at once: it is
// recorded `not_run` and runs again on --resume. The state is stop_flag's
// (include/crossbench/stop_flag.hpp): the one thing a signal handler can reach.
#pragma once

#include <mpi.h>
#include <signal.h>

#include <array>
#include <deque>
#include <vector>

#include "crossbench/stop_flag.hpp"
#include "dist/mpi_session.hpp"

namespace crossbench {

// Installs the handlers for SIGTERM, SIGUSR1 and SIGINT for the lifetime of
// the object and restores the previous ones after.
class StopRequest {
 public:
  StopRequest();
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  bool requested() const { return stop_flag::level() > 0; }
  int signal_number() const { return stop_flag::signal_number(); }

 private:
  struct sigaction previous_term_ {};
  struct sigaction previous_usr1_ {};
  struct sigaction previous_int_ {};
};

// Carries a stop from the rank that received the signal to every other rank:
// non-blocking messages on a communicator of its own, sent and received by
// poll(), which stop_flag::cell_must_end() runs between steps and the run
// loop runs between cells. Every rank polls, so a stop reaches a rank within
// one step of its running cell (or 200 ms of a worker's).
class StopBroadcast {
 public:
  explicit StopBroadcast(const MpiSession& mpi);
  ~StopBroadcast();
  StopBroadcast(const StopBroadcast&) = delete;
  StopBroadcast& operator=(const StopBroadcast&) = delete;

  void poll();

 private:
  struct Sent {
    std::array<int, 2> message{};  // signal number, level
    std::vector<MPI_Request> requests;
  };
  int rank_ = 0, size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int sent_level_ = 0;
  std::deque<Sent> sent_;  // deque: buffers stay where MPI reads them
  stop_flag::PollerGuard guard_;
};

// Exit status of a run that stopped early on request: resume it with --resume.
inline constexpr int kExitIncomplete = 3;

}  // namespace crossbench
