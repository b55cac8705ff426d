// --filter: cells selected by a regular expression over their names.
#include <regex>

#include "crossbench/options.hpp"

namespace crossbench {

bool cell_selected(const Options& options, const CellSpec& cell) {
  if (options.cell_filter.empty()) return true;
  // Validated when parsed (parse_command_options); compiled per call: a matrix
  // has thousands of cells at most, and a cache would be state to keep in step.
  return std::regex_search(describe(cell), std::regex(options.cell_filter, std::regex::ECMAScript));
}

}  // namespace crossbench
