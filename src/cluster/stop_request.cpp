#include "cluster/stop_request.hpp"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

constexpr int kStopTag = 7;

// Signals this process received itself (another rank's stop is not counted:
// Slurm signals every task once, and that must not read as a second signal).
std::atomic<int> signals_received{0};

extern "C" void on_stop_signal(int number) {
  const int count = signals_received.fetch_add(1) + 1;
  stop_flag::raise(number, count >= 2 ? 2 : 1);
}

}  // namespace

sigset_t StopRequest::stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGINT);
  return set;
}

StopRequest::StopRequest() {
  stop_flag::reset();
  signals_received.store(0);
  const sigset_t blocked = stop_signals();
  if (const int code = pthread_sigmask(SIG_BLOCK, &blocked, &previous_mask_); code != 0)
    throw Error(std::string("pthread_sigmask(SIG_BLOCK) for the stop signals failed: ") + std::strerror(code));
  try {
    receiver_ = std::thread([this] { receive(); });  // inherits the mask; sigtimedwait takes the signals anyway
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
    throw;
  }
  // A thread started before this object (none of crossbench's) would still
  // take a stop signal: the handler counts it there the same way.
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // MPI and file calls continue; the flag is read between steps
  sigaction(SIGTERM, &action, &previous_term_);
  sigaction(SIGUSR1, &action, &previous_usr1_);
  sigaction(SIGINT, &action, &previous_int_);
}

void StopRequest::receive() {
  const sigset_t waited = stop_signals();
  while (!done_.load()) {
    const timespec poll_interval{0, 50'000'000};  // [ns]: how soon the destructor's join returns
    const int number = sigtimedwait(&waited, nullptr, &poll_interval);
    if (number > 0) on_stop_signal(number);  // EAGAIN (timeout) and EINTR: wait again
  }
}

StopRequest::~StopRequest() {
  done_.store(true);
  receiver_.join();
  // A signal that arrived since is pending: unblocking delivers it to the handler, still installed.
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  sigaction(SIGUSR1, &previous_usr1_, nullptr);
  sigaction(SIGINT, &previous_int_, nullptr);
}

StopBroadcast::StopBroadcast(const MpiSession& mpi)
    : rank_(mpi.rank()), size_(mpi.size()), guard_([this] { poll(); }) {
  CB_CHECK_MPI(MPI_Comm_dup(mpi.world(), &comm_));
  CB_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
}

StopBroadcast::~StopBroadcast() {
  // Sends nobody received (a rank that had finished) are let go: MPI completes them on its own.
  for (auto& sent : sent_)
    for (auto& request : sent.requests)
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void StopBroadcast::poll() {
  if (comm_ == MPI_COMM_NULL) return;
  // Other ranks' stops.
  while (true) {
    int arrived = 0;
    MPI_Status status;
    CB_CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, kStopTag, comm_, &arrived, &status));
    if (!arrived) break;
    std::array<int, 2> message{};
    CB_CHECK_MPI(MPI_Recv(message.data(), 2, MPI_INT, status.MPI_SOURCE, kStopTag, comm_, MPI_STATUS_IGNORE));
    sent_level_ = std::max(sent_level_, message[1]);  // the sender tells everyone: no need to pass it on
    stop_flag::raise(message[0], message[1]);
  }
  // This rank's own, once per level.
  const int mine = stop_flag::raised_level();
  if (mine <= sent_level_) return;
  sent_level_ = mine;
  Sent& sent = sent_.emplace_back();
  sent.message = {stop_flag::signal_number(), mine};
  for (int rank = 0; rank < size_; ++rank) {
    if (rank == rank_) continue;
    MPI_Request request = MPI_REQUEST_NULL;
    CB_CHECK_MPI(MPI_Isend(sent.message.data(), 2, MPI_INT, rank, kStopTag, comm_, &request));
    sent.requests.push_back(request);
  }
}

}  // namespace crossbench
