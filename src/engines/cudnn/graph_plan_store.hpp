// engine.graph_plan_reuse: the runtime-compiled Graph API plans as bytes, kept across sessions and, beside a
// file-backed algorithm cache, across processes. Plain C++ (no cuDNN type): tested on the CPU.
//
// The file, FILE.plans beside --algo-cache FILE (binary; the plans are cuDNN's own serialization):
//   "crossbench-graph-plans/1\n", then records until the end, each
//   [u32 length][context] [u32 length][key] [u64 length][plan bytes]   (lengths little-endian)
// The context is the algorithm cache's (the device and the libraries: bytes of one cuDNN's runtime compiler
// are no plan for another's); records of other contexts are kept and written back, never restored here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace crossbench::cudnn {

class GraphPlanStore {
 public:
  // In memory only (`path` empty), or backed by `path`: a missing file is an empty store; a file that is not
  // a store of this format throws UsageError naming the file, the record and what is wrong.
  explicit GraphPlanStore(std::filesystem::path path = {}, std::string context = {});

  // Keeps a plan's bytes under `key` (graph_plan_key); the first kept stays, a file's included.
  void keep(const std::string& key, std::vector<std::uint8_t> bytes);
  // The bytes kept under `key` in this context, or nullptr.
  [[nodiscard]] const std::vector<std::uint8_t>* find(const std::string& key) const;
  [[nodiscard]] int plans() const { return static_cast<int>(plans_.size()); }
  // Plans of this context read from the file when the store was made.
  [[nodiscard]] int loaded() const { return loaded_; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] bool file_backed() const { return !path_.empty(); }

  // File-backed and with plans kept since the last save: merges them with what the file holds now (another
  // process may have added), under an exclusive lock on FILE.lock, and writes the result atomically.
  void save();

  // The file's bytes of every record (this context's and the others'), and its inverse (throws UsageError).
  [[nodiscard]] std::string serialized() const;
  void merge(const std::string& bytes, const std::string& source);

 private:
  std::filesystem::path path_;
  std::string context_;
  std::map<std::string, std::vector<std::uint8_t>> plans_;  // this context's, by key
  std::map<std::pair<std::string, std::string>, std::vector<std::uint8_t>> foreign_;  // (context, key)
  int loaded_ = 0;
  bool unsaved_ = false;
};

}  // namespace crossbench::cudnn
