// Communicator over MPI for CPU engines: each tensor of a bucket is summed with
// MPI_Iallreduce on the group's communicator and divided by the group size
// when the host waits (MPI has no averaging operation).
#pragma once

#include <mpi.h>

#include <vector>

#include "crossbench/communicator.hpp"

namespace crossbench {

class MpiCommunicator final : public Communicator {
 public:
  // `group`: the data-parallel group's communicator (not owned). A collective
  // still incomplete after `timeout_s` ends the cell as `timeout`.
  MpiCommunicator(MPI_Comm group, double timeout_s);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override;
  void start_average(std::span<const GradientTensor> bucket, void* stream) override;
  void wait_averages(void* stream) override;
  void check_health(double waited_s) override;

 private:
  MPI_Comm group_;
  int rank_ = 0;
  int size_ = 1;
  double timeout_s_;
  std::vector<MPI_Request> requests_;
  std::vector<GradientTensor> in_flight_;
};

}  // namespace crossbench
