// /layer_times: an index table over the dimension `profiled_cell` (one row per
// profiled cell: its coordinates and the name of its subgroup), and one
// subgroup per cell whose variables run along its own `layer` dimension.
// netCDF-4 compatible like the rest of the cube: creation order tracked,
// dimension scales, `long_name` and `units`; xarray opens each group with
// open_dataset(cube, group="layer_times") and group="layer_times/cell_<i>".
#include "cube/layer_times_io.hpp"

#include <hdf5_hl.h>

#include <map>
#include <string>
#include <vector>

#include "crossbench/error.hpp"
#include "cube/hdf5_handle.hpp"
#include "cube/hdf5_io.hpp"

namespace crossbench::cube_layout {
namespace {

constexpr const char* index_dimension = "profiled_cell";
constexpr const char* layer_dimension = "layer";

// netCDF-4 lists a group's variables and attributes only in tracked creation order.
hdf5::Group create_group(hid_t location, const std::string& name) {
  const hdf5::PropertyList properties(CB_CHECK_HDF5(H5Pcreate(H5P_GROUP_CREATE)));
  CB_CHECK_HDF5(H5Pset_link_creation_order(properties, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  CB_CHECK_HDF5(H5Pset_attr_creation_order(properties, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  return hdf5::Group(CB_CHECK_HDF5(H5Gcreate2(location, name.c_str(), H5P_DEFAULT, properties, H5P_DEFAULT)));
}

void describe_variable(hid_t variable, const char* long_name, const char* units) {
  hdf5::write_string_attribute(variable, "long_name", long_name);
  if (units != nullptr) hdf5::write_string_attribute(variable, "units", units);
}

// A 1-D variable along `scale` (the dimension's coordinate variable).
void along(hid_t variable, hid_t scale) { CB_CHECK_HDF5(H5DSattach_scale(variable, scale, 0)); }

// One cell's subgroup: layer (coordinate), kind, forward_ms, backward_ms.
void write_cell_group(hid_t parent, const std::string& name, const CellResult& result) {
  const hdf5::Group group = create_group(parent, name);
  // The cell's coordinates, so that the group reads on its own.
  hdf5::write_string_attribute(group, "device", result.device_key);
  hdf5::write_string_attribute(group, "engine", result.cell.engine);
  hdf5::write_string_attribute(group, "network", result.cell.network);
  hdf5::write_string_attribute(group, "precision", std::string(to_string(result.cell.precision)));
  const std::int64_t batch = result.cell.batch;
  hdf5::write_number_array_attribute<std::int64_t>(group, "batch", std::span(&batch, 1));
  hdf5::write_string_attribute(group, "phase", std::string(to_string(result.cell.phase)));
  const std::int32_t gpus = result.cell.gpus;
  hdf5::write_number_array_attribute<std::int32_t>(group, "gpus", std::span(&gpus, 1));
  const std::int32_t replica = result.cell.replica;
  hdf5::write_number_array_attribute<std::int32_t>(group, "replica", std::span(&replica, 1));

  std::vector<std::string> layers, kinds;
  std::vector<double> forward, backward;
  for (const LayerTime& time : result.layer_times) {
    layers.push_back(time.layer);
    kinds.push_back(time.kind);
    forward.push_back(time.forward_ms);
    backward.push_back(time.backward_ms);
  }
  const hdf5::Dataset scale = hdf5::create_string_vector(group, layer_dimension, layers);
  CB_CHECK_HDF5(H5DSset_scale(scale, layer_dimension));
  describe_variable(scale, "layer of the network, in network order", nullptr);
  const hdf5::Dataset kind = hdf5::create_string_vector(group, "kind", kinds);
  along(kind, scale);
  describe_variable(kind, "kind of layer", nullptr);
  const hdf5::Dataset forward_ms = hdf5::create_vector<double>(group, "forward_ms", forward);
  along(forward_ms, scale);
  describe_variable(forward_ms, "the layer's forward time, median over the profiled steps", "ms");
  const hdf5::Dataset backward_ms = hdf5::create_vector<double>(group, "backward_ms", backward);
  along(backward_ms, scale);
  describe_variable(backward_ms,
           "the layer's backward time (input and weight gradients, weight update), median over the profiled "
           "steps; 0 in inference",
           "ms");
}

}  // namespace

void write_layer_times(hid_t file, std::span<const CellResult* const> cells) {
  // Only ok cells: the cube shows no times for a cell that is not ok.
  std::vector<std::size_t> profiled;
  for (std::size_t i = 0; i < cells.size(); ++i)
    if (cells[i] != nullptr && cells[i]->status == Status::ok && !cells[i]->layer_times.empty()) profiled.push_back(i);
  if (profiled.empty()) return;

  const hdf5::Group group = create_group(file, layer_times_group);
  hdf5::write_string_attribute(
      group, "long_name",
      "--layer-times: each layer's forward and backward time from a profiling pass after the timed steps; "
      "one subgroup per profiled cell, listed in this index");

  std::vector<std::int32_t> rows;
  std::vector<std::string> names, devices, engines, networks, precisions, phases;
  std::vector<std::int64_t> batches;
  std::vector<std::int32_t> replicas, gpus;
  for (const std::size_t i : profiled) {
    const CellResult& result = *cells[i];
    rows.push_back(static_cast<std::int32_t>(rows.size()));
    names.push_back("cell_" + std::to_string(i));
    devices.push_back(result.device_key);
    engines.push_back(result.cell.engine);
    networks.push_back(result.cell.network);
    precisions.push_back(std::string(to_string(result.cell.precision)));
    batches.push_back(result.cell.batch);
    phases.push_back(std::string(to_string(result.cell.phase)));
    gpus.push_back(result.cell.gpus);
    replicas.push_back(result.cell.replica);
  }
  const hdf5::Dataset scale = hdf5::create_vector<std::int32_t>(group, index_dimension, rows);
  CB_CHECK_HDF5(H5DSset_scale(scale, index_dimension));
  describe_variable(scale, "row of the index of profiled cells", "1");
  const auto strings = [&](const char* name, const char* long_name, const std::vector<std::string>& values) {
    const hdf5::Dataset variable = hdf5::create_string_vector(group, name, values);
    along(variable, scale);
    describe_variable(variable, long_name, nullptr);
  };
  strings("group", "the cell's subgroup of /layer_times: cell_<i>, i = its row-major position in the per-cell variables",
          names);
  strings("device", "device key", devices);
  strings("engine", "engine", engines);
  strings("network", "network", networks);
  strings("precision", "arithmetic precision", precisions);
  const hdf5::Dataset batch = hdf5::create_vector<std::int64_t>(group, "batch", batches);
  along(batch, scale);
  describe_variable(batch, "images per step (minibatch)", "images");
  strings("phase", "inference or training", phases);
  const hdf5::Dataset gpus_column = hdf5::create_vector<std::int32_t>(group, "gpus", gpus);
  along(gpus_column, scale);
  describe_variable(gpus_column, "devices training the cell together (data parallel)", "1");
  const hdf5::Dataset replica = hdf5::create_vector<std::int32_t>(group, "replica", replicas);
  along(replica, scale);
  describe_variable(replica, "replica", "1");

  for (std::size_t row = 0; row < profiled.size(); ++row) write_cell_group(group, names[row], *cells[profiled[row]]);
}

void read_layer_times(hid_t file, const std::string& what, std::vector<CellResult>& cells) {
  if (!hdf5::link_exists(file, layer_times_group)) return;
  const hdf5::Group group(CB_CHECK_HDF5(H5Gopen2(file, layer_times_group, H5P_DEFAULT)));
  const std::string where = what + " group /" + layer_times_group;
  const auto strings = [&](hid_t location, const char* name, const std::string& in) {
    return hdf5::read_strings(hdf5::open_dataset(location, name, in));
  };
  const std::vector<std::string> names = strings(group, "group", where);
  const std::vector<std::string> devices = strings(group, "device", where);
  const std::vector<std::string> engines = strings(group, "engine", where);
  const std::vector<std::string> networks = strings(group, "network", where);
  const std::vector<std::string> precisions = strings(group, "precision", where);
  const std::vector<std::string> phases = strings(group, "phase", where);
  const auto batches = hdf5::read_numbers<std::int64_t>(hdf5::open_dataset(group, "batch", where));
  const auto replicas = hdf5::read_numbers<std::int32_t>(hdf5::open_dataset(group, "replica", where));
  const auto gpus = hdf5::read_numbers<std::int32_t>(hdf5::open_dataset(group, "gpus", where));
  for (const std::size_t size : {devices.size(), engines.size(), networks.size(), precisions.size(), phases.size(),
                                 batches.size(), replicas.size(), gpus.size()})
    if (size != names.size())
      throw Error(where + ": the index columns differ in length (" + std::to_string(size) + " and " +
                  std::to_string(names.size()) + " rows)");

  std::map<std::string, CellResult*> by_key;
  for (CellResult& cell : cells) by_key[cell_key(cell.device_key, cell.cell)] = &cell;
  for (std::size_t row = 0; row < names.size(); ++row) {
    CellSpec spec;
    spec.engine = engines[row];
    spec.network = networks[row];
    const auto precision = precision_from_string(precisions[row]);
    const auto phase = phase_from_string(phases[row]);
    if (!precision || !phase)
      throw Error(where + ": row " + std::to_string(row) + " has an unknown precision or phase");
    spec.precision = *precision;
    spec.phase = *phase;
    spec.batch = batches[row];
    spec.gpus = gpus[row];
    spec.replica = replicas[row];
    const auto found = by_key.find(cell_key(devices[row], spec));
    if (found == by_key.end())
      throw Error(where + ": " + names[row] + " holds layer times of " + describe(spec) + " on device \"" +
                  devices[row] + "\", which is not a cell of the cube");

    const std::string in = where + "/" + names[row];
    if (!hdf5::link_exists(group, names[row])) throw Error(where + " has no subgroup " + names[row]);
    const hdf5::Group cell_group(CB_CHECK_HDF5(H5Gopen2(group, names[row].c_str(), H5P_DEFAULT)));
    const std::vector<std::string> layers = strings(cell_group, layer_dimension, in);
    const std::vector<std::string> kinds = strings(cell_group, "kind", in);
    const auto forward = hdf5::read_numbers<double>(hdf5::open_dataset(cell_group, "forward_ms", in));
    const auto backward = hdf5::read_numbers<double>(hdf5::open_dataset(cell_group, "backward_ms", in));
    if (kinds.size() != layers.size() || forward.size() != layers.size() || backward.size() != layers.size())
      throw Error(in + ": `layer`, `kind`, `forward_ms` and `backward_ms` differ in length");
    std::vector<LayerTime>& times = found->second->layer_times;
    times.clear();
    for (std::size_t l = 0; l < layers.size(); ++l) times.push_back({layers[l], kinds[l], forward[l], backward[l]});
  }
}

}  // namespace crossbench::cube_layout
