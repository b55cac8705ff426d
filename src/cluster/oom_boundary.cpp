#include "cluster/oom_boundary.hpp"

#include <algorithm>

#include "core/utc_time.hpp"
#include "crossbench/cell.hpp"

namespace crossbench {

std::string batch_series(const std::string& device_key, const CellSpec& cell) {
  CellSpec series = cell;
  series.batch = 0;
  series.replica = 0;
  return cell_key(device_key, series);
}

void OomBoundary::note(const CellResult& result) {
  if (result.status != Status::oom) return;
  const std::string series = batch_series(result.device_key, result.cell);
  const auto found = smallest_oom_batch_.find(series);
  if (found == smallest_oom_batch_.end() || result.cell.batch < found->second) smallest_oom_batch_[series] = result.cell.batch;
}

std::optional<std::int64_t> OomBoundary::exceeded_by(const std::string& device_key, const CellSpec& cell) const {
  const auto found = smallest_oom_batch_.find(batch_series(device_key, cell));
  if (found == smallest_oom_batch_.end() || cell.batch <= found->second) return std::nullopt;
  return found->second;
}

CellResult OomBoundary::past_boundary(const std::string& device_key, const CellSpec& cell, int rank,
                                      std::int64_t oom_batch) {
  CellResult result;
  result.device_key = device_key;
  result.cell = cell;
  result.rank = rank;
  result.status = Status::oom;
  result.started_utc = utc_now();  // recorded, not run: it starts and ends at once
  result.finished_utc = result.started_utc;
  result.message = "not run: past the OOM boundary (measure.oom_boundary = stop): batch " + std::to_string(oom_batch) +
                   " of the same engine, network, precision and phase ran out of memory on this device key, and batch " +
                   std::to_string(cell.batch) + " needs more";
  return result;
}

void order_series_by_batch(std::vector<PlannedCell>& cells) {
  std::map<std::string, std::vector<std::size_t>> positions;  // series → its positions in run order
  for (std::size_t i = 0; i < cells.size(); ++i)
    if (!cells[i].data_parallel()) positions[batch_series(cells[i].device_key, cells[i].cell)].push_back(i);
  for (const auto& [series, at] : positions) {
    std::vector<PlannedCell> members;
    for (const std::size_t i : at) members.push_back(cells[i]);
    std::stable_sort(members.begin(), members.end(),
                     [](const PlannedCell& a, const PlannedCell& b) { return a.cell.batch < b.cell.batch; });
    for (std::size_t k = 0; k < at.size(); ++k) cells[at[k]] = members[k];
  }
}

}  // namespace crossbench
