// crossbench::check_hdf5_failure (declared in error.hpp): turns HDF5's error
// stack into the message of a crossbench::Error.
#include <hdf5.h>

#include <array>
#include <string>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

// The text of an HDF5 major or minor error message id ("" if unknown).
std::string error_message_text(hid_t message_id) {
  std::array<char, 256> text{};
  H5E_type_t type{};
  if (H5Eget_msg(message_id, &type, text.data(), text.size()) < 0) return {};
  return text.data();
}

// Called by H5Ewalk2 for each entry; with H5E_WALK_DOWNWARD the API call comes
// first and the innermost function, where the failure started, last. Must not
// throw through the C library.
herr_t append_error_entry(unsigned depth, const H5E_error2_t* entry, void* client_data) noexcept {
  try {
    auto& message = *static_cast<std::string*>(client_data);
    if (!message.empty()) message += "; ";
    message += entry->func_name ? entry->func_name : "?";
    message += "(): ";
    // Some descriptions carry a ctime() stamp with its newline: keep the message on one line.
    std::string description = entry->desc && *entry->desc ? entry->desc : "no description";
    for (char& c : description)
      if (c == '\n') c = ' ';
    message += description;
    const std::string major = error_message_text(entry->maj_num);
    const std::string minor = error_message_text(entry->min_num);
    if (!major.empty() || !minor.empty()) message += " [" + major + ": " + minor + "]";
  } catch (...) {
    return -1;  // stops the walk; what was gathered so far is kept
  }
  return 0;
}

}  // namespace

void check_hdf5_failure(const char* call, const char* file, int line) {
  std::string message;
  // The stack of this thread holds the entries of the call that just failed.
  const hid_t stack = H5Eget_current_stack();  // copies and clears the thread's stack
  if (stack >= 0) {
    H5Ewalk2(stack, H5E_WALK_DOWNWARD, append_error_entry, &message);
    H5Eclose_stack(stack);
  }
  if (message.empty()) message = "HDF5 reported a failure without an error stack";
  throw_library_error("HDF5", call, file, line, message);
}

}  // namespace crossbench
