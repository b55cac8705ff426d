// gpu_cudnn_cells: the cuDNN engine's cells with everything the cube will
// hold once the Runner reads the engine's telemetry (energy per image, mean
// SM clock, throttling), plus per-layer times of each cell, printed as a
// table and written as JSON (bench/gpu_pytorch_vs_crossbench.py reads it).
//
//   gpu_cudnn_cells [--networks a,b] [--precisions fp32,tf32] [--phases inference,training]
//                   [--batches 64] [--warmup 10] [--steps 50] [--algo heuristic|exhaustive]
//                   [--graphs] [--layout auto|nchw|nhwc] [--workspace-mb 1024] [--layer-times N]
//                   [--op-times N] [--json out.json]
//
// --op-times N: the 25 slowest ops of each cell (median of N profiled steps),
// a finer view than --layer-times ("conv1 backward filter").
//
// Timing as the Runner does it (CUDA events on the session's stream, one
// step at a time, warm-up untimed), a fixed number of steps, median.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"
#include "crossbench/statistics.hpp"
#include "crossbench/telemetry.hpp"
#include "engines/cudnn/cudnn_session.hpp"

namespace {

using namespace crossbench;
using nlohmann::json;

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Dense datasheet peak of the precision relative to the device's fp32 peak
// (Hopper: TF32 495, FP16/BF16 989 vs FP32 67 TFLOP/s; Ampere: 156, 312 vs 19.5).
double peak_tflops(const Device& device, Precision precision) {
  const bool hopper = device.architecture.rfind("9", 0) == 0;
  switch (precision) {
    case Precision::fp32: return device.peak_fp32_tflops;
    case Precision::tf32: return device.peak_fp32_tflops * (hopper ? 495.0 / 67.0 : 8.0);
    default: return device.peak_fp32_tflops * (hopper ? 989.0 / 67.0 : 16.0);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> networks{"alexnet", "overfeat", "vgg11", "googlenet", "resnet50", "resnet101", "resnet152"};
  std::vector<std::string> precisions{"fp32", "tf32", "fp16", "bf16"};
  std::vector<std::string> phases{"inference", "training"};
  std::vector<std::int64_t> batches{64};
  int warmup = 10, steps = 50, layer_repetitions = 0, op_repetitions = 0;
  EngineConfig config;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--networks") networks = split(value());
    else if (arg == "--precisions") precisions = split(value());
    else if (arg == "--phases") phases = split(value());
    else if (arg == "--batches") {
      batches.clear();
      for (const auto& b : split(value())) batches.push_back(std::stoll(b));
    } else if (arg == "--warmup") warmup = std::stoi(value());
    else if (arg == "--steps") steps = std::stoi(value());
    // The engine's own keys as a run's options give them (options_schema.cpp; checked by the engine).
    else if (arg == "--algo") config.settings["engine.algo"] = value();
    else if (arg == "--graphs") config.settings["engine.cuda_graphs"] = "true";
    else if (arg == "--workspace-mb") config.settings["engine.workspace_limit_mb"] = value();
    else if (arg == "--layout") {
      const std::string l = value();
      config.settings["engine.layout"] = l == "nchw" || l == "nhwc" ? l : "auto";
    } else if (arg == "--layer-times") layer_repetitions = std::stoi(value());
    else if (arg == "--op-times") op_repetitions = std::stoi(value());
    else if (arg == "--json") json_path = value();
    else {
      std::cerr << "unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (visible_gpu_count() == 0) {
    std::cerr << "gpu_cudnn_cells: no GPU visible\n";
    return 1;
  }
  const Device device = probe_gpu(0, "");
  auto engine = make_engine("cudnn", device, config);
  std::printf("%s, %d SMs, cc %s, fp32 peak %.1f TFLOP/s\n", device.model.c_str(), device.compute_units,
              device.architecture.c_str(), device.peak_fp32_tflops);
  for (const auto& [key, version] : engine_library_versions()) std::printf("%s %s\n", key.c_str(), version.c_str());
  std::printf("%-10s %-5s %-9s %5s %9s %9s %8s %6s %9s %9s %7s %6s %4s %10s %6s\n", "network", "prec", "phase", "batch",
              "median_ms", "images/s", "TFLOP/s", "%peak", "peak_MiB", "mJ/image", "SM_MHz", "W", "thr", "loss",
              "prep_s");
  json cells = json::array();
  for (const std::string& name : networks) {
    const Network network = make_network(name);
    for (const std::string& precision_name : precisions)
      for (const std::string& phase_name : phases)
        for (std::int64_t batch : batches) {
          const CellSpec cell{"cudnn", name, *precision_from_string(precision_name), batch,
                              *phase_from_string(phase_name), 0};
          json record{{"network", name}, {"precision", precision_name}, {"phase", phase_name}, {"batch", batch}};
          const Support support = engine->supports(device, cell);
          if (!support.supported) {
            record["status"] = "unsupported";
            record["message"] = support.reason;
            cells.push_back(record);
            continue;
          }
          try {
            const auto begin = std::chrono::steady_clock::now();
            auto session = engine->prepare(network, cell);
            const double prep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
            auto timed = [&] {
              session->timer().start();
              session->step();
              session->timer().stop();
              return session->timer().elapsed_ms();
            };
            for (int i = 0; i < warmup; ++i) timed();
            std::vector<double> samples;
            TelemetrySampler sampler(device);  // the Runner's sampler, as run_cell() uses it
            sampler.begin();
            for (int i = 0; i < steps; ++i) samples.push_back(timed());
            const Telemetry t = sampler.end();
            const OutputCheck check = session->check();
            const Statistics s = summarize(samples);
            const double flops = (cell.phase == Phase::training ? network.training_flops_per_image()
                                                                : network.forward_flops_per_image()) *
                                 static_cast<double>(batch);
            const double tflops = flops / (s.median_ms / 1e3) / 1e12;
            const double images = static_cast<double>(batch) * static_cast<double>(steps);
            const double peak_mib = static_cast<double>(session->memory().peak_bytes) / (1 << 20);
            std::printf("%-10s %-5s %-9s %5lld %9.3f %9.0f %8.1f %5.1f%% %9.0f %9.2f %7.0f %6.0f %4d %10.5g %6.1f\n",
                        name.c_str(), precision_name.c_str(), phase_name.c_str(), static_cast<long long>(batch),
                        s.median_ms, static_cast<double>(batch) / (s.median_ms / 1e3), tflops,
                        100.0 * tflops / peak_tflops(device, cell.precision), peak_mib, 1e3 * t.energy_j / images,
                        t.mean_sm_clock_mhz, t.mean_power_w, static_cast<int>(t.throttled), check.loss, prep_s);
            std::fflush(stdout);
            record.update({{"status", check.finite ? "ok" : "failed"},
                           {"median_ms", s.median_ms},
                           {"p05_ms", s.p05_ms},
                           {"p95_ms", s.p95_ms},
                           {"images_per_s", static_cast<double>(batch) / (s.median_ms / 1e3)},
                           {"tflops", tflops},
                           {"percent_of_peak", 100.0 * tflops / peak_tflops(device, cell.precision)},
                           {"peak_memory_bytes", session->memory().peak_bytes},
                           {"energy_j_per_image", t.energy_j / images},
                           {"mean_sm_clock_mhz", t.mean_sm_clock_mhz},
                           {"mean_power_w", t.mean_power_w},
                           {"throttled", t.throttled},
                           {"loss", check.loss},
                           {"gradient_norm", check.gradient_norm},
                           {"prepare_s", prep_s},
                           {"decisions", session->record().decisions}});
            if (op_repetitions > 0) {
              if (auto* cudnn_session = dynamic_cast<cudnn::CudnnSession*>(session.get())) {
                auto ops = op_medians(cudnn_session->profile(op_repetitions));
                double total = 0;
                for (const auto& op : ops) total += op.second;
                json op_list = json::array();
                for (const auto& [label, ms] : ops) op_list.push_back({{"op", label}, {"ms", ms}});
                record["op_times"] = op_list;
                std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
                std::printf("    op times (sum %.3f ms, %zu ops):\n", total, ops.size());
                for (std::size_t i = 0; i < std::min<std::size_t>(25, ops.size()); ++i)
                  std::printf("      %8.3f  %s\n", ops[i].second, ops[i].first.c_str());
              }
            }
            if (layer_repetitions > 0) {
              auto times = layer_medians(session->profile(layer_repetitions));
              json layers = json::array();
              for (const LayerTime& lt : times)
                layers.push_back({{"layer", lt.layer}, {"kind", lt.kind}, {"forward_ms", lt.forward_ms},
                                  {"backward_ms", lt.backward_ms}});
              record["layer_times"] = layers;
              std::sort(times.begin(), times.end(), [](const LayerTime& a, const LayerTime& b) {
                return a.forward_ms + a.backward_ms > b.forward_ms + b.backward_ms;
              });
              double total = 0;
              for (const LayerTime& lt : times) total += lt.forward_ms + lt.backward_ms;
              std::printf("    layer times (sum %.3f ms): ", total);
              for (std::size_t i = 0; i < std::min<std::size_t>(6, times.size()); ++i)
                std::printf("%s[%s] %.3f+%.3f  ", times[i].layer.c_str(), times[i].kind.c_str(), times[i].forward_ms,
                            times[i].backward_ms);
              std::printf("\n");
            }
          } catch (const OutOfMemory& e) {
            record["status"] = "oom";
            record["message"] = e.what();
            std::printf("%-10s %-5s %-9s %5lld oom\n", name.c_str(), precision_name.c_str(), phase_name.c_str(),
                        static_cast<long long>(batch));
          } catch (const std::exception& e) {
            record["status"] = "failed";
            record["message"] = e.what();
            std::printf("%-10s %-5s %-9s %5lld failed: %s\n", name.c_str(), precision_name.c_str(), phase_name.c_str(),
                        static_cast<long long>(batch), e.what());
          }
          cells.push_back(record);
        }
  }
  if (!json_path.empty()) {
    json out{{"device", device.model}, {"architecture", device.architecture}, {"cells", cells}};
    for (const auto& [key, version] : engine_library_versions()) out["versions"][key] = version;
    std::ofstream(json_path) << out.dump(1) << "\n";
  }
  return 0;
}
