// The HDF5 results cube: round trip, the NaN rule, refusals, atomic writes.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>

#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "cube/hdf5_handle.hpp"
#include "sample_cube.hpp"

namespace crossbench {
namespace {

namespace fs = std::filesystem;
using testing::sample_cpu_key;
using testing::sample_cube;
using testing::sample_gpu_key;

// Equal bit for bit, or both NaN: how a round trip must preserve a double.
bool same_number(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

void expect_same_numbers(const std::vector<double>& expected, const std::vector<double>& actual,
                         const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_TRUE(same_number(expected[i], actual[i])) << what << "[" << i << "]: " << expected[i] << " vs " << actual[i];
}

void expect_same_cell(const CellResult& expected, const CellResult& actual) {
  const std::string what = expected.device_key + " " + describe(expected.cell);
  EXPECT_EQ(expected.device_key, actual.device_key) << what;
  EXPECT_EQ(expected.cell, actual.cell) << what;
  EXPECT_EQ(expected.status, actual.status) << what;
  const auto numbers = [](const CellResult& r) {
    const Statistics& s = r.statistics;
    return std::vector<double>{s.median_ms,     s.mean_ms,  s.std_ms,       s.min_ms,
                               s.max_ms,        s.p05_ms,   s.p95_ms,       s.ci_low_ms,
                               s.ci_high_ms,    r.images_per_s, r.tflops,   r.peak_memory_bytes,
                               r.energy_j_per_image, r.mean_sm_clock_mhz, r.min_sm_clock_mhz,
                               r.mean_power_w, r.max_temperature_c, r.exposed_communication_ms,
                               r.scaling_efficiency};
  };
  expect_same_numbers(numbers(expected), numbers(actual), what + " numbers");
  EXPECT_EQ(expected.throttled, actual.throttled) << what;
  EXPECT_EQ(expected.steps, actual.steps) << what;
  EXPECT_EQ(expected.rank, actual.rank) << what;
  EXPECT_EQ(expected.message, actual.message) << what;
  EXPECT_EQ(expected.decisions, actual.decisions) << what;
  expect_same_numbers(expected.samples_ms, actual.samples_ms, what + " samples_ms");
}

const CellResult* find_cell(const std::vector<CellResult>& cells, const CellResult& wanted) {
  for (const CellResult& cell : cells)
    if (cell.device_key == wanted.device_key && cell.cell == wanted.cell) return &cell;
  return nullptr;
}

// What a non-ok cell looks like after the writer applied the NaN rule.
CellResult as_stored(CellResult cell) {
  if (cell.status != Status::ok) {
    cell.statistics = Statistics{};
    cell.images_per_s = cell.tflops = cell.peak_memory_bytes = not_a_number;
    cell.energy_j_per_image = cell.mean_sm_clock_mhz = not_a_number;
    cell.min_sm_clock_mhz = cell.mean_power_w = cell.max_temperature_c = not_a_number;
    cell.throttled = -1;
  }
  return cell;
}

// HDF5 identifiers still open in this process: RAII must leave none behind.
ssize_t open_hdf5_objects() { return H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL); }

std::vector<std::string> directory_entries(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

class CubeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = fs::temp_directory_path() /
                 ("crossbench_cube_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }
  fs::path directory_;
};

TEST_F(CubeTest, RoundTripKeepsEveryCellRankAndAttribute) {
  CubeContents written = sample_cube();
  // Text a user may put in a job file: long (past HDF5's 64 KiB compact
  // attribute limit) and not ASCII.
  std::string job_file = "# Débit × batch — µs\n";
  while (job_file.size() < 200'000) job_file += "networks = alexnet, resnet50, vgg16\n";
  written.attributes["job_file"] = job_file;
  const fs::path path = directory_ / "cube.h5";
  write_cube(path, written);

  const CubeContents read = read_cube(path);
  EXPECT_EQ(open_hdf5_objects(), 0);
  EXPECT_EQ(read.axes.devices, written.axes.devices);
  EXPECT_EQ(read.axes.engines, written.axes.engines);
  EXPECT_EQ(read.axes.networks, written.axes.networks);
  EXPECT_EQ(read.axes.precisions, written.axes.precisions);
  EXPECT_EQ(read.axes.batches, written.axes.batches);
  EXPECT_EQ(read.axes.phases, written.axes.phases);
  EXPECT_EQ(read.axes.gpus, written.axes.gpus);
  EXPECT_EQ(read.axes.replicas, written.axes.replicas);

  ASSERT_EQ(read.cells.size(), written.cells.size());
  for (const CellResult& expected : written.cells) {
    const CellResult* actual = find_cell(read.cells, expected);
    ASSERT_NE(actual, nullptr) << describe(expected.cell) << " is missing";
    expect_same_cell(expected, *actual);  // the sample's non-ok cells hold no numbers
  }

  std::map<std::string, std::string> expected_attributes = written.attributes;
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  expected_attributes["hdf5_version"] =
      std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  EXPECT_EQ(read.attributes, expected_attributes);

  ASSERT_EQ(read.ranks.size(), written.ranks.size());
  for (std::size_t i = 0; i < written.ranks.size(); ++i) {
    const RankRecord& a = written.ranks[i];
    const RankRecord& b = read.ranks[i];
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.host, b.host);
    EXPECT_EQ(a.device_key, b.device_key);
    EXPECT_EQ(a.device_index, b.device_index);
    EXPECT_EQ(a.uuid, b.uuid);
    EXPECT_EQ(a.pci_bus_id, b.pci_bus_id);
    EXPECT_EQ(a.memory_bytes, b.memory_bytes);
    EXPECT_EQ(a.sm_clock_mhz, b.sm_clock_mhz);
    EXPECT_EQ(a.memory_clock_mhz, b.memory_clock_mhz);
    EXPECT_EQ(a.power_limit_w, b.power_limit_w);
    EXPECT_EQ(a.driver, b.driver);
    EXPECT_EQ(a.threads, b.threads);
  }
}

TEST_F(CubeTest, SamplesOfDifferentLengthsComeBackWithoutPadding) {
  const fs::path path = directory_ / "cube.h5";
  write_cube(path, sample_cube());
  const CubeContents read = read_cube(path);
  CellResult five = sample_cube().cells[0];
  CellResult three = sample_cube().cells[1];
  ASSERT_EQ(five.samples_ms.size(), 5u);
  ASSERT_EQ(three.samples_ms.size(), 3u);
  EXPECT_EQ(find_cell(read.cells, five)->samples_ms, five.samples_ms);
  EXPECT_EQ(find_cell(read.cells, three)->samples_ms, three.samples_ms);
}

TEST_F(CubeTest, NumbersOfCellsThatAreNotOkAreStoredAsNaN) {
  CubeContents written = sample_cube();
  for (CellResult& cell : written.cells) {
    if (cell.status == Status::ok) continue;
    // A careless engine left numbers in a failed cell: the cube must not show them.
    cell.statistics.median_ms = 12.0;
    cell.statistics.ci_low_ms = 11.0;
    cell.images_per_s = 5000;
    cell.tflops = 3.0;
    cell.peak_memory_bytes = 80e9;
    cell.energy_j_per_image = 0.5;
    cell.mean_sm_clock_mhz = 1500;
    cell.min_sm_clock_mhz = 1400;
    cell.mean_power_w = 650;
    cell.max_temperature_c = 80;
    cell.throttled = 1;
  }
  const fs::path path = directory_ / "cube.h5";
  write_cube(path, written);
  const CubeContents read = read_cube(path);
  for (const CellResult& expected : written.cells) {
    const CellResult* actual = find_cell(read.cells, expected);
    ASSERT_NE(actual, nullptr);
    expect_same_cell(as_stored(expected), *actual);
    if (expected.status != Status::ok) {
      EXPECT_TRUE(std::isnan(actual->statistics.median_ms));
      EXPECT_TRUE(std::isnan(actual->peak_memory_bytes));
      EXPECT_TRUE(std::isnan(actual->min_sm_clock_mhz));
      EXPECT_TRUE(std::isnan(actual->mean_power_w));
      EXPECT_TRUE(std::isnan(actual->max_temperature_c));
      EXPECT_EQ(actual->throttled, -1);
    }
  }
}

TEST_F(CubeTest, TelemetryOfOkCellsRoundTripsWithUnits) {
  const fs::path path = directory_ / "cube.h5";
  write_cube(path, sample_cube());
  const CubeContents read = read_cube(path);
  const CellResult* ok = find_cell(read.cells, sample_cube().cells[0]);
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->mean_sm_clock_mhz, 1980.0);
  EXPECT_EQ(ok->min_sm_clock_mhz, 1755.0);
  EXPECT_EQ(ok->mean_power_w, 612.5);
  EXPECT_EQ(ok->max_temperature_c, 57.0);
  // The units as the file records them (netCDF/CF `units` attributes).
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const auto& [name, units] : {std::pair<std::string, std::string>{"min_sm_clock_mhz", "MHz"},
                                    {"mean_power_w", "W"}, {"max_temperature_c", "degC"}}) {
    const hid_t dataset = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
    ASSERT_GE(dataset, 0) << name;
    const hid_t attribute = H5Aopen(dataset, "units", H5P_DEFAULT);
    ASSERT_GE(attribute, 0) << name;
    const hid_t type = H5Aget_type(attribute);
    std::string text;
    if (H5Tis_variable_str(type) > 0) {
      char* value = nullptr;
      ASSERT_GE(H5Aread(attribute, type, &value), 0);
      text = value;
      H5free_memory(value);
    } else {
      text.resize(H5Tget_size(type));
      ASSERT_GE(H5Aread(attribute, type, text.data()), 0);
      text.resize(std::strlen(text.c_str()));
    }
    EXPECT_EQ(text, units) << name;
    H5Tclose(type);
    H5Aclose(attribute);
    H5Dclose(dataset);
  }
  H5Fclose(file);
  EXPECT_EQ(open_hdf5_objects(), 0);
}

TEST_F(CubeTest, OlderCubeWithoutTheTelemetryVariablesReadsThemAsNaN) {
  // A cube written before min_sm_clock_mhz, mean_power_w and max_temperature_c were recorded (same
  // schema): their datasets are absent. It must read, with NaN there and every other number intact.
  const fs::path path = directory_ / "cube.h5";
  const CubeContents written = sample_cube();
  write_cube(path, written);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const char* name : {"min_sm_clock_mhz", "mean_power_w", "max_temperature_c"})
    ASSERT_GE(H5Ldelete(file, name, H5P_DEFAULT), 0) << name;
  H5Fclose(file);

  const CubeContents read = read_cube(path);
  EXPECT_EQ(open_hdf5_objects(), 0);
  EXPECT_EQ(read.schema, cube_schema);
  ASSERT_EQ(read.cells.size(), written.cells.size());
  for (const CellResult& expected : written.cells) {
    const CellResult* actual = find_cell(read.cells, expected);
    ASSERT_NE(actual, nullptr) << describe(expected.cell);
    EXPECT_TRUE(std::isnan(actual->min_sm_clock_mhz)) << describe(expected.cell);
    EXPECT_TRUE(std::isnan(actual->mean_power_w)) << describe(expected.cell);
    EXPECT_TRUE(std::isnan(actual->max_temperature_c)) << describe(expected.cell);
    CellResult older = as_stored(expected);
    older.min_sm_clock_mhz = older.mean_power_w = older.max_temperature_c = not_a_number;
    expect_same_cell(older, *actual);
  }
  const CellResult* ok = find_cell(read.cells, written.cells[0]);
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->mean_sm_clock_mhz, 1980.0);
  EXPECT_EQ(ok->statistics.median_ms, 1.5);

  // Written again (a resume or a merge of the older cube): the variables come back, NaN.
  const fs::path again = directory_ / "again.h5";
  write_cube(again, read);
  const CubeContents reread = read_cube(again);
  const CellResult* reread_ok = find_cell(reread.cells, written.cells[0]);
  ASSERT_NE(reread_ok, nullptr);
  EXPECT_TRUE(std::isnan(reread_ok->max_temperature_c));
  EXPECT_EQ(reread_ok->mean_sm_clock_mhz, 1980.0);
}

TEST_F(CubeTest, AMissingRequiredFloatVariableIsStillRefused) {
  // Only the variables added without a schema change may be absent: a cube without median_ms is broken.
  const fs::path path = directory_ / "cube.h5";
  write_cube(path, sample_cube());
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  ASSERT_GE(H5Ldelete(file, "energy_j_per_image", H5P_DEFAULT), 0);
  H5Fclose(file);
  try {
    static_cast<void>(read_cube(path));
    FAIL() << "a cube without energy_j_per_image was read";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("energy_j_per_image"), std::string::npos) << error.what();
  }
  EXPECT_EQ(open_hdf5_objects(), 0);
}

TEST_F(CubeTest, NotRunCellsAreNotReturned) {
  CubeContents written = sample_cube();
  CellResult not_run = testing::sample_cell(sample_cpu_key, "cudnn", "alexnet", Precision::fp32, 64,
                                            Phase::training, 0, Status::not_run);
  not_run.message = "rank 3 stopped after a sticky CUDA error";
  written.cells.push_back(not_run);
  const fs::path path = directory_ / "cube.h5";
  write_cube(path, written);
  const CubeContents read = read_cube(path);
  EXPECT_EQ(read.cells.size(), written.cells.size() - 1);
  EXPECT_EQ(find_cell(read.cells, not_run), nullptr);
}

TEST_F(CubeTest, CellNotOnTheAxesIsRejectedByName) {
  CubeContents written = sample_cube();
  CellResult stray = testing::sample_ok_cell(sample_gpu_key, "cudnn", "vgg16", Precision::fp32, 64,
                                             Phase::inference, 0, {2.0, 2.1}, 0);
  written.cells.push_back(stray);
  const fs::path path = directory_ / "cube.h5";
  try {
    write_cube(path, written);
    FAIL() << "a cell off the axes was accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(describe(stray.cell)), std::string::npos) << message;
    EXPECT_NE(message.find(sample_gpu_key), std::string::npos) << message;
    EXPECT_NE(message.find("network"), std::string::npos) << message;
  }
  EXPECT_TRUE(directory_entries(directory_).empty()) << "nothing may be written";

  CubeContents unknown_device = sample_cube();
  unknown_device.cells.front().device_key = "NVIDIA A100-SXM4-80GB (108 SMs, sm_8.0, 79.3 GiB)";
  EXPECT_THROW(write_cube(path, unknown_device), Error);
}

TEST_F(CubeTest, DuplicateCellsAndAxisValuesAreRejected) {
  CubeContents duplicate_cell = sample_cube();
  duplicate_cell.cells.push_back(duplicate_cell.cells.front());
  const fs::path path = directory_ / "cube.h5";
  try {
    write_cube(path, duplicate_cell);
    FAIL() << "a duplicate cell was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(describe(duplicate_cell.cells.front().cell)), std::string::npos)
        << error.what();
  }
  CubeContents duplicate_axis = sample_cube();
  duplicate_axis.axes.batches.push_back(64);
  EXPECT_THROW(write_cube(path, duplicate_axis), Error);
  EXPECT_TRUE(directory_entries(directory_).empty());
}

TEST_F(CubeTest, FileWithoutSchemaIsRefused) {
  const fs::path path = directory_ / "plain.h5";
  {
    const hdf5::File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(file.get(), 0);
  }
  try {
    static_cast<void>(read_cube(path));
    FAIL() << "a file without schema was read";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("is not a crossbench cube (no schema attribute)"), std::string::npos)
        << error.what();
  }
}

TEST_F(CubeTest, FileWithAnotherSchemaIsRefused) {
  const fs::path path = directory_ / "future.h5";
  {
    const hdf5::File file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(file.get(), 0);
    const std::string schema = "crossbench-cube/99";
    const hdf5::Datatype type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type, schema.size());
    const hdf5::Dataspace space(H5Screate(H5S_SCALAR));
    const hdf5::Attribute attribute(H5Acreate2(file, "schema", type, space, H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Awrite(attribute, type, schema.data()), 0);
  }
  try {
    static_cast<void>(read_cube(path));
    FAIL() << "a file of another schema was read";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("has schema crossbench-cube/99; this crossbench reads crossbench-cube/2"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(CubeTest, FilesThatAreNotHdf5OrMissingAreRefused) {
  const fs::path text = directory_ / "notes.txt";
  std::ofstream(text) << "not a cube\n";
  EXPECT_THROW(read_cube(text), Error);
  EXPECT_THROW(read_cube(directory_ / "missing.h5"), Error);
}

TEST_F(CubeTest, AtomicWriteLeavesOnlyTheCube) {
  const fs::path path = directory_ / "cube.h5";
  write_cube(path, sample_cube());
  EXPECT_EQ(directory_entries(directory_), std::vector<std::string>{"cube.h5"});

  // A checkpoint rewrites the cube in place: the new contents replace the old.
  CubeContents bigger = sample_cube();
  bigger.cells.push_back(testing::sample_ok_cell(sample_cpu_key, "onednn", "alexnet", Precision::fp32, 128,
                                                 Phase::training, 1, {7.0, 7.5, 7.25}, 3));
  write_cube(path, bigger);
  EXPECT_EQ(directory_entries(directory_), std::vector<std::string>{"cube.h5"});
  EXPECT_EQ(read_cube(path).cells.size(), bigger.cells.size());
}

TEST_F(CubeTest, RefusedWriteKeepsTheOldCube) {
  const fs::path path = directory_ / "cube.h5";
  write_cube(path, sample_cube());
  CubeContents stray = sample_cube();
  stray.cells.front().cell.network = "vgg19";  // not on the network axis
  stray.cells.pop_back();
  EXPECT_THROW(write_cube(path, stray), Error);
  EXPECT_EQ(directory_entries(directory_), std::vector<std::string>{"cube.h5"});
  EXPECT_EQ(read_cube(path).cells.size(), sample_cube().cells.size());
}

TEST_F(CubeTest, FailedWriteRemovesTheTemporaryFile) {
  // The rename fails (the destination is a non-empty directory) after the
  // temporary file was written completely.
  const fs::path blocked = directory_ / "blocked.h5";
  fs::create_directories(blocked / "inside");
  EXPECT_THROW(write_cube(blocked, sample_cube()), Error);
  EXPECT_EQ(directory_entries(directory_), std::vector<std::string>{"blocked.h5"});

  // A directory that does not exist: the write names the file and the OS error.
  try {
    write_cube(directory_ / "no" / "such" / "cube.h5", sample_cube());
    FAIL() << "a cube was written into a missing directory";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("cannot write cube"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("No such file or directory"), std::string::npos) << error.what();
  }
  EXPECT_EQ(open_hdf5_objects(), 0);
}

TEST_F(CubeTest, EmptyCubeRoundTrips) {
  CubeContents empty;
  empty.axes.devices = {sample_gpu_key};
  empty.axes.gpus = {1};
  empty.axes.replicas = {0};  // other axes empty: no cells at all
  const fs::path path = directory_ / "empty.h5";
  write_cube(path, empty);
  const CubeContents read = read_cube(path);
  EXPECT_TRUE(read.cells.empty());
  EXPECT_TRUE(read.ranks.empty());
  EXPECT_EQ(read.axes.devices, empty.axes.devices);
}

TEST(Hdf5Error, NamesTheCallAndTheLibraryMessage) {
  const hdf5::SilenceAutomaticErrorPrinting silence;
  try {
    CB_CHECK_HDF5(H5Fopen("/nonexistent/crossbench/cube.h5", H5F_ACC_RDONLY, H5P_DEFAULT));
    FAIL() << "H5Fopen of a missing file succeeded";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("HDF5 call `H5Fopen("), std::string::npos) << message;
    EXPECT_NE(message.find("cube_test.cpp"), std::string::npos) << message;
    EXPECT_NE(message.find("unable to open file"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace crossbench
