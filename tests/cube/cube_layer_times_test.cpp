// The cube's /layer_times group (--layer-times): per-cell layer times written
// beside the main variables and read back exactly; only ok cells; no group at
// all when no cell has layer times; subgroups named by the cell's position.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <string>

#include "crossbench/cube.hpp"
#include "cube/hdf5_handle.hpp"
#include "cube/hdf5_io.hpp"
#include "sample_cube.hpp"

namespace crossbench {
namespace {

namespace fs = std::filesystem;

bool same_number(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

CellResult* find(std::vector<CellResult>& cells, const std::string& device, const std::string& network, Status status) {
  for (CellResult& cell : cells)
    if (cell.device_key == device && cell.cell.network == network && cell.status == status) return &cell;
  return nullptr;
}

const std::vector<LayerTime> gpu_times{{"conv1", "convolution", 0.5, 1.0 / 3.0},
                                       {"inception_3a/output", "concat", 1e-300, 0.0},
                                       {"loss", "softmax_cross_entropy", 0.0125, not_a_number}};
const std::vector<LayerTime> cpu_times{{"input", "input", 0.0, 0.0}, {"conv1", "convolution", 12.5, 0.0}};

class CubeLayerTimes : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() / ("crossbench_layer_times_" + std::to_string(::getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
    path_ = directory_ / "cube.h5";
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }
  // The sample cube with layer times on its first ok GPU cell, its ok CPU cell, and its failed cell.
  CubeContents profiled_cube() {
    CubeContents cube = testing::sample_cube();
    find(cube.cells, testing::sample_gpu_key, "alexnet", Status::ok)->layer_times = gpu_times;  // the first: replica 0
    find(cube.cells, testing::sample_cpu_key, "resnet50", Status::ok)->layer_times = cpu_times;
    find(cube.cells, testing::sample_cpu_key, "resnet50", Status::failed)->layer_times = cpu_times;
    return cube;
  }
  fs::path directory_, path_;
};

void expect_same(const std::vector<LayerTime>& expected, const std::vector<LayerTime>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].layer, actual[i].layer);
    EXPECT_EQ(expected[i].kind, actual[i].kind);
    EXPECT_TRUE(same_number(expected[i].forward_ms, actual[i].forward_ms)) << i;
    EXPECT_TRUE(same_number(expected[i].backward_ms, actual[i].backward_ms)) << i;
  }
}

TEST_F(CubeLayerTimes, RoundTripKeepsLayerTimesOfOkCellsOnly) {
  write_cube(path_, profiled_cube());
  CubeContents back = read_cube(path_);
  std::size_t with_times = 0;
  for (const CellResult& cell : back.cells) with_times += !cell.layer_times.empty();
  EXPECT_EQ(with_times, 2u) << "the failed cell's layer times are not stored";
  const CellResult* gpu = nullptr;
  for (const CellResult& cell : back.cells)
    if (cell.device_key == testing::sample_gpu_key && cell.cell.network == "alexnet" && cell.cell.replica == 0) gpu = &cell;
  ASSERT_NE(gpu, nullptr);
  expect_same(gpu_times, gpu->layer_times);
  expect_same(cpu_times, find(back.cells, testing::sample_cpu_key, "resnet50", Status::ok)->layer_times);
  // The main variables are those of the cube without layer times.
  CubeContents plain = testing::sample_cube();
  const fs::path plain_path = directory_ / "plain.h5";
  write_cube(plain_path, plain);
  const CubeContents plain_back = read_cube(plain_path);
  ASSERT_EQ(plain_back.cells.size(), back.cells.size());
  for (std::size_t i = 0; i < back.cells.size(); ++i) {
    EXPECT_EQ(plain_back.cells[i].cell, back.cells[i].cell);
    EXPECT_TRUE(same_number(plain_back.cells[i].statistics.median_ms, back.cells[i].statistics.median_ms));
    EXPECT_EQ(plain_back.cells[i].samples_ms, back.cells[i].samples_ms);
  }
  EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0) << "every HDF5 object closed";
}

TEST_F(CubeLayerTimes, NoGroupWithoutLayerTimes) {
  write_cube(path_, testing::sample_cube());
  const hdf5::File file(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_GE(file.get(), 0);
  EXPECT_FALSE(hdf5::link_exists(file, "layer_times"));
}

TEST_F(CubeLayerTimes, SubgroupsAreNamedByTheCellsPositionAndCarryItsCoordinates) {
  write_cube(path_, profiled_cube());
  const hdf5::File file(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_GE(file.get(), 0);
  // Axes of 2 values each: gpu/cudnn/alexnet/fp32/b64/inference/r0 is cell 0,
  // cpu/onednn/resnet50/fp32/b128/inference/g1/r0 is (1,1,1,0,1,0,0,0) over 2 × … × 2 = 128 + 64 + 32 + 8 = 232.
  EXPECT_TRUE(hdf5::link_exists(file, "layer_times/cell_0"));
  EXPECT_TRUE(hdf5::link_exists(file, "layer_times/cell_232"));
  const hdf5::Group group(H5Gopen2(file, "layer_times", H5P_DEFAULT));
  EXPECT_EQ(hdf5::read_strings(hdf5::open_dataset(group, "group", "index")),
            (std::vector<std::string>{"cell_0", "cell_232"}));
  EXPECT_EQ(hdf5::read_strings(hdf5::open_dataset(group, "network", "index")),
            (std::vector<std::string>{"alexnet", "resnet50"}));
  EXPECT_EQ(hdf5::read_numbers<std::int64_t>(hdf5::open_dataset(group, "batch", "index")),
            (std::vector<std::int64_t>{64, 128}));
  const hdf5::Group cell(H5Gopen2(group, "cell_232", H5P_DEFAULT));
  EXPECT_EQ(hdf5::read_string_attribute(cell, "device"), testing::sample_cpu_key);
  EXPECT_EQ(hdf5::read_string_attribute(cell, "network"), "resnet50");
  EXPECT_EQ(hdf5::read_string_attribute(cell, "phase"), "inference");
  EXPECT_EQ(hdf5::read_strings(hdf5::open_dataset(cell, "layer", "cell")), (std::vector<std::string>{"input", "conv1"}));
  EXPECT_EQ(hdf5::read_numbers<double>(hdf5::open_dataset(cell, "forward_ms", "cell")),
            (std::vector<double>{0.0, 12.5}));
  EXPECT_EQ(hdf5::read_string_attribute(hdf5::open_dataset(cell, "forward_ms", "cell"), "units"), "ms");
}

}  // namespace
}  // namespace crossbench
