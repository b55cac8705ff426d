// A worker process: started directly (no shell, arguments as a list) in its
// own process group, spoken to in lines over its stdin/stdout; its stderr is
// drained all the time (a full pipe would block it) and the last lines kept
// for error messages. The destructor kills the whole group.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace crossbench {

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
  ReadOutcome read_line(std::string& line, std::chrono::steady_clock::time_point deadline);
  std::string stderr_tail();  // the last lines the process wrote to stderr
  void kill_group();          // SIGKILL to the whole process group, then reaps
  bool running();
  // After end of output: gives a dying process up to `timeout` to finish, so
  // that exit_description() can say how it ended.
  void wait_for_exit(std::chrono::milliseconds timeout);
  std::string exit_description();  // "exited with status 1", "killed by signal 11", or "running"

 private:
  void drain_stderr(int timeout_ms);
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  std::string stdout_buffer_, stderr_buffer_;
  std::deque<std::string> stderr_lines_;
  int wait_status_ = 0;
  bool reaped_ = false;
};

}  // namespace crossbench
