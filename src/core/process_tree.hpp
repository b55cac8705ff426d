// Nothing a cell starts outlives it (DESIGN.md "Workers"): the processes a
// worker leaves behind are found through /proc and ended.
//
// A worker runs in its own process group, which Subprocess kills whole. A
// helper that leaves the group (setsid, a double fork: a daemonising compile
// server) escapes that kill; so the rank makes itself the "child subreaper"
// (prctl PR_SET_CHILD_SUBREAPER) before it starts its first worker, and every
// descendant orphaned by a worker's exit is re-parented to the rank instead of
// to init. After each cell the Runner ends every descendant of the rank that
// no live worker owns and that carries the worker mark in its environment
// (`end_strays`), and the cell's `decisions` name them. The mark
// (CROSSBENCH_WORKER_OF=<rank pid>, inherited by everything a worker starts)
// tells a worker's helper from the rank's other children: a singleton MPI
// rank's own `orted` is one, and killing it aborts the rank.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace crossbench::process_tree {

// One line of /proc/<pid>/stat: the fields the scans need.
struct ProcessInfo {
  pid_t pid = 0, parent = 0, group = 0, session = 0;
  char state = '?';     // 'R', 'S', 'Z' (zombie: exited, not yet reaped), ...
  std::string command;  // /proc/<pid>/comm: at most 15 characters
};

// Parses the text of /proc/<pid>/stat ("123 (comm) S 1 123 123 ..."); the
// command may hold spaces and parentheses, so it is the text between the first
// '(' and the last ')'. Returns false for text that is not such a line.
bool parse_stat(const std::string& text, ProcessInfo& info);

// Every process of /proc now (those that end while it is read are left out).
std::vector<ProcessInfo> snapshot();

// The processes of `processes` below `root` (children, their children, ...),
// not entering the subtrees of `skip` (live workers: their helpers are theirs).
std::vector<ProcessInfo> descendants(const std::vector<ProcessInfo>& processes, pid_t root,
                                     const std::vector<pid_t>& skip);

// "CROSSBENCH_WORKER_OF=<this process's pid>": the environment entry every
// worker starts with, so that its descendants can be told from the rank's own.
std::string worker_mark();

// Whether process `pid`'s environment holds `entry` (false when unreadable).
bool environment_has(pid_t pid, const std::string& entry);

// Makes this process the child subreaper (see above). Idempotent; throws
// Error naming the call if the kernel refuses.
void adopt_orphans();

// A live worker's process id, registered while a Subprocess owns it: its
// tree is the worker's, not a stray, and only its owner reaps it.
class Owned {
 public:
  explicit Owned(pid_t pid);
  ~Owned();
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;

 private:
  pid_t pid_;
};

// SIGKILL to every process of group `group`, repeated until none is left
// (members re-parented to this process are reaped here) or `timeout` passes.
// Returns the members still there at the deadline (e.g. stuck in the kernel).
std::vector<ProcessInfo> end_group(pid_t group, std::chrono::milliseconds timeout);

// Ends (SIGKILL, then reaps) every descendant of this process that no live
// worker owns and that carries worker_mark(): the processes that outlived
// their cell. Returns them as found.
std::vector<ProcessInfo> end_strays(std::chrono::milliseconds timeout = std::chrono::seconds(5));

// "pid 123 (sleep, session 120, group 123)" for a cell's decisions.
std::string describe(const ProcessInfo& process);

}  // namespace crossbench::process_tree
