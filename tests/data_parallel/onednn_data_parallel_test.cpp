// Data-parallel training with the oneDNN engine and the MPI communicator, run
// by ctest under mpiexec with 2 and 4 ranks (label mpi): after one SGD step,
// every rank's weights are identical and equal those of one process that
// trained on the concatenated batch.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>

#include "comm/mpi_communicator.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "crossbench/synthetic.hpp"
#include "data_parallel_network.hpp"
#include "mpi_test_support.hpp"
#include "engines/onednn/onednn_session.hpp"

namespace crossbench {
namespace {

constexpr std::int64_t kBatchPerRank = 2;

using mpi_test::world_rank;
using mpi_test::world_size;

EngineConfig training_config() {
  EngineConfig config;
  config.threads = 1;  // several ranks share this machine's cores
  config.update = Update::sgd;
  config.learning_rate = 0.5;  // large, so that a wrong gradient shows in the weights
  config.bucket_bytes = 1 << 12;  // several buckets even for this small network
  return config;
}

// Every parameter of the network after one step, in layer order, canonical layout.
std::vector<std::vector<float>> parameters_after_one_step(Session& session, const Network& network) {
  // Timed as the Runner times it, so that the timer has the step's exposed communication.
  session.timer().start();
  session.step();
  session.timer().stop();
  (void)session.timer().elapsed_ms();
  auto& onednn = dynamic_cast<onednn::OnednnSession&>(session);
  std::vector<std::vector<float>> values;
  for (int layer = 0; layer < static_cast<int>(network.layers().size()); ++layer)
    for (const auto slot : {synthetic::Slot::weight, synthetic::Slot::bias})
      if (synthetic::parameter_elements(network, layer, slot) > 0) values.push_back(onednn.parameter(layer, slot));
  return values;
}

TEST(OnednnDataParallel, OneStepEqualsTheConcatenatedBatchAndEveryRankAgrees) {
  const Network network = data_parallel_test::network();
  const Device cpu = probe_cpu(1, "");
  const EngineConfig config = training_config();
  const int ranks = world_size();
  ASSERT_GE(ranks, 2) << "run under mpiexec with 2 or more ranks";

  // One process, the global batch.
  auto reference_engine = make_engine("onednn", cpu, config);
  CellSpec global{"onednn", network.name(), Precision::fp32, kBatchPerRank * ranks, Phase::training};
  const auto reference_session = reference_engine->prepare(network, global);
  const auto reference = parameters_after_one_step(*reference_session, network);

  // This rank's shard, gradients averaged over the world.
  MpiCommunicator communicator(MPI_COMM_WORLD, 120);
  auto engine = make_engine("onednn", cpu, config);
  CellSpec shard{"onednn", network.name(), Precision::fp32, kBatchPerRank, Phase::training, 0, ranks};
  const auto session = engine->prepare(network, shard, &communicator);
  ASSERT_NE(session, nullptr);
  EXPECT_NE(session->record().decisions.find("buckets"), std::string::npos) << session->record().decisions;
  const auto trained = parameters_after_one_step(*session, network);
  EXPECT_GE(session->timer().exposed_communication_ms(), 0.0);

  ASSERT_EQ(trained.size(), reference.size());
  const std::vector<float> initial_conv1 = synthetic::parameter(network, 1, synthetic::Slot::weight, config.seed);
  double largest_change = 0;
  for (std::size_t t = 0; t < trained.size(); ++t) {
    ASSERT_EQ(trained[t].size(), reference[t].size());
    // fp32: the shards' partial sums are added in another order than the global batch's.
    double worst = 0;
    for (std::size_t i = 0; i < trained[t].size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(trained[t][i]) - reference[t][i]) /
                                  (1e-5 + 1e-4 * std::abs(static_cast<double>(reference[t][i]))));
    EXPECT_LE(worst, 1.0) << "tensor " << t << " differs from the concatenated batch's result on rank " << world_rank();
  }
  for (std::size_t i = 0; i < initial_conv1.size(); ++i)
    largest_change = std::max(largest_change, std::abs(static_cast<double>(trained[0][i]) - initial_conv1[i]));
  EXPECT_GT(largest_change, 1e-4) << "the step did not change the weights: the test would prove nothing";

  // Identical on every rank: compare with rank 0's, bit for bit.
  for (const std::vector<float>& tensor : trained) {
    std::vector<float> first = tensor;
    MPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_TRUE(std::equal(first.begin(), first.end(), tensor.begin())) << "rank " << world_rank() << " differs from rank 0";
  }
}

TEST(MpiCommunicator, AveragesInPlaceOverTheGroup) {
  MpiCommunicator communicator(MPI_COMM_WORLD, 60);
  const int ranks = world_size();
  std::vector<float> values(1000, static_cast<float>(world_rank()));
  const GradientTensor tensor{values.data(), values.size(), ElementType::f32};
  communicator.start_average({&tensor, 1}, nullptr);
  communicator.wait_averages(nullptr);
  const float expected = static_cast<float>(ranks - 1) / 2.0f;  // mean of 0 .. ranks - 1
  for (const float v : values) ASSERT_FLOAT_EQ(v, expected);
  EXPECT_EQ(communicator.size(), ranks);
  EXPECT_EQ(communicator.rank(), world_rank());
}

TEST(MpiCommunicator, RefusesSixteenBitGradientsWithAReason) {
  MpiCommunicator communicator(MPI_COMM_WORLD, 60);
  std::uint16_t value = 0;
  const GradientTensor tensor{&value, 1, ElementType::bf16};
  try {
    communicator.start_average({&tensor, 1}, nullptr);
    FAIL() << "expected Unsupported";
  } catch (const Unsupported& error) {
    EXPECT_NE(std::string(error.what()).find("fp32"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace crossbench

int main(int argc, char** argv) { return crossbench::mpi_test::run_all_tests(argc, argv); }
