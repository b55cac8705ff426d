// What the MPI gtest programs of tests/data_parallel share: the world's rank
// and size, and a main() that fails on every rank when any rank failed.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

namespace crossbench::mpi_test {

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// MPI_Init, every test, the worst result over the ranks, MPI_Finalize.
inline int run_all_tests(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}

}  // namespace crossbench::mpi_test
