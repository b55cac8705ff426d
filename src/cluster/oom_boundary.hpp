// The OOM boundary of a batch sweep (measure.oom_boundary = stop; DESIGN.md
// "Distribution"): once a cell runs out of memory, the cells of its series
// (the same device key, engine, network, precision, phase and gpus) at larger
// batches would too; they are recorded `oom` at once, each naming the batch
// that ran out, instead of paying a worker's start and a compile to fail at
// their first allocation. Each rank runs a series' batches smallest first
// (order_series_by_batch), learns from its own cells and, on rank 0, from the
// journal a resumed run keeps.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/planned_cell.hpp"
#include "crossbench/result.hpp"

namespace crossbench {

// The series of a cell: its device key and coordinates without the batch and the replica.
[[nodiscard]] std::string batch_series(const std::string& device_key, const CellSpec& cell);

class OomBoundary {
 public:
  // Learns from a finished cell: an `oom` lowers its series' boundary to its batch.
  void note(const CellResult& result);
  // The smallest batch of the cell's series known to run out of memory, where it is below the cell's.
  [[nodiscard]] std::optional<std::int64_t> exceeded_by(const std::string& device_key, const CellSpec& cell) const;
  // The result of a cell past the boundary: `oom`, not run, its message naming the batch that ran out.
  [[nodiscard]] static CellResult past_boundary(const std::string& device_key, const CellSpec& cell, int rank,
                                                std::int64_t oom_batch);

 private:
  std::map<std::string, std::int64_t> smallest_oom_batch_;  // series → batch
};

// Reorders `cells` (one rank's, in run order) so that each series' cells run smallest batch first: the
// positions a series holds stay its own (the plan's longest-first order between series is kept), its
// batches fill them in ascending order.
void order_series_by_batch(std::vector<PlannedCell>& cells);

}  // namespace crossbench
