#include "cluster/plan.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "crossbench/cell.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"

namespace crossbench {
namespace {

TEST(LongestFirst, BalancesKnownCosts) {
  // Costs 7 5 4 3 3 2 on two ranks: LPT gives 7+3+2 | 5+4+3 = 12 | 12, the ideal.
  std::vector<double> load(2, 0.0);
  const Assignment a = assign_longest_first({3, 7, 2, 5, 4, 3}, {"a", "b", "c", "d", "e", "f"}, {0, 1}, load);
  EXPECT_EQ(a.order, (std::vector<std::size_t>{1, 3, 4, 0, 5, 2}));
  EXPECT_EQ(a.rank_of_item, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(load[0], 12);
  EXPECT_DOUBLE_EQ(load[1], 12);
}

TEST(LongestFirst, ConflictClassesGoToDistinctRanks) {
  // Three replicas of one expensive cell must land on three different ranks even
  // though a single rank would be least loaded for each of them.
  std::vector<double> load(4, 0.0);
  const Assignment a = assign_longest_first({1, 10, 10, 10}, {"small", "big", "big", "big"}, {0, 1, 2, 3}, load);
  std::set<int> ranks{a.rank_of_item[1], a.rank_of_item[2], a.rank_of_item[3]};
  EXPECT_EQ(ranks.size(), 3u);
  EXPECT_EQ(a.rank_of_item[0], 3);  // the small one goes to the only idle rank
}

TEST(LongestFirst, NoFreeRankIsReported) {
  std::vector<double> load(1, 0.0);
  const Assignment a = assign_longest_first({1, 1}, {"x", "x"}, {0}, load);
  EXPECT_EQ(a.rank_of_item[1], -1);
}

JobOptions seed_like_options() {
  JobOptions options;
  options.matrix.networks = {"alexnet", "overfeat", "vgg11", "googlenet", "resnet50", "resnet101", "resnet152"};
  options.matrix.engines = {"auto"};
  options.matrix.precisions = {Precision::fp32};
  options.matrix.batches = {64};
  options.matrix.phases = {Phase::inference, Phase::training};
  return options;
}

// An H200 as the plan sees it (no GPU needed: the cost model is host arithmetic).
Device h200_device() {
  Device gpu;
  gpu.kind = DeviceKind::gpu;
  gpu.model = "NVIDIA H200";
  gpu.architecture = "90";
  gpu.compute_units = 132;
  gpu.memory_bytes = 140LL << 30;
  gpu.peak_fp32_tflops = 67;
  return gpu;
}

Device cpu_device(const std::string& tag) {
  Device device;
  device.model = "Test CPU";
  device.memory_bytes = 64LL << 30;
  device.compute_units = 8;
  device.architecture = "avx2";
  device.peak_fp32_tflops = 1.0;
  device.tag = tag;
  return device;
}

TEST(Plan, EveryCellOnceAndDeterministic) {
  const JobOptions options = seed_like_options();
  const std::vector<Device> devices(4, cpu_device(""));
  const Plan first = make_plan(options, devices);
  const Plan second = make_plan(options, devices);
  ASSERT_EQ(first.cells.size(), 14u);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < first.cells.size(); ++i) {
    EXPECT_TRUE(seen.insert(describe(first.cells[i].cell)).second);
    EXPECT_EQ(describe(first.cells[i].cell), describe(second.cells[i].cell));
    EXPECT_EQ(first.cells[i].rank, second.cells[i].rank);
    EXPECT_GE(first.cells[i].rank, 0);
    EXPECT_EQ(first.cells[i].cell.engine, "onednn");  // auto on a CPU
  }
  double total = 0;
  for (double load : first.rank_load_s) total += load;
  EXPECT_NEAR(total, first.total_s, 1e-9);
  EXPECT_GE(first.makespan_s, first.total_s / 4);
}

TEST(Plan, GroupsByDeviceKeyAndTag) {
  const JobOptions options = seed_like_options();
  const std::vector<Device> devices{cpu_device("a"), cpu_device("b"), cpu_device("a"), cpu_device("b")};
  const Plan plan = make_plan(options, devices);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(plan.groups[1].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(plan.cells.size(), 28u);  // the whole matrix once per group
  for (const auto& planned : plan.cells) {
    const auto& group = planned.device_key == plan.groups[0].key ? plan.groups[0] : plan.groups[1];
    EXPECT_NE(std::find(group.ranks.begin(), group.ranks.end(), planned.rank), group.ranks.end());
  }
}

TEST(Plan, ReplicasNeedEnoughRanks) {
  JobOptions options = seed_like_options();
  options.replicas = 3;
  EXPECT_THROW(make_plan(options, std::vector<Device>(2, cpu_device(""))), UsageError);
  const Plan plan = make_plan(options, std::vector<Device>(3, cpu_device("")));
  EXPECT_EQ(plan.cells.size(), 42u);
  // Replicas of one cell run on distinct ranks.
  for (const auto& a : plan.cells)
    for (const auto& b : plan.cells)
      if (&a != &b && a.cell.network == b.cell.network && a.cell.phase == b.cell.phase) EXPECT_NE(a.rank, b.rank);
}

TEST(Plan, SeedJobIsWellBalancedOnFourRanks) {
  const Plan plan = make_plan(seed_like_options(), std::vector<Device>(4, cpu_device("")));
  // 14 cells of very different cost on 4 ranks: LPT keeps the makespan near the ideal.
  EXPECT_LT(plan.makespan_s / (plan.total_s / 4), 1.15);
}

TEST(Plan, WithoutCalibrationEveryCellIsTheModelWithItsPreparation) {
  const Plan plan = make_plan(seed_like_options(), std::vector<Device>(2, cpu_device("")));
  for (const auto& planned : plan.cells) {
    EXPECT_EQ(planned.estimate_source, kEstimateModel);
    EXPECT_GT(planned.model.preparation_s, 0);  // preparation is part of every runnable cell's cost
    EXPECT_DOUBLE_EQ(planned.estimated_s, planned.model.total_s());
  }
  EXPECT_TRUE(plan.calibration.empty());
}

TEST(Plan, CalibrationUsesRecordedSecondsAndScalesTheRest) {
  JobOptions options = seed_like_options();
  options.matrix.networks = {"alexnet", "resnet50"};
  options.matrix.phases = {Phase::inference};
  const std::vector<Device> devices{cpu_device("a"), cpu_device("b")};
  const Plan model = make_plan(options, devices);
  const auto find = [](const Plan& plan, const std::string& key, const std::string& network) {
    for (const auto& planned : plan.cells)
      if (planned.device_key == key && planned.cell.network == network) return planned;
    ADD_FAILURE() << key << " " << network;
    return PlannedCell{};
  };
  const std::string a = cpu_device("a").key(), b = cpu_device("b").key();
  const PlannedCell alexnet = find(model, a, "alexnet");
  // Device a recorded alexnet at 4x the model; device b recorded nothing.
  RecordedWallTimes recorded;
  recorded.cubes = {"earlier.h5"};
  recorded.seconds[cell_key(a, alexnet.cell)] = 4 * alexnet.model.total_s();
  const Plan plan = make_plan(options, devices, {}, &recorded);
  EXPECT_EQ(find(plan, a, "alexnet").estimate_source, kEstimateRecorded);
  EXPECT_DOUBLE_EQ(find(plan, a, "alexnet").estimated_s, 4 * alexnet.model.total_s());
  const PlannedCell resnet = find(plan, a, "resnet50");
  EXPECT_EQ(resnet.estimate_source, kEstimateScaledModel);
  EXPECT_NEAR(resnet.estimated_s, std::min(4 * resnet.model.total_s(), options.measure.cell_time_limit_s), 1e-9);
  EXPECT_EQ(find(plan, b, "resnet50").estimate_source, kEstimateModel);  // nothing matched on b
  ASSERT_EQ(plan.calibration.size(), 2u);
  EXPECT_EQ(plan.calibration[0].device_key, a);
  EXPECT_EQ(plan.calibration[0].matched_cells, 1);
  EXPECT_DOUBLE_EQ(plan.calibration[0].factor, 4);
  EXPECT_EQ(plan.calibration[1].matched_cells, 0);
  EXPECT_TRUE(std::isnan(plan.calibration[1].factor));
  EXPECT_EQ(plan.calibration_cubes, recorded.cubes);
}

JobOptions framework_options(const std::vector<std::string>& networks, const std::string& compile_cache = "none") {
  JobOptions options = seed_like_options();
  options.matrix.networks = networks;
  options.matrix.engines = {"pytorch-compile", "jax"};
  options.matrix.precisions = {Precision::bf16};
  options.engine.settings["engine.compile_cache"] = compile_cache;
  return options;
}

PlannedCell find_cell(const Plan& plan, const std::string& engine, const std::string& network, Phase phase) {
  for (const auto& planned : plan.cells)
    if (planned.cell.engine == engine && planned.cell.network == network && planned.cell.phase == phase) return planned;
  ADD_FAILURE() << engine << " " << network;
  return PlannedCell{};
}

TEST(CostModel, DistinctLayersCountRepeatedBlocksOnce) {
  // Layers of one kind, shapes and parameters compile to one kernel: the ResNets repeat theirs.
  EXPECT_EQ(distinct_layers(make_network("resnet50")), 57);
  EXPECT_EQ(distinct_layers(make_network("resnet152")), 57);
  EXPECT_EQ(distinct_layers(make_network("googlenet")), 109);
  EXPECT_EQ(distinct_layers(make_network("alexnet")), 21);
  // Of one kind: the convolutions cudnn.benchmark searches once per shape (a ResNet's 53-155 are 23).
  EXPECT_EQ(distinct_layers(make_network("resnet50"), LayerKind::convolution), 23);
  EXPECT_EQ(distinct_layers(make_network("resnet152"), LayerKind::convolution), 23);
  EXPECT_EQ(distinct_layers(make_network("googlenet"), LayerKind::convolution), 49);
  EXPECT_EQ(distinct_layers(make_network("vgg11"), LayerKind::convolution), 7);
}

TEST(CostModel, FrameworkCellsPayTheirCompileByEngineAndPhase) {
  const Plan plan = make_plan(framework_options({"alexnet", "vgg11", "googlenet", "resnet50", "resnet101", "resnet152"}),
                              std::vector<Device>(1, cpu_device("")));
  // The H200's recorded cold torch.compile of training cells (cost_model.hpp): each modelled within 25%.
  const std::map<std::string, double> measured_training_s{{"alexnet", 35}, {"vgg11", 37},     {"googlenet", 88},
                                                          {"resnet50", 66}, {"resnet101", 100}, {"resnet152", 105}};
  for (const auto& [network, seconds] : measured_training_s) {
    const PlannedCell cell = find_cell(plan, "pytorch-compile", network, Phase::training);
    EXPECT_EQ(cell.model.search_kind, "torch.compile (cold)");
    EXPECT_NEAR(cell.model.search_s, seconds, 0.25 * seconds) << network;
    EXPECT_GT(cell.model.search_s, find_cell(plan, "pytorch-compile", network, Phase::inference).model.search_s);
    EXPECT_GT(cell.model.search_s, find_cell(plan, "jax", network, Phase::training).model.search_s);
  }
  // The issue's ranges of a cell's preparation: pytorch-compile 16-122 s, jax 7-17 s (training resnet50).
  const PlannedCell jax = find_cell(plan, "jax", "resnet50", Phase::training);
  EXPECT_EQ(jax.model.search_kind, "jax.jit (cold)");
  EXPECT_GE(jax.model.preparation_s + jax.model.search_s, 7);
  EXPECT_LE(jax.model.preparation_s + jax.model.search_s, 17);
  EXPECT_EQ(plan.compile_cache.directory, "none");
}

TEST(CostModel, MaxAutotuneCompilesAsTheH200MeasuredItsColdCompiles) {
  JobOptions options = framework_options({"alexnet", "overfeat", "googlenet", "resnet50", "resnet152"});
  options.matrix.engines = {"pytorch-compile"};
  const Plan reduce_overhead = make_plan(options, std::vector<Device>(1, cpu_device("")));
  options.engine.settings["engine.compile_mode"] = "max-autotune";
  const Plan max_autotune = make_plan(options, std::vector<Device>(1, cpu_device("")));
  // Measured cold on the H200 (cost_model.cpp): alexnet inference 57-63 s, alexnet training 114 s; each
  // modelled within 25%. resnet50 training ran past 856 s alone (2026-12-10) and resnet152's past 450 s,
  // both without finishing: past the 600 s cell limit, where the plan caps them, as the run stops them.
  const PlannedCell alexnet_inference = find_cell(max_autotune, "pytorch-compile", "alexnet", Phase::inference);
  EXPECT_EQ(alexnet_inference.model.search_kind, "torch.compile max-autotune (cold)");
  EXPECT_NEAR(alexnet_inference.model.search_s, 60, 0.25 * 60);
  EXPECT_NEAR(find_cell(max_autotune, "pytorch-compile", "alexnet", Phase::training).model.search_s, 114, 0.25 * 114);
  for (const char* resnet : {"resnet50", "resnet152"}) {
    const PlannedCell training = find_cell(max_autotune, "pytorch-compile", resnet, Phase::training);
    EXPECT_GT(training.model.cold_compile_s, 856) << resnet;
    EXPECT_TRUE(training.model.capped) << resnet;
    EXPECT_DOUBLE_EQ(training.model.total_s(), options.measure.cell_time_limit_s) << resnet;
  }
  // Inference autotunes each distinct convolution and fully-connected layer, alone on the H200
  // (2026-12-09 call65): overfeat bf16 69 s; googlenet bf16 (49 distinct convolutions) not done after 346 s.
  EXPECT_NEAR(find_cell(max_autotune, "pytorch-compile", "overfeat", Phase::inference).model.search_s, 69, 0.25 * 69);
  EXPECT_GT(find_cell(max_autotune, "pytorch-compile", "googlenet", Phase::inference).model.search_s, 346);
  for (const auto& planned : reduce_overhead.cells) {
    EXPECT_EQ(planned.model.search_kind, "torch.compile (cold)") << describe(planned.cell);
    const PlannedCell autotuned = find_cell(max_autotune, "pytorch-compile", planned.cell.network, planned.cell.phase);
    EXPECT_GT(autotuned.model.search_s, 3 * planned.model.search_s) << describe(planned.cell);
  }
}

TEST(CostModel, EachEngineEndsItsCellAsTheH200StudyMeasuredAndACappedCellHasNoEnd) {
  // The H200's cells after 2a50465 (cost_model.cpp): cudnn 0.04 s, eager 0.12 s, JAX 0.33 s,
  // pytorch-compile 0.13 s after the last timed step.
  JobOptions options = framework_options({"resnet50"});
  options.matrix.engines = {"pytorch", "pytorch-compile", "jax"};
  const Plan plan = make_plan(options, std::vector<Device>(1, cpu_device("")));
  const std::map<std::string, double> finish_s{{"pytorch", 0.12}, {"pytorch-compile", 0.13}, {"jax", 0.33}};
  for (const auto& planned : plan.cells) {
    EXPECT_DOUBLE_EQ(planned.model.finish_s, finish_s.at(planned.cell.engine)) << describe(planned.cell);
    EXPECT_DOUBLE_EQ(planned.model.total_s(), planned.model.preparation_s + planned.model.search_s +
                                                  planned.model.steps_s + planned.model.finish_s);
  }
  Device gpu = cpu_device("");
  gpu.kind = DeviceKind::gpu;
  gpu.peak_fp32_tflops = 67;
  const Network network = make_network("resnet50");
  MeasureOptions measure = options.measure;
  const CellSpec cudnn{"cudnn", "resnet50", Precision::bf16, 64, Phase::inference};
  const CellEstimate native = model_cell_estimate(network, cudnn, gpu, measure, options.engine);
  if (native.unsupported.empty()) EXPECT_DOUBLE_EQ(native.finish_s, 0.04);
  // A cell the limit cuts off ends there: no check, its worker killed.
  measure.cell_time_limit_s = 2;
  const CellSpec compiled{"pytorch-compile", "resnet50", Precision::bf16, 64, Phase::training};
  const CellEstimate capped = model_cell_estimate(network, compiled, gpu, measure, options.engine);
  EXPECT_TRUE(capped.capped);
  EXPECT_EQ(capped.finish_s, 0);
  EXPECT_LE(capped.total_s(), 2.0 + 1e-9);
}

TEST(CostModel, EagerPyTorchOnAGpuPaysCudnnBenchmarksFirstStepSearch) {
  // cudnn.benchmark times each convolution shape's algorithms in the first warm-up step: 1 s + 0.07 s per
  // distinct convolution and direction (the H200 study's eager cells); none on a CPU, none for a compiled step.
  JobOptions options = framework_options({"resnet50"});
  Device gpu = cpu_device("");
  gpu.kind = DeviceKind::gpu;
  gpu.peak_fp32_tflops = 67;
  const Network network = make_network("resnet50");
  const auto steps_of = [&](const std::string& engine, Phase phase, const Device& device) {
    return model_cell_estimate(network, {engine, "resnet50", Precision::bf16, 64, phase}, device, options.measure,
                               options.engine)
        .steps_s;
  };
  const auto flops_only = [&](Phase phase) { return steps_of("pytorch-compile", phase, gpu); };
  EXPECT_NEAR(steps_of("pytorch", Phase::training, gpu) - flops_only(Phase::training), 1.0 + 0.07 * 3 * 23, 1e-9);
  EXPECT_NEAR(steps_of("pytorch", Phase::inference, gpu) - flops_only(Phase::inference), 1.0 + 0.07 * 23, 1e-9);
  EXPECT_DOUBLE_EQ(steps_of("pytorch", Phase::training, cpu_device("")),
                   steps_of("pytorch-compile", Phase::training, cpu_device("")));
}

TEST(CostModel, AWarmupInMillisecondsLastsAtLeastThatLongWhateverItsStepsTake) {
  // measure.warmup_ms: the warm-up steps' modelled time, topped up to warmup_ms; none where the steps
  // alone last longer.
  JobOptions options = framework_options({"resnet50"});
  Device gpu = cpu_device("");
  gpu.kind = DeviceKind::gpu;
  gpu.peak_fp32_tflops = 67;
  const Network network = make_network("resnet50");
  const CellSpec cell{"pytorch-compile", "resnet50", Precision::bf16, 64, Phase::inference};
  const auto steps_s = [&](int warmup_ms) {
    MeasureOptions measure = options.measure;
    measure.warmup_ms = warmup_ms;
    return model_cell_estimate(network, cell, gpu, measure, options.engine).steps_s;
  };
  const double without = steps_s(0);
  const double warmup_steps_s =
      without * options.measure.warmup_steps / (options.measure.warmup_steps + options.measure.min_steps);
  ASSERT_LT(warmup_steps_s, 60.0);
  EXPECT_NEAR(steps_s(60000) - without, 60.0 - warmup_steps_s, 1e-9);
  ASSERT_GT(warmup_steps_s, 1e-3);
  EXPECT_DOUBLE_EQ(steps_s(1), without);  // 1 ms: the steps alone last longer
  MeasureOptions resting = options.measure;
  resting.cooldown_ms = 2500;  // measure.cooldown_ms: the idle wait adds itself
  EXPECT_NEAR(model_cell_estimate(network, cell, gpu, resting, options.engine).steps_s - without, 2.5, 1e-9);
}

TEST(CostModel, NativeEnginesArePlannedUnsupportedForTheMixedPrecisionRecipes) {
  // cell.hpp: only framework workers run amp-*; a native engine's supports() refuses them, and the plan
  // says so up front instead of estimating a cell that will cost nothing (the H200 study's cudnn
  // amp-bf16 cells were planned at 41-61 s each).
  const auto& catalog = engine_catalog();
  const auto onednn = std::find_if(catalog.begin(), catalog.end(), [](const EngineInfo& e) { return e.name == "onednn"; });
  ASSERT_NE(onednn, catalog.end());
  if (!onednn->built) GTEST_SKIP() << "onednn is not built into this binary: " << onednn->description;
  JobOptions options = framework_options({"resnet50"});
  options.matrix.engines = {"onednn", "pytorch-compile"};
  options.matrix.precisions = {Precision::amp_bf16, Precision::bf16};
  const Plan plan = make_plan(options, std::vector<Device>(1, cpu_device("")));
  for (const auto& planned : plan.cells) {
    const bool refused = planned.cell.engine == "onednn" && planned.cell.precision == Precision::amp_bf16;
    EXPECT_EQ(planned.model.unsupported.find("is the frameworks' mixed-precision recipe") != std::string::npos, refused)
        << planned.cell.engine << " " << to_string(planned.cell.precision) << ": '" << planned.model.unsupported << "'";
  }
}

TEST(CostModel, TheCudnnEnginesRefusalsArePlannedAsTheRunWillRecordThem) {
  // A batch sweep past cuDNN's 2^31-element tensors: VGG-11's conv1_1 output (64 x 224 x 224 an image)
  // at batch 1024 is 3.3e9 elements, so the run records the cell unsupported at once; the plan said
  // 274 s for bf16 training at batch 8192 before it asked the engine (the studysweep matrix: 36 min of
  // cudnn cells planned, 14 with the refusals).
  const auto& catalog = engine_catalog();
  const auto cudnn = std::find_if(catalog.begin(), catalog.end(), [](const EngineInfo& e) { return e.name == "cudnn"; });
  ASSERT_NE(cudnn, catalog.end());
  if (!cudnn->built) GTEST_SKIP() << "cudnn is not built into this binary: " << cudnn->description;
  JobOptions options = framework_options({"vgg11"});
  options.matrix.engines = {"cudnn"};
  options.matrix.precisions = {Precision::bf16};
  options.matrix.batches = {512, 1024};
  const Plan plan = make_plan(options, std::vector<Device>(1, h200_device()));
  ASSERT_EQ(plan.cells.size(), 4u);
  for (const auto& planned : plan.cells) {
    const bool refused = planned.cell.batch == 1024;
    EXPECT_EQ(planned.model.unsupported.find("beyond the 2^31 - 1 that cuDNN's tensor descriptors hold") !=
                  std::string::npos,
              refused)
        << planned.cell.batch << " " << to_string(planned.cell.phase) << ": '" << planned.model.unsupported << "'";
    if (refused) EXPECT_DOUBLE_EQ(planned.model.total_s(), kUnsupportedCellSeconds);
    else EXPECT_GT(planned.model.total_s(), 1.0) << "batch 512 runs: " << planned.model.total_s() << " s";
  }
}

TEST(CostModel, TheCudnnEnginesRefusalsCountTheInputBatchAsItIsStored) {
  // 16-bit NHWC stores AlexNet's 3-channel images with 8 channels for the tensor cores: at batch 8192 that
  // is 8 x 224 x 224 x 8192 = 3.3e9 elements, which cuDNN's descriptors cannot hold (the H200 sweep's bf16
  // cells at 8192 failed there, bench/results/2026-12-06), where tf32's largest tensor, conv1's output
  // (1.6e9), fits; NCHW (engine.layout = nchw) stores the 3 channels and runs the bf16 cell too.
  const auto& catalog = engine_catalog();
  const auto cudnn = std::find_if(catalog.begin(), catalog.end(), [](const EngineInfo& e) { return e.name == "cudnn"; });
  ASSERT_NE(cudnn, catalog.end());
  if (!cudnn->built) GTEST_SKIP() << "cudnn is not built into this binary: " << cudnn->description;
  for (const std::string layout : {"auto", "nchw"}) {
    JobOptions options = framework_options({"alexnet"});
    options.matrix.engines = {"cudnn"};
    options.matrix.precisions = {Precision::tf32, Precision::bf16};
    options.matrix.batches = {4096, 8192};
    options.matrix.phases = {Phase::inference};
    options.engine.settings["engine.layout"] = layout;
    const Plan plan = make_plan(options, std::vector<Device>(1, h200_device()));
    ASSERT_EQ(plan.cells.size(), 4u);
    for (const auto& planned : plan.cells) {
      const bool refused = layout == "auto" && planned.cell.precision == Precision::bf16 && planned.cell.batch == 8192;
      EXPECT_EQ(planned.model.unsupported.find("beyond the 2^31 - 1 that cuDNN's tensor descriptors hold") !=
                    std::string::npos,
                refused)
          << layout << " " << to_string(planned.cell.precision) << " " << planned.cell.batch << ": '"
          << planned.model.unsupported << "'";
      if (refused) EXPECT_NE(planned.model.unsupported.find("3288334336 elements"), std::string::npos)
                       << planned.model.unsupported;
    }
  }
}

TEST(CostModel, AWarmCompileCacheShortensItsFrameworksCompiles) {
  const auto directory = std::filesystem::temp_directory_path() / ("plan_test_cache_" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory / "triton" / "kernel");
  std::ofstream(directory / "triton" / "kernel" / "entry.cubin") << "x";
  const std::vector<Device> devices(1, cpu_device(""));
  const Plan cold = make_plan(framework_options({"resnet50"}), devices);
  const Plan warm = make_plan(framework_options({"resnet50"}, directory.string()), devices);
  std::filesystem::remove_all(directory);
  EXPECT_EQ(warm.compile_cache.inductor_entries, 1);
  EXPECT_EQ(warm.compile_cache.jax_entries, 0);
  const PlannedCell compiled = find_cell(warm, "pytorch-compile", "resnet50", Phase::training);
  EXPECT_EQ(compiled.model.search_kind, "torch.compile (warm cache)");
  EXPECT_NEAR(compiled.model.search_s,
              kWarmCompileFraction * find_cell(cold, "pytorch-compile", "resnet50", Phase::training).model.search_s, 1e-9);
  EXPECT_DOUBLE_EQ(compiled.model.cold_compile_s,
                   find_cell(cold, "pytorch-compile", "resnet50", Phase::training).model.search_s);
  // A small graph's warm compile is its fixed costs: ResNet-50 inference's cold model (5 + 0.08 x 57 +
  // 0.03 x 177 = 14.9 s) x 0.25 is under the floor, so the floor; never more than the cold compile.
  const PlannedCell small = find_cell(warm, "pytorch-compile", "resnet50", Phase::inference);
  EXPECT_NEAR(small.model.cold_compile_s, 14.87, 1e-9);
  EXPECT_DOUBLE_EQ(small.model.search_s, kWarmCompileFloorSeconds);
  EXPECT_DOUBLE_EQ(warm_compile_seconds(8.0), kWarmCompileFloorSeconds);
  EXPECT_DOUBLE_EQ(warm_compile_seconds(3.0), 3.0);
  EXPECT_DOUBLE_EQ(warm_compile_seconds(100.0), 100.0 * kWarmCompileFraction);
  // JAX's part of the directory is empty: its cells stay cold.
  EXPECT_DOUBLE_EQ(find_cell(warm, "jax", "resnet50", Phase::training).model.search_s,
                   find_cell(cold, "jax", "resnet50", Phase::training).model.search_s);
}

// A batch series of pytorch-compile cells shares the run's compile cache: after the series' first compile,
// each later batch compiles at kSeriesCompileFraction of cold (the H200's sweep). JAX's executables are
// per batch (cold each), and without a persistent cache nothing carries over.
TEST(Plan, LaterBatchesOfATorchCompileSeriesFindTheFirstsKernelsInTheCompileCache) {
  const auto directory = std::filesystem::temp_directory_path() / ("plan_test_series_" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);  // an empty cache: every compile of the plan cold but for the series' reuse
  JobOptions options = framework_options({"vgg11", "alexnet"}, directory.string());
  options.matrix.batches = {1, 2, 4};
  options.matrix.phases = {Phase::training};
  options.measure.stop_at_oom_boundary = true;  // each series smallest batch first, as the sweep runs
  const std::vector<Device> devices(1, cpu_device(""));
  const Plan shared = make_plan(options, devices);
  JobOptions none = options;
  none.engine.settings["engine.compile_cache"] = "none";
  const Plan cold = make_plan(none, devices);
  ASSERT_EQ(shared.cells.size(), 12u);
  std::map<std::string, int> cold_compiles;  // per series
  double sum_s = 0;
  for (const PlannedCell& planned : shared.cells) {
    sum_s += planned.estimated_s;
    const std::string series = planned.cell.engine + "/" + planned.cell.network;
    if (planned.cell.engine == "jax") {
      EXPECT_EQ(planned.model.search_kind, "jax.jit (cold)") << describe(planned.cell);
      continue;
    }
    if (planned.cell.batch == 1) {
      ++cold_compiles[series];
      EXPECT_EQ(planned.model.search_kind, "torch.compile (cold)") << describe(planned.cell);
      EXPECT_DOUBLE_EQ(planned.model.search_s, planned.model.cold_compile_s);
    } else {
      EXPECT_EQ(planned.model.search_kind, "torch.compile (another batch cached)") << describe(planned.cell);
      EXPECT_NEAR(planned.model.search_s, kSeriesCompileFraction * planned.model.cold_compile_s, 1e-9);
      EXPECT_NEAR(planned.estimated_s, planned.model.total_s(), 1e-9);
    }
  }
  EXPECT_EQ(cold_compiles, (std::map<std::string, int>{{"pytorch-compile/alexnet", 1}, {"pytorch-compile/vgg11", 1}}));
  EXPECT_NEAR(shared.total_s, sum_s, 1e-9);
  EXPECT_NEAR(shared.rank_load_s[0], sum_s, 1e-9);
  EXPECT_LT(shared.total_s, cold.total_s);
  for (const PlannedCell& planned : cold.cells)
    EXPECT_NE(planned.model.search_kind.find("(cold)"), std::string::npos) << describe(planned.cell);
  EXPECT_FALSE(compile_shared_across_batches("jax"));
  EXPECT_TRUE(compile_shared_across_batches("pytorch-compile"));
}

// A prewarm (bench/study_prewarm.py) plans the run with the compile cache it is about to fill, and compiles
// the cells the run takes first; the run then plans with the cache warm. Both must take the cells in one
// order, or the run reaches cells nobody compiled (call 63: 1 of 3). A warm cache changes the estimates
// and the makespan, never the order (over two ranks the loads, and so a cell's rank, may change).
TEST(Plan, AWarmCompileCacheChangesTheEstimatesButNotTheOrder) {
  const auto directory = std::filesystem::temp_directory_path() / ("plan_test_order_" + std::to_string(::getpid()));
  std::filesystem::remove_all(directory);
  JobOptions options = framework_options({"vgg11", "resnet50", "alexnet"}, directory.string());
  options.matrix.engines = {"pytorch-compile"};
  options.matrix.precisions = {Precision::tf32, Precision::bf16};
  options.matrix.batches = {1, 8, 64, 512};
  options.measure.stop_at_oom_boundary = true;  // as the sweep runs
  for (const std::size_t ranks : {1u, 2u}) {
    const std::vector<Device> devices(ranks, cpu_device(""));
    std::filesystem::remove_all(directory);
    const Plan cold = make_plan(options, devices);
    std::filesystem::create_directories(directory / "triton" / "kernel");
    std::ofstream(directory / "triton" / "kernel" / "entry.cubin") << "x";
    const Plan warm = make_plan(options, devices);
    ASSERT_EQ(warm.compile_cache.inductor_entries, 1);
    ASSERT_EQ(cold.compile_cache.inductor_entries, 0);
    ASSERT_EQ(cold.cells.size(), warm.cells.size());
    ASSERT_EQ(cold.cells.size(), 48u);
    // The case the order must survive: a cell of another series that the warm estimates alone would put
    // first (long steps, short compile) after one that the cold estimates put first (long compile).
    bool warm_estimates_alone_would_reorder = false;
    for (std::size_t i = 0; i < cold.cells.size(); ++i) {
      EXPECT_EQ(describe(cold.cells[i].cell), describe(warm.cells[i].cell)) << "position " << i << ", " << ranks << " rank(s)";
      EXPECT_NE(warm.cells[i].model.search_kind.find("(warm cache)"), std::string::npos) << describe(warm.cells[i].cell);
      for (std::size_t j = 0; j < i; ++j)
        if (cold.cells[j].model.cold_compile_s > cold.cells[i].model.cold_compile_s &&
            warm.cells[j].estimated_s < warm.cells[i].estimated_s && cold.cells[j].cell.network != cold.cells[i].cell.network)
          warm_estimates_alone_would_reorder = true;
    }
    EXPECT_TRUE(warm_estimates_alone_would_reorder) << "the matrix no longer tests the order";
    EXPECT_LT(warm.makespan_s, cold.makespan_s);
  }
  std::filesystem::remove_all(directory);
}

// A resumed run plans only the cells its journal lacks (`done`); the prewarm (bench/study_prewarm.py) plans
// the same cells with --filter. Both must give one order. A series some of whose batches are done is ordered
// among those that remain, so the full matrix's order less the done cells is not the run's order.
TEST(Plan, AResumedRunOrdersItsCellsAsAFilterOfTheRemainingCellsWould) {
  JobOptions options = framework_options({"vgg11", "resnet50", "alexnet"});
  options.matrix.engines = {"pytorch-compile"};
  options.matrix.precisions = {Precision::tf32, Precision::bf16};
  options.matrix.batches = {1, 2, 4, 8, 16, 32, 64};
  options.matrix.phases = {Phase::inference, Phase::training};
  options.measure.stop_at_oom_boundary = true;
  const std::vector<Device> devices(1, cpu_device(""));
  const Plan full = make_plan(options, devices);
  ASSERT_EQ(full.cells.size(), 84u);
  std::set<std::string> done;
  std::string remaining_names;
  std::vector<std::string> full_less_done;
  for (std::size_t i = 0; i < full.cells.size(); ++i) {
    const PlannedCell& planned = full.cells[i];
    if (i % 3 == 0 || planned.cell.batch <= 2) {  // an earlier segment's cells, batch 1-2 of every series among them
      done.insert(cell_key(planned.device_key, planned.cell));
      continue;
    }
    full_less_done.push_back(describe(planned.cell));
    remaining_names += (remaining_names.empty() ? "^(" : "|") + std::regex_replace(describe(planned.cell), std::regex(R"([/.])"), R"(\$&)");
  }
  const Plan resumed = make_plan(options, devices, done);
  JobOptions filtered_options = options;
  filtered_options.cell_filter = remaining_names + ")$";
  const Plan filtered = make_plan(filtered_options, devices);
  ASSERT_EQ(resumed.cells.size(), full_less_done.size());
  ASSERT_EQ(filtered.cells.size(), resumed.cells.size());
  std::vector<std::string> resumed_order;
  for (std::size_t i = 0; i < resumed.cells.size(); ++i) {
    EXPECT_EQ(describe(resumed.cells[i].cell), describe(filtered.cells[i].cell)) << "position " << i;
    EXPECT_DOUBLE_EQ(resumed.cells[i].estimated_s, filtered.cells[i].estimated_s) << describe(resumed.cells[i].cell);
    resumed_order.push_back(describe(resumed.cells[i].cell));
  }
  EXPECT_NE(resumed_order, full_less_done) << "the matrix no longer shows why the prewarm plans again";
}

// A cell name as a --filter or --first regular expression matches it: its dots and slashes escaped.
std::string exact_names(const std::vector<std::string>& names) {
  std::string regex;
  for (const std::string& name : names)
    regex += (regex.empty() ? "^(" : "|") + std::regex_replace(name, std::regex(R"([/.])"), R"(\$&)");
  return regex + ")$";
}

// --first (the cells a prewarm finished compiling): they run first, in the plan's order, and every cell keeps
// its rank, so the loads and the makespan are the plan's; the others follow in the plan's order.
TEST(Plan, FirstTakesTheCellsItNamesAheadInThePlansOrderEachOnItsRank) {
  JobOptions options = framework_options({"vgg11", "resnet50", "alexnet", "googlenet"});
  options.matrix.precisions = {Precision::tf32, Precision::bf16};
  const std::vector<Device> devices(2, cpu_device(""));
  const Plan plain = make_plan(options, devices);
  ASSERT_EQ(plain.cells.size(), 32u);
  // Three cells from the back half of the plan, named in another order than the plan's.
  const std::vector<std::size_t> named{plain.cells.size() - 1, 20, plain.cells.size() - 5};
  std::vector<std::string> names;
  for (const std::size_t i : named) names.push_back(describe(plain.cells[i].cell));
  options.first_cells = exact_names(names);
  const Plan first = make_plan(options, devices);
  ASSERT_EQ(first.cells.size(), plain.cells.size());
  std::vector<std::string> expected{describe(plain.cells[20].cell), describe(plain.cells[plain.cells.size() - 5].cell),
                                    describe(plain.cells[plain.cells.size() - 1].cell)};
  std::map<std::string, int> plain_rank;
  for (const PlannedCell& planned : plain.cells) {
    plain_rank[describe(planned.cell)] = planned.rank;
    const bool is_named = std::find(names.begin(), names.end(), describe(planned.cell)) != names.end();
    if (!is_named) expected.push_back(describe(planned.cell));
  }
  for (std::size_t i = 0; i < first.cells.size(); ++i) {
    EXPECT_EQ(describe(first.cells[i].cell), expected[i]) << "position " << i;
    EXPECT_EQ(first.cells[i].rank, plain_rank[describe(first.cells[i].cell)]) << describe(first.cells[i].cell);
    EXPECT_EQ(first.cells[i].taken_first, i < 3) << describe(first.cells[i].cell);
  }
  EXPECT_DOUBLE_EQ(first.makespan_s, plain.makespan_s);
  EXPECT_DOUBLE_EQ(first.total_s, plain.total_s);
}

// Under measure.oom_boundary = stop a series' first oom ends it, so it still runs its smaller batches first:
// --first naming a larger batch takes the series first, from its smallest remaining batch.
TEST(Plan, UnderTheOomBoundaryFirstTakesANamedCellsSeriesFromItsSmallestBatch) {
  JobOptions options = framework_options({"vgg11", "resnet50"});
  options.matrix.engines = {"pytorch-compile"};
  options.matrix.batches = {1, 2, 4, 8};
  options.measure.stop_at_oom_boundary = true;
  const std::vector<Device> devices(1, cpu_device(""));
  const Plan plain = make_plan(options, devices);
  // The series that comes last in the plan: its batch 4 is named.
  const CellSpec last = plain.cells.back().cell;
  CellSpec named = last;
  named.batch = 4;
  options.first_cells = exact_names({describe(named)});
  const Plan first = make_plan(options, devices);
  ASSERT_EQ(first.cells.size(), plain.cells.size());
  const auto same_series = [&](const CellSpec& cell) {
    return cell.network == last.network && cell.phase == last.phase && cell.precision == last.precision;
  };
  EXPECT_TRUE(same_series(first.cells[0].cell)) << describe(first.cells[0].cell);
  EXPECT_EQ(first.cells[0].cell.batch, 1);
  int previous_batch = 0;
  for (const PlannedCell& planned : first.cells) {
    if (!same_series(planned.cell)) continue;
    EXPECT_GT(planned.cell.batch, previous_batch) << "the series runs its batches in increasing order";
    previous_batch = planned.cell.batch;
  }
}

TEST(Plan, AFirstThatNamesNoCellIsBadInputNamingIt) {
  JobOptions options = framework_options({"alexnet"});
  options.first_cells = "resnet";
  try {
    (void)make_plan(options, std::vector<Device>(1, cpu_device("")));
    FAIL() << "no error";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("--first 'resnet' matches no cell of the matrix"), std::string::npos)
        << error.what();
  }
  // A cell a resumed run has done counts as named (that part of the run is finished, not mistyped).
  options.first_cells = "alexnet";
  std::set<std::string> done;
  const Plan all = make_plan(options, std::vector<Device>(1, cpu_device("")));
  for (const PlannedCell& planned : all.cells) done.insert(cell_key(planned.device_key, planned.cell));
  EXPECT_NO_THROW((void)make_plan(options, std::vector<Device>(1, cpu_device("")), done));
}

// A native engine's exhaustive search replays an algorithm cache that holds
// records for the cell's device (the study's cudnn cells took 0.18 of an
// estimate that searched every convolution); another device's records do not count.
TEST(CostModel, AWarmAlgorithmCacheReplaysTheNativeSearch) {
  const auto& catalog = engine_catalog();
  const auto cudnn = std::find_if(catalog.begin(), catalog.end(), [](const EngineInfo& e) { return e.name == "cudnn"; });
  if (cudnn == catalog.end() || !cudnn->built) GTEST_SKIP() << "cudnn is not built into this binary";
  const Device gpu = h200_device();
  EXPECT_EQ(measurement_device(gpu), "NVIDIA H200 cc=90 sms=132");
  const auto path = std::filesystem::temp_directory_path() / ("plan_test_algorithms_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << R"({"format": "crossbench-algorithm-cache/1", "records": [
      {"device": "NVIDIA H200 cc=90 sms=132", "signature": "forward x=bf16[64,3,224,224/150528,1,672,3] w=bf16", "candidates": []},
      {"device": "NVIDIA H200 cc=90 sms=132", "signature": "agreement.dx=bf16[64,64,56,56/1,2,3,4] w=bf16", "candidates": []},
      {"device": "NVIDIA H200 cc=90 sms=132", "signature": "forward x=f32[8,3,224,224/1,2,3,4]", "candidates": []},
      {"device": "NVIDIA H200 cc=90 sms=132", "signature": "gemm m=4096", "candidates": []},
      {"device": "NVIDIA H100 cc=90 sms=132", "signature": "forward x=bf16[64,3,224,224/1,2,3,4]", "candidates": []}]})";
  const AlgorithmCacheState algorithms = read_algorithm_cache_state(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(algorithms.records_for(gpu), 4);
  EXPECT_EQ(algorithms.records_for(gpu, 64), 2);
  EXPECT_EQ(algorithms.records_for(gpu, 8), 1);
  EXPECT_EQ(algorithms.records_for(gpu, 0), 1);  // a record whose signature names no input tensor
  EXPECT_EQ(algorithms.records_for(gpu, 256), 0);
  EXPECT_EQ(read_algorithm_cache_state(path.string()).records_for(gpu), 0);  // gone: an empty cache
  EXPECT_EQ(read_algorithm_cache_state("none").file, "none");

  JobOptions options = seed_like_options();
  options.engine.settings["engine.algo"] = "exhaustive";
  const Network network = make_network("resnet50");
  const CellSpec cell{"cudnn", "resnet50", Precision::bf16, 64, Phase::training};
  const CellEstimate searched = model_cell_estimate(network, cell, gpu, options.measure, options.engine);
  const CellEstimate replayed = model_cell_estimate(network, cell, gpu, options.measure, options.engine, {}, algorithms);
  EXPECT_EQ(searched.search_kind, "exhaustive search");
  // ResNet-50's 53 convolutions are 23 distinct ones, each searched once per direction.
  EXPECT_EQ(distinct_layers(network, LayerKind::convolution), 23);
  EXPECT_EQ(searched.searches.size(), 3u * 23u);
  EXPECT_DOUBLE_EQ(searched.search_s, search_seconds_per_convolution() * 3 * 23);
  EXPECT_EQ(replayed.search_s, 0);
  EXPECT_TRUE(replayed.searches.empty());
  EXPECT_NE(replayed.search_kind.find("replayed: 2 records for this device at batch 64"), std::string::npos)
      << replayed.search_kind;
  EXPECT_DOUBLE_EQ(replayed.steps_s, searched.steps_s);
  // A batch the file holds no record of is searched (a batch sweep's new sizes).
  CellSpec larger = cell;
  larger.batch = 256;
  EXPECT_EQ(model_cell_estimate(network, larger, gpu, options.measure, options.engine, {}, algorithms).search_kind,
            "exhaustive search");
  Device other = gpu;
  other.model = "NVIDIA A100";
  EXPECT_EQ(model_cell_estimate(network, cell, other, options.measure, options.engine, {}, algorithms).search_kind,
            "exhaustive search");
}

// A rank's process keeps the searches it measured: a later cell of the rank searches only the
// convolutions no earlier cell of the rank searched (ResNet-101's are ResNet-50's, and inference's
// forward searches are training's), while another rank searches its own.
TEST(Plan, ALaterCellOfARankSearchesOnlyWhatNoEarlierCellSearched) {
  const auto& catalog = engine_catalog();
  const auto cudnn = std::find_if(catalog.begin(), catalog.end(), [](const EngineInfo& e) { return e.name == "cudnn"; });
  if (cudnn == catalog.end() || !cudnn->built) GTEST_SKIP() << "cudnn is not built into this binary";
  const Device gpu = h200_device();
  JobOptions options = seed_like_options();
  options.matrix.engines = {"cudnn"};
  options.matrix.networks = {"resnet50", "resnet101"};
  options.matrix.precisions = {Precision::bf16};
  options.engine.settings["engine.algo"] = "exhaustive";
  const double per_search = search_seconds_per_convolution();
  const auto fresh_searches = [&](const PlannedCell& planned) {
    return static_cast<int>(std::lround(planned.model.search_s / per_search));
  };
  const Plan one = make_plan(options, std::vector<Device>(1, gpu));
  ASSERT_EQ(one.cells.size(), 4u);
  std::set<std::string> union_of_keys;
  double sum_s = 0;
  for (const PlannedCell& planned : one.cells) {
    union_of_keys.insert(planned.model.searches.begin(), planned.model.searches.end());
    sum_s += planned.estimated_s;
  }
  int searched = 0;
  for (const PlannedCell& planned : one.cells) searched += fresh_searches(planned);
  EXPECT_EQ(searched, static_cast<int>(union_of_keys.size()));  // each key once in the rank's process
  EXPECT_EQ(fresh_searches(one.cells.front()), static_cast<int>(one.cells.front().model.searches.size()));
  int reused_cells = 0;
  for (const PlannedCell& planned : one.cells)
    if (fresh_searches(planned) < static_cast<int>(planned.model.searches.size())) {
      ++reused_cells;
      EXPECT_NE(planned.model.search_kind.find("new to rank 0"), std::string::npos) << planned.model.search_kind;
      EXPECT_DOUBLE_EQ(planned.estimated_s, planned.model.total_s());
    }
  EXPECT_EQ(reused_cells, 3);
  EXPECT_NEAR(one.rank_load_s[0], sum_s, 1e-9);
  EXPECT_NEAR(one.total_s, sum_s, 1e-9);
  EXPECT_NEAR(one.makespan_s, sum_s, 1e-9);

  // Two ranks: each rank's first cell searches all of its keys.
  const Plan two = make_plan(options, std::vector<Device>(2, gpu));
  std::map<int, int> firsts;
  for (const PlannedCell& planned : two.cells)
    if (!firsts.count(planned.rank)) {
      firsts[planned.rank] = 1;
      EXPECT_EQ(fresh_searches(planned), static_cast<int>(planned.model.searches.size())) << describe(planned.cell);
    }
  EXPECT_EQ(firsts.size(), 2u);
  double loads = 0;
  for (const double load : two.rank_load_s) loads += load;
  EXPECT_NEAR(loads, two.total_s, 1e-9);
}

TEST(Plan, CalibrationTakesARecordedPreparationOfTheSameEngineNetworkAndPhase) {
  JobOptions options = framework_options({"googlenet", "resnet50"});
  options.matrix.precisions = {Precision::tf32, Precision::bf16};
  const std::vector<Device> devices(1, cpu_device(""));
  const std::string key = cpu_device("").key();
  const Plan model = make_plan(options, devices);
  // The earlier cube holds resnet50 tf32 training (prepared in 70 s, timed 2x the model's steps) and
  // googlenet training at tf32 only; the bf16 cells of both take the recorded preparation.
  const PlannedCell resnet_tf32 = [&] {
    for (const auto& planned : model.cells)
      if (planned.cell.engine == "pytorch-compile" && planned.cell.network == "resnet50" &&
          planned.cell.precision == Precision::tf32 && planned.cell.phase == Phase::training)
        return planned;
    return PlannedCell{};
  }();
  RecordedWallTimes recorded;
  recorded.cubes = {"earlier.h5"};
  recorded.seconds[cell_key(key, resnet_tf32.cell)] = 70 + 2 * resnet_tf32.model.steps_s;
  recorded.timed_seconds[cell_key(key, resnet_tf32.cell)] = 2 * resnet_tf32.model.steps_s;
  recorded.preparation_seconds[preparation_key(key, resnet_tf32.cell, false)] = 70;
  recorded.preparation_seconds[preparation_key(key, resnet_tf32.cell, true)] = 70;
  CellSpec googlenet = resnet_tf32.cell;
  googlenet.network = "googlenet";
  recorded.preparation_seconds[preparation_key(key, googlenet, true)] = 110;
  const Plan plan = make_plan(options, devices, {}, &recorded);
  for (const auto& planned : plan.cells) {
    if (planned.cell.engine != "pytorch-compile" || planned.cell.phase != Phase::training) continue;
    if (planned.cell.network == "resnet50" && planned.cell.precision == Precision::tf32) {
      EXPECT_EQ(planned.estimate_source, kEstimateRecorded);
      continue;
    }
    EXPECT_EQ(planned.estimate_source, kEstimateRecordedPreparation) << describe(planned.cell);
    const double preparation_s = planned.cell.network == "resnet50" ? 70 : 110;
    EXPECT_NEAR(planned.estimated_s, preparation_s + 2 * planned.model.steps_s, 1e-9) << describe(planned.cell);
  }
  const auto fit = std::find_if(plan.calibration.begin(), plan.calibration.end(),
                                [](const CalibrationFit& f) { return f.engine == "pytorch-compile"; });
  ASSERT_NE(fit, plan.calibration.end());
  EXPECT_NEAR(fit->steps_factor, 2, 1e-9);
  EXPECT_EQ(fit->recorded_preparations, 3);  // resnet50 bf16, googlenet tf32 and bf16
}

TEST(Plan, AMissingCalibrationCubeIsBadInputNamingIt) {
  try {
    static_cast<void>(read_recorded_wall_times({"/nonexistent/earlier.h5"}));
    FAIL() << "a missing cube was accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/earlier.h5"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace crossbench
