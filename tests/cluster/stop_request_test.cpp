// Stop signals are taken by StopRequest's own thread, never by a compute
// thread: a signal frame pushed onto a thread running oneDNN's JIT kernels
// corrupted their data below the stack pointer (src/cluster/stop_request.hpp).
#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cluster/stop_request.hpp"

namespace crossbench {
namespace {

bool blocks_every_stop_signal() {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, SIGTERM) == 1 && sigismember(&mask, SIGUSR1) == 1 && sigismember(&mask, SIGINT) == 1;
}

bool wait_for_level(int level) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (stop_flag::raised_level() < level) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(StopRequest, BlocksTheStopSignalsInThisThreadAndInThreadsStartedLater) {
  ASSERT_FALSE(blocks_every_stop_signal()) << "the test runner already blocks the stop signals";
  {
    StopRequest stop;
    EXPECT_TRUE(blocks_every_stop_signal());
    bool in_a_thread = false;
    std::thread([&] { in_a_thread = blocks_every_stop_signal(); }).join();
    EXPECT_TRUE(in_a_thread);
    // OpenMP's pool, as oneDNN uses it: every team member blocks them.
    std::vector<int> blocked(static_cast<std::size_t>(std::max(omp_get_max_threads(), 2)), -1);
#pragma omp parallel num_threads(static_cast<int>(blocked.size()))
    blocked[static_cast<std::size_t>(omp_get_thread_num())] = blocks_every_stop_signal() ? 1 : 0;
    for (std::size_t t = 0; t < blocked.size(); ++t) EXPECT_NE(blocked[t], 0) << "OpenMP thread " << t;
  }
  EXPECT_FALSE(blocks_every_stop_signal()) << "the previous mask is restored";
}

TEST(StopRequest, ASignalToTheProcessRaisesTheFlagOnceAndASecondEndsTheCell) {
  StopRequest stop;
  EXPECT_FALSE(stop.requested());
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  ASSERT_TRUE(wait_for_level(1)) << "SIGUSR1 was not received";
  EXPECT_TRUE(stop.requested());
  EXPECT_EQ(stop.signal_number(), SIGUSR1);
  EXPECT_EQ(stop_flag::raised_level(), 1);
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  ASSERT_TRUE(wait_for_level(2)) << "the second signal was not received";
  EXPECT_EQ(stop.signal_number(), SIGUSR1) << "the first signal is the one recorded";
  EXPECT_TRUE(stop_flag::cell_must_end());
}

TEST(StopRequest, ASignalDuringABusyOpenMpRegionIsReceivedByTheStopThread) {
  StopRequest stop;
  std::atomic<bool> raised{false};
  std::atomic<int> members_that_saw_it{0};
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) kill(getpid(), SIGINT);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (stop_flag::raised_level() < 1 && std::chrono::steady_clock::now() < deadline) {
    }
    if (stop_flag::raised_level() >= 1) members_that_saw_it.fetch_add(1);
    raised.store(true);
  }
  EXPECT_TRUE(raised.load());
  EXPECT_EQ(members_that_saw_it.load(), 2);
  EXPECT_EQ(stop.signal_number(), SIGINT);
}

}  // namespace
}  // namespace crossbench
