// read_cube (cube.hpp): the inverse of write_cube for files of the schema
// crossbench-cube/1; refuses anything else with a message that says why.
#include <hdf5.h>

#include <array>
#include <cmath>
#include <string>
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

std::string dims_text(std::span<const hsize_t> dims) {
  std::string text = "(";
  for (std::size_t d = 0; d < dims.size(); ++d) text += (d ? ", " : "") + std::to_string(dims[d]);
  return text + ")";
}

class CubeReader {
 public:
  CubeReader(const fs::path& path, hid_t file) : path_(path), what_("cube " + path.string()), file_(file) {}

  CubeContents read() {
    CubeContents contents;
    check_schema();
    contents.schema = *hdf5::read_string_attribute(file_, "schema");
    contents.attributes = read_attributes();
    contents.axes = read_axes();
    contents.cells = read_cells(contents.axes);
    contents.ranks = read_ranks(file_, what_);
    contents.segments = read_segments();
    contents.sources = read_sources();
    layout::read_layer_times(file_, what_, contents.cells);
    return contents;
  }

 private:
  void check_schema() const {
    const std::optional<std::string> found = hdf5::read_string_attribute(file_, "schema");
    if (!found) throw Error(path_.string() + " is not a crossbench cube (no schema attribute)");
    std::string known;
    for (const char* schema : cube_schemas_read) {
      if (*found == schema) return;
      known += (known.empty() ? "" : ", ") + std::string(schema);
    }
    throw Error(path_.string() + " has schema " + *found + "; this crossbench reads " + known);
  }

  std::map<std::string, std::string> read_attributes(hid_t object) const {
    std::map<std::string, std::string> attributes;
    for (const std::string& name : hdf5::attribute_names(object))
      if (hdf5::is_text_attribute(object, name)) attributes[name] = *hdf5::read_string_attribute(object, name);
    return attributes;
  }
  std::map<std::string, std::string> read_attributes() const {
    std::map<std::string, std::string> attributes = read_attributes(file_);
    attributes.erase("schema");  // CubeContents::schema
    return attributes;
  }

  // Schema 4: /segments/segment_<i>; older cubes have none.
  std::vector<CubeSegment> read_segments() const {
    std::vector<CubeSegment> segments;
    if (!hdf5::link_exists(file_, "segments")) return segments;
    const hdf5::Group group(CB_CHECK_HDF5(H5Gopen2(file_, "segments", H5P_DEFAULT)));
    for (std::size_t i = 0;; ++i) {
      const std::string name = "segment_" + std::to_string(i);
      if (!hdf5::link_exists(group, name)) break;
      const hdf5::Group segment(CB_CHECK_HDF5(H5Gopen2(group, name.c_str(), H5P_DEFAULT)));
      segments.push_back({read_attributes(segment)});
    }
    return segments;
  }

  std::vector<CubeSource> read_sources() const {
    std::vector<CubeSource> sources;
    if (!hdf5::link_exists(file_, "sources")) return sources;
    const hdf5::Group group(CB_CHECK_HDF5(H5Gopen2(file_, "sources", H5P_DEFAULT)));
    for (std::size_t i = 0;; ++i) {
      const std::string name = "source_" + std::to_string(i);
      if (!hdf5::link_exists(group, name)) break;
      const hdf5::Group source(CB_CHECK_HDF5(H5Gopen2(group, name.c_str(), H5P_DEFAULT)));
      std::map<std::string, std::string> attributes = read_attributes(source);
      attributes.erase("long_name");
      sources.push_back({std::move(attributes), read_ranks(source, what_ + " /sources/" + name)});
    }
    return sources;
  }

  hdf5::Dataset open_vector(hid_t location, const char* name, const std::string& where) const {
    hdf5::Dataset dataset = hdf5::open_dataset(location, name, where);
    if (hdf5::dataset_dims(dataset).size() != 1) throw Error(where + ": `" + name + "` is not one-dimensional");
    return dataset;
  }
  std::vector<std::string> read_string_axis(const char* name) const {
    return hdf5::read_strings(open_vector(file_, name, what_));
  }

  CubeAxes read_axes() {
    CubeAxes axes;
    axes.devices = read_string_axis("device");
    axes.engines = read_string_axis("engine");
    axes.networks = read_string_axis("network");
    axes.precisions = read_string_axis("precision");
    axes.batches = hdf5::read_numbers<std::int64_t>(open_vector(file_, "batch", what_));
    axes.phases = read_string_axis("phase");
    axes.gpus = hdf5::read_numbers<std::int32_t>(open_vector(file_, "gpus", what_));
    axes.replicas = hdf5::read_numbers<std::int32_t>(open_vector(file_, "replica", what_));
    steps_ = hdf5::dataset_dims(open_vector(file_, layout::step_dimension, what_)).front();
    cell_dims_ = {axes.devices.size(), axes.engines.size(), axes.networks.size(), axes.precisions.size(),
                  axes.batches.size(), axes.phases.size(),  axes.gpus.size(), axes.replicas.size()};
    cell_count_ = 1;
    for (const hsize_t dim : cell_dims_) cell_count_ *= dim;
    return axes;
  }

  // Opens a variable and checks that its shape is that of the axes.
  hdf5::Dataset open_cell_variable(const char* name, bool with_steps = false) const {
    hdf5::Dataset variable = hdf5::open_dataset(file_, name, what_);
    std::vector<hsize_t> expected(cell_dims_.begin(), cell_dims_.end());
    if (with_steps) expected.push_back(steps_);
    const std::vector<hsize_t> dims = hdf5::dataset_dims(variable);
    if (dims != expected)
      throw Error(what_ + ": `" + name + "` has shape " + dims_text(dims) + ", the axes give " +
                  dims_text(expected));
    return variable;
  }

  template <typename T>
  std::vector<T> read_cell_numbers(const char* name) const {
    return hdf5::read_numbers<T>(open_cell_variable(name));
  }

  std::vector<std::uint8_t> read_status() const {
    const hdf5::Dataset variable = open_cell_variable("status");
    // Read through crossbench's own enum: HDF5 converts by member name, so a
    // file whose values differ still reads right, and an unknown name fails.
    const hdf5::Datatype status_type = layout::status_enum_type();
    std::vector<std::uint8_t> codes(cell_count_);
    if (!codes.empty())
      CB_CHECK_HDF5(H5Dread(variable, status_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, codes.data()));
    return codes;
  }

  std::vector<CellResult> read_cells(const CubeAxes& axes) const {
    const std::vector<std::uint8_t> status = read_status();
    std::vector<std::size_t> present;  // linear indices of the cells with a result
    for (std::size_t i = 0; i < status.size(); ++i)
      if (status[i] != static_cast<std::uint8_t>(Status::not_run)) present.push_back(i);

    std::vector<CellResult> cells(present.size());
    for (std::size_t k = 0; k < present.size(); ++k) {
      CellResult& cell = cells[k];
      CellIndex index{};
      std::size_t rest = present[k];
      for (std::size_t d = cell_rank; d-- > 0;) {
        index[d] = rest % cell_dims_[d];
        rest /= cell_dims_[d];
      }
      cell.device_key = axes.devices[index[0]];
      cell.cell.engine = axes.engines[index[1]];
      cell.cell.network = axes.networks[index[2]];
      const std::optional<Precision> precision = precision_from_string(axes.precisions[index[3]]);
      if (!precision) throw Error(what_ + ": unknown precision \"" + axes.precisions[index[3]] + "\"");
      cell.cell.precision = *precision;
      cell.cell.batch = axes.batches[index[4]];
      const std::optional<Phase> phase = phase_from_string(axes.phases[index[5]]);
      if (!phase) throw Error(what_ + ": unknown phase \"" + axes.phases[index[5]] + "\"");
      cell.cell.phase = *phase;
      cell.cell.gpus = axes.gpus[index[6]];
      cell.cell.replica = axes.replicas[index[7]];
      cell.status = static_cast<Status>(status[present[k]]);
    }

    for (const layout::FloatVariable& entry : layout::float_variables()) {
      // Older cubes of the same schema lack the optional variables: the cells keep NaN.
      if (entry.optional && !hdf5::link_exists(file_, entry.name)) continue;
      const std::vector<double> values = read_cell_numbers<double>(entry.name);
      for (std::size_t k = 0; k < present.size(); ++k) entry.set(cells[k], values[present[k]]);
    }
    const auto throttled = read_cell_numbers<std::int8_t>("throttled");
    const auto steps = read_cell_numbers<std::int32_t>("steps");
    const auto rank = read_cell_numbers<std::int32_t>("rank");
    // Schema 4: run segment and merge source of every cell; older cubes: -1 (unknown, not merged).
    const bool has_segments = hdf5::link_exists(file_, "segment");
    const auto segment = has_segments ? read_cell_numbers<std::int32_t>("segment") : std::vector<std::int32_t>{};
    const auto source = has_segments ? read_cell_numbers<std::int32_t>("source") : std::vector<std::int32_t>{};
    // Schema 3: wall times of every cell; a schema-2 cube has none (NaN, "").
    if (hdf5::link_exists(file_, "timed_s")) {
      for (const auto& [name, field] : {std::pair{"preparation_s", &CellResult::preparation_s},
                                        std::pair{"search_s", &CellResult::search_s}, std::pair{"timed_s", &CellResult::timed_s}}) {
        const std::vector<double> values = read_cell_numbers<double>(name);
        for (std::size_t k = 0; k < present.size(); ++k) cells[k].*field = values[present[k]];
      }
      const auto started = hdf5::read_strings(open_cell_variable("started_utc"));
      const auto finished = hdf5::read_strings(open_cell_variable("finished_utc"));
      for (std::size_t k = 0; k < present.size(); ++k) {
        cells[k].started_utc = started[present[k]];
        cells[k].finished_utc = finished[present[k]];
      }
    }
    const auto messages = hdf5::read_strings(open_cell_variable("message"));
    const auto decisions = hdf5::read_strings(open_cell_variable("decisions"));
    for (std::size_t k = 0; k < present.size(); ++k) {
      cells[k].throttled = throttled[present[k]];
      cells[k].steps = steps[present[k]];
      cells[k].rank = rank[present[k]];
      if (has_segments) {
        cells[k].segment = segment[present[k]];
        cells[k].source = source[present[k]];
      }
      cells[k].message = messages[present[k]];
      cells[k].decisions = decisions[present[k]];
    }
    read_samples(present, cells);
    read_repetitions(present, cells);
    return cells;
  }

  // Schema 4: each cell's repetition medians (trailing NaNs dropped); older cubes have none.
  void read_repetitions(const std::vector<std::size_t>& present, std::vector<CellResult>& cells) const {
    if (!hdf5::link_exists(file_, layout::repetition_variable)) return;
    const hsize_t count = hdf5::dataset_dims(open_vector(file_, layout::repetition_dimension, what_)).front();
    const hdf5::Dataset variable = hdf5::open_dataset(file_, layout::repetition_variable, what_);
    std::vector<hsize_t> expected(cell_dims_.begin(), cell_dims_.end());
    expected.push_back(count);
    if (hdf5::dataset_dims(variable) != expected)
      throw Error(what_ + ": `" + layout::repetition_variable + "` has shape " + dims_text(hdf5::dataset_dims(variable)) +
                  ", the axes give " + dims_text(expected));
    std::vector<double> values(cell_count_ * count);
    if (!values.empty())
      CB_CHECK_HDF5(H5Dread(variable, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
    for (std::size_t k = 0; k < present.size(); ++k) {
      const auto row = values.begin() + static_cast<std::ptrdiff_t>(present[k] * count);
      auto end = row + static_cast<std::ptrdiff_t>(count);
      while (end != row && std::isnan(*(end - 1))) --end;
      cells[k].repetition_medians_ms.assign(row, end);
    }
  }

  void read_samples(const std::vector<std::size_t>& present, std::vector<CellResult>& cells) const {
    const hdf5::Dataset variable = open_cell_variable(layout::samples_variable, true);
    const layout::SampleBlocks blocks(cell_dims_, steps_);
    std::vector<double> buffer;
    std::size_t next = 0;  // the first entry of `present` not yet given its samples
    for (std::size_t block = 0; block < blocks.count() && next < present.size(); ++block) {
      const std::size_t first_cell = block * blocks.cells_per_block();
      const std::size_t end_cell = first_cell + blocks.cells_per_block();
      if (present[next] >= end_cell) continue;  // only not_run cells in this block
      std::array<hsize_t, cell_rank + 1> start{}, count{};
      blocks.hyperslab(block, start, count);
      const hdf5::Dataspace file_block = hdf5::select_block(variable, start, count);
      const hdf5::Dataspace memory_block = hdf5::simple_dataspace(count);
      buffer.resize(blocks.cells_per_block() * steps_);
      CB_CHECK_HDF5(H5Dread(variable, H5T_NATIVE_DOUBLE, memory_block, file_block, H5P_DEFAULT, buffer.data()));
      for (; next < present.size() && present[next] < end_cell; ++next) {
        const auto row = buffer.begin() + static_cast<std::ptrdiff_t>((present[next] - first_cell) * steps_);
        // The padding is the trailing NaNs; a row ends at its last number.
        auto end = row + static_cast<std::ptrdiff_t>(steps_);
        while (end != row && std::isnan(*(end - 1))) --end;
        cells[next].samples_ms.assign(row, end);
      }
    }
  }

  std::vector<RankRecord> read_ranks(hid_t location, const std::string& what) const {
    std::vector<RankRecord> ranks;
    if (!hdf5::link_exists(location, layout::ranks_group)) return ranks;
    const hdf5::Group group(CB_CHECK_HDF5(H5Gopen2(location, layout::ranks_group, H5P_DEFAULT)));
    const std::string where = what + " group " + layout::ranks_group;
    const hsize_t rows = hdf5::dataset_dims(open_vector(group, layout::rank_row_dimension, where)).front();
    ranks.resize(rows);
    auto checked = [&](auto values, const char* name) {
      if (values.size() != rows)
        throw Error(where + ": `" + name + "` has " + std::to_string(values.size()) + " rows, not " +
                    std::to_string(rows));
      return values;
    };
    auto numbers = [&]<typename T>(const char* name, T RankRecord::*field) {
      const auto values = checked(hdf5::read_numbers<T>(open_vector(group, name, where)), name);
      for (std::size_t i = 0; i < rows; ++i) ranks[i].*field = values[i];
    };
    auto strings = [&](const char* name, std::string RankRecord::*field) {
      const auto values = checked(hdf5::read_strings(open_vector(group, name, where)), name);
      for (std::size_t i = 0; i < rows; ++i) ranks[i].*field = values[i];
    };
    numbers("rank", &RankRecord::rank);
    strings("host", &RankRecord::host);
    strings("device_key", &RankRecord::device_key);
    numbers("device_index", &RankRecord::device_index);
    strings("uuid", &RankRecord::uuid);
    strings("pci_bus_id", &RankRecord::pci_bus_id);
    numbers("memory_bytes", &RankRecord::memory_bytes);
    numbers("sm_clock_mhz", &RankRecord::sm_clock_mhz);
    numbers("memory_clock_mhz", &RankRecord::memory_clock_mhz);
    numbers("power_limit_w", &RankRecord::power_limit_w);
    strings("driver", &RankRecord::driver);
    numbers("threads", &RankRecord::threads);
    if (hdf5::link_exists(group, "kernel")) {  // schema 3: the system description
      numbers("application_sm_clock_mhz", &RankRecord::application_sm_clock_mhz);
      numbers("application_memory_clock_mhz", &RankRecord::application_memory_clock_mhz);
      strings("clock_policy", &RankRecord::clock_policy);
      strings("ecc", &RankRecord::ecc);
      strings("cpu_model", &RankRecord::cpu_model);
      strings("os", &RankRecord::os);
      strings("kernel", &RankRecord::kernel);
      strings("container", &RankRecord::container);
    }
    if (hdf5::link_exists(group, "segment")) {  // schema 4: run segments, merge sources, CPU placement
      numbers("segment", &RankRecord::segment);
      numbers("source", &RankRecord::source);
      strings("cpu_set", &RankRecord::cpu_set);
      numbers("numa_node", &RankRecord::numa_node);
    }
    return ranks;
  }

  fs::path path_;
  std::string what_;  // "cube <path>", the subject of error messages
  hid_t file_;
  CellIndex cell_dims_{};
  std::size_t cell_count_ = 0;
  hsize_t steps_ = 0;
};

}  // namespace

CubeContents read_cube(const fs::path& path) {
  const hdf5::SilenceAutomaticErrorPrinting silence;
  if (!fs::exists(path)) throw Error("cube " + path.string() + " does not exist");
#if H5_VERSION_GE(1, 12, 0)
  const htri_t is_hdf5 = CB_CHECK_HDF5(H5Fis_accessible(path.c_str(), H5P_DEFAULT));
#else
  const htri_t is_hdf5 = CB_CHECK_HDF5(H5Fis_hdf5(path.c_str()));
#endif
  if (is_hdf5 == 0) throw Error(path.string() + " is not a crossbench cube (not an HDF5 file)");
  const hdf5::PropertyList access = hdf5::file_access_properties();
  const hdf5::File file(CB_CHECK_HDF5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access)));
  return CubeReader(path, file).read();
}

}  // namespace crossbench
