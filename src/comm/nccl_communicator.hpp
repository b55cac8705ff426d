// Communicator over NCCL for GPU engines: a bucket's tensors are averaged with
// ncclAllReduce(ncclAvg) in one NCCL group on the communicator's own stream,
// after the compute stream's work that produced them (an event), so that the
// all-reduce overlaps the rest of the backward pass. The NCCL communicator is
// non-blocking, so that a failed or stuck collective can be detected while the
// host waits and ended with ncclCommAbort instead of hanging the rank.
#pragma once

#include <mpi.h>

#include <memory>

#include "crossbench/communicator.hpp"

namespace crossbench {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `group`: its rank 0 creates the NCCL unique id and
  // broadcasts it with MPI. `device`: the CUDA ordinal of this rank.
  NcclCommunicator(MPI_Comm group, int device, double timeout_s);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override;
  int size() const override;
  std::string description() const override;
  void start_average(std::span<const GradientTensor> bucket, void* stream) override;
  void wait_averages(void* stream) override;
  void check_health(double waited_s) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace crossbench
