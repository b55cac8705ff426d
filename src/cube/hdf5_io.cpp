#include "cube/hdf5_io.hpp"

#include <algorithm>

#include "crossbench/error.hpp"

namespace crossbench::hdf5 {
namespace {

bool is_ascii(const std::string& text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

hsize_t element_count(std::span<const hsize_t> dims) {
  hsize_t count = 1;
  for (const hsize_t dim : dims) count *= dim;
  return count;
}

hsize_t element_count_of(hid_t dataset) {
  const std::vector<hsize_t> dims = dataset_dims(dataset);
  return element_count(dims);
}

// Frees what HDF5 allocated for variable-length data read into `buffer`.
class VariableLengthBuffer {
 public:
  VariableLengthBuffer(hid_t memory_type, hid_t memory_space, void* buffer)
      : memory_type_(memory_type), memory_space_(memory_space), buffer_(buffer) {}
  VariableLengthBuffer(const VariableLengthBuffer&) = delete;
  VariableLengthBuffer& operator=(const VariableLengthBuffer&) = delete;
  ~VariableLengthBuffer() {
#if H5_VERSION_GE(1, 12, 0)  // H5Treclaim: declared by 1.10.8 headers, exported from 1.12
    H5Treclaim(memory_type_, memory_space_, H5P_DEFAULT, buffer_);
#else
    H5Dvlen_reclaim(memory_type_, memory_space_, H5P_DEFAULT, buffer_);
#endif
  }

 private:
  hid_t memory_type_;
  hid_t memory_space_;
  void* buffer_;
};

// H5Aiterate2 callback: collects names. Must not throw through the C library.
herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* names) noexcept {
  try {
    static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  } catch (...) {
    return -1;
  }
  return 0;
}

}  // namespace

PropertyList file_access_properties() {
  PropertyList properties(CB_CHECK_HDF5(H5Pcreate(H5P_FILE_ACCESS)));
#if H5_VERSION_GE(1, 12, 1) || (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7)
  CB_CHECK_HDF5(H5Pset_file_locking(properties, /*use_file_locking=*/true, /*ignore_when_disabled=*/true));
#endif
  return properties;
}

Datatype variable_string_type() {
  Datatype type(CB_CHECK_HDF5(H5Tcopy(H5T_C_S1)));
  CB_CHECK_HDF5(H5Tset_size(type, H5T_VARIABLE));
  CB_CHECK_HDF5(H5Tset_cset(type, H5T_CSET_UTF8));
  return type;
}

Dataspace simple_dataspace(std::span<const hsize_t> dims) {
  return Dataspace(CB_CHECK_HDF5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
}

std::vector<hsize_t> dataset_dims(hid_t dataset) {
  const Dataspace space(CB_CHECK_HDF5(H5Dget_space(dataset)));
  const int rank = CB_CHECK_HDF5(H5Sget_simple_extent_ndims(space));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  CB_CHECK_HDF5(H5Sget_simple_extent_dims(space, dims.data(), nullptr));
  return dims;
}

PropertyList dataset_creation_properties() {
  PropertyList properties(CB_CHECK_HDF5(H5Pcreate(H5P_DATASET_CREATE)));
  CB_CHECK_HDF5(H5Pset_attr_creation_order(properties, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  return properties;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  // HDF5 has no zero-sized string type: "" is one NUL byte, which reads back as "".
  Datatype type(CB_CHECK_HDF5(H5Tcopy(H5T_C_S1)));
  CB_CHECK_HDF5(H5Tset_size(type, std::max<std::size_t>(value.size(), 1)));
  CB_CHECK_HDF5(H5Tset_strpad(type, H5T_STR_NULLTERM));
  CB_CHECK_HDF5(H5Tset_cset(type, is_ascii(value) ? H5T_CSET_ASCII : H5T_CSET_UTF8));
  const Dataspace space(CB_CHECK_HDF5(H5Screate(H5S_SCALAR)));
  const Attribute attribute(
      CB_CHECK_HDF5(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT)));
  const std::string padded = value.empty() ? std::string(1, '\0') : value;
  CB_CHECK_HDF5(H5Awrite(attribute, type, padded.data()));
}

void write_double_attribute(hid_t object, const std::string& name, double value) {
  const Dataspace space(CB_CHECK_HDF5(H5Screate(H5S_SCALAR)));
  const Attribute attribute(CB_CHECK_HDF5(
      H5Acreate2(object, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT)));
  CB_CHECK_HDF5(H5Awrite(attribute, H5T_NATIVE_DOUBLE, &value));
}

template <typename T>
void write_number_array_attribute(hid_t object, const std::string& name, std::span<const T> values) {
  const hsize_t size = values.size();
  const Dataspace space = simple_dataspace(std::span(&size, 1));
  const Attribute attribute(CB_CHECK_HDF5(
      H5Acreate2(object, name.c_str(), NumberType<T>::file(), space, H5P_DEFAULT, H5P_DEFAULT)));
  CB_CHECK_HDF5(H5Awrite(attribute, NumberType<T>::memory(), values.data()));
}
template void write_number_array_attribute<std::uint8_t>(hid_t, const std::string&,
                                                         std::span<const std::uint8_t>);
template void write_number_array_attribute<std::int32_t>(hid_t, const std::string&,
                                                         std::span<const std::int32_t>);
template void write_number_array_attribute<std::int64_t>(hid_t, const std::string&,
                                                         std::span<const std::int64_t>);

bool is_text_attribute(hid_t object, const std::string& name) {
  const Attribute attribute(CB_CHECK_HDF5(H5Aopen(object, name.c_str(), H5P_DEFAULT)));
  const Datatype type(CB_CHECK_HDF5(H5Aget_type(attribute)));
  const Dataspace space(CB_CHECK_HDF5(H5Aget_space(attribute)));
  return CB_CHECK_HDF5(H5Tget_class(type)) == H5T_STRING && CB_CHECK_HDF5(H5Sget_simple_extent_npoints(space)) <= 1;
}

std::optional<std::string> read_string_attribute(hid_t object, const std::string& name) {
  if (CB_CHECK_HDF5(H5Aexists(object, name.c_str())) == 0) return std::nullopt;
  const Attribute attribute(CB_CHECK_HDF5(H5Aopen(object, name.c_str(), H5P_DEFAULT)));
  const Datatype type(CB_CHECK_HDF5(H5Aget_type(attribute)));
  if (CB_CHECK_HDF5(H5Tget_class(type)) != H5T_STRING)
    throw Error("attribute `" + name + "` is not a string");
  const Dataspace space(CB_CHECK_HDF5(H5Aget_space(attribute)));
  const hssize_t points = CB_CHECK_HDF5(H5Sget_simple_extent_npoints(space));
  if (points == 0) return std::string();  // netCDF-4 writes "" with an empty (null) dataspace
  if (points != 1) throw Error("attribute `" + name + "` is not a single string");

  if (CB_CHECK_HDF5(H5Tis_variable_str(type)) > 0) {
    const Datatype memory_type = variable_string_type();
    char* text = nullptr;
    CB_CHECK_HDF5(H5Aread(attribute, memory_type, &text));
    const VariableLengthBuffer release(memory_type, space, &text);
    return std::string(text ? text : "");
  }
  // Fixed length: read with the file's own type (characters have no byte
  // order), so that no padding conversion shortens the text.
  const std::size_t size = H5Tget_size(type);
  if (size == 0) check_hdf5_failure("H5Tget_size(type)", __FILE__, __LINE__);
  std::string text(size, '\0');
  CB_CHECK_HDF5(H5Aread(attribute, type, text.data()));
  text.resize(text.find('\0') == std::string::npos ? size : text.find('\0'));
  return text;
}

std::vector<std::string> attribute_names(hid_t object) {
  std::vector<std::string> names;
  // Creation order when the object tracks it (the cube's do), else by name.
  hsize_t position = 0;
  if (H5Aiterate2(object, H5_INDEX_CRT_ORDER, H5_ITER_INC, &position, collect_attribute_name, &names) < 0) {
    H5Eclear2(H5E_DEFAULT);
    names.clear();
    position = 0;
    CB_CHECK_HDF5(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, &position, collect_attribute_name, &names));
  }
  return names;
}

bool link_exists(hid_t location, const std::string& name) {
  return CB_CHECK_HDF5(H5Lexists(location, name.c_str(), H5P_DEFAULT)) > 0;
}

Dataset open_dataset(hid_t location, const std::string& name, const std::string& what) {
  if (!link_exists(location, name)) throw Error(what + " has no dataset `" + name + "`");
  return Dataset(CB_CHECK_HDF5(H5Dopen2(location, name.c_str(), H5P_DEFAULT)));
}

template <typename T>
void write_numbers(hid_t dataset, std::span<const T> values) {
  if (values.size() != element_count_of(dataset))
    throw Error("internal error: writing " + std::to_string(values.size()) + " values to a dataset of " +
                std::to_string(element_count_of(dataset)));
  if (values.empty()) return;  // nothing to transfer; HDF5 rejects a null buffer
  CB_CHECK_HDF5(H5Dwrite(dataset, NumberType<T>::memory(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
}

template <typename T>
std::vector<T> read_numbers(hid_t dataset) {
  std::vector<T> values(element_count_of(dataset));
  if (values.empty()) return values;
  CB_CHECK_HDF5(H5Dread(dataset, NumberType<T>::memory(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  return values;
}

#define CROSSBENCH_INSTANTIATE_NUMBER_IO(T)                                              \
  template void write_numbers<T>(hid_t, std::span<const T>);                            \
  template std::vector<T> read_numbers<T>(hid_t);                                       \
  template Dataset create_vector<T>(hid_t, const std::string&, std::span<const T>);

void write_strings(hid_t dataset, std::span<const char* const> values) {
  if (values.size() != element_count_of(dataset))
    throw Error("internal error: writing " + std::to_string(values.size()) +
                " strings to a dataset of " + std::to_string(element_count_of(dataset)));
  if (values.empty()) return;
  const Datatype memory_type = variable_string_type();
  CB_CHECK_HDF5(H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
}

void write_strings(hid_t dataset, std::span<const std::string> values) {
  std::vector<const char*> pointers;
  pointers.reserve(values.size());
  for (const std::string& value : values) pointers.push_back(value.c_str());
  write_strings(dataset, std::span<const char* const>(pointers));
}

std::vector<std::string> read_strings(hid_t dataset) {
  const Datatype file_type(CB_CHECK_HDF5(H5Dget_type(dataset)));
  if (CB_CHECK_HDF5(H5Tget_class(file_type)) != H5T_STRING || CB_CHECK_HDF5(H5Tis_variable_str(file_type)) <= 0)
    throw Error("dataset is not of variable-length strings");
  std::vector<char*> pointers(element_count_of(dataset), nullptr);
  std::vector<std::string> values;
  if (pointers.empty()) return values;
  const Datatype memory_type = variable_string_type();
  const Dataspace space(CB_CHECK_HDF5(H5Dget_space(dataset)));
  CB_CHECK_HDF5(H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, pointers.data()));
  const VariableLengthBuffer release(memory_type, space, pointers.data());
  values.reserve(pointers.size());
  for (const char* pointer : pointers) values.emplace_back(pointer ? pointer : "");
  return values;
}

template <typename T>
Dataset create_vector(hid_t location, const std::string& name, std::span<const T> values) {
  const hsize_t size = values.size();
  const Dataspace space = simple_dataspace(std::span(&size, 1));
  const PropertyList properties = dataset_creation_properties();
  Dataset dataset(CB_CHECK_HDF5(H5Dcreate2(location, name.c_str(), NumberType<T>::file(), space,
                                           H5P_DEFAULT, properties, H5P_DEFAULT)));
  write_numbers<T>(dataset, values);
  return dataset;
}

CROSSBENCH_INSTANTIATE_NUMBER_IO(double)
CROSSBENCH_INSTANTIATE_NUMBER_IO(std::int8_t)
CROSSBENCH_INSTANTIATE_NUMBER_IO(std::uint8_t)
CROSSBENCH_INSTANTIATE_NUMBER_IO(std::int32_t)
CROSSBENCH_INSTANTIATE_NUMBER_IO(std::int64_t)
#undef CROSSBENCH_INSTANTIATE_NUMBER_IO

Dataset create_string_vector(hid_t location, const std::string& name,
                             std::span<const std::string> values) {
  const hsize_t size = values.size();
  const Dataspace space = simple_dataspace(std::span(&size, 1));
  const Datatype type = variable_string_type();
  const PropertyList properties = dataset_creation_properties();
  Dataset dataset(CB_CHECK_HDF5(
      H5Dcreate2(location, name.c_str(), type, space, H5P_DEFAULT, properties, H5P_DEFAULT)));
  write_strings(dataset, values);
  return dataset;
}

Dataspace select_block(hid_t dataset, std::span<const hsize_t> start, std::span<const hsize_t> count) {
  Dataspace space(CB_CHECK_HDF5(H5Dget_space(dataset)));
  CB_CHECK_HDF5(H5Sselect_hyperslab(space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr));
  return space;
}

}  // namespace crossbench::hdf5
