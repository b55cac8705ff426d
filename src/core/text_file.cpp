#include "crossbench/text_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::string read_regular_text_file(const std::filesystem::path& path, const std::string& what, std::size_t max_bytes) {
  const std::string named = what + " '" + path.string() + "'";
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat refuses it next.
  const int descriptor = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (descriptor < 0) throw UsageError("cannot read " + named + ": " + std::strerror(errno));
  struct Closer {
    int descriptor;
    ~Closer() { ::close(descriptor); }
  } closer{descriptor};
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) throw UsageError("cannot read " + named + ": " + std::strerror(errno));
  if (!S_ISREG(status.st_mode)) throw UsageError("cannot read " + named + ": it is " + file_kind(status.st_mode));
  if (static_cast<std::size_t>(status.st_size) > max_bytes)
    throw UsageError("cannot read " + named + ": it has " + std::to_string(status.st_size) + " bytes; at most " +
                     std::to_string(max_bytes) + " are accepted");
  std::string text;
  std::string chunk(65536, '\0');
  while (true) {
    const auto count = ::read(descriptor, chunk.data(), chunk.size());
    if (count < 0 && errno == EINTR) continue;
    if (count < 0) throw UsageError("cannot read " + named + ": " + std::strerror(errno));
    if (count == 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(count));
    if (text.size() > max_bytes)  // it grew while being read
      throw UsageError("cannot read " + named + ": it has more than " + std::to_string(max_bytes) + " bytes");
  }
  return text;
}

}  // namespace crossbench
