// Errors of crossbench, and the one macro family that checks every library call.
//
// Every failing library call becomes a crossbench::Error that names the call,
// file:line, the MPI rank, the host and the library's own message. `main`
// catches it and decides: a cell's status (oom, failed) or MPI_Abort.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace crossbench {

// "rank 3 on host node17" (or "process on host node17" before MPI_Init).
std::string where_am_i();

// `text` with every byte a terminal would hide made visible: NUL as "\0",
// other control characters (not newline or tab) as "\xNN", and a UTF-8
// byte-order mark as "<BOM>". Every message goes through it: what() is a C
// string, so a NUL read from a file would otherwise cut the message there.
std::string printable(std::string_view text);

// A runtime failure of a library call or of the system.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(printable(what)) {}
};

// An allocation failed (host or device, any library): the cell's status is `oom`.
class OutOfMemory : public Error {
 public:
  explicit OutOfMemory(const std::string& what) : Error(what) {}
};

// The engine cannot run this cell (found out only when preparing it): `unsupported`.
class Unsupported : public Error {
 public:
  explicit Unsupported(const std::string& what) : Error(what) {}
};

// The cell ran past its time limit (e.g. a worker that stopped answering): `timeout`.
class CellTimeout : public Error {
 public:
  explicit CellTimeout(const std::string& what) : Error(what) {}
};

// Bad input from the user (job file, command line): exit status 2, nothing written.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(printable(what)) {}
};

// Whether an OS error code (errno) says the storage failed a write: a full
// disk (ENOSPC), a quota (EDQUOT), a file size limit (EFBIG), a read-only
// (EROFS) or failing (EIO) file system. Such a failure is exit 1 (README
// "Exit status": retry once the disk is fixed), never exit 2 (bad input).
bool is_storage_failure(int error_code);

// Builds "<library> call `<call>` failed at <file>:<line> on <where_am_i()>: <message>".
std::string describe_failure(std::string_view library, std::string_view call, const char* file,
                             int line, std::string_view message);

[[noreturn]] void throw_library_error(std::string_view library, std::string_view call,
                                      const char* file, int line, std::string_view message,
                                      bool out_of_memory = false);

// MPI: every MPI call returns an error code; the communicator's handler must be
// MPI_ERRORS_RETURN (set by MpiSession) for this to see it.
void check_mpi(int code, const char* call, const char* file, int line);
// HDF5: calls return a negative value on failure; the message comes from the error stack.
[[noreturn]] void check_hdf5_failure(const char* call, const char* file, int line);

}  // namespace crossbench

#define CB_CHECK_MPI(expr) ::crossbench::check_mpi((expr), #expr, __FILE__, __LINE__)

// Evaluates expr once; throws if the (herr_t or hid_t) result is negative; yields the result.
#define CB_CHECK_HDF5(expr)                                                     \
  ([&]() {                                                                      \
    auto cb_hdf5_result_ = (expr);                                              \
    if (cb_hdf5_result_ < 0)                                                    \
      ::crossbench::check_hdf5_failure(#expr, __FILE__, __LINE__);              \
    return cb_hdf5_result_;                                                     \
  }())

// oneDNN's C++ API throws dnnl::error; this turns it into a crossbench::Error
// (OutOfMemory for dnnl_out_of_memory) naming the call.
#define CB_CHECK_DNNL(expr)                                                     \
  ([&]() -> decltype(auto) {                                                    \
    try {                                                                       \
      return (expr);                                                            \
    } catch (const ::dnnl::error& cb_dnnl_error_) {                             \
      ::crossbench::throw_library_error("oneDNN", #expr, __FILE__, __LINE__,    \
                                        cb_dnnl_error_.what(),                  \
                                        cb_dnnl_error_.status == dnnl_out_of_memory); \
    }                                                                           \
  }())
