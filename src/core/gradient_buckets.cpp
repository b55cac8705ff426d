#include "crossbench/gradient_buckets.hpp"

#include <cstdio>

#include "crossbench/error.hpp"

namespace crossbench {

std::size_t element_bytes(ElementType type) { return type == ElementType::f32 ? 4 : 2; }

GradientBuckets::GradientBuckets(Communicator& communicator, std::vector<GradientTensor> tensors,
                                 std::size_t bucket_bytes)
    : communicator_(communicator), tensors_(std::move(tensors)), bucket_bytes_(bucket_bytes) {
  if (bucket_bytes == 0) throw Error("gradient buckets: the bucket size must be positive");
  std::size_t filled = 0;
  for (const GradientTensor& tensor : tensors_) {
    // A new bucket when this tensor would overflow a non-empty one: a tensor
    // larger than a bucket gets a bucket of its own.
    if (buckets_.empty() || (filled > 0 && filled + tensor.bytes() > bucket_bytes)) {
      buckets_.emplace_back();
      filled = 0;
    }
    buckets_.back().push_back(tensor);
    bucket_of_.push_back(buckets_.size() - 1);
    filled += tensor.bytes();
  }
  pending_in_bucket_.resize(buckets_.size());
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_in_bucket_[b] = buckets_[b].size();
  is_ready_.assign(tensors_.size(), false);
}

void GradientBuckets::ready(std::size_t index, void* stream) {
  if (index >= tensors_.size())
    throw Error("gradient buckets: tensor " + std::to_string(index) + " of " + std::to_string(tensors_.size()));
  if (is_ready_[index]) return;  // a tensor may be reported by several ops of one layer
  is_ready_[index] = true;
  --pending_in_bucket_[bucket_of_[index]];
  start_ready_buckets(stream);
}

void GradientBuckets::start_ready_buckets(void* stream) {
  while (next_to_start_ < buckets_.size() && pending_in_bucket_[next_to_start_] == 0) {
    communicator_.start_average(buckets_[next_to_start_], stream);
    ++next_to_start_;
  }
}

void GradientBuckets::finish(void* stream) {
  for (std::size_t i = 0; i < tensors_.size(); ++i)
    if (!is_ready_[i]) {
      is_ready_[i] = true;
      --pending_in_bucket_[bucket_of_[i]];
    }
  start_ready_buckets(stream);
  communicator_.wait_averages(stream);
  // The next step starts from nothing ready.
  next_to_start_ = 0;
  is_ready_.assign(tensors_.size(), false);
  for (std::size_t b = 0; b < buckets_.size(); ++b) pending_in_bucket_[b] = buckets_[b].size();
}

std::string GradientBuckets::description() const {
  std::size_t total = 0;
  for (const GradientTensor& tensor : tensors_) total += tensor.bytes();
  char text[256];
  std::snprintf(text, sizeof text, "%zu buckets of <= %.4g MiB over %zu gradient tensors (%.4g MiB), ",
                buckets_.size(), static_cast<double>(bucket_bytes_) / (1 << 20), tensors_.size(),
                static_cast<double>(total) / (1 << 20));
  return text + communicator_.description() + " over " + std::to_string(communicator_.size()) + " ranks";
}

}  // namespace crossbench
