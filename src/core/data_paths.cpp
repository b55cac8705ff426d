#include "crossbench/data_paths.hpp"

#include <system_error>

#include "crossbench/build_info.hpp"

namespace crossbench {
namespace {

bool is_folder(const std::filesystem::path& path) {
  std::error_code ignored;
  return std::filesystem::is_directory(path, ignored);
}

// A folder laid out as the repository: jobs/ and the workers' common code.
bool is_source_tree(const std::filesystem::path& root) {
  return is_folder(root / "jobs") && is_folder(root / "src" / "workers" / "common");
}

DataPaths source_tree(const std::filesystem::path& root) {
  return {root / "jobs", root / "src" / "workers", (root / "scripts" / "report").string(), false};
}

}  // namespace

DataPaths data_paths_for(const std::filesystem::path& executable) {
  const std::filesystem::path bin = executable.parent_path(), prefix = bin.parent_path();
  const std::filesystem::path share = prefix / "share" / "crossbench";
  const DataPaths installed{share / "jobs", share / "workers", (bin / "crossbench-report").string(), true};
  if (is_folder(installed.jobs) && is_folder(installed.workers / "common")) return installed;
  for (const auto& root : {bin, prefix, prefix.parent_path()})  // build/crossbench, .bundle/bin/crossbench
    if (!root.empty() && is_source_tree(root)) return source_tree(root);
  // An out-of-tree build's binary, still where it was built: its sources.
  std::error_code ignored;
  if (std::filesystem::equivalent(bin, build_info::binary_dir, ignored) && is_source_tree(build_info::source_dir))
    return source_tree(build_info::source_dir);
  return installed;
}

const DataPaths& data_paths() {
  static const DataPaths paths = [] {
    std::error_code error;
    const auto executable = std::filesystem::canonical("/proc/self/exe", error);
    return data_paths_for(error ? std::filesystem::path() : executable);
  }();
  return paths;
}

std::filesystem::path resolve_job_file(const std::filesystem::path& path) {
  std::error_code ignored;
  if (std::filesystem::exists(path, ignored) || path.is_absolute()) return path;
  const bool bare = !path.has_parent_path() || path.parent_path() == "jobs";
  if (!bare) return path;
  const auto installed = data_paths().jobs / path.filename();
  return std::filesystem::exists(installed, ignored) ? installed : path;
}

}  // namespace crossbench
