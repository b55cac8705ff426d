// cache_file.hpp: POSIX calls, each checked (an Error naming the call, the file and errno's text).
#include "engines/cudnn/cache_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "crossbench/error.hpp"

namespace crossbench::cudnn::cache_file {
namespace {

[[noreturn]] void system_error(const char* call, const std::filesystem::path& path) {
  const int error = errno;
  throw_library_error("POSIX", std::string(call) + "(" + path.string() + ")", __FILE__, __LINE__,
                      std::strerror(error));
}

}  // namespace

FileLock::FileLock(const std::filesystem::path& path) : path_(path.string() + ".lock") {
  descriptor_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (descriptor_ < 0) system_error("open", path_);
  if (::flock(descriptor_, LOCK_EX) != 0) {
    const int error = errno;
    ::close(descriptor_);
    errno = error;
    system_error("flock", path_);
  }
}

FileLock::~FileLock() { ::close(descriptor_); }  // closing releases the lock

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) system_error("open", path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_atomically(const std::filesystem::path& path, const std::string& bytes) {
  const std::filesystem::path temporary = path.string() + ".tmp." + std::to_string(::getpid());
  const int descriptor = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (descriptor < 0) system_error("open", temporary);
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(descriptor, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(descriptor);
      ::unlink(temporary.c_str());
      errno = error;
      system_error("write", temporary);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(descriptor) != 0 || ::close(descriptor) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    errno = error;
    system_error("fsync", temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    ::unlink(temporary.c_str());
    errno = error;
    system_error("rename", temporary.string() + " -> " + path.string());
  }
}

}  // namespace crossbench::cudnn::cache_file
