// Data-parallel training with the cuDNN engine and NCCL (label gpu), run by
// ctest under mpiexec with 2 ranks, one GPU each: after one SGD step, both
// ranks' weights are identical and equal those of one GPU that trained on the
// concatenated batch. Skips with the reason when there are fewer than 2 GPUs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>

#include "comm/nccl_communicator.hpp"
#include "crossbench/engine.hpp"
#include "data_parallel_network.hpp"
#include "mpi_test_support.hpp"
#include "engines/cudnn/cudnn_session.hpp"

namespace crossbench {
namespace {

constexpr std::int64_t kBatchPerRank = 2;

using mpi_test::world_rank;
using mpi_test::world_size;

std::vector<std::vector<float>> parameters_after_one_step(Session& session) {
  // Timed as the Runner times it, so that the timer has the step's exposed communication.
  session.timer().start();
  session.step();
  session.timer().stop();
  (void)session.timer().elapsed_ms();
  auto& cudnn = dynamic_cast<cudnn::CudnnSession&>(session);
  std::vector<std::vector<float>> values;
  for (std::size_t p = 0; p < cudnn.parameter_count(); ++p) values.push_back(cudnn.parameter_storage(p));
  return values;
}

TEST(CudnnDataParallel, OneStepEqualsTheConcatenatedBatchAndEveryRankAgrees) {
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
  const int ranks = world_size();
  // Every rank decides the same: a skip on one rank only would leave the other waiting in NCCL.
  int usable = gpus >= ranks && ranks >= 2 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!usable)
    GTEST_SKIP() << "needs " << std::max(ranks, 2) << " GPUs and as many ranks (mpiexec -np 2); this rank sees "
                 << gpus << " GPU(s) and the job has " << ranks << " rank(s)";

  const int device_index = world_rank() % gpus;
  const Device gpu = probe_gpu(device_index, "");
  const Network network = data_parallel_test::network();
  EngineConfig config;
  config.update = Update::sgd;
  config.learning_rate = 0.5;
  config.bucket_bytes = 1 << 12;

  auto reference_engine = make_engine("cudnn", gpu, config);
  CellSpec global{"cudnn", network.name(), Precision::fp32, kBatchPerRank * ranks, Phase::training};
  const auto reference = parameters_after_one_step(*reference_engine->prepare(network, global));

  NcclCommunicator communicator(MPI_COMM_WORLD, device_index, 120);
  auto engine = make_engine("cudnn", gpu, config);
  CellSpec shard{"cudnn", network.name(), Precision::fp32, kBatchPerRank, Phase::training, 0, ranks};
  const auto session = engine->prepare(network, shard, &communicator);
  ASSERT_NE(session, nullptr);
  const auto trained = parameters_after_one_step(*session);
  EXPECT_GE(session->timer().exposed_communication_ms(), 0.0);

  ASSERT_EQ(trained.size(), reference.size());
  for (std::size_t t = 0; t < trained.size(); ++t) {
    ASSERT_EQ(trained[t].size(), reference[t].size());
    double worst = 0;
    for (std::size_t i = 0; i < trained[t].size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(trained[t][i]) - reference[t][i]) /
                                  (1e-5 + 1e-4 * std::abs(static_cast<double>(reference[t][i]))));
    EXPECT_LE(worst, 1.0) << "parameter " << t << " differs from the concatenated batch's result on rank " << world_rank();
    std::vector<float> first = trained[t];
    MPI_Bcast(first.data(), static_cast<int>(first.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_TRUE(std::equal(first.begin(), first.end(), trained[t].begin()))
        << "parameter " << t << " on rank " << world_rank() << " differs from rank 0's";
  }
}

}  // namespace
}  // namespace crossbench

int main(int argc, char** argv) { return crossbench::mpi_test::run_all_tests(argc, argv); }
