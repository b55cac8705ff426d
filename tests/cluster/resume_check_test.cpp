// The journal header's resume check: each difference that would mix two runs
// in one cube is named; new device keys pass only when allowed.
#include <gtest/gtest.h>

#include <algorithm>

#include "crossbench/options.hpp"
#include "crossbench/options_schema.hpp"
#include "cluster/journal.hpp"
#include "cluster/run_segment.hpp"
#include "cluster/resume_settings.hpp"

namespace crossbench {
namespace {

JobOptions small_options() {
  JobOptions options;
  options.job_name = "quick";
  options.matrix.networks = {"alexnet"};
  options.matrix.engines = {"auto"};
  options.matrix.precisions = {Precision::fp32};
  options.matrix.batches = {1, 2};
  options.matrix.phases = {Phase::inference};
  // As parsing leaves them: every single-valued key's canonical text, here the schema's defaults.
  for (const OptionSpec& spec : options_schema())
    if (!spec.key.empty()) options.settings[spec.key] = spec.default_value;
  return options;
}

TEST(ResumeCheck, IdenticalRunsMatch) {
  const JobOptions options = small_options();
  const auto header = JournalHeader::for_run(options, {"cpu b", "cpu a", "cpu a"});
  EXPECT_EQ(header.device_keys, (std::vector<std::string>{"cpu a", "cpu b"}));
  EXPECT_EQ(header.mismatch(JournalHeader::for_run(options, {"cpu a", "cpu b"}), false), "");
}

TEST(ResumeCheck, EveryNumberChangingSettingIsCompared) {
  const JobOptions before = small_options();
  const auto journal = JournalHeader::for_run(before, {"cpu"});
  JobOptions after = before;
  after.settings["measure.learning_rate"] = "0.02";
  after.settings["engine.algo"] = "exhaustive";
  EXPECT_EQ(JournalHeader::for_run(after, {"cpu"}).mismatch(journal, false),
            "setting engine.algo is 'heuristic' in the journal, 'exhaustive' in this run; "
            "setting measure.learning_rate is '0.01' in the journal, '0.02' in this run");
  // Exact: a change in the 17th digit is a change.
  JobOptions close = before;
  close.settings["measure.target_ci"] = "0.010000000000000002";
  EXPECT_NE(JournalHeader::for_run(close, {"cpu"}).mismatch(journal, false), "");
}

// A journal written before a key existed (engine.search_l2, say) resumes while
// this run keeps the key's default, the behaviour the journal's build had.
TEST(ResumeCheck, AKeyTheJournalPredatesIsItsDefault) {
  const JobOptions options = small_options();
  JournalHeader journal = JournalHeader::for_run(options, {"cpu"});
  journal.settings.erase("engine.search_l2");
  EXPECT_EQ(JournalHeader::for_run(options, {"cpu"}).mismatch(journal, false), "");
  JobOptions cold = options;
  cold.settings["engine.search_l2"] = "cold";
  EXPECT_EQ(JournalHeader::for_run(cold, {"cpu"}).mismatch(journal, false),
            "setting engine.search_l2 is (not set) in the journal, 'cold' in this run");
}

TEST(ResumeCheck, ResumeSettingsAreTheSchemasNumberChangingKeys) {
  const auto settings = resume_settings(small_options());
  std::size_t number_changing = 0;
  for (const OptionSpec& spec : options_schema()) {
    if (!spec.changes_numbers) continue;
    ++number_changing;
    EXPECT_EQ(settings.count(spec.key), 1u) << spec.key;
  }
  EXPECT_EQ(settings.size(), number_changing);
  for (const char* key : {"measure.warmup", "measure.min_steps", "measure.max_steps", "measure.target_ci",
                          "measure.cell_time_limit_s", "measure.seed", "measure.update", "measure.learning_rate",
                          "engine.algo", "engine.workspace_limit_mb", "engine.layout", "engine.cuda_graphs",
                          "engine.compile_mode", "engine.bucket_mb"})
    EXPECT_EQ(settings.count(key), 1u) << key;
}

TEST(ResumeCheck, WorkerCommandsAreCompared) {
  JobOptions before = small_options();
  before.engine.settings["workers.pytorch"] = "python3 worker.py";
  JobOptions after = before;
  after.engine.settings["workers.pytorch"] = "python3  other.py";  // the command as run: single spaces
  EXPECT_EQ(JournalHeader::for_run(after, {"cpu"}).mismatch(JournalHeader::for_run(before, {"cpu"}), false),
            "worker command workers.pytorch is 'python3 worker.py' in the journal, 'python3 other.py' in this run");
}

// A setting whose schema row names its engines, and a framework's worker
// command, change only those engines' numbers: with a list to take them
// (--allow-setting-change decides) they leave the refusal; a setting of every
// engine stays in it.
TEST(ResumeCheck, EngineScopedChangesAreSetApart) {
  JobOptions before = small_options();
  before.engine.settings["workers.jax"] = "python3 jax/worker.py";
  const auto journal = JournalHeader::for_run(before, {"cpu"});
  JobOptions after = before;
  after.settings["engine.jax_timing"] = "device-paced";
  after.settings["engine.compile_mode"] = "max-autotune";
  after.engine.settings["workers.jax"] = "python3 other/worker.py";
  const auto now = JournalHeader::for_run(after, {"cpu"});
  std::vector<EngineScopedChange> scoped;
  EXPECT_EQ(now.mismatch(journal, false, &scoped), "");
  ASSERT_EQ(scoped.size(), 3u);
  EXPECT_EQ(scoped[0].text, "setting engine.compile_mode is 'reduce-overhead' in the journal, 'max-autotune' in this run");
  EXPECT_EQ(scoped[0].engines, (std::vector<std::string>{"pytorch-compile"}));
  EXPECT_EQ(scoped[1].text, "setting engine.jax_timing is 'events' in the journal, 'device-paced' in this run");
  EXPECT_EQ(scoped[1].engines, (std::vector<std::string>{"jax"}));
  EXPECT_EQ(scoped[2].text, "worker command workers.jax is 'python3 jax/worker.py' in the journal, 'python3 other/worker.py' in this run");
  EXPECT_EQ(scoped[2].engines, (std::vector<std::string>{"jax"}));
  // Without the list every difference refuses, as before.
  EXPECT_EQ(now.mismatch(journal, false),
            "setting engine.compile_mode is 'reduce-overhead' in the journal, 'max-autotune' in this run; "
            "setting engine.jax_timing is 'events' in the journal, 'device-paced' in this run; "
            "worker command workers.jax is 'python3 jax/worker.py' in the journal, 'python3 other/worker.py' in this run");
  // A setting of every engine is never set apart.
  after.settings["engine.algo"] = "exhaustive";
  scoped.clear();
  EXPECT_EQ(JournalHeader::for_run(after, {"cpu"}).mismatch(journal, false, &scoped),
            "setting engine.algo is 'heuristic' in the journal, 'exhaustive' in this run");
  EXPECT_EQ(scoped.size(), 3u);
}

// Every engine a schema row scopes a setting to is an engine crossbench runs,
// and only settings that change numbers carry a scope.
TEST(ResumeCheck, ScopedSettingsNameRealEngines) {
  const std::vector<std::string> known{"cudnn", "onednn", "pytorch", "pytorch-compile", "jax"};
  std::size_t scoped = 0;
  for (const OptionSpec& spec : options_schema()) {
    if (spec.engines.empty()) continue;
    ++scoped;
    EXPECT_TRUE(spec.changes_numbers) << spec.id();
    for (const auto& engine : spec.engines)
      EXPECT_NE(std::find(known.begin(), known.end(), engine), known.end()) << spec.id() << ": " << engine;
  }
  EXPECT_GE(scoped, 3u);
}

TEST(ResumeCheck, DeviceKeys) {
  const JobOptions options = small_options();
  const auto journal = JournalHeader::for_run(options, {"cpu a"});
  const auto more = JournalHeader::for_run(options, {"cpu a", "cpu b"});
  EXPECT_NE(more.mismatch(journal, false).find("device key(s) 'cpu b'"), std::string::npos);
  EXPECT_EQ(more.mismatch(journal, true), "");
  EXPECT_EQ(more.new_device_keys(journal), (std::vector<std::string>{"cpu b"}));
  const auto other = JournalHeader::for_run(options, {"cpu b"});
  EXPECT_NE(other.mismatch(journal, true).find("'cpu a' have no rank in this run"), std::string::npos);
}

TEST(ResumeCheck, AnOlderJournalSchemaIsNamed) {
  const JobOptions options = small_options();
  auto journal = JournalHeader::for_run(options, {"cpu"});
  journal.schema = "crossbench-journal/1";
  EXPECT_EQ(JournalHeader::for_run(options, {"cpu"}).mismatch(journal, false),
            "it has journal schema 'crossbench-journal/1', this crossbench writes '" + std::string(journal_schema) + "'");
}

// The build facts a resume compares: revision and loaded libraries, not the GPU
// driver (the machine's, like the GPU: a requeue may meet another) nor HDF5 (the writer's).
TEST(ResumeCheck, BuildDifferencesNameRevisionAndLibrariesOnly) {
  RunSegment before, now;
  before.attributes = {{"git_revision", "abc"}, {"cudnn_version", "9.14.0"}, {"cuda_driver_version", "12.8"},
                       {"command_line", "crossbench run"}, {"started", "2026-12-01T10:00:00Z"}};
  now = before;
  now.attributes["cuda_driver_version"] = "13.0";
  now.attributes["command_line"] = "crossbench run --resume";
  now.attributes["started"] = "2026-12-01T11:00:00Z";
  EXPECT_TRUE(build_differences(before, 0, now).empty());
  now.attributes["cudnn_version"] = "9.19.0";
  now.attributes["nccl_version"] = "2.27.3";
  EXPECT_EQ(build_differences(before, 3, now),
            (std::vector<std::string>{"cudnn_version is '9.14.0' in segment 3, '9.19.0' now",
                                      "nccl_version is (not loaded) in segment 3, '2.27.3' now"}));
}

}  // namespace
}  // namespace crossbench
