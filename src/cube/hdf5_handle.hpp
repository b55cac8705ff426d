// RAII for HDF5 identifiers (hid_t): every file, group, dataset, dataspace,
// datatype, property list and attribute the cube opens is closed exactly once,
// also when an exception leaves the writer or the reader half way.
#pragma once

#include <hdf5.h>

#include <utility>

#include "crossbench/error.hpp"

namespace crossbench::hdf5 {

// Owns one hid_t; `Close` is the matching H5?close function.
template <herr_t (*Close)(hid_t)>
class Handle {
 public:
  Handle() = default;
  // Takes ownership of an identifier that is already valid: wrap the call in
  // CB_CHECK_HDF5 first, so that a failure throws before a Handle exists.
  explicit Handle(hid_t id) : id_(id) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      release_quietly();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  // A destructor cannot throw: errors on this path are ignored (the operation
  // that failed before is already being reported). Use close() where a failing
  // close must be seen, as for the file (its close flushes the data).
  ~Handle() { release_quietly(); }

  hid_t get() const { return id_; }
  operator hid_t() const { return id_; }  // NOLINT: reads naturally in H5 calls

  // Closes now and throws Error if the library reports a failure.
  void close() {
    const hid_t id = std::exchange(id_, H5I_INVALID_HID);
    if (id >= 0) CB_CHECK_HDF5(Close(id));
  }

 private:
  void release_quietly() noexcept {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using Dataset = Handle<H5Dclose>;
using Dataspace = Handle<H5Sclose>;
using Datatype = Handle<H5Tclose>;
using PropertyList = Handle<H5Pclose>;
using Attribute = Handle<H5Aclose>;

// Turns HDF5's automatic printing of its error stack to stderr off for the
// lifetime of the guard (crossbench reports the stack inside its own Error),
// and restores the previous handler afterwards. The setting is per thread.
class SilenceAutomaticErrorPrinting {
 public:
  SilenceAutomaticErrorPrinting() {
    CB_CHECK_HDF5(H5Eget_auto2(H5E_DEFAULT, &previous_function_, &previous_data_));
    CB_CHECK_HDF5(H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr));
  }
  SilenceAutomaticErrorPrinting(const SilenceAutomaticErrorPrinting&) = delete;
  SilenceAutomaticErrorPrinting& operator=(const SilenceAutomaticErrorPrinting&) = delete;
  ~SilenceAutomaticErrorPrinting() { H5Eset_auto2(H5E_DEFAULT, previous_function_, previous_data_); }

 private:
  H5E_auto2_t previous_function_ = nullptr;
  void* previous_data_ = nullptr;
};

}  // namespace crossbench::hdf5
