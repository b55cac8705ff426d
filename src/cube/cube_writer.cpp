// write_cube (cube.hpp): the whole cube in bulk, each variable built in memory
// and written with one H5Dwrite (samples_ms in bounded blocks), to a temporary
// file that is renamed over the destination only once it is complete on disk.
#include <fcntl.h>
#include <hdf5.h>
#include <hdf5_hl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "cube/cube_layout.hpp"
#include "cube/hdf5_handle.hpp"
#include "cube/hdf5_io.hpp"
#include "cube/layer_times_io.hpp"

namespace crossbench {
namespace {

namespace fs = std::filesystem;
namespace layout = cube_layout;
using layout::cell_rank;
using layout::CellIndex;

std::string in_quotes(const std::string& value) { return "\"" + value + "\""; }
std::string in_quotes(std::int64_t value) { return std::to_string(value); }

// Position of each value on one axis; refuses an axis that lists a value twice.
template <typename T>
class AxisIndex {
 public:
  AxisIndex(const char* axis, const std::vector<T>& values) : axis_(axis) {
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!positions_.emplace(values[i], i).second)
        throw Error(std::string("cube axis `") + axis + "` lists " + in_quotes(values[i]) + " twice");
  }
  // Throws Error naming `cell` when `value` is not on the axis.
  hsize_t position(const T& value, const CellResult& cell) const {
    const auto found = positions_.find(value);
    if (found == positions_.end())
      throw Error("cube cell " + describe(cell.cell) + " on device " + in_quotes(cell.device_key) +
                  " is not on the cube's axes: " + in_quotes(value) + " is not on the `" + axis_ + "` axis");
    return found->second;
  }

 private:
  std::string axis_;
  std::unordered_map<T, hsize_t> positions_;
};

// The cells placed on the grid of the axes, row-major over the 8 cell dims.
struct CellGrid {
  CellIndex dims{};
  std::vector<const CellResult*> cells;  // nullptr: not_run, nothing known
  hsize_t steps = 1;                     // length of the `step` axis: longest samples, at least 1
};

CellGrid place_cells(const CubeContents& contents) {
  const CubeAxes& axes = contents.axes;
  const AxisIndex<std::string> devices("device", axes.devices);
  const AxisIndex<std::string> engines("engine", axes.engines);
  const AxisIndex<std::string> networks("network", axes.networks);
  const AxisIndex<std::string> precisions("precision", axes.precisions);
  const AxisIndex<std::int64_t> batches("batch", axes.batches);
  const AxisIndex<std::string> phases("phase", axes.phases);
  const AxisIndex<std::int64_t> gpus("gpus", {axes.gpus.begin(), axes.gpus.end()});
  const AxisIndex<std::int64_t> replicas("replica", {axes.replicas.begin(), axes.replicas.end()});

  CellGrid grid;
  grid.dims = {axes.devices.size(), axes.engines.size(),    axes.networks.size(), axes.precisions.size(),
               axes.batches.size(), axes.phases.size(),     axes.gpus.size(),     axes.replicas.size()};
  std::size_t cell_count = 1;
  for (const hsize_t dim : grid.dims) cell_count *= dim;
  grid.cells.assign(cell_count, nullptr);

  for (const CellResult& result : contents.cells) {
    const CellSpec& cell = result.cell;
    const CellIndex index{devices.position(result.device_key, result),
                          engines.position(cell.engine, result),
                          networks.position(cell.network, result),
                          precisions.position(std::string(to_string(cell.precision)), result),
                          batches.position(cell.batch, result),
                          phases.position(std::string(to_string(cell.phase)), result),
                          gpus.position(cell.gpus, result),
                          replicas.position(cell.replica, result)};
    std::size_t linear = 0;
    for (std::size_t d = 0; d < cell_rank; ++d) linear = linear * grid.dims[d] + index[d];
    if (grid.cells[linear] != nullptr)
      throw Error("cube cell " + describe(cell) + " on device " + in_quotes(result.device_key) +
                  " appears twice in the cube's contents");
    grid.cells[linear] = &result;
    grid.steps = std::max<hsize_t>(grid.steps, result.samples_ms.size());
  }
  return grid;
}

// The root attributes after `schema`: the caller's, plus the HDF5 version that
// writes the file (the writer's own fact wins over a caller's entry).
std::map<std::string, std::string> root_attributes(const std::map<std::string, std::string>& given) {
  std::map<std::string, std::string> attributes = given;
  if (const auto schema_entry = attributes.find("schema"); schema_entry != attributes.end()) {
    if (schema_entry->second != cube_schema)
      throw Error("cube attribute `schema` is written by the writer (" + std::string(cube_schema) +
                  "); the contents ask for " + in_quotes(schema_entry->second));
    attributes.erase(schema_entry);
  }
  unsigned major = 0, minor = 0, release = 0;
  CB_CHECK_HDF5(H5get_libversion(&major, &minor, &release));
  attributes["hdf5_version"] =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  for (const auto& [name, value] : attributes)
    if (name.empty()) throw Error("cube attribute with an empty name");
  return attributes;
}

// Property lists of groups (the root's come with the file): netCDF-4 reads
// variables in link creation order and attributes in attribute creation order,
// and drops what it cannot order.
void track_creation_order(hid_t group_creation_properties) {
  CB_CHECK_HDF5(H5Pset_link_creation_order(group_creation_properties,
                                           H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  CB_CHECK_HDF5(H5Pset_attr_creation_order(group_creation_properties,
                                           H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
}

void describe_variable(hid_t variable, const char* long_name, const char* units) {
  hdf5::write_string_attribute(variable, "long_name", long_name);
  if (units != nullptr) hdf5::write_string_attribute(variable, "units", units);
}

void make_scale(hid_t dataset, const char* dimension) {
  CB_CHECK_HDF5(H5DSset_scale(dataset, dimension));
}

void attach_scales(hid_t variable, std::span<const hdf5::Dataset> scales) {
  for (std::size_t d = 0; d < scales.size(); ++d)
    CB_CHECK_HDF5(H5DSattach_scale(variable, scales[d], static_cast<unsigned>(d)));
}

// The coordinates: device ... replica, then step.
std::vector<hdf5::Dataset> write_coordinates(hid_t file, const CubeAxes& axes, hsize_t steps) {
  std::vector<hdf5::Dataset> scales;
  auto add = [&](hdf5::Dataset dataset, const char* name, const char* long_name, const char* units) {
    make_scale(dataset, name);
    describe_variable(dataset, long_name, units);
    scales.push_back(std::move(dataset));
  };
  add(hdf5::create_string_vector(file, "device", axes.devices), "device",
      "device key: kind, model, memory, compute units, architecture, tag", nullptr);
  add(hdf5::create_string_vector(file, "engine", axes.engines), "engine", "engine that ran the network", nullptr);
  add(hdf5::create_string_vector(file, "network", axes.networks), "network", "network", nullptr);
  add(hdf5::create_string_vector(file, "precision", axes.precisions), "precision", "arithmetic precision",
      nullptr);
  add(hdf5::create_vector<std::int64_t>(file, "batch", axes.batches), "batch", "images per step (minibatch)",
      "images");
  add(hdf5::create_string_vector(file, "phase", axes.phases), "phase", "inference or training", nullptr);
  add(hdf5::create_vector<std::int32_t>(file, "gpus", axes.gpus), "gpus",
      "devices training together (data parallel; batch is per device), 1 = single device", "1");
  add(hdf5::create_vector<std::int32_t>(file, "replica", axes.replicas), "replica",
      "replica: the same cell on another device of the same key", "1");
  std::vector<std::int32_t> step_numbers(steps);
  for (hsize_t s = 0; s < steps; ++s) step_numbers[s] = static_cast<std::int32_t>(s);
  add(hdf5::create_vector<std::int32_t>(file, layout::step_dimension, step_numbers), layout::step_dimension,
      "timed step", "1");
  return scales;
}

// A per-cell variable over the 8 cell dimensions, its fill value set.
hdf5::Dataset create_cell_variable(hid_t file, const char* name, hid_t file_type, hid_t fill_type,
                                   const void* fill_value, const CellGrid& grid,
                                   std::span<const hdf5::Dataset> cell_scales) {
  const hdf5::Dataspace space = hdf5::simple_dataspace(grid.dims);
  const hdf5::PropertyList properties = hdf5::dataset_creation_properties();
  CB_CHECK_HDF5(H5Pset_fill_value(properties, fill_type, fill_value));
  // Every element is written at once below: writing the fill value first would
  // only cost time. Readers still see the fill value in the dataset's properties.
  // (HDF5 refuses NEVER for variable-length types.)
  if (CB_CHECK_HDF5(H5Tis_variable_str(file_type)) == 0)
    CB_CHECK_HDF5(H5Pset_fill_time(properties, H5D_FILL_TIME_NEVER));
  hdf5::Dataset variable(
      CB_CHECK_HDF5(H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, properties, H5P_DEFAULT)));
  attach_scales(variable, cell_scales);
  return variable;
}

void write_status(hid_t file, const CellGrid& grid, std::span<const hdf5::Dataset> cell_scales) {
  // Committed (named) so that netCDF-4 sees the enum type `status_t`.
  const hdf5::Datatype status_type = layout::status_enum_type();
  CB_CHECK_HDF5(H5Tcommit2(file, layout::status_type_name, status_type, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  const auto not_run = static_cast<std::uint8_t>(Status::not_run);
  const hdf5::Dataset variable =
      create_cell_variable(file, "status", status_type, status_type, &not_run, grid, cell_scales);
  std::vector<std::uint8_t> codes(grid.cells.size(), not_run);
  for (std::size_t i = 0; i < grid.cells.size(); ++i)
    if (grid.cells[i] != nullptr) codes[i] = static_cast<std::uint8_t>(grid.cells[i]->status);
  if (!codes.empty())
    CB_CHECK_HDF5(H5Dwrite(variable, status_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, codes.data()));

  describe_variable(variable, "outcome of the cell", nullptr);
  // CF flags too, for tools that do not read HDF5 enums.
  std::vector<std::uint8_t> flag_values;
  std::string flag_meanings;
  for (const std::string& name : status_names()) {
    flag_values.push_back(static_cast<std::uint8_t>(*status_from_string(name)));
    flag_meanings += (flag_meanings.empty() ? "" : " ") + name;
  }
  hdf5::write_number_array_attribute<std::uint8_t>(variable, "flag_values", flag_values);
  hdf5::write_string_attribute(variable, "flag_meanings", flag_meanings);
}

template <typename T>
void write_number_cell_variable(hid_t file, const char* name, const char* long_name, const char* units,
                                T fill_value, const CellGrid& grid, std::span<const hdf5::Dataset> cell_scales,
                                T (*value_of)(const CellResult&)) {
  const hdf5::Dataset variable =
      create_cell_variable(file, name, hdf5::NumberType<T>::file(), hdf5::NumberType<T>::memory(),
                           &fill_value, grid, cell_scales);
  std::vector<T> values(grid.cells.size(), fill_value);
  for (std::size_t i = 0; i < grid.cells.size(); ++i)
    if (grid.cells[i] != nullptr) values[i] = value_of(*grid.cells[i]);
  hdf5::write_numbers<T>(variable, values);
  // No _FillValue attribute: -1 and 0 are values here, which xarray must not mask.
  describe_variable(variable, long_name, units);
}

void write_cell_numbers(hid_t file, const CellGrid& grid, std::span<const hdf5::Dataset> cell_scales) {
  for (const layout::FloatVariable& entry : layout::float_variables()) {
    const hdf5::Dataset variable = create_cell_variable(file, entry.name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                                                        &not_a_number, grid, cell_scales);
    std::vector<double> values(grid.cells.size(), not_a_number);
    for (std::size_t i = 0; i < grid.cells.size(); ++i) {
      const CellResult* cell = grid.cells[i];
      // Numbers are NaN unless the cell is ok, whatever the CellResult holds.
      if (cell != nullptr && cell->status == Status::ok) values[i] = entry.get(*cell);
    }
    hdf5::write_numbers<double>(variable, values);
    describe_variable(variable, entry.long_name, entry.units);
    hdf5::write_double_attribute(variable, "_FillValue", not_a_number);
  }
  write_number_cell_variable<std::int8_t>(
      file, "throttled", "1: clocks fell or throttle reasons fired during the timed steps, 0: not, -1: unknown",
      "1", -1, grid, cell_scales,
      [](const CellResult& cell) -> std::int8_t { return cell.status == Status::ok ? cell.throttled : -1; });
  write_number_cell_variable<std::int32_t>(file, "steps", "timed steps measured", "1", 0, grid, cell_scales,
                                           [](const CellResult& cell) { return cell.steps; });
  write_number_cell_variable<std::int32_t>(file, "rank", "MPI rank that ran the cell, -1: none", "1", -1, grid,
                                           cell_scales, [](const CellResult& cell) { return cell.rank; });
  // Schema 4: with `rank`, the /ranks row (segment, rank) that names the physical device.
  write_number_cell_variable<std::int32_t>(file, "segment", "run segment (/segments/segment_<i>) that measured the cell, -1: unknown",
                                           "1", -1, grid, cell_scales, [](const CellResult& cell) { return cell.segment; });
  write_number_cell_variable<std::int32_t>(file, "source", "merged cubes: the input (/sources/source_<i>) of the cell, -1: not merged",
                                           "1", -1, grid, cell_scales, [](const CellResult& cell) { return cell.source; });
}

void write_string_cell_variable(hid_t file, const char* name, const char* long_name, const CellGrid& grid,
                                std::span<const hdf5::Dataset> cell_scales,
                                const std::string& (*text_of)(const CellResult&)) {
  const hdf5::Datatype type = hdf5::variable_string_type();
  const char* empty = "";
  const hdf5::Dataset variable = create_cell_variable(file, name, type, type, &empty, grid, cell_scales);
  std::vector<const char*> texts(grid.cells.size(), empty);
  for (std::size_t i = 0; i < grid.cells.size(); ++i)
    if (grid.cells[i] != nullptr) texts[i] = text_of(*grid.cells[i]).c_str();
  hdf5::write_strings(variable, std::span<const char* const>(texts));
  describe_variable(variable, long_name, nullptr);
}

// Schema 3: every cell's wall time, whatever its status (a failed cell took time too).
void write_cell_wall_times(hid_t file, const CellGrid& grid, std::span<const hdf5::Dataset> cell_scales) {
  const std::array<std::tuple<const char*, const char*, double CellResult::*>, 3> parts{{
      {"preparation_s", "wall time of the preparation, without the search", &CellResult::preparation_s},
      {"search_s", "wall time of measured choices during preparation (algorithm search, compilation); NaN: not reported",
       &CellResult::search_s},
      {"timed_s", "wall time of the warm-up, the timed steps and the output check", &CellResult::timed_s},
  }};
  for (const auto& [name, long_name, field] : parts) {
    const hdf5::Dataset variable =
        create_cell_variable(file, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &not_a_number, grid, cell_scales);
    std::vector<double> values(grid.cells.size(), not_a_number);
    for (std::size_t i = 0; i < grid.cells.size(); ++i)
      if (grid.cells[i] != nullptr) values[i] = grid.cells[i]->*field;
    hdf5::write_numbers<double>(variable, values);
    describe_variable(variable, long_name, "s");
    hdf5::write_double_attribute(variable, "_FillValue", not_a_number);
  }
  write_string_cell_variable(file, "started_utc", "when the cell started (UTC, ISO 8601)", grid, cell_scales,
                             [](const CellResult& cell) -> const std::string& { return cell.started_utc; });
  write_string_cell_variable(file, "finished_utc", "when the cell ended (UTC, ISO 8601)", grid, cell_scales,
                             [](const CellResult& cell) -> const std::string& { return cell.finished_utc; });
}

void write_cell_texts(hid_t file, const CellGrid& grid, std::span<const hdf5::Dataset> cell_scales) {
  write_string_cell_variable(file, "message", "why the cell is not ok; for ok cells, the stopping decision", grid,
                             cell_scales, [](const CellResult& cell) -> const std::string& { return cell.message; });
  write_string_cell_variable(
      file, "decisions", "the engine's decisions: convolution algorithms, layout, CUDA graph, ...", grid,
      cell_scales, [](const CellResult& cell) -> const std::string& { return cell.decisions; });
}

void write_samples(hid_t file, const CellGrid& grid, std::span<const hdf5::Dataset> scales) {
  std::array<hsize_t, cell_rank + 1> dims{};
  std::copy(grid.dims.begin(), grid.dims.end(), dims.begin());
  dims[cell_rank] = grid.steps;
  const hdf5::Dataspace space = hdf5::simple_dataspace(dims);
  const hdf5::PropertyList properties = hdf5::dataset_creation_properties();
  CB_CHECK_HDF5(H5Pset_fill_value(properties, H5T_NATIVE_DOUBLE, &not_a_number));
  if (!grid.cells.empty()) {
    // One chunk = one cell's steps, so a cell reads alone; blocks of cells
    // that never ran are not written and cost no space (an unwritten chunk
    // reads as the fill value, NaN). Shuffle groups the bytes of the doubles
    // by significance, which deflate then packs better.
    std::array<hsize_t, cell_rank + 1> chunk{};
    chunk.fill(1);
    chunk[cell_rank] = grid.steps;
    CB_CHECK_HDF5(H5Pset_chunk(properties, static_cast<int>(chunk.size()), chunk.data()));
    CB_CHECK_HDF5(H5Pset_shuffle(properties));
    CB_CHECK_HDF5(H5Pset_deflate(properties, 4));
  }
  const hdf5::Dataset variable(CB_CHECK_HDF5(H5Dcreate2(file, layout::samples_variable, H5T_IEEE_F64LE, space,
                                                        H5P_DEFAULT, properties, H5P_DEFAULT)));
  attach_scales(variable, scales);

  const layout::SampleBlocks blocks(grid.dims, grid.steps);
  std::vector<double> buffer;
  for (std::size_t block = 0; block < blocks.count(); ++block) {
    const std::size_t first_cell = block * blocks.cells_per_block();
    bool any_samples = false;
    for (std::size_t c = 0; c < blocks.cells_per_block() && !any_samples; ++c) {
      const CellResult* cell = grid.cells[first_cell + c];
      any_samples = cell != nullptr && !cell->samples_ms.empty();
    }
    if (!any_samples) continue;
    buffer.assign(blocks.cells_per_block() * grid.steps, not_a_number);
    for (std::size_t c = 0; c < blocks.cells_per_block(); ++c)
      if (const CellResult* cell = grid.cells[first_cell + c])
        std::copy(cell->samples_ms.begin(), cell->samples_ms.end(), buffer.begin() + c * grid.steps);
    std::array<hsize_t, cell_rank + 1> start{}, count{};
    blocks.hyperslab(block, start, count);
    const hdf5::Dataspace file_block = hdf5::select_block(variable, start, count);
    const hdf5::Dataspace memory_block = hdf5::simple_dataspace(count);
    CB_CHECK_HDF5(H5Dwrite(variable, H5T_NATIVE_DOUBLE, memory_block, file_block, H5P_DEFAULT, buffer.data()));
  }
  describe_variable(variable, "time of every timed step, NaN past the cell's last step", "ms");
  hdf5::write_double_attribute(variable, "_FillValue", not_a_number);
}

// Schema 4, --repetitions: each cell's repetition medians over the cell dimensions and
// `repetition` (NaN past a cell's last repetition; one NaN column when no cell repeated).
void write_repetitions(hid_t file, const CellGrid& grid, std::span<const hdf5::Dataset> cell_scales) {
  std::size_t count = 1;
  for (const CellResult* cell : grid.cells)
    if (cell != nullptr) count = std::max(count, cell->repetition_medians_ms.size());
  std::vector<std::int32_t> numbers(count);
  for (std::size_t r = 0; r < count; ++r) numbers[r] = static_cast<std::int32_t>(r);
  hdf5::Dataset axis = hdf5::create_vector<std::int32_t>(file, layout::repetition_dimension, numbers);
  make_scale(axis, layout::repetition_dimension);
  describe_variable(axis, "repetition of a cell on the same device (--repetitions)", "1");
  std::array<hsize_t, cell_rank + 1> dims{};
  std::copy(grid.dims.begin(), grid.dims.end(), dims.begin());
  dims[cell_rank] = count;
  const hdf5::Dataspace space = hdf5::simple_dataspace(dims);
  const hdf5::PropertyList properties = hdf5::dataset_creation_properties();
  CB_CHECK_HDF5(H5Pset_fill_value(properties, H5T_NATIVE_DOUBLE, &not_a_number));
  const hdf5::Dataset variable(CB_CHECK_HDF5(H5Dcreate2(file, layout::repetition_variable, H5T_IEEE_F64LE, space,
                                                        H5P_DEFAULT, properties, H5P_DEFAULT)));
  for (std::size_t d = 0; d < cell_rank; ++d)
    CB_CHECK_HDF5(H5DSattach_scale(variable, cell_scales[d], static_cast<unsigned>(d)));
  CB_CHECK_HDF5(H5DSattach_scale(variable, axis, static_cast<unsigned>(cell_rank)));
  std::vector<double> values(grid.cells.size() * count, not_a_number);
  for (std::size_t i = 0; i < grid.cells.size(); ++i)
    if (const CellResult* cell = grid.cells[i]; cell != nullptr && cell->status == Status::ok)
      std::copy(cell->repetition_medians_ms.begin(), cell->repetition_medians_ms.end(), values.begin() + i * count);
  if (!values.empty()) CB_CHECK_HDF5(H5Dwrite(variable, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  describe_variable(variable, "median of each repetition of the cell (--repetitions), NaN past its last", "ms");
  hdf5::write_double_attribute(variable, "_FillValue", not_a_number);
}

void write_ranks(hid_t file, const std::vector<RankRecord>& ranks) {
  const hdf5::PropertyList group_properties(CB_CHECK_HDF5(H5Pcreate(H5P_GROUP_CREATE)));
  track_creation_order(group_properties);
  const hdf5::Group group(
      CB_CHECK_HDF5(H5Gcreate2(file, layout::ranks_group, H5P_DEFAULT, group_properties, H5P_DEFAULT)));
  hdf5::write_string_attribute(group, "long_name", "one row per MPI rank: the facts the device key does not hold");

  std::vector<std::int32_t> rows(ranks.size());
  for (std::size_t i = 0; i < ranks.size(); ++i) rows[i] = static_cast<std::int32_t>(i);
  std::vector<hdf5::Dataset> row_scale;
  row_scale.push_back(hdf5::create_vector<std::int32_t>(group, layout::rank_row_dimension, rows));
  make_scale(row_scale.front(), layout::rank_row_dimension);
  describe_variable(row_scale.front(), "row of the ranks table", "1");

  auto column = [&](auto field) {
    using T = std::decay_t<decltype(field(ranks.front()))>;
    std::vector<T> values;
    values.reserve(ranks.size());
    for (const RankRecord& record : ranks) values.push_back(field(record));
    return values;
  };
  auto numbers = [&](const char* name, const char* long_name, const char* units, auto field) {
    const auto values = column(field);
    using T = typename decltype(values)::value_type;
    const hdf5::Dataset variable = hdf5::create_vector<T>(group, name, values);
    attach_scales(variable, row_scale);
    describe_variable(variable, long_name, units);
  };
  auto strings = [&](const char* name, const char* long_name, auto field) {
    const std::vector<std::string> values = column(field);
    const hdf5::Dataset variable = hdf5::create_string_vector(group, name, values);
    attach_scales(variable, row_scale);
    describe_variable(variable, long_name, nullptr);
  };
  numbers("rank", "MPI rank", "1", [](const RankRecord& r) { return r.rank; });
  strings("host", "host name", [](const RankRecord& r) { return r.host; });
  strings("device_key", "device key of the rank's device", [](const RankRecord& r) { return r.device_key; });
  numbers("device_index", "device ordinal as the rank sees it, -1: the CPU", "1",
          [](const RankRecord& r) { return r.device_index; });
  strings("uuid", "device UUID", [](const RankRecord& r) { return r.uuid; });
  strings("pci_bus_id", "PCI bus id of the device", [](const RankRecord& r) { return r.pci_bus_id; });
  numbers("memory_bytes", "device memory (GPU) or physical memory (CPU)", "bytes",
          [](const RankRecord& r) { return r.memory_bytes; });
  numbers("sm_clock_mhz", "maximum SM clock (GPU) or nominal core clock (CPU), 0: unknown", "MHz",
          [](const RankRecord& r) { return r.sm_clock_mhz; });
  numbers("memory_clock_mhz", "memory clock, 0: unknown", "MHz",
          [](const RankRecord& r) { return r.memory_clock_mhz; });
  numbers("power_limit_w", "power limit, 0: unknown", "W", [](const RankRecord& r) { return r.power_limit_w; });
  strings("driver", "driver version (GPU) or kernel release (CPU)", [](const RankRecord& r) { return r.driver; });
  numbers("threads", "CPU threads of the rank's binding (CPU devices), 0 for GPUs", "1",
          [](const RankRecord& r) { return r.threads; });
  numbers("application_sm_clock_mhz", "application SM clock (NVML), 0: unknown", "MHz",
          [](const RankRecord& r) { return r.application_sm_clock_mhz; });
  numbers("application_memory_clock_mhz", "application memory clock (NVML), 0: unknown", "MHz",
          [](const RankRecord& r) { return r.application_memory_clock_mhz; });
  strings("clock_policy", "clock policy: auto boost, locked clocks, persistence mode", [](const RankRecord& r) { return r.clock_policy; });
  strings("ecc", "ECC mode of the device memory: on, off, unsupported", [](const RankRecord& r) { return r.ecc; });
  strings("cpu_model", "host CPU model", [](const RankRecord& r) { return r.cpu_model; });
  strings("os", "operating system (/etc/os-release)", [](const RankRecord& r) { return r.os; });
  strings("kernel", "kernel release and machine", [](const RankRecord& r) { return r.kernel; });
  strings("container", "container image or runtime, empty: none", [](const RankRecord& r) { return r.container; });
  numbers("segment", "run segment of the row (/segments/segment_<i>), -1: unknown", "1",
          [](const RankRecord& r) { return r.segment; });
  numbers("source", "merged cubes: the input of the row (/sources/source_<i>), -1: not merged", "1",
          [](const RankRecord& r) { return r.source; });
  strings("cpu_set", "CPUs the rank's process may run on (Linux list syntax), empty: unknown",
          [](const RankRecord& r) { return r.cpu_set; });
  numbers("numa_node", "NUMA node nearest the rank's GPU, -1: unknown or no GPU", "1",
          [](const RankRecord& r) { return r.numa_node; });
}

// Schema 4: every run segment of the cube (one mpirun or one resume), in order.
void write_segments(hid_t file, const std::vector<CubeSegment>& segments) {
  const hdf5::PropertyList group_properties(CB_CHECK_HDF5(H5Pcreate(H5P_GROUP_CREATE)));
  track_creation_order(group_properties);
  const hdf5::Group group(CB_CHECK_HDF5(H5Gcreate2(file, "segments", H5P_DEFAULT, group_properties, H5P_DEFAULT)));
  hdf5::write_string_attribute(group, "long_name",
                               "run segments (one process group's lifetime: one mpirun or one resume); "
                               "each one's ranks are the /ranks rows of its index");
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const hdf5::PropertyList properties(CB_CHECK_HDF5(H5Pcreate(H5P_GROUP_CREATE)));
    track_creation_order(properties);
    const std::string name = "segment_" + std::to_string(i);
    const hdf5::Group segment(CB_CHECK_HDF5(H5Gcreate2(group, name.c_str(), H5P_DEFAULT, properties, H5P_DEFAULT)));
    for (const auto& [key, value] : segments[i].attributes) hdf5::write_string_attribute(segment, key, value);
  }
}

// Merged cubes: each input's root attributes and ranks table, in input order.
void write_sources(hid_t file, const std::vector<CubeSource>& sources) {
  if (sources.empty()) return;
  const hdf5::PropertyList group_properties(CB_CHECK_HDF5(H5Pcreate(H5P_GROUP_CREATE)));
  track_creation_order(group_properties);
  const hdf5::Group group(CB_CHECK_HDF5(H5Gcreate2(file, "sources", H5P_DEFAULT, group_properties, H5P_DEFAULT)));
  hdf5::write_string_attribute(group, "long_name", "the cubes merged into this one: each one's attributes and ranks");
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const hdf5::PropertyList properties(CB_CHECK_HDF5(H5Pcreate(H5P_GROUP_CREATE)));
    track_creation_order(properties);
    const std::string name = "source_" + std::to_string(i);
    const hdf5::Group source(CB_CHECK_HDF5(H5Gcreate2(group, name.c_str(), H5P_DEFAULT, properties, H5P_DEFAULT)));
    for (const auto& [key, value] : sources[i].attributes) hdf5::write_string_attribute(source, key, value);
    write_ranks(source, sources[i].ranks);
  }
}

void write_contents(hid_t file, const CubeContents& contents, const CellGrid& grid,
                    const std::map<std::string, std::string>& attributes) {
  hdf5::write_string_attribute(file, "schema", cube_schema);
  for (const auto& [name, value] : attributes) hdf5::write_string_attribute(file, name, value);

  const std::vector<hdf5::Dataset> scales = write_coordinates(file, contents.axes, grid.steps);
  const std::span<const hdf5::Dataset> cell_scales(scales.data(), cell_rank);
  write_status(file, grid, cell_scales);
  write_cell_numbers(file, grid, cell_scales);
  write_cell_texts(file, grid, cell_scales);
  write_cell_wall_times(file, grid, cell_scales);
  write_samples(file, grid, scales);
  write_repetitions(file, grid, cell_scales);
  write_ranks(file, contents.ranks);
  write_segments(file, contents.segments);
  write_sources(file, contents.sources);
  layout::write_layer_times(file, grid.cells);  // --layer-times; nothing without them
}

// The cube is built in memory (HDF5's core driver, no backing store) and
// written to disk by crossbench itself. HDF5 then never sees a disk error: a
// full disk is one POSIX error naming the file, and the library is never left
// with a file it failed to flush (HDF5 1.10 then crashes in its exit handler).
std::vector<char> build_image(const CubeContents& contents, const CellGrid& grid,
                              const std::map<std::string, std::string>& attributes) {
  const hdf5::PropertyList creation(CB_CHECK_HDF5(H5Pcreate(H5P_FILE_CREATE)));
  track_creation_order(creation);
  const hdf5::PropertyList access = hdf5::file_access_properties();
  // H5Fclose fails if an object is still open, instead of leaving the file
  // open behind our back: the close below then really closes.
  CB_CHECK_HDF5(H5Pset_fclose_degree(access, H5F_CLOSE_SEMI));
  CB_CHECK_HDF5(H5Pset_fapl_core(access, /*increment=*/std::size_t{1} << 20, /*backing_store=*/false));
  const std::string name = "crossbench-cube-in-memory-" + std::to_string(::getpid());
  hdf5::File file(CB_CHECK_HDF5(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, creation, access)));
  write_contents(file, contents, grid, attributes);
  CB_CHECK_HDF5(H5Fflush(file, H5F_SCOPE_GLOBAL));
  const ssize_t size = CB_CHECK_HDF5(H5Fget_file_image(file, nullptr, 0));
  std::vector<char> image(static_cast<std::size_t>(size));
  CB_CHECK_HDF5(H5Fget_file_image(file, image.data(), image.size()));
  file.close();
  return image;
}

[[noreturn]] void throw_system_error(const char* call, const fs::path& path, const char* file, int line) {
  const int error = errno;
  throw_library_error("POSIX", std::string(call) + "(" + path.string() + ")", file, line, std::strerror(error));
}

// Writes `image` to a new file at `path` (never through a symlink) and puts
// data and metadata on stable storage before the rename makes them visible,
// so that a crash never leaves a cube that is renamed but incomplete.
void write_durably(const fs::path& path, const std::vector<char>& image) {
  const int descriptor = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (descriptor < 0) throw_system_error("open", path, __FILE__, __LINE__);
  const auto fail = [&](const char* call, int line) {
    const int error = errno;
    ::close(descriptor);
    errno = error;
    throw_system_error(call, path, __FILE__, line);
  };
  std::size_t written = 0;
  while (written < image.size()) {
    const auto count = ::write(descriptor, image.data() + written, image.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) fail("write", __LINE__);
    written += static_cast<std::size_t>(count);
  }
  if (::fsync(descriptor) != 0) fail("fsync", __LINE__);
  if (::close(descriptor) != 0) throw_system_error("close", path, __FILE__, __LINE__);
}

void sync_directory(const fs::path& directory) {
  const int descriptor = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (descriptor < 0) throw_system_error("open", directory, __FILE__, __LINE__);
  if (::fsync(descriptor) != 0) {
    const int error = errno;
    ::close(descriptor);
    errno = error;
    throw_system_error("fsync", directory, __FILE__, __LINE__);
  }
  ::close(descriptor);
}

}  // namespace

void write_cube(const fs::path& path, const CubeContents& contents) {
  const hdf5::SilenceAutomaticErrorPrinting silence;
  // Everything that can be refused is refused before the disk is touched.
  const CellGrid grid = place_cells(contents);
  const std::map<std::string, std::string> attributes = root_attributes(contents.attributes);

  const std::vector<char> image = build_image(contents, grid, attributes);
  const fs::path temporary = path.string() + ".tmp." + std::to_string(::getpid());
  std::error_code ignored;
  fs::remove(temporary, ignored);  // left by a killed process of the same pid: ours to replace
  try {
    write_durably(temporary, image);
    if (std::rename(temporary.c_str(), path.c_str()) != 0)
      throw_system_error("rename", temporary.string() + " -> " + path.string(), __FILE__, __LINE__);
    sync_directory(path.has_parent_path() ? path.parent_path() : fs::path("."));  // makes the rename durable
  } catch (const Error& error) {
    fs::remove(temporary, ignored);
    // The OS error first: "No space left on device" must not hide in the middle of the line.
    const std::string what = error.what();
    const auto reason = what.rfind(": ");
    throw Error("cannot write cube '" + path.string() + "': " +
                (reason == std::string::npos ? what : what.substr(reason + 2) + " (" + what.substr(0, reason) + ")"));
  } catch (...) {
    fs::remove(temporary, ignored);
    throw;
  }
}

}  // namespace crossbench
