// SIGTERM and SIGUSR1 (Slurm's warning before the time limit) ask a run to
// stop cleanly: every rank finishes its current cell, rank 0 writes the cube,
// and the exit status says "incomplete, resume me".
#pragma once

#include <signal.h>

namespace crossbench {

// Installs the handlers for SIGTERM and SIGUSR1 for the lifetime of the object
// and restores the previous ones after. The flag a handler sets is the one
// process-wide state crossbench has: a signal handler can reach nothing else.
class StopRequest {
 public:
  StopRequest();
  ~StopRequest();
  StopRequest(const StopRequest&) = delete;
  StopRequest& operator=(const StopRequest&) = delete;

  bool requested() const;
  int signal_number() const;  // the signal that asked, 0 if none

 private:
  struct sigaction previous_term_ {};
  struct sigaction previous_usr1_ {};
};

// Exit status of a run that stopped early on request: resume it with --resume.
inline constexpr int kExitIncomplete = 3;

}  // namespace crossbench
