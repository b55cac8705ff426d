// The Runner's measurement rules, driven by a scripted session whose step
// times are known, so that every stopping decision can be checked exactly.
#include "crossbench/runner.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <functional>
#include <span>
#include <thread>

#include "crossbench/error.hpp"
#include "crossbench/stop_flag.hpp"
#include "crossbench/network.hpp"

namespace crossbench {
namespace {

// A timer that reports the step time the script gives for each call.
class ScriptedTimer final : public StepTimer {
 public:
  explicit ScriptedTimer(std::function<double(int)> script) : script_(std::move(script)) {}
  void start() override {}
  void stop() override {}
  double elapsed_ms() override { return script_(calls_++); }
  int calls() const { return calls_; }

 private:
  std::function<double(int)> script_;
  int calls_ = 0;
};

class ScriptedSession final : public Session {
 public:
  explicit ScriptedSession(std::function<double(int)> script, std::chrono::milliseconds sleep = {}, bool finite = true)
      : timer_(std::move(script)), sleep_(sleep), finite_(finite) {}
  void step() override {
    ++steps_;
    if (sleep_.count()) std::this_thread::sleep_for(sleep_);
  }
  StepTimer& timer() override { return timer_; }
  MemoryUse memory() const override { return {1234}; }
  OutputCheck check() override { return {finite_, finite_ ? 6.9 : NAN, 1.0, NAN, {}}; }
  int steps() const { return steps_; }

 private:
  ScriptedTimer timer_;
  std::chrono::milliseconds sleep_;
  bool finite_;
  int steps_ = 0;
};

TEST(Measure, WarmupIsNotRecordedAndConstantTimesStopAtMinSteps) {
  // Warm-up steps report 100 ms, timed ones 2 ms: no 100 may appear in the samples.
  const int warmup = 3;
  ScriptedSession session([&](int call) { return call < warmup ? 100.0 : 2.0; });
  MeasureOptions options;
  options.warmup_steps = warmup;
  options.min_steps = 20;
  const Measurement m = measure(session, options);
  EXPECT_EQ(session.steps(), warmup + 20);
  ASSERT_EQ(m.samples_ms.size(), 20u);
  for (double sample : m.samples_ms) EXPECT_EQ(sample, 2.0);
  EXPECT_EQ(m.stop_reason, "ci_target");
  EXPECT_TRUE(m.reached_min_steps);
}

TEST(Measure, ACooldownLeavesTheDeviceIdleBeforeTheWarmupAndAStopEndsIt) {
  // measure.cooldown_ms: the session runs nothing for that long, then the warm-up and the steps as ever.
  ScriptedSession session([](int) { return 2.0; });
  MeasureOptions options;
  options.warmup_steps = 3;
  options.min_steps = 20;
  options.cooldown_ms = 60;
  const auto start = std::chrono::steady_clock::now();
  const Measurement m = measure(session, options);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(60));
  EXPECT_EQ(session.steps(), 3 + 20);
  EXPECT_EQ(m.warmup_steps, 3);
  EXPECT_EQ(m.samples_ms.size(), 20u);

  // A stop request (level 2: end the running cell) ends a long wait at once, and the cell with it.
  stop_flag::reset();
  stop_flag::raise(SIGTERM, 2);
  ScriptedSession stopped([](int) { return 2.0; });
  options.cooldown_ms = 600000;
  const auto begun = std::chrono::steady_clock::now();
  EXPECT_THROW(static_cast<void>(measure(stopped, options)), CellInterrupted);
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(60)) << "the 10-minute wait ended early";
  EXPECT_LE(stopped.steps(), 1);
  stop_flag::reset();
}

TEST(Measure, AWarmupInMillisecondsRunsStepsUntilItHasLastedThatLong) {
  // 4 ms steps: the 2 warm-up steps last 8 ms; measure.warmup_ms = 50 adds ceil(42 / 4) = 11 more,
  // sized from the step time seen, so the warm-up is 13 steps and 52 ms, none of them a sample.
  ScriptedSession session([](int) { return 4.0; });
  MeasureOptions options;
  options.warmup_steps = 2;
  options.warmup_ms = 50;
  options.min_steps = 20;
  const Measurement m = measure(session, options);
  EXPECT_EQ(m.warmup_steps, 13);
  EXPECT_DOUBLE_EQ(m.warmup_ms, 52.0);
  ASSERT_EQ(m.samples_ms.size(), 20u);
  EXPECT_EQ(session.steps(), 13 + 20);

  // No warm-up steps: one step first, to learn the step time (4 ms), then ceil(6 / 4) = 2 more.
  ScriptedSession from_none([](int) { return 4.0; });
  options.warmup_steps = 0;
  options.warmup_ms = 10;
  const Measurement n = measure(from_none, options);
  EXPECT_EQ(n.warmup_steps, 3);
  EXPECT_DOUBLE_EQ(n.warmup_ms, 12.0);
  EXPECT_EQ(from_none.steps(), 3 + 20);

  // 0 (the default): the warm-up steps alone, however short.
  ScriptedSession steps_only([](int) { return 4.0; });
  options.warmup_steps = 5;
  options.warmup_ms = 0;
  const Measurement o = measure(steps_only, options);
  EXPECT_EQ(o.warmup_steps, 5);
  EXPECT_DOUBLE_EQ(o.warmup_ms, 20.0);
  EXPECT_EQ(steps_only.steps(), 5 + 20);
}

// A data-parallel group as one rank sees it: each agreement replaces the step's facts by the group's
// maxima, here with another rank whose steps take 4 ms and which runs out of time at `out_of_time_at`.
class OtherRankAgreement final : public StepAgreement {
 public:
  explicit OtherRankAgreement(int out_of_time_at = -1) : out_of_time_at_(out_of_time_at) {}
  void max_over_group(std::span<double> values) override {
    values[0] = std::max(values[0], 4.0);
    if (calls++ == out_of_time_at_) values[2] = 1.0;
  }
  int calls = 0;

 private:
  int out_of_time_at_;
};

TEST(Measure, AWarmupInMillisecondsCountsTheGroupsAgreedStepTimes) {
  // This rank's steps take 1 ms, the group's 4 ms: the warm-up is sized from the agreed 4 ms, as on
  // every other rank (2 steps, then ceil(42 / 4) = 11), so all ranks run the same 13 warm-up steps.
  ScriptedSession session([](int) { return 1.0; });
  MeasureOptions options;
  options.warmup_steps = 2;
  options.warmup_ms = 50;
  options.min_steps = 20;
  OtherRankAgreement group;
  const Measurement m = measure(session, options, 0, &group);
  EXPECT_EQ(m.warmup_steps, 13);
  EXPECT_DOUBLE_EQ(m.warmup_ms, 52.0);
  EXPECT_EQ(group.calls, 13 + 20);
  ASSERT_EQ(m.samples_ms.size(), 20u);
  for (double sample : m.samples_ms) EXPECT_EQ(sample, 4.0);

  // The other rank runs out of time in the 4th step of the 11: the group stops there, no timed step,
  // and the warm-up counts the 2 + 4 steps it ran.
  ScriptedSession cut([](int) { return 1.0; });
  OtherRankAgreement late(5);
  const Measurement n = measure(cut, options, 0, &late);
  EXPECT_EQ(n.warmup_steps, 6);
  EXPECT_EQ(cut.steps(), 6);
  EXPECT_TRUE(n.samples_ms.empty());
  EXPECT_EQ(n.stop_reason, "time_limit");
}

TEST(Measure, WithoutAWarmupInMillisecondsTheWarmupIsItsStepsAlone) {
  // measure.warmup_ms = 0 (the default): exactly measure.warmup steps, however short, and no note.
  ScriptedSession session([](int) { return 0.01; });
  MeasureOptions options;
  options.warmup_steps = 7;
  options.min_steps = 20;
  const Measurement m = measure(session, options);
  EXPECT_EQ(m.warmup_steps, 7);
  EXPECT_EQ(session.steps(), 7 + 20);
  CellResult result;
  result.cell = CellSpec{"scripted", "alexnet", Precision::fp32, 2, Phase::inference, 0};
  summarize_cell(result, make_network("alexnet"), m, OutputCheck{true, 1.0, 1.0, NAN, {}}, options, 0.5, 1);
  ASSERT_EQ(result.status, Status::ok);
  EXPECT_EQ(result.message.find("warm-up"), std::string::npos) << result.message;

  // Above 0, the message says what the warm-up took, before the loss (which readers take last).
  options.warmup_ms = 50;
  Measurement warmed = m;
  warmed.warmup_steps = 812;
  warmed.warmup_ms = 1003.4;
  summarize_cell(result, make_network("alexnet"), warmed, OutputCheck{true, 1.0, 1.0, NAN, {}}, options, 0.5, 1);
  EXPECT_NE(result.message.find("; warm-up 812 steps in 1003 ms; loss 1"), std::string::npos) << result.message;
}

TEST(Measure, NoisyTimesRunToMaxSteps) {
  // Alternating 1 ms and 3 ms: the median's CI stays [1, 3], far above 1%.
  ScriptedSession session([](int call) { return call % 2 ? 1.0 : 3.0; });
  MeasureOptions options;
  options.warmup_steps = 0;
  options.min_steps = 10;
  options.max_steps = 57;
  const Measurement m = measure(session, options);
  EXPECT_EQ(m.samples_ms.size(), 57u);
  EXPECT_EQ(m.stop_reason, "max_steps");
}

TEST(Measure, StopsWhenTheIntervalNarrowsBelowTheTarget) {
  // 10% noise on the first 200 steps, then constant: the CI shrinks below 5% later.
  ScriptedSession session([](int call) { return call < 30 ? 1.0 + 0.1 * (call % 7) : 1.3; });
  MeasureOptions options;
  options.warmup_steps = 0;
  options.min_steps = 30;
  options.target_ci = 0.01;
  const Measurement m = measure(session, options);
  EXPECT_EQ(m.stop_reason, "ci_target");
  EXPECT_GT(m.samples_ms.size(), 30u);
  EXPECT_LE(relative_ci_half_width(summarize(m.samples_ms)), 0.01);
}

TEST(Measure, TimeLimitStopsTheCell) {
  ScriptedSession session([](int call) { return call % 2 ? 1.0 : 9.0; }, std::chrono::milliseconds(20));
  MeasureOptions options;
  options.warmup_steps = 0;
  options.min_steps = 1000;
  options.cell_time_limit_s = 0.2;
  const Measurement m = measure(session, options);
  EXPECT_EQ(m.stop_reason, "time_limit");
  EXPECT_FALSE(m.reached_min_steps);
  EXPECT_LT(m.samples_ms.size(), 20u);
}

TEST(Measure, PreparationCountsAgainstTheTimeLimit) {
  ScriptedSession session([](int) { return 1.0; });
  MeasureOptions options;
  options.cell_time_limit_s = 5;
  const Measurement m = measure(session, options, /*seconds_already_spent=*/5.0);
  EXPECT_TRUE(m.samples_ms.empty());
  EXPECT_EQ(m.stop_reason, "time_limit");
}

// A session whose steps run elsewhere (as a framework worker's): it runs the
// batches the Runner asks for, with the same script of step times, and logs
// each request (count, warm-up) so that the batch schedule can be checked.
class BatchedSession final : public Session, public RemoteSteps {
 public:
  struct Request {
    int count;
    bool warmup;
    bool operator==(const Request&) const = default;
  };
  explicit BatchedSession(std::function<double(int)> script, std::chrono::milliseconds sleep = {})
      : script_(std::move(script)), sleep_(sleep) {}
  // Each batch's steps per sample, by request index (1 for every batch when empty).
  std::function<int(std::size_t)> steps_per_sample = [](std::size_t) { return 1; };
  void step() override { ADD_FAILURE() << "the Runner must not call step() on a session that runs steps elsewhere"; }
  StepTimer& timer() override { return unused_; }
  MemoryUse memory() const override { return {1}; }
  OutputCheck check() override { return {true, 6.9, 1.0, NAN, {}}; }
  RemoteSteps* remote_steps() override { return this; }
  RemoteBatch run_steps(int count, double seconds_left, bool warmup) override {
    RemoteBatch batch;
    batch.steps_per_sample = steps_per_sample(requests.size());
    requests.push_back({count, warmup});
    const auto start = std::chrono::steady_clock::now();
    while (static_cast<int>(batch.samples_ms.size()) < count &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds_left) {
      if (sleep_.count()) std::this_thread::sleep_for(sleep_);
      batch.samples_ms.push_back(script_(calls_++));
    }
    return batch;
  }
  std::vector<Request> requests;

 private:
  std::function<double(int)> script_;
  std::chrono::milliseconds sleep_;
  ScriptedTimer unused_{[](int) { return 0.0; }};
  int calls_ = 0;
};

TEST(MeasureInBatches, TheBatchesAreTheStoppingRulesCheckSchedule) {
  // Noisy times never meet the CI target: warm-up, min_steps, then +10 (10% of
  // the steps, at least 10) per check, the last batch cut at max_steps.
  BatchedSession session([](int call) { return call % 2 ? 1.0 : 3.0; });
  MeasureOptions options;
  options.warmup_steps = 3;
  options.min_steps = 10;
  options.max_steps = 57;
  const Measurement m = measure(session, options);
  using R = BatchedSession::Request;
  const std::vector<R> expected{{3, true}, {10, false}, {10, false}, {10, false}, {10, false}, {10, false}, {7, false}};
  EXPECT_EQ(session.requests, expected);
  EXPECT_EQ(m.samples_ms.size(), 57u);
  EXPECT_EQ(m.stop_reason, "max_steps");
}

TEST(MeasureInBatches, BatchesGrowByTenPercentOfTheSteps) {
  BatchedSession session([](int call) { return call % 2 ? 1.0 : 3.0; });
  MeasureOptions options;
  options.warmup_steps = 0;
  options.min_steps = 200;
  options.max_steps = 300;
  (void)measure(session, options);
  using R = BatchedSession::Request;
  // 200, +20 = 220, +22 = 242, +24 = 266, +26 = 292, then 8 up to max_steps.
  const std::vector<R> expected{{200, false}, {20, false}, {22, false}, {24, false}, {26, false}, {8, false}};
  EXPECT_EQ(session.requests, expected);
}

TEST(MeasureInBatches, SameSamplesAndDecisionAsStepByStep) {
  // The one rule decides: a session timed here step by step and one that runs
  // batches elsewhere, with the same step times, stop at the same step for the same reason.
  const auto script = [](int call) { return call < 43 ? 1.0 + 0.1 * (call % 7) : 1.3; };
  for (int min_steps : {5, 30, 100}) {
    MeasureOptions options;
    options.warmup_steps = 2;
    options.min_steps = min_steps;
    options.max_steps = 5000;
    ScriptedSession here([&](int call) { return call < 2 ? 50.0 : script(call - 2); });
    BatchedSession elsewhere([&](int call) { return call < 2 ? 50.0 : script(call - 2); });
    const Measurement a = measure(here, options);
    const Measurement b = measure(elsewhere, options);
    EXPECT_EQ(a.samples_ms, b.samples_ms) << "min_steps " << min_steps;
    EXPECT_EQ(a.stop_reason, b.stop_reason) << "min_steps " << min_steps;
    EXPECT_EQ(a.stop_reason, "ci_target");
  }
}

TEST(MeasureInBatches, ABatchCutShortByTheTimeLimitEndsTheCell) {
  BatchedSession session([](int) { return 20.0; }, std::chrono::milliseconds(20));
  MeasureOptions options;
  options.warmup_steps = 0;
  options.min_steps = 1000;
  options.cell_time_limit_s = 0.2;
  const Measurement m = measure(session, options);
  EXPECT_EQ(m.stop_reason, "time_limit");
  EXPECT_FALSE(m.reached_min_steps);
  ASSERT_EQ(session.requests.size(), 1u);
  EXPECT_EQ(session.requests[0].count, 1000);
  EXPECT_GT(m.samples_ms.size(), 0u);
  EXPECT_LT(m.samples_ms.size(), 20u);
}

TEST(MeasureInBatches, SamplesOfSeveralStepsAreCountedAsStepsForEnergy) {
  // A worker's batch measurement (the JAX worker's marks around 4 steps): the samples are kept as
  // they come, the steps per sample with them, and the energy per image is over every step run.
  BatchedSession session([](int) { return 2.0; });
  session.steps_per_sample = [](std::size_t) { return 4; };
  MeasureOptions options;
  options.warmup_steps = 1;
  options.min_steps = 10;
  Measurement m = measure(session, options);
  EXPECT_EQ(m.steps_per_sample, 4);
  ASSERT_EQ(m.samples_ms.size(), 10u);
  m.telemetry.energy_j = 80.0;  // [J] over the 40 steps the 10 samples spanned
  CellResult result;
  result.cell = CellSpec{"scripted", "alexnet", Precision::fp32, 2, Phase::inference, 0};
  summarize_cell(result, make_network("alexnet"), m, OutputCheck{true, 1.0, 1.0, NAN, {}}, options, 0.5, 1);
  ASSERT_EQ(result.status, Status::ok);
  EXPECT_EQ(result.steps, 10);
  EXPECT_DOUBLE_EQ(result.energy_j_per_image, 80.0 / (40 * 2));
  EXPECT_NE(result.message.find("10 samples of 4 steps each"), std::string::npos) << result.message;
}

TEST(MeasureInBatches, AWarmupInMillisecondsAsksAWorkerForBatchesOfRealTime) {
  // A worker's warm-up lasts in the host's wall time of its requests: steps of 1 ms of real time
  // (sleep), samples of 4 steps. No warm-up steps: 1 sample first, to learn its time, then batches
  // sized from it until 50 ms have passed; all of it before the first timed batch, none of it a sample.
  BatchedSession session([](int) { return 1.0; }, std::chrono::milliseconds(1));
  session.steps_per_sample = [](std::size_t) { return 4; };
  MeasureOptions options;
  options.warmup_steps = 0;
  options.warmup_ms = 50;
  options.min_steps = 20;
  const auto start = std::chrono::steady_clock::now();
  const Measurement m = measure(session, options);
  const double elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_GE(session.requests.size(), 3u);  // 1 sample, at least one more warm-up batch, the timed one
  EXPECT_EQ(session.requests[0], (BatchedSession::Request{1, true}));
  int warmup_samples = 0;
  std::size_t i = 0;
  for (; i < session.requests.size() && session.requests[i].warmup; ++i) warmup_samples += session.requests[i].count;
  EXPECT_GE(i, 2u) << "a 1 ms sample cannot have lasted 50 ms";
  for (; i < session.requests.size(); ++i) EXPECT_FALSE(session.requests[i].warmup) << "request " << i;
  EXPECT_EQ(m.warmup_steps, 4 * warmup_samples);  // steps, not samples
  EXPECT_GE(m.warmup_ms, 50.0);
  EXPECT_GE(elapsed_ms, 50.0);
  EXPECT_EQ(m.samples_ms.size(), 20u);
}

TEST(MeasureInBatches, AWorkerThatChangesItsStepsPerSampleMidCellIsAnError) {
  // The warm-up batch may differ (it is discarded); the timed batches may not.
  BatchedSession session([](int call) { return call % 2 ? 1.0 : 3.0; });
  session.steps_per_sample = [](std::size_t request) { return request < 2 ? 2 : 3; };
  MeasureOptions options;
  options.warmup_steps = 1;
  options.min_steps = 10;
  options.max_steps = 100;
  try {
    (void)measure(session, options);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("changed its steps per sample from 2 to 3"), std::string::npos)
        << error.what();
  }
}

// An engine whose prepare() does what the test says: the Runner must turn each outcome into a status.
class ScriptedEngine final : public Engine {
 public:
  explicit ScriptedEngine(std::function<std::unique_ptr<Session>()> prepare, DeviceKind kind = DeviceKind::cpu,
                          Support support = Support::yes())
      : prepare_(std::move(prepare)), kind_(kind), support_(std::move(support)) {}
  std::string_view name() const override { return "scripted"; }
  DeviceKind device_kind() const override { return kind_; }
  Support supports(const Device&, const CellSpec&) const override { return support_; }
  std::unique_ptr<Session> prepare(const Network&, const CellSpec&, Communicator*) override { return prepare_(); }

 private:
  std::function<std::unique_ptr<Session>()> prepare_;
  DeviceKind kind_;
  Support support_;
};

class RunCell : public ::testing::Test {
 protected:
  Network network_ = make_network("alexnet");
  CellSpec cell_{"scripted", "alexnet", Precision::fp32, 4, Phase::training, 0};
  Device device_ = probe_cpu(1, "");
  MeasureOptions options_ = [] {
    MeasureOptions o;
    o.warmup_steps = 1;
    o.min_steps = 10;
    return o;
  }();
  CellResult run(Engine* engine) { return run_cell(engine, "scripted", network_, cell_, device_, options_, 3); }
};

TEST_F(RunCell, OkCellHasStatisticsThroughputAndFlops) {
  ScriptedEngine engine([] { return std::make_unique<ScriptedSession>([](int) { return 8.0; }); });
  const CellResult r = run(&engine);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_EQ(r.steps, 10);
  EXPECT_EQ(r.rank, 3);
  EXPECT_DOUBLE_EQ(r.statistics.median_ms, 8.0);
  EXPECT_DOUBLE_EQ(r.images_per_s, 4 / 0.008);
  EXPECT_NEAR(r.tflops, network_.training_flops_per_image() * 4 / 0.008 / 1e12, 1e-9);
  EXPECT_DOUBLE_EQ(r.peak_memory_bytes, 1234);
  EXPECT_NE(r.message.find("ci_target"), std::string::npos) << r.message;
  EXPECT_EQ(r.device_key, device_.key());
}

TEST_F(RunCell, OutOfMemoryBecomesOom) {
  ScriptedEngine engine([]() -> std::unique_ptr<Session> { throw OutOfMemory("cudaMalloc of 80 GiB failed"); });
  const CellResult r = run(&engine);
  EXPECT_EQ(r.status, Status::oom);
  EXPECT_NE(r.message.find("80 GiB"), std::string::npos);
  EXPECT_TRUE(std::isnan(r.statistics.median_ms));
}

TEST_F(RunCell, OtherErrorsBecomeFailedWithTheMessage) {
  ScriptedEngine engine([]() -> std::unique_ptr<Session> { throw Error("cudnnConvolutionForward failed"); });
  const CellResult r = run(&engine);
  EXPECT_EQ(r.status, Status::failed);
  EXPECT_NE(r.message.find("cudnnConvolutionForward"), std::string::npos);
}

TEST_F(RunCell, NonFiniteOutputIsFailed) {
  ScriptedEngine engine([] { return std::make_unique<ScriptedSession>([](int) { return 1.0; }, std::chrono::milliseconds(0), false); });
  EXPECT_EQ(run(&engine).status, Status::failed);
}

TEST_F(RunCell, TooFewStepsInTheLimitIsTimeout) {
  options_.cell_time_limit_s = 0.1;
  options_.min_steps = 1000;
  ScriptedEngine engine([] { return std::make_unique<ScriptedSession>([](int) { return 30.0; }, std::chrono::milliseconds(30)); });
  const CellResult r = run(&engine);
  EXPECT_EQ(r.status, Status::timeout);
  EXPECT_NE(r.message.find("time limit"), std::string::npos) << r.message;
}

TEST_F(RunCell, UnsupportedReasonsAreKept) {
  ScriptedEngine wrong_device([] { return nullptr; }, DeviceKind::gpu);
  const CellResult on_cpu = run(&wrong_device);
  EXPECT_EQ(on_cpu.status, Status::unsupported);
  EXPECT_NE(on_cpu.message.find("GPUs"), std::string::npos);

  ScriptedEngine refuses([] { return nullptr; }, DeviceKind::cpu, Support::no("bf16 needs avx512_core_bf16"));
  EXPECT_EQ(run(&refuses).message, "bf16 needs avx512_core_bf16");

  const CellResult not_built = run(nullptr);
  EXPECT_EQ(not_built.status, Status::unsupported);
  EXPECT_NE(not_built.message.find("not built"), std::string::npos);
}

// --layer-times: a session that records in `log` (which outlives it) when the
// profile pass ran, relative to its steps and its check(), and what it was asked for.
struct ProfileLog {
  int steps = 0, checked_at = -1, profiled_at = -1, profiles = 0, repetitions = 0;
};

class ProfiledSession final : public Session {
 public:
  explicit ProfiledSession(ProfileLog& log, bool throws = false, bool finite = true)
      : log_(log), timer_([](int) { return 5.0; }), throws_(throws), finite_(finite) {}
  void step() override { ++log_.steps; }
  StepTimer& timer() override { return timer_; }
  MemoryUse memory() const override { return {1}; }
  OutputCheck check() override {
    log_.checked_at = log_.steps;
    return {finite_, finite_ ? 6.9 : NAN, 1.0, 1.0, {}};
  }
  OpSamples profile(int repetitions) override {
    ++log_.profiles;
    log_.profiled_at = log_.steps;
    log_.repetitions = repetitions;
    for (int i = 0; i < repetitions; ++i) timer_.elapsed_ms();  // a profiled step must not reach the samples
    log_.steps += repetitions;
    if (throws_) throw Error("cudaEventRecord failed");
    OpSamples samples;
    samples.layers = {{"conv1", "convolution"}, {"fc", "fully_connected"}};
    samples.ops = {{"conv1 forward", 0, OpStage::forward},
                   {"fc forward", 1, OpStage::forward},
                   {"loss", 1, OpStage::loss},
                   {"fc backward", 1, OpStage::backward},
                   {"fc update", 1, OpStage::update},
                   {"conv1 backward", 0, OpStage::backward}};
    // Repetition r: every op takes (r + 1) x its base time [ms]; the medians
    // over 1..repetitions are then (repetitions + 1) / 2 x the base sums.
    for (int r = 0; r < repetitions; ++r) {
      const double k = r + 1;
      samples.ms.push_back({1.0 * k, 0.25 * k, 0.5 * k, 0.75 * k, 0.125 * k, 2.0 * k});
    }
    return samples;
  }

 private:
  ProfileLog& log_;
  ScriptedTimer timer_;
  bool throws_, finite_;
};

TEST_F(RunCell, LayerTimesOnlyWhenAskedAndNeverInTheHeadline) {
  ProfileLog plain;
  ScriptedEngine without([&] { return std::make_unique<ProfiledSession>(plain); });
  const CellResult reference = run(&without);
  ASSERT_EQ(reference.status, Status::ok) << reference.message;
  EXPECT_TRUE(reference.layer_times.empty());
  EXPECT_EQ(plain.profiles, 0);

  options_.layer_times = true;
  options_.layer_time_repetitions = 7;
  ProfileLog profiled;
  ScriptedEngine with([&] { return std::make_unique<ProfiledSession>(profiled); });
  const CellResult r = run(&with);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_EQ(profiled.profiles, 1);
  EXPECT_EQ(profiled.repetitions, 7);
  EXPECT_EQ(profiled.checked_at, plain.checked_at);
  EXPECT_EQ(profiled.profiled_at, profiled.checked_at) << "the profile pass runs after the timed steps and the check";
  ASSERT_EQ(r.layer_times.size(), 2u);
  // The Runner's medians of the raw samples: (7 + 1) / 2 = 4 x each base sum.
  EXPECT_EQ(r.layer_times[0].layer, "conv1");
  EXPECT_EQ(r.layer_times[0].kind, "convolution");
  EXPECT_DOUBLE_EQ(r.layer_times[0].forward_ms, 4 * 1.0);
  EXPECT_DOUBLE_EQ(r.layer_times[0].backward_ms, 4 * 2.0);
  EXPECT_EQ(r.layer_times[1].layer, "fc");
  EXPECT_DOUBLE_EQ(r.layer_times[1].forward_ms, 4 * (0.25 + 0.5)) << "the loss counts as its layer's forward";
  EXPECT_DOUBLE_EQ(r.layer_times[1].backward_ms, 4 * (0.75 + 0.125)) << "the update as its layer's backward";
  // The headline is that of the run without profiling, to the bit.
  EXPECT_EQ(r.steps, reference.steps);
  EXPECT_EQ(r.samples_ms, reference.samples_ms);
  EXPECT_EQ(r.statistics.median_ms, reference.statistics.median_ms);
  EXPECT_EQ(r.images_per_s, reference.images_per_s);
  EXPECT_EQ(r.message, reference.message);
}

TEST(LayerMedians, EvenRepetitionsAndOpMedians) {
  OpSamples samples;
  samples.layers = {{"a", "relu"}, {"b", "add"}};
  samples.ops = {{"a forward", 0, OpStage::forward}, {"b backward", 1, OpStage::backward},
                 {"b bookkeeping", 1, OpStage::bookkeeping}};
  samples.ms = {{1.0, 4.0, 1.0}, {3.0, 2.0, 0.0}, {2.0, 9.0, 1.0}, {10.0, 1.0, 0.0}};
  const std::vector<LayerTime> layers = layer_medians(samples);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_DOUBLE_EQ(layers[0].forward_ms, 2.5);   // median of 1, 3, 2, 10
  EXPECT_DOUBLE_EQ(layers[0].backward_ms, 0.0);
  EXPECT_DOUBLE_EQ(layers[1].forward_ms, 0.0);
  EXPECT_DOUBLE_EQ(layers[1].backward_ms, 3.5);  // median of 5, 2, 10, 1
  const auto ops = op_medians(samples);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[1].first, "b backward");
  EXPECT_DOUBLE_EQ(ops[0].second, 2.5);
  EXPECT_DOUBLE_EQ(ops[1].second, 3.0);  // median of 4, 2, 9, 1
  EXPECT_DOUBLE_EQ(ops[2].second, 0.5);
  EXPECT_TRUE(layer_medians(OpSamples{}).empty()) << "an engine that cannot profile gives no layer times";
}

TEST_F(RunCell, FailedLayerProfileKeepsTheCellOk) {
  options_.layer_times = true;
  ProfileLog log;
  ScriptedEngine engine([&] { return std::make_unique<ProfiledSession>(log, /*throws=*/true); });
  const CellResult r = run(&engine);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_EQ(log.profiles, 1);
  EXPECT_DOUBLE_EQ(r.statistics.median_ms, 5.0);
  EXPECT_TRUE(r.layer_times.empty());
  EXPECT_NE(r.message.find("layer times not measured: cudaEventRecord failed"), std::string::npos) << r.message;
}

TEST_F(RunCell, CellsThatAreNotOkAreNotProfiled) {
  options_.layer_times = true;
  ProfileLog log;
  ScriptedEngine engine([&] { return std::make_unique<ProfiledSession>(log, /*throws=*/false, /*finite=*/false); });
  const CellResult r = run(&engine);  // non-finite output: failed
  EXPECT_EQ(r.status, Status::failed);
  EXPECT_TRUE(r.layer_times.empty());
  EXPECT_EQ(log.profiles, 0);
}

}  // namespace
}  // namespace crossbench

namespace crossbench {
namespace {

// A session whose preparation took `search` seconds of measured choices, which it reports.
class SearchingSession final : public Session {
 public:
  StepTimer& timer() override { return timer_; }
  void step() override { std::this_thread::sleep_for(std::chrono::milliseconds(2)); }
  MemoryUse memory() const override { return {1}; }
  SearchingSession() { record_.search_s = 0.05; }
  OutputCheck check() override { return {true, 1.0, 1.0, NAN, {}}; }

 private:
  ScriptedTimer timer_{[](int) { return 2.0; }};
};

// A session of a cell measured in repetitions: its steps take `step_ms` [ms], and it reports `search_s` of
// measured choices (the first repetition searches, the later ones replay its choices: 0).
class RepeatedSession final : public Session {
 public:
  RepeatedSession(double step_ms, double search_s) : timer_([step_ms](int) { return step_ms; }) {
    record_.search_s = search_s;
  }
  StepTimer& timer() override { return timer_; }
  void step() override {}
  MemoryUse memory() const override { return {1}; }
  OutputCheck check() override { return {true, 1.0, 1.0, NAN, {}}; }

 private:
  ScriptedTimer timer_;
};

// A data-parallel-like session: its timer knows each timed step's exposed
// communication, and its record says what it decided.
class ExposingTimer final : public StepTimer {
 public:
  void start() override {}
  void stop() override {}
  double elapsed_ms() override { return 4.0; }
  double exposed_communication_ms() override { return 0.5; }
};

class RecordingSession final : public Session {
 public:
  RecordingSession() {
    record_.decisions = "layout=nchw";
    record_.versions = R"({"lib": "1.0"})";
  }
  StepTimer& timer() override { return timer_; }
  void step() override {}
  MemoryUse memory() const override { return {1}; }
  OutputCheck check() override { return {true, 1.0, 1.0, NAN, {}}; }

 private:
  ExposingTimer timer_;
};

TEST_F(RunCell, TheRecordAndTheTimersExposedCommunicationAreKept) {
  ScriptedEngine engine([] { return std::make_unique<RecordingSession>(); });
  const CellResult r = run(&engine);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_EQ(r.decisions, "layout=nchw");
  EXPECT_EQ(r.versions, R"({"lib": "1.0"})");
  EXPECT_DOUBLE_EQ(r.exposed_communication_ms, 0.5);
  EXPECT_TRUE(std::isnan(r.search_s));  // not reported separately
  // A single-device session's timer has none.
  ScriptedEngine plain([] { return std::make_unique<ScriptedSession>([](int) { return 8.0; }); });
  EXPECT_TRUE(std::isnan(run(&plain).exposed_communication_ms));
}

// --repetitions 3: the headline is the repetition with the median median (here the third), but the cell's
// wall-time parts are every repetition's, the first one's search included.
TEST_F(RunCell, RepetitionsSumEveryRepetitionsSearchIntoTheCell) {
  options_.repetitions = 3;
  int prepared = 0;
  ScriptedEngine engine([&]() -> std::unique_ptr<Session> {
    const int k = prepared++;
    const double step_ms[] = {3.0, 1.0, 2.0};
    return std::make_unique<RepeatedSession>(step_ms[k], k == 0 ? 0.5 : 0.0);
  });
  const CellResult r = run(&engine);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_EQ(prepared, 3);
  ASSERT_EQ(r.repetition_medians_ms, (std::vector<double>{3.0, 1.0, 2.0}));
  EXPECT_DOUBLE_EQ(r.statistics.median_ms, 2.0);
  EXPECT_NE(r.message.find("repetition 3 of 3"), std::string::npos) << r.message;
  EXPECT_DOUBLE_EQ(r.search_s, 0.5) << "the first repetition's search is the cell's";
  // Sessions that report no search leave it unknown, as a cell measured once.
  ScriptedEngine silent([] { return std::make_unique<ScriptedSession>([](int) { return 8.0; }); });
  EXPECT_TRUE(std::isnan(run(&silent).search_s));
}

TEST_F(RunCell, EveryCellRecordsItsWallTimes) {
  ScriptedEngine engine([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(80));  // preparation, search included
    return std::make_unique<SearchingSession>();
  });
  const CellResult r = run(&engine);
  ASSERT_EQ(r.status, Status::ok) << r.message;
  EXPECT_DOUBLE_EQ(r.search_s, 0.05);
  EXPECT_GE(r.preparation_s, 0.08 - 0.05);  // the prepare() call less the reported search
  EXPECT_LT(r.preparation_s, 0.08);
  EXPECT_GE(r.timed_s, 11 * 0.002);  // 1 warm-up + 10 timed steps of 2 ms at least
  ASSERT_EQ(r.started_utc.size(), std::string("2026-12-01T04:00:00.000Z").size()) << r.started_utc;
  EXPECT_EQ(r.started_utc.back(), 'Z');
  EXPECT_LE(r.started_utc, r.finished_utc);  // ISO 8601 sorts as time

  // A failed preparation still says when it ran and how long preparing took.
  ScriptedEngine failing([]() -> std::unique_ptr<Session> {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    throw Error("no");
  });
  const CellResult failed = run(&failing);
  EXPECT_EQ(failed.status, Status::failed);
  EXPECT_GE(failed.preparation_s, 0.02);
  EXPECT_TRUE(std::isnan(failed.timed_s));
  EXPECT_FALSE(failed.started_utc.empty());
  EXPECT_FALSE(failed.finished_utc.empty());
}

}  // namespace
}  // namespace crossbench
