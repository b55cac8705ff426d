// The files the cuDNN engine's caches live in (the algorithm cache, algorithm_cache.hpp, and the graph
// plans beside it, graph_plan_store.hpp): read whole, written atomically, merged under an exclusive lock so
// that ranks and processes sharing one file lose nothing. One implementation for both. Plain C++.
#pragma once

#include <filesystem>
#include <string>

namespace crossbench::cudnn::cache_file {

// An exclusive advisory lock on PATH.lock for the lifetime of the object (flock: released on close, also
// when the process dies). Throws Error naming the call and the file.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::filesystem::path path_;
  int descriptor_ = -1;
};

// The whole file, bytes as they are. Throws Error naming the call and the file.
[[nodiscard]] std::string read_all(const std::filesystem::path& path);

// Writes `bytes` to a temporary file beside `path`, fsync'd, then renames it over `path`: a reader sees the
// old file or the new one, never part of one. Throws Error naming the call and the file.
void write_atomically(const std::filesystem::path& path, const std::string& bytes);

}  // namespace crossbench::cudnn::cache_file
