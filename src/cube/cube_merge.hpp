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
// Schema 4: each cell's `source` is its input (source_<i>), the inputs' run
// segments are renumbered into the merged /segments and every cell and ranks
// row follows them; an input without segments (schema 2, 3) becomes one.
[[nodiscard]] CubeContents merge_cubes(const std::vector<MergeInput>& inputs, const MergePreference& preference);

// What a reader of the merged cube must know: inputs that are incomplete
// (run_state not "complete"), and each setting that changes the numbers (the
// options schema's rows) on which the inputs differ, with its values.
std::vector<std::string> merge_warnings(const std::vector<MergeInput>& inputs);

}  // namespace crossbench
