// The worker's prepare request is generated from the options schema: its
// `settings` hold exactly the keys the schema marks sent_to_workers, each with
// the value the job file gave, typed by its row.
#include "engines/worker/prepare_request.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "crossbench/error.hpp"
#include "crossbench/options.hpp"
#include "crossbench/options_schema.hpp"
#include "app/options.hpp"
#include "engines/worker/worker_engine.hpp"

namespace crossbench {
namespace {

RunOptions parsed_job(const std::vector<std::string>& arguments) {
  const auto job = std::filesystem::temp_directory_path() / "prepare_request_test.ini";
  std::ofstream(job) << "[matrix]\nnetworks = alexnet\nengines = pytorch\nprecisions = fp32\nbatches = 2\n"
                        "phases = training\n[measure]\nseed = 7\nupdate = sgd\nlearning_rate = 1e-3\n";
  std::vector<std::string> all{"--job", job.string()};
  all.insert(all.end(), arguments.begin(), arguments.end());
  return parse_command_options<RunOptions>(all, job, "test").value();  // no --help here
}

nlohmann::json request_of(const JobOptions& options) {
  const CellSpec cell{"pytorch", "alexnet", Precision::fp32, 2, Phase::training, 0};
  return prepare_request(make_network("alexnet"), cell, options.engine, kWorkerProtocol);
}

TEST(PrepareRequest, SettingsAreExactlyTheSchemasWorkerKeys) {
  const nlohmann::json request = request_of(parsed_job({"--layout", "nhwc"}));
  std::set<std::string> expected, sent;
  for (const auto& spec : options_schema())
    if (spec.sent_to_workers) expected.insert(spec.key);
  for (const auto& [key, value] : request.at("settings").items()) sent.insert(key);
  EXPECT_EQ(sent, expected);
  EXPECT_FALSE(expected.empty());
  // The job file's values, typed by their rows (a worker reads 7, not "7").
  const auto& settings = request.at("settings");
  EXPECT_EQ(settings.at("measure.seed"), 7);
  EXPECT_EQ(settings.at("measure.update"), "sgd");
  EXPECT_DOUBLE_EQ(settings.at("measure.learning_rate").get<double>(), 1e-3);
  EXPECT_EQ(settings.at("engine.layout"), "nhwc");
  EXPECT_EQ(settings.at("engine.compile_mode"), "reduce-overhead");  // the schema's default
  // Nothing named by hand beside them: the cell, the graph and the rank's threads.
  std::set<std::string> top;
  for (const auto& [key, value] : request.items()) top.insert(key);
  EXPECT_EQ(top, (std::set<std::string>{"protocol", "type", "cell", "graph", "threads", "settings"}));
  EXPECT_EQ(request.at("protocol"), kWorkerProtocol);
}

TEST(PrepareRequest, ALargeSeedStaysExact) {
  const nlohmann::json request = request_of(parsed_job({"--set", "measure.seed=9000000000000000001"}));
  EXPECT_EQ(request.at("settings").at("measure.seed").get<long long>(), 9000000000000000001LL);
}

TEST(PrepareRequest, AValueOutsideItsSchemaRowIsRefused) {
  EngineConfig config;
  config.settings["engine.layout"] = "diagonal";
  const CellSpec cell{"pytorch", "alexnet", Precision::fp32, 2, Phase::training, 0};
  EXPECT_THROW(prepare_request(make_network("alexnet"), cell, config, kWorkerProtocol), UsageError);
}

}  // namespace
}  // namespace crossbench
