// Small typed helpers over the HDF5 C API for the cube writer and reader:
// string attributes netCDF-4 reads as text, 1-D and N-D datasets of numbers and
// of variable-length strings, hyperslabs. Every call is checked (CB_CHECK_HDF5).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cube/hdf5_handle.hpp"

namespace crossbench::hdf5 {

// The HDF5 types of a C++ number: in memory (native) and in the file
// (little-endian standard types, so a file reads the same everywhere).
template <typename T>
struct NumberType;
template <>
struct NumberType<double> {
  static hid_t memory() { return H5T_NATIVE_DOUBLE; }
  static hid_t file() { return H5T_IEEE_F64LE; }
};
template <>
struct NumberType<std::int8_t> {
  static hid_t memory() { return H5T_NATIVE_INT8; }
  static hid_t file() { return H5T_STD_I8LE; }
};
template <>
struct NumberType<std::uint8_t> {
  static hid_t memory() { return H5T_NATIVE_UINT8; }
  static hid_t file() { return H5T_STD_U8LE; }
};
template <>
struct NumberType<std::int32_t> {
  static hid_t memory() { return H5T_NATIVE_INT32; }
  static hid_t file() { return H5T_STD_I32LE; }
};
template <>
struct NumberType<std::int64_t> {
  static hid_t memory() { return H5T_NATIVE_INT64; }
  static hid_t file() { return H5T_STD_I64LE; }
};

// File access properties of the cube: HDF5's file locking where the file
// system supports it, and no failure where it does not (Lustre and NFS mounts
// often refuse flock; HDF5 >= 1.10.7 would otherwise fail to open the file).
PropertyList file_access_properties();

// Variable-length UTF-8 strings: what netCDF-4 calls `string` (xarray: str).
Datatype variable_string_type();

Dataspace simple_dataspace(std::span<const hsize_t> dims);
std::vector<hsize_t> dataset_dims(hid_t dataset);

// Creation properties every dataset of the cube shares: attribute creation
// order tracked and indexed (netCDF-4 iterates attributes in creation order).
PropertyList dataset_creation_properties();

// Attributes. Strings are fixed-length (ASCII, or UTF-8 when the value is not
// ASCII), scalar: netCDF-4 reads them as text attributes.
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
void write_double_attribute(hid_t object, const std::string& name, double value);
template <typename T>
void write_number_array_attribute(hid_t object, const std::string& name, std::span<const T> values);
// The value of a string attribute (fixed- or variable-length); nullopt when absent.
std::optional<std::string> read_string_attribute(hid_t object, const std::string& name);
// Names of the attributes of `object`, in creation order when it is tracked.
std::vector<std::string> attribute_names(hid_t object);
// A string attribute that holds one text (or none): what read_string_attribute reads.
bool is_text_attribute(hid_t object, const std::string& name);

// Datasets.
bool link_exists(hid_t location, const std::string& name);
// Opens `name` under `location`; Error "<what> has no dataset `name`" if absent.
Dataset open_dataset(hid_t location, const std::string& name, const std::string& what);

template <typename T>
void write_numbers(hid_t dataset, std::span<const T> values);
template <typename T>
std::vector<T> read_numbers(hid_t dataset);
void write_strings(hid_t dataset, std::span<const std::string> values);
void write_strings(hid_t dataset, std::span<const char* const> values);
std::vector<std::string> read_strings(hid_t dataset);

// A 1-D dataset of numbers or strings (a coordinate or a /ranks variable).
template <typename T>
Dataset create_vector(hid_t location, const std::string& name, std::span<const T> values);
Dataset create_string_vector(hid_t location, const std::string& name,
                             std::span<const std::string> values);

// Selects the block [start, start + count) of `dataset`'s file dataspace.
Dataspace select_block(hid_t dataset, std::span<const hsize_t> start, std::span<const hsize_t> count);

}  // namespace crossbench::hdf5
