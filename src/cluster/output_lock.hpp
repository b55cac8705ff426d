// One run per output: rank 0 holds an exclusive lock on `<cube>.lock` for the
// whole run, so that a second `run`, `--overwrite` or `--resume` on the same
// output cannot measure the same cells again, truncate a running journal or
// mix two runs into one cube (DESIGN.md "Distribution").
//
// The lock is flock(2) on `<cube>.lock` (on NFS, Linux maps it to a POSIX
// lock that the server enforces across hosts); the file holds the holder's
// host, pid and start time, so a refused run can say who holds it. The lock
// goes with the process: a killed run never leaves a stale lock behind, only
// the file, which the next run takes over.
#pragma once

#include <filesystem>
#include <string>

namespace crossbench {

std::filesystem::path lock_path(const std::filesystem::path& cube);

class OutputLock {
 public:
  // Takes the lock or throws UsageError naming the holder (host, pid, since when).
  explicit OutputLock(const std::filesystem::path& cube);
  ~OutputLock();  // releases the lock and removes the file
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::filesystem::path path_;
  int descriptor_ = -1;
};

}  // namespace crossbench
