// A worker process: started directly (no shell, arguments as a list) in its
// own process group, spoken to in lines over its stdin/stdout; its stderr is
// drained all the time (a full pipe would block it) and its last lines kept
// for error messages. The destructor kills the whole group.
//
// A worker is not trusted with memory: one protocol line is at most
// kMaxProtocolLineBytes (a longer one kills the worker), the stderr tail kept
// is at most kStderrTailBytes, and both are read in time linear in their size.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/process_tree.hpp"

namespace crossbench {

inline constexpr std::size_t kMaxProtocolLineBytes = std::size_t{64} << 20;  // [bytes] ~3 million samples
inline constexpr std::size_t kStderrTailBytes = 4096;                          // [bytes] kept for messages
inline constexpr std::size_t kStderrTailLines = 20;

class Subprocess {
 public:
  // Throws Error when the program cannot be started (e.g. not found), naming it.
  Subprocess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra_environment);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  void write_line(const std::string& line);  // throws Error when the process is gone
  enum class ReadOutcome { line, end_of_file, deadline };
  // Reads one line from stdout before `deadline`; on end_of_file or deadline `line` is untouched.
  // Throws Error (after killing the worker) for a line over kMaxProtocolLineBytes,
  // and CellInterrupted (after killing it) when the running cell must end now.
  ReadOutcome read_line(std::string& line, std::chrono::steady_clock::time_point deadline);
  std::string stderr_tail();  // the last lines the process wrote to stderr, at most kStderrTailBytes
  // SIGKILL to the whole process group until it is empty, even after the
  // worker itself exited (its helpers may live on), then reaps the worker.
  void kill_group();
  bool running();
  // After end of output: gives a dying process up to `timeout` to finish, so
  // that exit_description() can say how it ended.
  void wait_for_exit(std::chrono::milliseconds timeout);
  std::string exit_description();  // "exited with status 1", "killed by signal 11", or "running"

 private:
  void drain_stderr(int timeout_ms);
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  std::string stdout_buffer_;
  std::size_t stdout_scanned_ = 0;  // bytes of stdout_buffer_ known to hold no newline
  std::string stderr_recent_;       // the last bytes of stderr, between kStderrTailBytes and twice that
  bool stderr_cut_ = false;         // stderr_recent_ lost its beginning
  bool exited_ = false;  // seen to end (waitid WNOWAIT), maybe not yet reaped
  int exit_code_ = 0;    // siginfo si_code: CLD_EXITED, CLD_KILLED, CLD_DUMPED
  int exit_value_ = 0;   // the exit status or the signal number
  bool reaped_ = false;
  std::unique_ptr<process_tree::Owned> owned_;  // while live: its tree is not a stray
};

}  // namespace crossbench
