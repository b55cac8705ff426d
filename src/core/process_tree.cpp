#include "core/process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "crossbench/error.hpp"

namespace crossbench::process_tree {
namespace {

std::mutex owned_mutex;
std::multiset<pid_t>& owned_pids() {
  static std::multiset<pid_t> pids;
  return pids;
}

std::vector<pid_t> owned_now() {
  const std::lock_guard lock(owned_mutex);
  return {owned_pids().begin(), owned_pids().end()};
}

bool is_owned(pid_t pid) {
  const std::lock_guard lock(owned_mutex);
  return owned_pids().count(pid) > 0;
}

// Reads a small /proc file whole; empty when it cannot be read (the process ended).
std::string read_small_file(const std::string& path) {
  const int descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return {};
  std::string text;
  std::array<char, 4096> chunk;
  while (true) {
    const auto count = ::read(descriptor, chunk.data(), chunk.size());
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(count));
  }
  ::close(descriptor);
  return text;
}

// Reaps `process` if it is a zombie child of this process that no worker owns.
void reap_if_ours(const ProcessInfo& process) {
  if (process.state != 'Z' || process.parent != ::getpid() || is_owned(process.pid)) return;
  int status = 0;
  (void)::waitpid(process.pid, &status, WNOHANG);  // ECHILD: someone else reaped it; either way it is gone
}

constexpr auto kPollInterval = std::chrono::milliseconds(10);  // between scans while processes die

}  // namespace

bool parse_stat(const std::string& text, ProcessInfo& info) {
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open || close + 2 >= text.size()) return false;
  char* end = nullptr;
  info.pid = static_cast<pid_t>(std::strtol(text.c_str(), &end, 10));
  if (end == text.c_str() || info.pid <= 0) return false;
  info.command = text.substr(open + 1, close - open - 1);
  // After ") ": state ppid pgrp session ...
  const char* cursor = text.c_str() + close + 2;
  info.state = *cursor++;
  long fields[3];
  for (long& field : fields) {
    field = std::strtol(cursor, &end, 10);
    if (end == cursor) return false;
    cursor = end;
  }
  info.parent = static_cast<pid_t>(fields[0]);
  info.group = static_cast<pid_t>(fields[1]);
  info.session = static_cast<pid_t>(fields[2]);
  return true;
}

std::vector<ProcessInfo> snapshot() {
  std::vector<ProcessInfo> processes;
  const std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) throw Error(std::string("opendir(\"/proc\") failed on ") + where_am_i() + ": " + std::strerror(errno));
  while (const dirent* entry = ::readdir(proc.get())) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;  // not a process
    ProcessInfo info;
    if (parse_stat(read_small_file(std::string("/proc/") + entry->d_name + "/stat"), info)) processes.push_back(info);
  }
  return processes;
}

std::vector<ProcessInfo> descendants(const std::vector<ProcessInfo>& processes, pid_t root, const std::vector<pid_t>& skip) {
  std::multimap<pid_t, const ProcessInfo*> children;
  for (const auto& process : processes) children.emplace(process.parent, &process);
  std::vector<ProcessInfo> found;
  std::vector<pid_t> frontier{root};
  std::set<pid_t> seen{root};  // a /proc read while processes move may show a cycle: never loop
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    const auto [first, last] = children.equal_range(parent);
    for (auto it = first; it != last; ++it) {
      const ProcessInfo& child = *it->second;
      if (std::find(skip.begin(), skip.end(), child.pid) != skip.end() || !seen.insert(child.pid).second) continue;
      found.push_back(child);
      frontier.push_back(child.pid);
    }
  }
  return found;
}

std::string worker_mark() { return "CROSSBENCH_WORKER_OF=" + std::to_string(::getpid()); }

namespace {

// What a process's environment says of an entry. `unreadable`: /proc gave no
// environment for a live process, which happens while it execs (the kernel
// names the new program before it maps the new environment) and when the read
// races its exit; a later scan reads it whole.
enum class Entry { present, absent, unreadable };

Entry find_entry(pid_t pid, const std::string& entry) {
  const std::string environment = read_small_file("/proc/" + std::to_string(pid) + "/environ");
  if (environment.empty()) return Entry::unreadable;
  for (std::size_t start = 0; start < environment.size();) {
    const auto end = environment.find('\0', start);
    if (environment.compare(start, (end == std::string::npos ? environment.size() : end) - start, entry) == 0)
      return Entry::present;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return Entry::absent;
}

// Scans that look again at a live process whose environment could not be read
// before it counts as the rank's own: an exec's window lasts microseconds, a
// process started with an empty environment (env -i) never shows one.
constexpr int kUnreadableEnvironmentScans = 20;  // x kPollInterval = 200 ms at most

}  // namespace

bool environment_has(pid_t pid, const std::string& entry) { return find_entry(pid, entry) == Entry::present; }

void adopt_orphans() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL) != 0)
    throw Error(std::string("prctl(PR_SET_CHILD_SUBREAPER) failed on ") + where_am_i() + ": " + std::strerror(errno));
}

Owned::Owned(pid_t pid) : pid_(pid) {
  const std::lock_guard lock(owned_mutex);
  owned_pids().insert(pid);
}

Owned::~Owned() {
  const std::lock_guard lock(owned_mutex);
  if (const auto it = owned_pids().find(pid_); it != owned_pids().end()) owned_pids().erase(it);
}

std::vector<ProcessInfo> end_group(pid_t group, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    // A zombie has ended already; it only waits to be reaped (here, when it is ours).
    (void)::kill(-group, SIGKILL);  // ESRCH: nobody left, which the scan confirms
    std::vector<ProcessInfo> alive;
    for (const auto& process : snapshot()) {
      if (process.group != group) continue;
      if (process.state == 'Z') reap_if_ours(process);
      else alive.push_back(process);
    }
    if (alive.empty() || std::chrono::steady_clock::now() >= deadline) return alive;
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::vector<ProcessInfo> end_strays(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<ProcessInfo> ended;
  std::set<pid_t> named;
  std::map<pid_t, int> unreadable_scans;  // per live process whose environment /proc did not give
  const std::string mark = worker_mark();
  while (true) {
    bool any = false;
    for (const auto& process : descendants(snapshot(), ::getpid(), owned_now())) {
      if (process.state == 'Z') {  // a zombie's environment cannot be read: reaped only when killed here
        if (named.count(process.pid)) {
          any = true;
          reap_if_ours(process);
        }
        continue;
      }
      if (!named.count(process.pid)) {
        const Entry entry = find_entry(process.pid, mark);
        if (entry == Entry::unreadable && ++unreadable_scans[process.pid] <= kUnreadableEnvironmentScans) {
          any = true;  // mid-exec: read it again on the next scan
          continue;
        }
        if (entry != Entry::present) continue;  // the rank's own (orted)
      }
      any = true;
      if (named.insert(process.pid).second) ended.push_back(process);
      (void)::kill(process.pid, SIGKILL);  // ESRCH: it ended meanwhile
    }
    if (!any || std::chrono::steady_clock::now() >= deadline) return ended;
    std::this_thread::sleep_for(kPollInterval);
  }
}

std::string describe(const ProcessInfo& process) {
  return "pid " + std::to_string(process.pid) + " (" + process.command + ", session " + std::to_string(process.session) +
         ", group " + std::to_string(process.group) + ")";
}

}  // namespace crossbench::process_tree
