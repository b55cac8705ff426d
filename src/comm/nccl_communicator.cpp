#include "comm/nccl_communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/nccl_check.hpp"
#include "crossbench/clock.hpp"
#include "crossbench/error.hpp"

namespace crossbench {
namespace {

ncclDataType_t nccl_type(ElementType type) {
  switch (type) {
    case ElementType::f32: return ncclFloat32;
    case ElementType::f16: return ncclFloat16;
    case ElementType::bf16: return ncclBfloat16;
  }
  return ncclFloat32;
}

}  // namespace

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int size = 1;
  int device = 0;
  double timeout_s = 600;
  cudaStream_t stream = nullptr;  // the all-reduces' own stream
  cudaEvent_t produced = nullptr; // on the compute stream: a bucket's gradients are written
  cudaEvent_t reduced = nullptr;  // on `stream`: every average started so far is done
  bool aborted = false;

  // Non-blocking communicator: wait until NCCL has finished the host side of
  // the last call, failing (after an abort) on an error or past the timeout.
  void wait_until_idle(const char* what) {
    const auto start = std::chrono::steady_clock::now();
    while (true) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(comm, &state);
      if (queried != ncclSuccess) state = queried;
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(what, nccl_message(comm, state));
      if (seconds_since(start) > timeout_s) time_out(what);
      std::this_thread::yield();
    }
  }
  [[noreturn]] void fail(const char* what, const std::string& message) {
    abort();
    throw_library_error("NCCL", what, __FILE__, __LINE__, message + "; the communicator was aborted", false);
  }
  [[noreturn]] void time_out(const char* what) {
    abort();
    throw CellTimeout(std::string("NCCL ") + what + " over " + std::to_string(size) + " ranks did not complete within " +
                      std::to_string(timeout_s) + " s (a rank of the group is stuck or gone); the communicator was aborted");
  }
  void abort() {
    if (comm != nullptr && !aborted) ncclCommAbort(comm);
    aborted = true;
  }
};

NcclCommunicator::NcclCommunicator(MPI_Comm group, int device, double timeout_s) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.device = device;
  s.timeout_s = timeout_s;
  CB_CHECK_MPI(MPI_Comm_rank(group, &s.rank));
  CB_CHECK_MPI(MPI_Comm_size(group, &s.size));
  CB_CHECK_CUDA(cudaSetDevice(device));
  ncclUniqueId id{};
  if (s.rank == 0) CB_CHECK_NCCL(nullptr, ncclGetUniqueId(&id));
  CB_CHECK_MPI(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, group));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns; wait_until_idle watches for errors and the timeout
  CB_CHECK_NCCL(nullptr, ncclCommInitRankConfig(&s.comm, s.size, id, s.rank, &config));
  s.wait_until_idle("ncclCommInitRankConfig");
  CB_CHECK_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  CB_CHECK_CUDA(cudaEventCreateWithFlags(&s.produced, cudaEventDisableTiming));
  CB_CHECK_CUDA(cudaEventCreateWithFlags(&s.reduced, cudaEventDisableTiming));
}

NcclCommunicator::~NcclCommunicator() {
  State& s = *state_;
  if (s.comm != nullptr) {
    if (s.aborted) {
      // ncclCommAbort already released it.
    } else if (cudaStreamQuery(s.stream) == cudaErrorNotReady) {
      s.abort();  // collectives still in flight after a failure: never wait on them
    } else {
      ncclCommDestroy(s.comm);
    }
  }
  if (s.produced) cudaEventDestroy(s.produced);
  if (s.reduced) cudaEventDestroy(s.reduced);
  if (s.stream) cudaStreamDestroy(s.stream);
}

int NcclCommunicator::rank() const { return state_->rank; }
int NcclCommunicator::size() const { return state_->size; }

std::string NcclCommunicator::description() const {
  int version = 0;
  ncclGetVersion(&version);
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return "nccl " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

void NcclCommunicator::start_average(std::span<const GradientTensor> bucket, void* stream) {
  State& s = *state_;
  if (s.aborted) throw Error("NCCL communicator used after it was aborted");
  const auto compute = static_cast<cudaStream_t>(stream);
  CB_CHECK_CUDA(cudaEventRecord(s.produced, compute));
  CB_CHECK_CUDA(cudaStreamWaitEvent(s.stream, s.produced, 0));
  CB_CHECK_NCCL(s.comm, ncclGroupStart());
  for (const GradientTensor& tensor : bucket)
    CB_CHECK_NCCL(s.comm, ncclAllReduce(tensor.data, tensor.data, tensor.count, nccl_type(tensor.type), ncclAvg,
                                        s.comm, s.stream));
  CB_CHECK_NCCL(s.comm, ncclGroupEnd());
  s.wait_until_idle("ncclAllReduce (a gradient bucket)");
}

void NcclCommunicator::wait_averages(void* stream) {
  State& s = *state_;
  CB_CHECK_CUDA(cudaEventRecord(s.reduced, s.stream));
  if (stream != nullptr) {
    CB_CHECK_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), s.reduced, 0));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  while (cudaEventQuery(s.reduced) == cudaErrorNotReady) {
    check_health(seconds_since(start));
    std::this_thread::yield();
  }
  CB_CHECK_CUDA(cudaEventSynchronize(s.reduced));
}

void NcclCommunicator::check_health(double waited_s) {
  State& s = *state_;
  if (s.aborted) throw Error("NCCL communicator was aborted after an earlier failure");
  ncclResult_t state = ncclSuccess;
  const ncclResult_t queried = ncclCommGetAsyncError(s.comm, &state);
  if (queried != ncclSuccess) state = queried;
  if (state != ncclSuccess && state != ncclInProgress) s.fail("asynchronous error of a collective", nccl_message(s.comm, state));
  if (waited_s > s.timeout_s) s.time_out("gradient all-reduce");
}

}  // namespace crossbench
