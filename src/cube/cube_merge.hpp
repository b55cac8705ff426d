// `crossbench merge`: one cube from the cubes of separate runs (a buyer tests
// loaner systems one after another, never in one MPI world).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "crossbench/cube.hpp"

namespace crossbench {

struct MergeInput {
  std::filesystem::path path;
  CubeContents contents;  // as read_cube returns it
};

// Which input wins a cell that several inputs hold: none (refuse), the first
// or the last input that holds it, or the input `preferred_path`.
struct MergePreference {
  enum class Rule { refuse, first, last, file } rule = Rule::refuse;
  std::filesystem::path preferred_path;
};

// The union of the inputs' axes (in order of first appearance; batches, gpus
// and replicas ascending), every input's cells, the inputs' ranks tables one
// after another, the root attributes on which all inputs agree, and each
// input's attributes and ranks in `sources` (a merged input's own sources are
// carried over, so merging merged cubes keeps every run). Throws UsageError
// naming the cells that two inputs hold, unless `preference` says which wins.
[[nodiscard]] CubeContents merge_cubes(const std::vector<MergeInput>& inputs, const MergePreference& preference);

}  // namespace crossbench
