#include "comm/mpi_communicator.hpp"

#include <chrono>
#include <climits>
#include <thread>

#include "crossbench/error.hpp"

namespace crossbench {

MpiCommunicator::MpiCommunicator(MPI_Comm group, double timeout_s) : group_(group), timeout_s_(timeout_s) {
  CB_CHECK_MPI(MPI_Comm_rank(group_, &rank_));
  CB_CHECK_MPI(MPI_Comm_size(group_, &size_));
}

MpiCommunicator::~MpiCommunicator() {
  // A cell that failed part-way may leave collectives in flight. MPI cannot
  // cancel or free a collective's request, so wait for them, but only as long
  // as the collective timeout: past it they are left behind (a peer is gone)
  // rather than hanging the rank.
  const auto start = std::chrono::steady_clock::now();
  while (!requests_.empty() &&
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < timeout_s_) {
    int done = 0;
    if (MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS ||
        done)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

std::string MpiCommunicator::description() const {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<std::size_t>(length));
  if (const auto comma = text.find(','); comma != std::string::npos) text.resize(comma);
  return "mpi (" + text + ")";
}

void MpiCommunicator::start_average(std::span<const GradientTensor> bucket, void* stream) {
  // Open MPI advances non-blocking collectives only inside MPI calls: testing
  // the ones in flight here lets them progress while the backward pass goes on.
  if (!requests_.empty()) {
    int done = 0;
    CB_CHECK_MPI(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
  }
  for (const GradientTensor& tensor : bucket) {
    if (tensor.type != ElementType::f32)
      throw Unsupported("the MPI communicator averages fp32 gradients only (MPI has no 16-bit float type)");
    if (tensor.count > static_cast<std::size_t>(INT_MAX))
      throw Unsupported("a gradient tensor of " + std::to_string(tensor.count) + " elements exceeds MPI's int count");
    MPI_Request request = MPI_REQUEST_NULL;
    CB_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, tensor.data, static_cast<int>(tensor.count), MPI_FLOAT, MPI_SUM, group_,
                                &request));
    requests_.push_back(request);
    in_flight_.push_back(tensor);
  }
}

void MpiCommunicator::wait_averages(void* stream) {
  const auto start = std::chrono::steady_clock::now();
  while (!requests_.empty()) {
    int done = 0;
    CB_CHECK_MPI(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
    if (done) break;
    check_health(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::this_thread::yield();
  }
  requests_.clear();
  const float scale = 1.0f / static_cast<float>(size_);
  for (const GradientTensor& tensor : in_flight_) {
    auto* values = static_cast<float*>(tensor.data);
#pragma omp parallel for simd schedule(static)
    for (std::size_t i = 0; i < tensor.count; ++i) values[i] *= scale;
  }
  in_flight_.clear();
}

void MpiCommunicator::check_health(double waited_s) {
  if (waited_s > timeout_s_)
    throw CellTimeout("MPI gradient all-reduce over " + std::to_string(size_) + " ranks did not complete within " +
                      std::to_string(timeout_s_) + " s (a rank of the group is stuck or gone)");
}

}  // namespace crossbench
