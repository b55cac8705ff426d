#include "engines/worker/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "core/process_tree.hpp"
#include "crossbench/error.hpp"
#include "crossbench/stop_flag.hpp"

extern char** environ;

namespace crossbench {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra_environment) {
  if (argv.empty()) throw Error("worker command is empty");
  int in[2], out[2], err[2], exec_error[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC) || ::pipe2(exec_error, O_CLOEXEC))
    throw Error(std::string("pipe() for worker '") + argv[0] + "' failed on " + where_am_i() + ": " + std::strerror(errno));
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<std::string> environment_strings;
  for (char** variable = environ; *variable; ++variable) {
    const std::string entry = *variable;
    const auto name = entry.substr(0, entry.find('='));
    if (!extra_environment.count(name) && name != "CROSSBENCH_WORKER_OF") environment_strings.push_back(entry);
  }
  for (const auto& [name, value] : extra_environment) environment_strings.push_back(name + "=" + value);
  // Inherited by everything the worker starts: the Runner ends those of them that outlive the cell.
  environment_strings.push_back(process_tree::worker_mark());
  std::vector<char*> child_environment, child_argv;
  for (auto& entry : environment_strings) child_environment.push_back(entry.data());
  child_environment.push_back(nullptr);
  std::vector<std::string> arguments = argv;
  for (auto& argument : arguments) child_argv.push_back(argument.data());
  child_argv.push_back(nullptr);

  // Helpers that leave the worker's group (setsid) come back to the rank when
  // the worker ends, and the Runner ends them after the cell (process_tree.hpp).
  process_tree::adopt_orphans();
  pid_ = ::fork();
  if (pid_ < 0) throw Error(std::string("fork() for worker failed on ") + where_am_i() + ": " + std::strerror(errno));
  if (pid_ == 0) {
    ::setpgid(0, 0);  // its own group: killing the worker kills what it started too
    // A signal mask and ignored signals survive exec: the worker starts with
    // neither the rank's blocked stop signals (StopRequest) nor its ignored SIGPIPE.
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    ::execvpe(child_argv[0], child_argv.data(), child_environment.data());
    const int code = errno;
    (void)!::write(exec_error[1], &code, sizeof code);
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also here: no race with the child's own call
  owned_ = std::make_unique<process_tree::Owned>(pid_);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::close(exec_error[1]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
  int code = 0;
  const auto got = ::read(exec_error[0], &code, sizeof code);  // EOF (0) when exec succeeded
  ::close(exec_error[0]);
  if (got == static_cast<ssize_t>(sizeof code)) {
    kill_group();
    throw Error("cannot start worker '" + argv[0] + "': " + std::strerror(code));
  }
  ::signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill the rank through a write
}

Subprocess::~Subprocess() {
  kill_group();
  close_fd(stdin_);
  close_fd(stdout_);
  close_fd(stderr_);
}

void Subprocess::write_line(const std::string& line) {
  std::string data = line + "\n";
  std::size_t written = 0;
  while (written < data.size()) {
    const auto count = ::write(stdin_, data.data() + written, data.size() - written);
    if (count < 0) {
      if (errno == EINTR) continue;
      throw Error("writing to the worker failed (" + exit_description() + "): " + std::strerror(errno));
    }
    written += static_cast<std::size_t>(count);
  }
}

void Subprocess::drain_stderr(int timeout_ms) {
  if (stderr_ < 0) return;
  pollfd descriptor{stderr_, POLLIN, 0};
  while (::poll(&descriptor, 1, timeout_ms) > 0) {
    std::array<char, 65536> chunk;
    const auto count = ::read(stderr_, chunk.data(), chunk.size());
    if (count <= 0) {
      close_fd(stderr_);
      break;
    }
    stderr_recent_.append(chunk.data(), static_cast<std::size_t>(count));
    if (stderr_recent_.size() > 2 * kStderrTailBytes) {  // amortised: each byte is moved at most once
      stderr_recent_.erase(0, stderr_recent_.size() - kStderrTailBytes);
      stderr_cut_ = true;
    }
    timeout_ms = 0;
    descriptor.revents = 0;
  }
}

Subprocess::ReadOutcome Subprocess::read_line(std::string& line, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    // Only the bytes that arrived since the last look are searched: linear in the line's length.
    if (const auto newline = stdout_buffer_.find('\n', stdout_scanned_); newline != std::string::npos) {
      line = stdout_buffer_.substr(0, newline);
      stdout_buffer_.erase(0, newline + 1);
      stdout_scanned_ = 0;
      return ReadOutcome::line;
    }
    stdout_scanned_ = stdout_buffer_.size();
    if (stdout_buffer_.size() > kMaxProtocolLineBytes) {
      kill_group();
      stdout_buffer_.clear();
      stdout_scanned_ = 0;
      close_fd(stdout_);
      throw Error("the worker wrote a protocol line longer than " + std::to_string(kMaxProtocolLineBytes >> 20) +
                  " MiB without a newline; it was killed");
    }
    if (stdout_ < 0) return ReadOutcome::end_of_file;
    if (stop_flag::cell_must_end()) {
      kill_group();
      throw CellInterrupted(stop_flag::reason());
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return ReadOutcome::deadline;
    std::array<pollfd, 2> descriptors{{{stdout_, POLLIN, 0}, {stderr_, POLLIN, 0}}};
    // At most 200 ms between looks at the stop flag.
    const int ready = ::poll(descriptors.data(), stderr_ >= 0 ? 2 : 1,
                             static_cast<int>(std::min<long long>(left.count(), 200)));
    if (ready < 0 && errno != EINTR) throw Error(std::string("poll() on the worker failed: ") + std::strerror(errno));
    if (ready == 0 && !running()) {
      // The worker is gone but its output has no end: a helper it started
      // holds the pipe open. Its death is the end of its output.
      close_fd(stdout_);
      drain_stderr(100);
      continue;
    }
    if (stderr_ >= 0 && descriptors[1].revents) drain_stderr(0);
    if (descriptors[0].revents) {
      std::array<char, 65536> chunk;
      const auto count = ::read(stdout_, chunk.data(), chunk.size());
      if (count <= 0) {
        close_fd(stdout_);
        drain_stderr(100);  // a crashing worker's last words
      } else {
        stdout_buffer_.append(chunk.data(), static_cast<std::size_t>(count));
      }
    }
  }
}

std::string Subprocess::stderr_tail() {
  drain_stderr(0);
  // The last kStderrTailLines lines of the last kStderrTailBytes bytes.
  std::string tail = stderr_recent_.size() > kStderrTailBytes
                         ? stderr_recent_.substr(stderr_recent_.size() - kStderrTailBytes)
                         : stderr_recent_;
  bool cut = stderr_cut_ || tail.size() < stderr_recent_.size();
  std::size_t newlines = 0;
  for (std::size_t i = tail.size(); i-- > 0;) {
    if (tail[i] != '\n' || i + 1 == tail.size()) continue;  // a final newline ends the last line
    if (++newlines == kStderrTailLines) {
      tail.erase(0, i + 1);
      cut = true;
      break;
    }
  }
  return cut ? "[...]" + tail : tail;
}

bool Subprocess::running() {
  if (exited_ || pid_ <= 0) return false;
  // Looks without reaping (WNOWAIT): an unreaped leader keeps its pid, and so
  // its group's id, from being reused until kill_group has killed the group.
  siginfo_t info{};
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) {
    exited_ = true;
    exit_code_ = info.si_code;
    exit_value_ = info.si_status;
  }
  return !exited_;
}

void Subprocess::wait_for_exit(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running() && std::chrono::steady_clock::now() < deadline) ::usleep(10000);
}

void Subprocess::kill_group() {
  if (pid_ <= 0 || reaped_) return;
  // The whole group, whether or not the worker has exited already: a helper
  // it started (a compile worker pool) may never read stdin and never end on
  // its own. The leader is not reaped before this (running() looks with
  // WNOWAIT), so the group's id cannot have been reused.
  // First whatever still descends from a live worker outside its group (a
  // setsid child: with worker_per_cell = false the worker lives until the run
  // ends, and so do such children); once the worker has exited they are the
  // rank's, and the Runner's end_strays ends them.
  if (!exited_ && running())
    for (const auto& process : process_tree::descendants(process_tree::snapshot(), pid_, {}))
      if (process.group != pid_) (void)::kill(process.pid, SIGKILL);
  const auto left = process_tree::end_group(pid_, std::chrono::seconds(5));
  (void)left;  // a member stuck in the kernel: the Runner's end_strays names it after the cell
  int status = 0;
  if (::waitpid(pid_, &status, 0) == pid_ && !exited_) {
    exited_ = true;
    exit_code_ = WIFSIGNALED(status) ? CLD_KILLED : CLD_EXITED;
    exit_value_ = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
  }
  reaped_ = true;
  owned_.reset();  // reaped: no longer a live worker
}

std::string Subprocess::exit_description() {
  if (running()) return "running";
  if (exit_code_ == CLD_EXITED) return "exited with status " + std::to_string(exit_value_);
  if (exit_code_ == CLD_KILLED || exit_code_ == CLD_DUMPED)
    return std::string("killed by signal ") + std::to_string(exit_value_) + " (" + strsignal(exit_value_) + ")";
  return "ended";
}

}  // namespace crossbench
