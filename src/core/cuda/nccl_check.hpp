// The NCCL member of the checked-call macro family (see cuda_check.hpp).
#pragma once

#include <nccl.h>

#include <string>

#include "crossbench/error.hpp"

namespace crossbench {

// ncclGetErrorString plus the communicator's last error, when it has one.
inline std::string nccl_message(ncclComm_t comm, ncclResult_t status) {
  std::string text = ncclGetErrorString(status);
  if (comm != nullptr)
    if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') text += " (" + std::string(last) + ")";
  return text;
}

}  // namespace crossbench

// The call, file:line, rank,
// host (throw_library_error adds them) and NCCL's messages. A non-blocking
// communicator returns ncclInProgress for work it is still setting up: that is
// not a failure, the caller then waits for it (wait_until_idle).
#define CB_CHECK_NCCL(comm, expr)                                                                 \
  do {                                                                                            \
    const ncclResult_t cb_nccl_status_ = (expr);                                                  \
    if (cb_nccl_status_ != ncclSuccess && cb_nccl_status_ != ncclInProgress)                      \
      ::crossbench::throw_library_error("NCCL", #expr, __FILE__, __LINE__,                        \
                                        ::crossbench::nccl_message(comm, cb_nccl_status_), false); \
  } while (false)

