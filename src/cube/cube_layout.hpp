// The layout of the cube (README "The results cube"), shared by the writer and
// the reader so that the two can never disagree on a name, a type or a unit.
#pragma once

#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "crossbench/result.hpp"
#include "cube/hdf5_handle.hpp"

namespace crossbench::cube_layout {

inline constexpr std::size_t cell_rank = 8;  // dimensions of a per-cell variable
inline constexpr std::array<const char*, cell_rank> cell_dimensions{
    "device", "engine", "network", "precision", "batch", "phase", "gpus", "replica"};
inline constexpr const char* step_dimension = "step";
inline constexpr const char* status_type_name = "status_t";
inline constexpr const char* ranks_group = "ranks";
inline constexpr const char* rank_row_dimension = "rank_row";
inline constexpr const char* samples_variable = "samples_ms";
inline constexpr const char* repetition_dimension = "repetition";            // schema 4
inline constexpr const char* repetition_variable = "repetition_median_ms";  // schema 4

// A float64 per-cell variable: NaN unless status == ok.
struct FloatVariable {
  const char* name;
  const char* units;
  const char* long_name;
  double (*get)(const CellResult&);
  void (*set)(CellResult&, double);
  // Added to the layout without a schema change: a cube written before lacks it, and it reads as NaN.
  bool optional = false;
};
std::span<const FloatVariable> float_variables();

// The enum `status_t` over uint8 (values of crossbench::Status), used as the
// committed file type and as the memory type (a byte has no byte order).
hdf5::Datatype status_enum_type();

using CellIndex = std::array<hsize_t, cell_rank>;

// samples_ms is read and written in blocks of whole cells that are contiguous
// in the row-major cell order: the leading dimensions are fixed and the rest
// span their axes. A block holds at most `max_block_cells` cells and, where
// possible, at most `max_block_bytes` of samples, so memory stays bounded
// however large the cube is: HDF5 keeps several KiB of bookkeeping per chunk
// (= per cell) of one H5Dwrite, besides the buffer itself.
class SampleBlocks {
 public:
  static constexpr std::size_t max_block_bytes = std::size_t{16} << 20;  // 16 MiB of samples
  static constexpr std::size_t max_block_cells = 4096;

  SampleBlocks(const CellIndex& cell_dims, hsize_t steps);
  std::size_t count() const { return block_count_; }
  std::size_t cells_per_block() const { return cells_per_block_; }
  // Start and count of block `block` in the 8-D samples dataset.
  void hyperslab(std::size_t block, std::array<hsize_t, cell_rank + 1>& start,
                 std::array<hsize_t, cell_rank + 1>& count) const;

 private:
  CellIndex cell_dims_;
  hsize_t steps_;
  std::size_t fixed_dimensions_ = 0;
  std::size_t block_count_ = 1;
  std::size_t cells_per_block_ = 1;
};

}  // namespace crossbench::cube_layout
