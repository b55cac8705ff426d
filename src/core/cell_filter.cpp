// --filter: cells selected by a regular expression over their names (include/crossbench/cell.hpp).
#include <regex>

#include "crossbench/cell.hpp"

namespace crossbench {

bool cell_selected(const std::string& filter, const CellSpec& cell) {
  if (filter.empty()) return true;
  // Validated when parsed (src/app/options.cpp); compiled per call: a matrix
  // has thousands of cells at most, and a cache would be state to keep in step.
  return std::regex_search(describe(cell), std::regex(filter, std::regex::ECMAScript));
}

}  // namespace crossbench
