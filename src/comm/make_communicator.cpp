#include "comm/make_communicator.hpp"

#include "comm/mpi_communicator.hpp"
#include "crossbench/error.hpp"
#ifdef CROSSBENCH_HAVE_CUDA
#include "comm/nccl_communicator.hpp"
#endif

namespace crossbench {

std::unique_ptr<Communicator> make_communicator(DeviceKind kind, MPI_Comm group, int gpu_ordinal, double timeout_s) {
  if (kind == DeviceKind::cpu) return std::make_unique<MpiCommunicator>(group, timeout_s);
#ifdef CROSSBENCH_HAVE_CUDA
  return std::make_unique<NcclCommunicator>(group, gpu_ordinal, timeout_s);
#else
  throw Unsupported("data parallel on GPUs needs NCCL: this crossbench was built without CUDA");
#endif
}

}  // namespace crossbench
