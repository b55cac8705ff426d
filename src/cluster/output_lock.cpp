#include "cluster/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

std::string holder_text() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) host = {'?'};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> since{};
  std::strftime(since.data(), since.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string("host ") + host.data() + ", pid " + std::to_string(::getpid()) + ", since " + since.data() + "\n";
}

std::string read_holder(int descriptor) {
  std::array<char, 512> text{};
  const auto count = ::pread(descriptor, text.data(), text.size() - 1, 0);
  std::string holder = count > 0 ? std::string(text.data(), static_cast<std::size_t>(count)) : std::string();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder.empty() ? "a process that has not written its name yet" : holder;
}

// A full, read-only or failing disk is an Error (exit 1: retry once fixed);
// any other refusal (no permission, a missing directory) is the user's to fix
// by choosing another output: a UsageError (exit 2).
[[noreturn]] void throw_lock_error(const std::string& what, const std::filesystem::path& path) {
  const int code = errno;
  const std::string message = what + " '" + path.string() + "' failed on " + where_am_i() + ": " + std::strerror(code);
  if (is_storage_failure(code) || code == 0 || code == ENOLCK) throw Error(message);
  throw UsageError(message + "; choose another --output");
}

}  // namespace

std::filesystem::path lock_path(const std::filesystem::path& cube) { return std::filesystem::path(cube.string() + ".lock"); }

OutputLock::OutputLock(const std::filesystem::path& cube) : path_(lock_path(cube)) {
  // The file may be replaced between open and flock (a finishing holder removes
  // it): the lock counts only when the locked file is still the one at the path.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int descriptor = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (descriptor < 0) {
      if (errno == ELOOP) throw UsageError("lock file '" + path_.string() + "' is a symbolic link; remove it");
      throw_lock_error("creating lock file", path_);
    }
    struct stat opened {};
    if (::fstat(descriptor, &opened) != 0 || !S_ISREG(opened.st_mode)) {
      ::close(descriptor);
      throw UsageError("lock file '" + path_.string() + "' is not a regular file; remove it");
    }
    if (::flock(descriptor, LOCK_EX | LOCK_NB) != 0) {
      const int error = errno;
      if (error == EWOULDBLOCK) {
        const std::string holder = read_holder(descriptor);
        ::close(descriptor);
        throw UsageError("output '" + cube.string() + "' is in use by another crossbench run (" + holder +
                         ", lock '" + path_.string() + "'); wait for it to end, stop it, or choose another --output");
      }
      ::close(descriptor);
      errno = error;
      throw_lock_error("locking", path_);
    }
    struct stat named {};
    if (::stat(path_.c_str(), &named) == 0 && named.st_ino == opened.st_ino && named.st_dev == opened.st_dev) {
      descriptor_ = descriptor;
      const std::string holder = holder_text();
      errno = 0;
      if (::ftruncate(descriptor_, 0) == 0 &&
          ::pwrite(descriptor_, holder.data(), holder.size(), 0) == static_cast<ssize_t>(holder.size()))
        return;
      const int error = errno != 0 ? errno : EIO;  // a short write without an errno: the disk failed it
      ::unlink(path_.c_str());
      ::close(std::exchange(descriptor_, -1));
      errno = error;
      throw_lock_error("writing lock file", path_);
    }
    ::close(descriptor);  // locked a file that was removed meanwhile: try the new one
  }
  throw Error("could not lock '" + path_.string() + "': it keeps being replaced");
}

OutputLock::~OutputLock() {
  if (descriptor_ < 0) return;
  ::unlink(path_.c_str());  // while still locked: a waiting run then locks a fresh file
  ::close(descriptor_);
}

}  // namespace crossbench
