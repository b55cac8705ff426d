// GradientBuckets: how gradients are grouped and when each bucket's average
// starts. The communicator here records the calls (the bucket logic is what is
// tested; the real MPI and NCCL communicators have their own tests).
#include <gtest/gtest.h>

#include <vector>

#include "crossbench/gradient_buckets.hpp"

namespace crossbench {
namespace {

class RecordingCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string description() const override { return "recording"; }
  void start_average(std::span<const GradientTensor> bucket, void*) override {
    std::vector<void*> started;
    for (const GradientTensor& tensor : bucket) started.push_back(tensor.data);
    starts.push_back(started);
  }
  void wait_averages(void*) override { ++waits; }
  void check_health(double) override {}
  std::vector<std::vector<void*>> starts;
  int waits = 0;
};

// Tensors of the given sizes [fp32 elements], each with a distinct address.
std::vector<GradientTensor> tensors_of(const std::vector<std::size_t>& counts, std::vector<float>& memory) {
  std::size_t total = 0;
  for (const std::size_t count : counts) total += count;
  memory.assign(total, 0.0f);
  std::vector<GradientTensor> tensors;
  std::size_t offset = 0;
  for (const std::size_t count : counts) {
    tensors.push_back({memory.data() + offset, count, ElementType::f32});
    offset += count;
  }
  return tensors;
}

TEST(GradientBuckets, FillBucketsInOrderUpToTheSizeAndGiveLargeTensorsTheirOwn) {
  RecordingCommunicator communicator;
  std::vector<float> memory;
  // 4-byte elements, buckets of 100 bytes: [10, 10] [30] [5, 5, 5] ([30] alone: 40 + 120 > 100).
  const auto tensors = tensors_of({10, 10, 30, 5, 5, 5}, memory);
  GradientBuckets buckets(communicator, tensors, 100);
  EXPECT_EQ(buckets.bucket_count(), 3u);
  EXPECT_EQ(buckets.tensor_count(), 6u);
  for (std::size_t i = 0; i < 6; ++i) buckets.ready(i, nullptr);
  ASSERT_EQ(communicator.starts.size(), 3u);
  EXPECT_EQ(communicator.starts[0], (std::vector<void*>{tensors[0].data, tensors[1].data}));
  EXPECT_EQ(communicator.starts[1], (std::vector<void*>{tensors[2].data}));
  EXPECT_EQ(communicator.starts[2], (std::vector<void*>{tensors[3].data, tensors[4].data, tensors[5].data}));
}

TEST(GradientBuckets, ABucketStartsWhenItsLastTensorIsReadyAndNeverBeforeAnEarlierOne) {
  RecordingCommunicator communicator;
  std::vector<float> memory;
  const auto tensors = tensors_of({25, 25, 25, 25}, memory);  // two buckets of 200 bytes
  GradientBuckets buckets(communicator, tensors, 200);
  ASSERT_EQ(buckets.bucket_count(), 2u);
  buckets.ready(2, nullptr);
  buckets.ready(3, nullptr);  // bucket 1 is complete, but bucket 0 has not started
  EXPECT_TRUE(communicator.starts.empty());
  buckets.ready(0, nullptr);
  EXPECT_TRUE(communicator.starts.empty());
  buckets.ready(1, nullptr);  // bucket 0 completes: both start, in order
  ASSERT_EQ(communicator.starts.size(), 2u);
  EXPECT_EQ(communicator.starts[0].front(), tensors[0].data);
  EXPECT_EQ(communicator.starts[1].front(), tensors[2].data);
  buckets.ready(1, nullptr);  // reported twice: no second start
  EXPECT_EQ(communicator.starts.size(), 2u);
}

TEST(GradientBuckets, FinishStartsWhatIsLeftWaitsAndResetsForTheNextStep) {
  RecordingCommunicator communicator;
  std::vector<float> memory;
  const auto tensors = tensors_of({25, 25, 25, 25}, memory);
  GradientBuckets buckets(communicator, tensors, 200);
  buckets.ready(0, nullptr);
  buckets.finish(nullptr);
  EXPECT_EQ(communicator.starts.size(), 2u);
  EXPECT_EQ(communicator.waits, 1);
  // The next step starts from nothing ready.
  buckets.ready(0, nullptr);
  buckets.ready(1, nullptr);
  EXPECT_EQ(communicator.starts.size(), 3u);
  buckets.finish(nullptr);
  EXPECT_EQ(communicator.starts.size(), 4u);
  EXPECT_EQ(communicator.waits, 2);
  EXPECT_NE(buckets.description().find("2 buckets"), std::string::npos) << buckets.description();
}

TEST(GradientBuckets, RefusesAZeroBucketSize) {
  RecordingCommunicator communicator;
  std::vector<float> memory;
  EXPECT_THROW(GradientBuckets(communicator, tensors_of({1}, memory), 0), std::exception);
}

}  // namespace
}  // namespace crossbench
