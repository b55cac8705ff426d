// crossbench merge (src/cube/cube_merge.cpp): the union of two runs' cubes,
// each run's provenance kept, a cell held twice refused unless told which wins.
#include "cube/cube_merge.hpp"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "crossbench/error.hpp"
#include "sample_cube.hpp"

namespace crossbench {
namespace {

namespace fs = std::filesystem;
using testing::sample_cube;

// The sample cube's cells, moved to another device key (another run, another tag).
CubeContents retagged(const CubeContents& cube, const std::string& tag, const std::string& revision) {
  CubeContents copy = cube;
  for (auto& device : copy.axes.devices) device += " [" + tag + "]";
  for (auto& cell : copy.cells) cell.device_key += " [" + tag + "]";
  for (auto& rank : copy.ranks) rank.device_key += " [" + tag + "]";
  copy.attributes["git_revision"] = revision;
  return copy;
}

TEST(CubeMerge, UnionOfAxesAndCellsWithEachInputsProvenance) {
  const CubeContents a = retagged(sample_cube(), "site=a", "aaaaaaaaaaaa");
  CubeContents b = retagged(sample_cube(), "site=b", "bbbbbbbbbbbb-dirty");
  b.axes.batches = {256, 64};
  b.cells.front().cell.batch = 256;
  const CubeContents merged = merge_cubes({{"a.h5", a}, {"b.h5", b}}, {});

  EXPECT_EQ(merged.axes.devices, (std::vector<std::string>{a.axes.devices[0], a.axes.devices[1], b.axes.devices[0], b.axes.devices[1]}));
  EXPECT_EQ(merged.axes.batches, (std::vector<std::int64_t>{64, 128, 256}));
  EXPECT_EQ(merged.axes.engines, a.axes.engines);
  EXPECT_EQ(merged.cells.size(), a.cells.size() + b.cells.size());
  EXPECT_EQ(merged.ranks.size(), a.ranks.size() + b.ranks.size());
  ASSERT_EQ(merged.sources.size(), 2u);
  EXPECT_EQ(merged.sources[0].attributes.at("path"), "a.h5");
  EXPECT_EQ(merged.sources[1].attributes.at("git_revision"), "bbbbbbbbbbbb-dirty");
  EXPECT_EQ(merged.sources[1].attributes.at("schema"), cube_schema);
  EXPECT_EQ(merged.sources[0].ranks.size(), a.ranks.size());
  // The root keeps what both agree on, and only that.
  EXPECT_EQ(merged.attributes.count("git_revision"), 0u);
  EXPECT_EQ(merged.attributes.at("job_file"), a.attributes.at("job_file"));

  // Written and read back: the sources survive, as do the wall times of the cells.
  const fs::path path = fs::temp_directory_path() / ("crossbench_merge_test_" + std::to_string(::getpid()) + ".h5");
  CubeContents written = merged;
  written.cells.front().started_utc = "2026-12-01T04:00:00.000Z";
  written.cells.front().finished_utc = "2026-12-01T04:00:02.500Z";
  written.cells.front().preparation_s = 1.25;
  written.cells.front().timed_s = 1.0;
  write_cube(path, written);
  const CubeContents read = read_cube(path);
  fs::remove(path);
  EXPECT_EQ(read.schema, cube_schema);
  ASSERT_EQ(read.sources.size(), 2u);
  EXPECT_EQ(read.sources[1].attributes, merged.sources[1].attributes);
  EXPECT_EQ(read.sources[1].ranks.size(), b.ranks.size());
  EXPECT_EQ(read.sources[1].ranks[0].host, b.ranks[0].host);
  bool found = false;
  for (const CellResult& cell : read.cells)
    if (cell.started_utc == "2026-12-01T04:00:00.000Z") {
      found = true;
      EXPECT_EQ(cell.finished_utc, "2026-12-01T04:00:02.500Z");
      EXPECT_DOUBLE_EQ(cell.preparation_s, 1.25);
      EXPECT_DOUBLE_EQ(cell.timed_s, 1.0);
      EXPECT_TRUE(std::isnan(cell.search_s));
    }
  EXPECT_TRUE(found);
}

TEST(CubeMerge, ACubeWithoutTheTelemetryVariablesMergesWithOneThatHasThem) {
  // a.h5 was written before min_sm_clock_mhz, mean_power_w and max_temperature_c (same schema).
  const fs::path directory = fs::temp_directory_path() / ("crossbench_merge_telemetry_" + std::to_string(::getpid()));
  fs::create_directories(directory);
  const fs::path older = directory / "a.h5", newer = directory / "b.h5", merged_path = directory / "merged.h5";
  write_cube(older, retagged(sample_cube(), "site=a", "aaaaaaaaaaaa"));
  write_cube(newer, retagged(sample_cube(), "site=b", "bbbbbbbbbbbb"));
  const hid_t file = H5Fopen(older.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(file, 0);
  for (const char* name : {"min_sm_clock_mhz", "mean_power_w", "max_temperature_c"})
    ASSERT_GE(H5Ldelete(file, name, H5P_DEFAULT), 0) << name;
  H5Fclose(file);

  const CubeContents merged = merge_cubes({{older, read_cube(older)}, {newer, read_cube(newer)}}, {});
  write_cube(merged_path, merged);
  const CubeContents read = read_cube(merged_path);
  fs::remove_all(directory);
  ASSERT_EQ(read.cells.size(), 2 * sample_cube().cells.size());
  int older_ok = 0, newer_ok = 0;
  for (const CellResult& cell : read.cells) {
    if (cell.status != Status::ok) continue;
    EXPECT_EQ(cell.mean_sm_clock_mhz, 1980.0);
    if (cell.device_key.find("[site=a]") != std::string::npos) {
      ++older_ok;
      EXPECT_TRUE(std::isnan(cell.min_sm_clock_mhz));
      EXPECT_TRUE(std::isnan(cell.mean_power_w));
      EXPECT_TRUE(std::isnan(cell.max_temperature_c));
    } else {
      ++newer_ok;
      EXPECT_EQ(cell.min_sm_clock_mhz, 1755.0);
      EXPECT_EQ(cell.mean_power_w, 612.5);
      EXPECT_EQ(cell.max_temperature_c, 57.0);
    }
  }
  EXPECT_EQ(older_ok, 4);
  EXPECT_EQ(newer_ok, 4);
}

TEST(CubeMerge, ASettingAnOlderCubeDoesNotRecordIsItsDefault) {
  // measure.warmup_ms came after a.h5 was written: its default (0) is what that build did, so a cube that
  // records 0 measured alike (the H200 sweep and its retry, bench/results/2026-12-06); 1000 differs.
  CubeContents a = retagged(sample_cube(), "site=a", "aaaaaaaaaaaa");
  CubeContents b = retagged(sample_cube(), "site=b", "bbbbbbbbbbbb");
  a.attributes.erase("measure_warmup_ms");
  b.attributes["measure_warmup_ms"] = "0";
  for (const std::string& warning : merge_warnings({{"a.h5", a}, {"b.h5", b}}))
    EXPECT_EQ(warning.find("measure_warmup_ms"), std::string::npos) << warning;
  b.attributes["measure_warmup_ms"] = "1000";
  bool named = false;
  for (const std::string& warning : merge_warnings({{"a.h5", a}, {"b.h5", b}}))
    named = named || warning.find("measure_warmup_ms ('0' (not recorded: the default), '1000')") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST(CubeMerge, ACellInTwoInputsIsRefusedUnlessToldWhichWins) {
  const CubeContents a = sample_cube();
  CubeContents b = sample_cube();
  b.cells.front().statistics.median_ms = 99.0;
  try {
    static_cast<void>(merge_cubes({{"a.h5", a}, {"b.h5", b}}, {}));
    FAIL() << "a cell held twice was merged";
  } catch (const UsageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("a.h5, b.h5"), std::string::npos) << message;
    EXPECT_NE(message.find("--prefer"), std::string::npos) << message;
  }
  const auto median_of_first = [](const CubeContents& merged) {
    for (const CellResult& cell : merged.cells)
      if (describe(cell.cell) == describe(sample_cube().cells.front().cell) && cell.device_key == sample_cube().cells.front().device_key)
        return cell.statistics.median_ms;
    return -1.0;
  };
  using Rule = MergePreference::Rule;
  EXPECT_EQ(median_of_first(merge_cubes({{"a.h5", a}, {"b.h5", b}}, {Rule::last, {}})), 99.0);
  EXPECT_EQ(median_of_first(merge_cubes({{"a.h5", a}, {"b.h5", b}}, {Rule::first, {}})),
            a.cells.front().statistics.median_ms);
  EXPECT_EQ(median_of_first(merge_cubes({{"a.h5", a}, {"b.h5", b}}, {Rule::file, "b.h5"})), 99.0);
  EXPECT_EQ(merge_cubes({{"a.h5", a}, {"b.h5", b}}, {Rule::last, {}}).cells.size(), a.cells.size());
}

TEST(CubeMerge, AMergedInputCarriesItsSources) {
  const CubeContents a = retagged(sample_cube(), "site=a", "a"), b = retagged(sample_cube(), "site=b", "b"),
                     c = retagged(sample_cube(), "site=c", "c");
  const CubeContents ab = merge_cubes({{"a.h5", a}, {"b.h5", b}}, {});
  const CubeContents abc = merge_cubes({{"ab.h5", ab}, {"c.h5", c}}, {});
  ASSERT_EQ(abc.sources.size(), 3u);
  EXPECT_EQ(abc.sources[0].attributes.at("path"), "a.h5");
  EXPECT_EQ(abc.sources[2].attributes.at("path"), "c.h5");
}

}  // namespace
}  // namespace crossbench
