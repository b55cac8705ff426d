#include "dist/stop_request.hpp"

#include <csignal>

namespace crossbench {
namespace {

// The only state a signal handler may touch: async-signal-safe by type.
volatile std::sig_atomic_t& received_signal() {
  static volatile std::sig_atomic_t value = 0;
  return value;
}

extern "C" void on_stop_signal(int number) { received_signal() = number; }

}  // namespace

StopRequest::StopRequest() {
  received_signal() = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // MPI and file calls continue; the flag is read between cells
  sigaction(SIGTERM, &action, &previous_term_);
  sigaction(SIGUSR1, &action, &previous_usr1_);
}

StopRequest::~StopRequest() {
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGUSR1, &previous_usr1_, nullptr);
}

bool StopRequest::requested() const { return received_signal() != 0; }
int StopRequest::signal_number() const { return received_signal(); }

}  // namespace crossbench
