// The communicator of data-parallel training (one interface for every engine):
// the ranks of a group average their weight gradients in place. NCCL backs it
// on GPUs (src/comm/nccl_communicator.cpp), MPI_Iallreduce on CPUs
// (src/comm/mpi_communicator.cpp). Engines see only this interface and the
// GradientBuckets built on it (gradient_buckets.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace crossbench {

enum class ElementType : std::uint8_t { f32, f16, bf16 };
std::size_t element_bytes(ElementType type);

// A gradient tensor in the memory of the rank's device: `count` elements at `data`.
struct GradientTensor {
  void* data = nullptr;
  std::size_t count = 0;
  ElementType type = ElementType::f32;
  std::size_t bytes() const { return count * element_bytes(type); }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // this rank's position in the group, 0 .. size() - 1
  virtual int size() const = 0;  // ranks in the group
  // "nccl 2.28.3" or "mpi (Open MPI v4.1.4)": recorded with the cell.
  virtual std::string description() const = 0;
  // Starts averaging one bucket of tensors over the group, in place. `stream`:
  // the cudaStream_t whose earlier work produces the tensors (GPU backends);
  // nullptr for host memory, which must then be ready now.
  virtual void start_average(std::span<const GradientTensor> bucket, void* stream) = 0;
  // Makes `stream` (GPU) or the host (nullptr) wait until every average started
  // so far has completed; on the host the tensors then hold the averages.
  virtual void wait_averages(void* stream) = 0;
  // Called while the host waits for device work that may include collectives:
  // throws Error (after aborting the communicator) when a collective failed,
  // and CellTimeout when `waited_s` passed the collective timeout.
  virtual void check_health(double waited_s) = 0;
};

}  // namespace crossbench
