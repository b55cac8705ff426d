// Gradient buckets of data-parallel training, as PyTorch DDP forms them: the
// gradient tensors, in the order the backward pass finishes them, are grouped
// into buckets of about `bucket_bytes`; a bucket's average starts as soon as
// its last tensor is ready (and every earlier bucket has started, so that all
// ranks start the same collectives in the same order), overlapping the rest of
// the backward pass.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "crossbench/communicator.hpp"

namespace crossbench {

class GradientBuckets {
 public:
  // `tensors` in backward (readiness) order; bucket_bytes > 0.
  GradientBuckets(Communicator& communicator, std::vector<GradientTensor> tensors, std::size_t bucket_bytes);

  // Tensor `index` (position in the constructor's list) is final for this step:
  // starts every bucket that is now complete, in order. `stream` as in Communicator.
  void ready(std::size_t index, void* stream);
  // Starts what has not started (tensors never marked ready count as ready
  // now), waits for all averages (see Communicator::wait_averages) and gets
  // ready for the next step.
  void finish(void* stream);

  std::size_t bucket_count() const { return buckets_.size(); }
  std::size_t tensor_count() const { return tensors_.size(); }
  Communicator& communicator() { return communicator_; }
  // "12 buckets of <= 25 MiB over 161 tensors (97.5 MiB), nccl 2.28.3": for the cell's decisions.
  std::string description() const;

 private:
  void start_ready_buckets(void* stream);

  Communicator& communicator_;
  std::vector<GradientTensor> tensors_;
  std::vector<std::vector<GradientTensor>> buckets_;
  std::vector<std::size_t> bucket_of_;        // tensor index → bucket
  std::vector<std::size_t> pending_in_bucket_; // tensors not yet ready, per bucket (this step)
  std::vector<bool> is_ready_;
  std::size_t next_to_start_ = 0;
  std::size_t bucket_bytes_ = 0;
};

}  // namespace crossbench
