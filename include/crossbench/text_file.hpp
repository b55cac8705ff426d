// Reading a small text file that the user names (a job file): it must be a
// regular file under a size cap, so that a FIFO never hangs the run and
// /dev/zero never fills the memory.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace crossbench {

inline constexpr std::size_t kMaxJobFileBytes = std::size_t{1} << 20;  // [bytes] a job file is a few lines

// The whole file; throws UsageError naming `what` (e.g. "job file") and the
// path when it is missing, unreadable, not a regular file or over `max_bytes`.
std::string read_regular_text_file(const std::filesystem::path& path, const std::string& what,
                                   std::size_t max_bytes = kMaxJobFileBytes);

}  // namespace crossbench
