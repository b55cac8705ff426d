// The request to stop a run: the one process-wide state of crossbench, because
// a signal handler can reach nothing else (DESIGN.md "Distribution", stopping).
//
//   level 1  stop after the running cell (the first SIGTERM/SIGUSR1/SIGINT, or
//            another rank's): the rank runs no new cell;
//   level 2  end the running cell now (a second signal, or the grace time
//            after level 1 has passed): the Runner and the worker engine throw
//            CellInterrupted between steps; the cell is recorded `not_run` and
//            runs again on --resume.
//
// raise() is async-signal-safe. A poller (the MPI side, src/cluster) may be
// installed to learn of other ranks' stops while a cell runs on this one.
#pragma once

#include <functional>
#include <string>

#include "crossbench/error.hpp"

namespace crossbench {

// The running cell was ended by a stop request; it was not measured.
class CellInterrupted : public Error {
 public:
  explicit CellInterrupted(const std::string& what) : Error(what) {}
};

namespace stop_flag {

void raise(int signal_number, int level) noexcept;  // never lowers the level; async-signal-safe
int level() noexcept;              // 0, 1 or 2; 1 becomes 2 once the grace time has passed
int raised_level() noexcept;       // as raised (by signals or messages), without the grace deadline
int signal_number() noexcept;      // the signal that asked first, 0 if none
void set_grace_seconds(double seconds) noexcept;  // [s] between level 1 and level 2
void reset() noexcept;             // level 0, no signal (a new run in the same process, tests)

// Runs the poller (if any) and says whether the running cell must end now.
// Called between steps: cheap (a clock read and, with MPI, one MPI_Iprobe).
bool cell_must_end();
// "interrupted by signal 15 (Terminated) ...": the message of an interrupted cell.
std::string reason();

// Installs the poller for the lifetime of the guard (one at a time).
class PollerGuard {
 public:
  explicit PollerGuard(std::function<void()> poller);
  ~PollerGuard();
  PollerGuard(const PollerGuard&) = delete;
  PollerGuard& operator=(const PollerGuard&) = delete;
};

}  // namespace stop_flag
}  // namespace crossbench
