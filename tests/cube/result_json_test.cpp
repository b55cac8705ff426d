// CellResult ⇄ JSON: the MPI record and the journal line must round-trip exactly.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "crossbench/error.hpp"
#include "crossbench/result.hpp"
#include "sample_cube.hpp"

namespace crossbench {
namespace {

bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

std::vector<double> numbers_of(const CellResult& r) {
  const Statistics& s = r.statistics;
  return {s.median_ms, s.mean_ms, s.std_ms, s.min_ms, s.max_ms, s.p05_ms, s.p95_ms, s.ci_low_ms, s.ci_high_ms,
          r.images_per_s, r.tflops, r.peak_memory_bytes, r.energy_j_per_image, r.mean_sm_clock_mhz,
          r.min_sm_clock_mhz, r.mean_power_w, r.max_temperature_c};
}

void expect_identical(const CellResult& a, const CellResult& b) {
  EXPECT_EQ(a.device_key, b.device_key);
  EXPECT_EQ(a.cell, b.cell);
  EXPECT_EQ(a.status, b.status);
  const auto x = numbers_of(a), y = numbers_of(b);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_TRUE(same_bits(x[i], y[i])) << i << ": " << x[i] << " " << y[i];
  EXPECT_EQ(a.throttled, b.throttled);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.message, b.message);
  EXPECT_EQ(a.decisions, b.decisions);
  ASSERT_EQ(a.samples_ms.size(), b.samples_ms.size());
  for (std::size_t i = 0; i < a.samples_ms.size(); ++i) EXPECT_TRUE(same_bits(a.samples_ms[i], b.samples_ms[i]));
  ASSERT_EQ(a.layer_times.size(), b.layer_times.size());
  for (std::size_t i = 0; i < a.layer_times.size(); ++i) {
    EXPECT_EQ(a.layer_times[i].layer, b.layer_times[i].layer);
    EXPECT_EQ(a.layer_times[i].kind, b.layer_times[i].kind);
    EXPECT_TRUE(same_bits(a.layer_times[i].forward_ms, b.layer_times[i].forward_ms)) << i;
    EXPECT_TRUE(same_bits(a.layer_times[i].backward_ms, b.layer_times[i].backward_ms)) << i;
  }
}

// Through text, as over MPI and through the journal.
CellResult through_text(const CellResult& result) {
  const std::string line = to_json(result).dump();
  EXPECT_EQ(line.find('\n'), std::string::npos) << "a journal record is one line";
  return cell_result_from_json(nlohmann::json::parse(line));
}

TEST(ResultJson, EveryCellOfTheSampleRoundTripsExactly) {
  for (const CellResult& cell : testing::sample_cube().cells) expect_identical(cell, through_text(cell));
}

TEST(ResultJson, AwkwardDoublesAndNaNRoundTrip) {
  CellResult result = testing::sample_ok_cell("dev\n\"quoted\" ü", "cudnn", "vgg16", Precision::bf16, 256,
                                              Phase::training, 3, {0.1, 1.0 / 3.0, 1e-300, 123456789.123456789}, 7);
  result.statistics.std_ms = not_a_number;                                  // NaN → null → NaN
  result.energy_j_per_image = std::numeric_limits<double>::infinity();     // no JSON number for it
  result.mean_sm_clock_mhz = -std::numeric_limits<double>::infinity();
  result.min_sm_clock_mhz = 1.0 / 3.0;
  result.mean_power_w = not_a_number;
  result.max_temperature_c = 1e-300;
  result.tflops = std::numeric_limits<double>::denorm_min();
  result.peak_memory_bytes = 80.0 * (1ull << 30);
  result.throttled = 1;
  result.samples_ms.push_back(not_a_number);
  result.message = "multi\nline\tmessage";
  result.decisions = "conv1 fwd=WINOGRAD; layout=NCHW";
  const nlohmann::json json = to_json(result);
  EXPECT_TRUE(json.at("std_ms").is_null());
  EXPECT_EQ(json.at("status"), "ok");
  EXPECT_EQ(json.at("precision"), "bf16");
  expect_identical(result, through_text(result));
}

TEST(ResultJson, LayerTimesRoundTripExactly) {
  CellResult result = testing::sample_ok_cell("gpu", "cudnn", "googlenet", Precision::fp16, 64, Phase::training, 0,
                                              {2.0, 2.5}, 1);
  result.layer_times = {{"conv1/7x7_s2", "convolution", 0.1, 1.0 / 3.0},
                        {"inception_3a/output", "concat", 1e-300, 0.0},
                        {"loss", "softmax_cross_entropy", 0.0125, not_a_number}};
  const nlohmann::json json = to_json(result);
  ASSERT_EQ(json.at("layer_times").size(), 3u);
  EXPECT_EQ(json.at("layer_times")[0].at("layer"), "conv1/7x7_s2");
  EXPECT_TRUE(json.at("layer_times")[2].at("backward_ms").is_null());
  expect_identical(result, through_text(result));
}

TEST(ResultJson, RecordsWithoutLayerTimesAreAccepted) {
  // Journals written before --layer-times have no such field: their cells read back without layer times.
  nlohmann::json record = to_json(testing::sample_cube().cells.front());
  record.erase("layer_times");
  EXPECT_TRUE(cell_result_from_json(record).layer_times.empty());
}

TEST(ResultJson, TelemetryFieldsAreWrittenAndReadBack) {
  const CellResult cell = testing::sample_cube().cells.front();
  const nlohmann::json record = to_json(cell);
  EXPECT_EQ(record.at("min_sm_clock_mhz"), 1755.0);
  EXPECT_EQ(record.at("mean_power_w"), 612.5);
  EXPECT_EQ(record.at("max_temperature_c"), 57.0);
  const CellResult read = through_text(cell);
  EXPECT_EQ(read.min_sm_clock_mhz, 1755.0);
  EXPECT_EQ(read.mean_power_w, 612.5);
  EXPECT_EQ(read.max_temperature_c, 57.0);
}

TEST(ResultJson, RecordsWithoutTheTelemetryFieldsReadAsNaN) {
  // Journals written before min_sm_clock_mhz, mean_power_w and max_temperature_c were recorded.
  nlohmann::json record = to_json(testing::sample_cube().cells.front());
  for (const char* field : {"min_sm_clock_mhz", "mean_power_w", "max_temperature_c"}) record.erase(field);
  const CellResult read = cell_result_from_json(record);
  EXPECT_TRUE(std::isnan(read.min_sm_clock_mhz));
  EXPECT_TRUE(std::isnan(read.mean_power_w));
  EXPECT_TRUE(std::isnan(read.max_temperature_c));
  EXPECT_EQ(read.mean_sm_clock_mhz, 1980.0);
  EXPECT_EQ(read.status, Status::ok);
}

TEST(ResultJson, DefaultResultRoundTrips) {
  const CellResult empty;
  expect_identical(empty, through_text(empty));
}

void expect_rejected(const nlohmann::json& record, const std::string& field) {
  try {
    static_cast<void>(cell_result_from_json(record));
    FAIL() << "accepted " << record.dump();
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("`" + field + "`"), std::string::npos)
        << "the message must name " << field << ": " << error.what();
  }
}

TEST(ResultJson, MalformedRecordsAreRejectedNamingTheField) {
  const nlohmann::json good = to_json(testing::sample_cube().cells.front());
  for (const char* field : {"device_key", "engine", "precision", "batch", "status", "median_ms", "throttled",
                            "steps", "rank", "message", "decisions", "samples_ms"}) {
    nlohmann::json missing = good;
    missing.erase(field);
    expect_rejected(missing, field);
  }
  auto with = [&](const char* field, nlohmann::json value) {
    nlohmann::json record = good;
    record[field] = std::move(value);
    return record;
  };
  expect_rejected(with("status", "crashed"), "status");
  expect_rejected(with("precision", "fp64"), "precision");
  expect_rejected(with("phase", 1), "phase");
  expect_rejected(with("batch", 64.5), "batch");
  expect_rejected(with("batch", "64"), "batch");
  expect_rejected(with("batch", 0), "batch");
  expect_rejected(with("throttled", 2), "throttled");
  expect_rejected(with("rank", 1ll << 40), "rank");
  expect_rejected(with("median_ms", "fast"), "median_ms");
  expect_rejected(with("samples_ms", 1.0), "samples_ms");
  expect_rejected(with("samples_ms", nlohmann::json::array({1.0, "x"})), "samples_ms[1]");
  expect_rejected(with("layer_times", "fast"), "layer_times");
  expect_rejected(with("layer_times", nlohmann::json::array({1.0})), "layer_times[0]");
  expect_rejected(with("layer_times", nlohmann::json::array({{{"layer", "conv1"}, {"kind", "convolution"},
                                                              {"forward_ms", 1.0}}})),
                  "backward_ms");
  expect_rejected(with("layer_times", nlohmann::json::array({{{"layer", 3}, {"kind", "convolution"},
                                                              {"forward_ms", 1.0}, {"backward_ms", 1.0}}})),
                  "layer_times[0]");
  EXPECT_THROW(cell_result_from_json(nlohmann::json::array()), Error);
  EXPECT_THROW(cell_result_from_json(nlohmann::json("ok")), Error);
}

}  // namespace
}  // namespace crossbench
