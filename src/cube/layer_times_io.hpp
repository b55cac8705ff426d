// The cube's group /layer_times (README "Layer times in the cube"): the
// per-layer times of --layer-times, written and read beside the main
// variables, which they never change. Absent from a cube without layer times.
#pragma once

#include <hdf5.h>

#include <span>
#include <string>
#include <vector>

#include "crossbench/result.hpp"

namespace crossbench::cube_layout {

inline constexpr const char* layer_times_group = "layer_times";

// `cells`: the cube's cells in the row-major order of its per-cell variables
// (nullptr where nothing ran). Each ok cell with layer times becomes the
// subgroup /layer_times/cell_<i>, i its position there, listed in the index
// table of /layer_times. Writes nothing when no cell has layer times.
void write_layer_times(hid_t file, std::span<const CellResult* const> cells);

// Gives each of `cells` the layer times the file holds for it (matched by
// device key and coordinates); Error when a subgroup names a cell that is not
// among them or its variables disagree in length.
void read_layer_times(hid_t file, const std::string& what, std::vector<CellResult>& cells);

}  // namespace crossbench::cube_layout
