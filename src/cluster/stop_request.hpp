// Stopping a run (DESIGN.md "Distribution", stopping).
//
// SIGTERM, SIGUSR1 (Slurm's warning before the time limit) and SIGINT ask a
// run to stop: the rank that receives one runs no new cell and tells every
// other rank (StopBroadcast), which do the same; rank 0 writes the cube and
// every rank exits 3 ("incomplete, resume me"). A second signal, or the stop
// grace time (--stop-grace-s) passing, ends the running cell at once: it is
// recorded `not_run` and runs again on --resume. The state is stop_flag's
// (include/crossbench/stop_flag.hpp): the one thing a signal handler can reach.
//
// No stop signal ever interrupts a compute thread. oneDNN 2.6's JIT kernels
// keep data below the stack pointer beyond the 128-byte red zone (valgrind:
// reads "on thread 1's stack"), and a signal frame pushed onto such a stack
// overwrote it: heap corruption and aborts in dnnl_primitive_execute after
// SIGUSR1 (tests/faults/test_stop_faults.py). So the signals are blocked in
// the thread that constructs StopRequest, and therefore in every thread it
// starts later (OpenMP's, MPI's, the telemetry sampler), and one thread of
// StopRequest's own receives them with sigtimedwait.
#pragma once

#include <mpi.h>
#include <signal.h>

#include <array>
#include <atomic>
#include <deque>
#include <thread>
#include <vector>

#include "crossbench/stop_flag.hpp"
#include "cluster/mpi_session.hpp"

namespace crossbench {

// For its lifetime: blocks SIGTERM, SIGUSR1 and SIGINT in the constructing
// thread (construct it first, before MPI or OpenMP start threads), receives
// them on a thread of its own, and installs a handler for any thread started
// before it; restores the mask and the previous handlers after.
class StopRequest {
 public:
  StopRequest();
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  bool requested() const { return stop_flag::level() > 0; }
  int signal_number() const { return stop_flag::signal_number(); }

  // The stop signals (SIGTERM, SIGUSR1, SIGINT), blocked in every thread but the receiver.
  static sigset_t stop_signals();

 private:
  void receive();

  sigset_t previous_mask_{};
  std::atomic<bool> done_{false};
  std::thread receiver_;
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
