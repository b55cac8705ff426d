// A small cube with every status, two device keys and two replicas: used by
// cube_test (C++ round trip) and by write_sample_cube (for the xarray test in
// tests/python/test_cube_xarray.py, which checks the values written here).
#pragma once

#include <string>
#include <vector>

#include "crossbench/cube.hpp"
#include "crossbench/statistics.hpp"

namespace crossbench::testing {

inline const std::string sample_gpu_key = "NVIDIA H200 (132 SMs, sm_9.0, 140.0 GiB)";
inline const std::string sample_cpu_key = "CPU Intel(R) Xeon(R) Platinum 8480+ (16 threads, avx512_core_amx, 503.5 GiB)";

inline CellResult sample_cell(const std::string& device_key, const std::string& engine, const std::string& network,
                              Precision precision, std::int64_t batch, Phase phase, int replica, Status status) {
  CellResult result;
  result.device_key = device_key;
  result.cell = CellSpec{engine, network, precision, batch, phase, replica};
  result.status = status;
  return result;
}

// An ok cell whose statistics are those of `samples` [ms].
inline CellResult sample_ok_cell(const std::string& device_key, const std::string& engine,
                                 const std::string& network, Precision precision, std::int64_t batch,
                                 Phase phase, int replica, std::vector<double> samples, int rank) {
  CellResult result = sample_cell(device_key, engine, network, precision, batch, phase, replica, Status::ok);
  result.statistics = summarize(samples);
  result.images_per_s = static_cast<double>(batch) / (result.statistics.median_ms / 1000.0);
  result.tflops = 1.43e9 * static_cast<double>(batch) / (result.statistics.median_ms / 1000.0) / 1e12;
  result.peak_memory_bytes = 2.5e9;
  result.energy_j_per_image = 0.125;
  result.mean_sm_clock_mhz = 1980.0;
  result.min_sm_clock_mhz = 1755.0;
  result.mean_power_w = 612.5;
  result.max_temperature_c = 57.0;
  result.throttled = 0;
  result.steps = static_cast<std::int32_t>(samples.size());
  result.rank = rank;
  result.message = "relative CI half-width 0.4% < 1% after " + std::to_string(samples.size()) + " steps";
  result.decisions = "conv1 fwd=IMPLICIT_PRECOMP_GEMM; layout=NHWC; cuda_graph=1";
  result.samples_ms = std::move(samples);
  return result;
}

// Axes: 2 devices × 2 engines × 2 networks × 2 precisions × 2 batches × 2 phases × 2 gpus × 2 replicas.
// Cells (all others not_run):
//   ok          gpu/cudnn/alexnet/fp32/b64/inference/r0   samples 1.5 1.25 1.75 1.5 1.5 (5 steps), rank 0
//   ok          gpu/cudnn/alexnet/fp32/b64/inference/r1   samples 1.6 1.4 1.5 (3 steps), rank 1
//   oom         gpu/cudnn/resnet50/fp32/b128/training/r0  rank 0, message "out of memory"
//   unsupported cpu/onednn/alexnet/fp16/b64/inference/r0  rank 2, message "onednn: fp16 needs avx512_fp16"
//   failed      cpu/onednn/resnet50/fp32/b64/training/r1  rank 3, message "NaN loss"
//   timeout     gpu/cudnn/resnet50/fp16/b128/inference/r1 rank 1, message "time limit 600 s", 2 partial samples 9.5 9.75
//   ok          cpu/onednn/resnet50/fp32/b128/inference/r0 samples 40 41 (2 steps), rank 2
//   ok          gpu/cudnn/resnet50/fp32/b64/training/g2/r0 samples 30 31 30, rank 0 (group 0,1),
//               exposed communication 1.25 ms, scaling efficiency 0.95
inline CubeContents sample_cube() {
  CubeContents cube;
  cube.attributes = {{"created", "2024-05-01T12:00:00Z"},
                     {"command_line", "mpirun -np 4 crossbench run --job jobs/study2017.ini"},
                     {"job_file", "[matrix]\nnetworks = alexnet, resnet50\nbatches = 64, 128\n"},
                     {"crossbench_version", "0.1.0"},
                     {"git_revision", "0123456789ab"},
                     {"cuda_runtime_version", ""}};
  cube.axes.devices = {sample_gpu_key, sample_cpu_key};
  cube.axes.engines = {"cudnn", "onednn"};
  cube.axes.networks = {"alexnet", "resnet50"};
  cube.axes.precisions = {"fp32", "fp16"};
  cube.axes.batches = {64, 128};
  cube.axes.phases = {"inference", "training"};
  cube.axes.gpus = {1, 2};
  cube.axes.replicas = {0, 1};

  using P = Precision;
  using H = Phase;
  cube.cells.push_back(sample_ok_cell(sample_gpu_key, "cudnn", "alexnet", P::fp32, 64, H::inference, 0,
                                      {1.5, 1.25, 1.75, 1.5, 1.5}, 0));
  cube.cells.push_back(
      sample_ok_cell(sample_gpu_key, "cudnn", "alexnet", P::fp32, 64, H::inference, 1, {1.6, 1.4, 1.5}, 1));
  CellResult oom = sample_cell(sample_gpu_key, "cudnn", "resnet50", P::fp32, 128, H::training, 0, Status::oom);
  oom.rank = 0;
  oom.message = "out of memory";
  cube.cells.push_back(oom);
  CellResult unsupported =
      sample_cell(sample_cpu_key, "onednn", "alexnet", P::fp16, 64, H::inference, 0, Status::unsupported);
  unsupported.rank = 2;
  unsupported.message = "onednn: fp16 needs avx512_fp16";
  cube.cells.push_back(unsupported);
  CellResult failed = sample_cell(sample_cpu_key, "onednn", "resnet50", P::fp32, 64, H::training, 1, Status::failed);
  failed.rank = 3;
  failed.message = "NaN loss";
  cube.cells.push_back(failed);
  CellResult timeout =
      sample_cell(sample_gpu_key, "cudnn", "resnet50", P::fp16, 128, H::inference, 1, Status::timeout);
  timeout.rank = 1;
  timeout.message = "time limit 600 s";
  timeout.steps = 2;
  timeout.samples_ms = {9.5, 9.75};
  cube.cells.push_back(timeout);
  cube.cells.push_back(
      sample_ok_cell(sample_cpu_key, "onednn", "resnet50", P::fp32, 128, H::inference, 0, {40.0, 41.0}, 2));
  CellResult parallel =
      sample_ok_cell(sample_gpu_key, "cudnn", "resnet50", P::fp32, 64, H::training, 0, {30.0, 31.0, 30.0}, 0);
  parallel.cell.gpus = 2;
  parallel.images_per_s *= 2;  // the group's throughput: gpus × batch per step
  parallel.tflops *= 2;
  parallel.exposed_communication_ms = 1.25;
  parallel.scaling_efficiency = 0.95;
  parallel.group_ranks = {0, 1};
  cube.cells.push_back(parallel);

  for (int rank = 0; rank < 4; ++rank) {
    RankRecord record;
    record.rank = rank;
    const bool gpu = rank < 2;
    record.host = gpu ? "gpu-node01" : "cpu-node07";
    record.device_key = gpu ? sample_gpu_key : sample_cpu_key;
    record.device_index = gpu ? rank : -1;
    record.uuid = gpu ? "GPU-0000000" + std::to_string(rank) : "";
    record.pci_bus_id = gpu ? "00000000:1" + std::to_string(rank) + ":00.0" : "";
    record.memory_bytes = gpu ? 150754820096.0 : 540641460224.0;
    record.sm_clock_mhz = gpu ? 1980 : 2000;
    record.memory_clock_mhz = gpu ? 2619 : 0;
    record.power_limit_w = gpu ? 700 : 0;
    record.driver = gpu ? "570.124.06" : "6.1.0-18-amd64";
    record.threads = gpu ? 0 : 16;
    cube.ranks.push_back(record);
  }
  return cube;
}

}  // namespace crossbench::testing
