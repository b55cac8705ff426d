#include "cube/cube_layout.hpp"

#include <cstdint>

#include "crossbench/cell.hpp"
#include "crossbench/error.hpp"

namespace crossbench::cube_layout {

std::span<const FloatVariable> float_variables() {
  // The order is the order of the variables in the file (netCDF lists them so).
  static constexpr FloatVariable variables[] = {
      {"median_ms", "ms", "median time per step",
       [](const CellResult& r) { return r.statistics.median_ms; },
       [](CellResult& r, double v) { r.statistics.median_ms = v; }},
      {"mean_ms", "ms", "mean time per step",
       [](const CellResult& r) { return r.statistics.mean_ms; },
       [](CellResult& r, double v) { r.statistics.mean_ms = v; }},
      {"std_ms", "ms", "sample standard deviation (n - 1) of the time per step",
       [](const CellResult& r) { return r.statistics.std_ms; },
       [](CellResult& r, double v) { r.statistics.std_ms = v; }},
      {"min_ms", "ms", "shortest time per step",
       [](const CellResult& r) { return r.statistics.min_ms; },
       [](CellResult& r, double v) { r.statistics.min_ms = v; }},
      {"max_ms", "ms", "longest time per step",
       [](const CellResult& r) { return r.statistics.max_ms; },
       [](CellResult& r, double v) { r.statistics.max_ms = v; }},
      {"p05_ms", "ms", "5th percentile of the time per step (linear interpolation)",
       [](const CellResult& r) { return r.statistics.p05_ms; },
       [](CellResult& r, double v) { r.statistics.p05_ms = v; }},
      {"p95_ms", "ms", "95th percentile of the time per step (linear interpolation)",
       [](const CellResult& r) { return r.statistics.p95_ms; },
       [](CellResult& r, double v) { r.statistics.p95_ms = v; }},
      {"ci_low_ms", "ms", "lower bound of the distribution-free 95% confidence interval of the median",
       [](const CellResult& r) { return r.statistics.ci_low_ms; },
       [](CellResult& r, double v) { r.statistics.ci_low_ms = v; }},
      {"ci_high_ms", "ms", "upper bound of the distribution-free 95% confidence interval of the median",
       [](const CellResult& r) { return r.statistics.ci_high_ms; },
       [](CellResult& r, double v) { r.statistics.ci_high_ms = v; }},
      {"images_per_s", "images/s", "throughput: batch / median time per step",
       [](const CellResult& r) { return r.images_per_s; },
       [](CellResult& r, double v) { r.images_per_s = v; }},
      {"tflops", "TFLOP/s", "arithmetic rate: FLOPs per step / median time per step",
       [](const CellResult& r) { return r.tflops; },
       [](CellResult& r, double v) { r.tflops = v; }},
      {"peak_memory_bytes", "bytes", "peak memory of the session: tensors, workspaces, weights",
       [](const CellResult& r) { return r.peak_memory_bytes; },
       [](CellResult& r, double v) { r.peak_memory_bytes = v; }},
      {"energy_j_per_image", "J/image", "energy per image during the timed steps",
       [](const CellResult& r) { return r.energy_j_per_image; },
       [](CellResult& r, double v) { r.energy_j_per_image = v; }},
      {"mean_sm_clock_mhz", "MHz", "mean SM clock during the timed steps",
       [](const CellResult& r) { return r.mean_sm_clock_mhz; },
       [](CellResult& r, double v) { r.mean_sm_clock_mhz = v; }},
      // Written since schema 4 without a schema change: a cube written before lacks them (read as NaN).
      {"min_sm_clock_mhz", "MHz", "lowest SM clock sampled during the timed steps",
       [](const CellResult& r) { return r.min_sm_clock_mhz; },
       [](CellResult& r, double v) { r.min_sm_clock_mhz = v; }, true},
      {"mean_power_w", "W", "mean board power during the timed steps",
       [](const CellResult& r) { return r.mean_power_w; },
       [](CellResult& r, double v) { r.mean_power_w = v; }, true},
      {"max_temperature_c", "degC", "hottest GPU temperature sampled during the timed steps",
       [](const CellResult& r) { return r.max_temperature_c; },
       [](CellResult& r, double v) { r.max_temperature_c = v; }, true},
      {"exposed_communication_ms", "ms",
       "data parallel: median time per step spent waiting for gradient all-reduces after the backward pass",
       [](const CellResult& r) { return r.exposed_communication_ms; },
       [](CellResult& r, double v) { r.exposed_communication_ms = v; }},
      {"scaling_efficiency", "1",
       "data parallel: images_per_s / (gpus * images_per_s of the gpus = 1 cell of the same coordinates)",
       [](const CellResult& r) { return r.scaling_efficiency; },
       [](CellResult& r, double v) { r.scaling_efficiency = v; }},
  };
  return variables;
}

hdf5::Datatype status_enum_type() {
  hdf5::Datatype type(CB_CHECK_HDF5(H5Tenum_create(H5T_STD_U8LE)));
  for (const std::string& name : status_names()) {
    const std::uint8_t value = static_cast<std::uint8_t>(*status_from_string(name));
    CB_CHECK_HDF5(H5Tenum_insert(type, name.c_str(), &value));
  }
  return type;
}

SampleBlocks::SampleBlocks(const CellIndex& cell_dims, hsize_t steps) : cell_dims_(cell_dims), steps_(steps) {
  // Fix as few leading dimensions as keep one block within both limits; a
  // single cell longer than max_block_bytes is still one block.
  const std::size_t bytes_per_cell = static_cast<std::size_t>(steps) * sizeof(double);
  for (fixed_dimensions_ = 0; fixed_dimensions_ < cell_rank; ++fixed_dimensions_) {
    std::size_t cells = 1;
    for (std::size_t d = fixed_dimensions_; d < cell_rank; ++d) cells *= cell_dims_[d];
    if (cells <= max_block_cells && cells * bytes_per_cell <= max_block_bytes) break;
  }
  cells_per_block_ = 1;
  for (std::size_t d = fixed_dimensions_; d < cell_rank; ++d) cells_per_block_ *= cell_dims_[d];
  block_count_ = 1;
  for (std::size_t d = 0; d < fixed_dimensions_; ++d) block_count_ *= cell_dims_[d];
  if (cells_per_block_ == 0) block_count_ = 0;  // an empty axis: no cells at all
}

void SampleBlocks::hyperslab(std::size_t block, std::array<hsize_t, cell_rank + 1>& start,
                             std::array<hsize_t, cell_rank + 1>& count) const {
  // Row-major decomposition of `block` over the fixed leading dimensions.
  std::size_t rest = block;
  for (std::size_t d = fixed_dimensions_; d-- > 0;) {
    start[d] = rest % cell_dims_[d];
    rest /= cell_dims_[d];
    count[d] = 1;
  }
  for (std::size_t d = fixed_dimensions_; d < cell_rank; ++d) {
    start[d] = 0;
    count[d] = cell_dims_[d];
  }
  start[cell_rank] = 0;
  count[cell_rank] = steps_;
}

}  // namespace crossbench::cube_layout
