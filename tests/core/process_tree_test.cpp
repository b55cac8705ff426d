// The /proc scans that end what a cell left behind (src/core/process_tree.hpp),
// on real processes: a group whose leader has exited, a setsid escapee.
#include "core/process_tree.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "crossbench/error.hpp"

namespace crossbench::process_tree {
namespace {

bool alive(pid_t pid) {
  for (const auto& process : snapshot())
    if (process.pid == pid) return process.state != 'Z';
  return false;
}

// Reads one pid a child wrote to `descriptor`.
pid_t read_pid(int descriptor) {
  pid_t pid = 0;
  EXPECT_EQ(::read(descriptor, &pid, sizeof pid), static_cast<ssize_t>(sizeof pid));
  return pid;
}

// Kills and reaps the test's children however the test ends: a failed
// assertion must not leave a sleeper holding ctest's output pipe open (which
// turned one failure into a 900 s timeout).
class Reaped {
 public:
  Reaped() = default;
  Reaped(const Reaped&) = delete;
  Reaped& operator=(const Reaped&) = delete;
  void add(pid_t pid) { pids_.push_back(pid); }
  ~Reaped() {
    for (const pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      int status = 0;
      (void)::waitpid(pid, &status, 0);  // ECHILD: reaped already
    }
  }

 private:
  std::vector<pid_t> pids_;
};

// Waits (at most 2 s) until each of `pids` runs `command`: it has exec'd.
void wait_for_command(const std::vector<pid_t>& pids, const std::string& command) {
  for (int i = 0; i < 2000; ++i) {
    int ready = 0;
    for (const auto& process : snapshot())
      if (std::find(pids.begin(), pids.end(), process.pid) != pids.end() && process.command == command) ++ready;
    if (ready == static_cast<int>(pids.size())) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(ParseStat, TakesTheCommandBetweenTheFirstParenthesisAndTheLast) {
  ProcessInfo info;
  ASSERT_TRUE(parse_stat("4242 (a (b) c) S 17 4242 99 34816 4242 4194560 0 0", info));
  EXPECT_EQ(info.pid, 4242);
  EXPECT_EQ(info.command, "a (b) c");
  EXPECT_EQ(info.state, 'S');
  EXPECT_EQ(info.parent, 17);
  EXPECT_EQ(info.group, 4242);
  EXPECT_EQ(info.session, 99);
  EXPECT_FALSE(parse_stat("", info));
  EXPECT_FALSE(parse_stat("12 (x", info));
  EXPECT_FALSE(parse_stat("12 (x) S", info));
}

TEST(Descendants, FollowsParentsAndSkipsALiveWorkersTree) {
  const std::vector<ProcessInfo> processes{{10, 1, 10, 10, 'S', "rank"},  {11, 10, 11, 11, 'S', "worker"},
                                           {12, 11, 11, 11, 'S', "pool"}, {13, 10, 13, 13, 'S', "stray"},
                                           {14, 13, 14, 14, 'S', "its child"}, {15, 1, 15, 15, 'S', "other"}};
  std::vector<pid_t> found;
  for (const auto& process : descendants(processes, 10, {11})) found.push_back(process.pid);
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<pid_t>{13, 14}));
  EXPECT_EQ(descendants(processes, 10, {}).size(), 4u);
}

TEST(EndGroup, KillsTheGroupAfterItsLeaderHasExited) {
  // The defect of issue 28: the worker exited, was reaped, and its helper
  // (same group, never reading stdin) lived on.
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t leader = ::fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) {
    ::setpgid(0, 0);
    const pid_t helper = ::fork();
    if (helper == 0) {
      ::execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    (void)!::write(pipe_fds[1], &helper, sizeof helper);
    ::_exit(0);  // the leader ends; its helper stays in its group
  }
  ::close(pipe_fds[1]);
  const pid_t helper = read_pid(pipe_fds[0]);
  ::close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(leader, &status, 0), leader);
  ASSERT_TRUE(alive(helper));
  EXPECT_TRUE(end_group(leader, std::chrono::seconds(5)).empty());
  EXPECT_FALSE(alive(helper));
}

TEST(EndStrays, EndsASetsidEscapeeAndLeavesAnOwnedWorkerAndTheRanksOwnChildren) {
  adopt_orphans();  // as the rank does before its first worker
  std::string mark = worker_mark();  // what a worker and all it starts inherit
  Reaped reaped;
  // The rank's own child, without the mark (a singleton MPI rank's orted): never a stray.
  const pid_t own = ::fork();
  ASSERT_GE(own, 0);
  if (own == 0) {
    ::execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  reaped.add(own);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {  // a daemon's double fork: its grandchild comes back to us
    ::putenv(mark.data());
    ::setsid();
    const pid_t escapee = ::fork();
    if (escapee == 0) {
      ::execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    (void)!::write(pipe_fds[1], &escapee, sizeof escapee);
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  const pid_t escapee = read_pid(pipe_fds[0]);
  ::close(pipe_fds[0]);
  reaped.add(escapee);  // re-parented to us by the subreaper
  int status = 0;
  ASSERT_EQ(::waitpid(middle, &status, 0), middle);

  const pid_t worker = ::fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    ::execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  reaped.add(worker);
  const Owned owned(worker);
  wait_for_command({escapee, worker, own}, "sleep");  // each has exec'd (the escapee may be mid-exec still)
  const auto ended = end_strays();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].pid, escapee);
  EXPECT_NE(ended[0].session, ::getsid(0));  // it had left our session
  EXPECT_NE(describe(ended[0]).find("pid " + std::to_string(escapee) + " (sleep"), std::string::npos) << describe(ended[0]);
  EXPECT_FALSE(alive(escapee));
  EXPECT_TRUE(alive(worker));
  EXPECT_TRUE(alive(own));
}

TEST(EndStrays, EndsAStrayCaughtWhileItExecs) {
  // The defect behind a CI failure: /proc names the new program (comm) before
  // the kernel has mapped its environment, so a scan in that window read no
  // mark and took the stray for the rank's own. Each round scans as early as
  // it can: right when comm turns to "sleep".
  adopt_orphans();
  std::string mark = worker_mark();
  for (int round = 0; round < 50; ++round) {
    Reaped reaped;
    const pid_t stray = ::fork();
    ASSERT_GE(stray, 0);
    if (stray == 0) {
      ::putenv(mark.data());
      ::execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    reaped.add(stray);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < give_up) {  // no sleep: catch the exec as it happens
      bool named = false;
      for (const auto& process : snapshot())
        if (process.pid == stray && process.command == "sleep") named = true;
      if (named) break;
    }
    const auto ended = end_strays();
    ASSERT_EQ(ended.size(), 1u) << "round " << round;
    EXPECT_EQ(ended[0].pid, stray);
    EXPECT_FALSE(alive(stray));
  }
}

TEST(EndStrays, ALiveChildWithAnEmptyEnvironmentIsTheRanksOwnAfterALookAgain) {
  // `env -i` leaves /proc/<pid>/environ empty for good: end_strays looks again
  // for a bounded time (an exec's window), then leaves it alone.
  adopt_orphans();
  Reaped reaped;
  const pid_t bare = ::fork();
  ASSERT_GE(bare, 0);
  if (bare == 0) {
    char* const arguments[] = {const_cast<char*>("sleep"), const_cast<char*>("1000"), nullptr};
    char* const no_environment[] = {nullptr};
    ::execve("/bin/sleep", arguments, no_environment);
    ::_exit(127);
  }
  reaped.add(bare);
  wait_for_command({bare}, "sleep");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_TRUE(end_strays(std::chrono::seconds(60)).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));  // bounded (~0.2 s), not the deadline
  EXPECT_TRUE(alive(bare));
}

TEST(Printable, ShowsNulControlsAndAByteOrderMark) {
  using namespace std::string_literals;
  EXPECT_EQ(printable("a\0b"s), "a\\0b");
  EXPECT_EQ(printable("\xEF\xBB\xBFkey"), "<BOM>key");
  EXPECT_EQ(printable("x\x1b[31my\r"), "x\\x1b[31my\\x0d");
  EXPECT_EQ(printable("line\n\ttab é"), "line\n\ttab é");
  EXPECT_EQ(std::string(Error("cut\0here"s).what()), "cut\\0here");
}

}  // namespace
}  // namespace crossbench::process_tree
