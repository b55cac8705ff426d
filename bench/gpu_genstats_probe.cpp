// gpu_genstats_probe: is a convolution that also writes its output's per-channel sums (cuDNN's genstats,
// GraphConvolutionProblem::statistics) worth taking into the training batch-norm? For ResNet-50's
// convolution shapes (NHWC, stride 1), each followed by a training batch-norm, it times on one GPU:
//   plain      the fastest of the first N plans of the plain forward graph (precompiled engines only,
//              as the engine's search lists them)
//   genstats   the fastest of the first N plans of the same forward with the sums (runtime fusion engines)
//   bn_forward our fused batch-norm + relu forward over the output (statistics pass + apply pass,
//              kernels_batch_norm.hpp), what the engine runs after the plain convolution today
// and prints, per shape, genstats - plain against the batch-norm forward: the statistics pass is one of
// its three passes over y (two reads and a write), so genstats pays where genstats - plain is well under a
// third of bn_forward. Timing: CUDA events around `--repeat` back-to-back runs on one stream, the median of
// `--rounds` rounds, per run [ms]. Speed is measured here, never asserted in a test.
//
//   gpu_genstats_probe [--batch 256] [--precisions fp16,bf16,tf32] [--plans 8] [--repeat 20] [--rounds 5]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "crossbench/error.hpp"
#include "engines/cudnn/graph_api_convolution.hpp"
#include "engines/cudnn/graph_refusal.hpp"
#include "engines/cudnn/handles.hpp"
#include "engines/cudnn/kernels_batch_norm.hpp"

namespace {

using namespace crossbench;
using namespace crossbench::cudnn;

struct Shape {
  const char* name;
  std::int64_t in, out, size, kernel;  // channels in and out, height = width, kernel height = width
};

// ResNet-50's stride-1 convolutions that a batch-norm follows, one of each kind per stage.
const Shape kShapes[] = {
    {"layer1 1x1 64->64 @56", 64, 64, 56, 1},     {"layer1 3x3 64->64 @56", 64, 64, 56, 3},
    {"layer1 1x1 64->256 @56", 64, 256, 56, 1},   {"layer2 3x3 128->128 @28", 128, 128, 28, 3},
    {"layer3 1x1 256->1024 @14", 256, 1024, 14, 1}, {"layer4 1x1 512->2048 @7", 512, 2048, 7, 1},
};

// Median over rounds of (CUDA-event time of `repeat` runs) / repeat [ms].
double time_ms(cudaStream_t stream, int repeat, int rounds, const std::function<bool()>& run) {
  const Event start = make_event(), stop = make_event();
  if (!run()) return std::numeric_limits<double>::quiet_NaN();  // warm-up, and refusal
  CB_CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> per_run;
  for (int r = 0; r < rounds; ++r) {
    CB_CHECK_CUDA(cudaEventRecord(start, stream));
    for (int i = 0; i < repeat; ++i) run();
    CB_CHECK_CUDA(cudaEventRecord(stop, stream));
    CB_CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    CB_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    per_run.push_back(ms / repeat);
  }
  std::sort(per_run.begin(), per_run.end());
  return per_run[per_run.size() / 2];
}

struct Best {
  double ms = std::numeric_limits<double>::quiet_NaN();
  std::string plan;
  int listed = 0;
};

Best fastest_plan(cudnnHandle_t handle, cudaStream_t stream, const GraphConvolutionProblem& problem, int plans,
                  int repeat, int rounds, void* x, void* w, void* y, float* sum, float* squares) {
  Best best;
  std::unique_ptr<GraphConvolution> graph;
  try {
    graph = GraphConvolution::create(handle, problem);
  } catch (const Error& e) {
    best.plan = "refused: " + graph_refusal_summary(e.what());  // one line, as in the decisions
    return best;
  }
  best.listed = graph->plan_count();
  for (int plan = 0; plan < graph->plan_count() && plan < plans; ++plan) {
    if (!graph->build(plan)) continue;
    const std::int64_t workspace_bytes = graph->workspace_bytes(plan);
    const DeviceBuffer workspace(static_cast<std::size_t>(std::max<std::int64_t>(workspace_bytes, 1)), "probe workspace");
    const double ms = time_ms(stream, repeat, rounds, [&] {
      if (problem.statistics) {
        // genstats may add to its outputs: zeroed in the timed loop, as a step would (a memset node).
        CB_CHECK_CUDA(cudaMemsetAsync(sum, 0, static_cast<std::size_t>(problem.y.dims[1]) * 4, stream));
        CB_CHECK_CUDA(cudaMemsetAsync(squares, 0, static_cast<std::size_t>(problem.y.dims[1]) * 4, stream));
        return graph->run_with_statistics(handle, plan, x, w, y, sum, squares, workspace.data(), true);
      }
      return graph->run(handle, plan, x, w, y, nullptr, nullptr, workspace.data(), true);
    });
    if (!std::isnan(ms) && (std::isnan(best.ms) || ms < best.ms)) {
      best.ms = ms;
      best.plan = graph->plan_name(plan);
    }
  }
  if (best.plan.empty()) best.plan = std::to_string(best.listed) + " listed, none built and ran";
  return best;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    if (end > begin) out.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

int run(int argc, char** argv) {
  std::int64_t batch = 256;
  std::vector<std::string> precisions{"fp16", "bf16", "tf32"};
  int plans = 8, repeat = 20, rounds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw UsageError("gpu_genstats_probe: " + arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--batch") batch = std::stoll(value);
    else if (arg == "--precisions") precisions = split(value);
    else if (arg == "--plans") plans = std::stoi(value);
    else if (arg == "--repeat") repeat = std::stoi(value);
    else if (arg == "--rounds") rounds = std::stoi(value);
    else throw UsageError("gpu_genstats_probe: unknown option " + arg);
  }
  if (!graph_api_available()) throw Error(std::string("no Graph API in this build: ") + graph_api_unavailable_reason());
  int device = 0, multiprocessors = 0;
  CB_CHECK_CUDA(cudaGetDevice(&device));
  CB_CHECK_CUDA(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  const CudnnHandle handle = make_cudnn_handle();
  const Stream stream = make_stream();
  CB_CHECK_CUDNN(cudnnSetStream(handle, stream));
  std::printf("%-26s %-5s %10s %10s %12s %12s  %s | %s\n", "shape", "prec", "plain[ms]", "genstats", "minus plain",
              "bn_fwd[ms]", "plain plan", "genstats plan (listed)");
  for (const std::string& precision_name : precisions) {
    // fp16: the one io type whose statistics graph cuDNN 9.14 runs on an H100 (gpu_genstats_forms, call 74h).
    if (precision_name != "bf16" && precision_name != "tf32" && precision_name != "fp16")
      throw UsageError("gpu_genstats_probe: --precisions takes fp16, bf16 and tf32, not " + precision_name);
    const Precision precision = precision_name == "bf16"   ? Precision::bf16
                                : precision_name == "fp16" ? Precision::fp16
                                                           : Precision::tf32;
    const DType type = precision == Precision::bf16 ? DType::bf16 : precision == Precision::fp16 ? DType::f16 : DType::f32;
    const std::size_t element = static_cast<std::size_t>(size_of(type));  // [bytes]
    for (const Shape& s : kShapes) {
      GraphConvolutionProblem problem;
      problem.precision = precision;
      problem.x = Tensor::packed({batch, s.in, s.size, s.size}, type, true);
      problem.w = Tensor::packed({s.out, s.in, s.kernel, s.kernel}, type, true);
      problem.y = Tensor::packed({batch, s.out, s.size, s.size}, type, true);
      problem.padding = static_cast<int>(s.kernel / 2);
      problem.stride = 1;
      problem.workspace_limit_bytes = std::int64_t{1} << 30;
      const std::int64_t rows = batch * s.size * s.size;
      // Zeros everywhere: the probe times memory traffic and math, not values.
      DeviceBuffer x(static_cast<std::size_t>(rows * s.in) * element, "probe x");
      DeviceBuffer w(static_cast<std::size_t>(s.out * s.in * s.kernel * s.kernel) * element, "probe w");
      DeviceBuffer y(static_cast<std::size_t>(rows * s.out) * element, "probe y");
      DeviceBuffer z(static_cast<std::size_t>(rows * s.out) * element, "probe batch-norm output");
      DeviceBuffer channels(static_cast<std::size_t>(s.out) * 4 * 8, "probe per-channel values");
      for (const DeviceBuffer* b : {&x, &w, &y, &z, &channels}) CB_CHECK_CUDA(cudaMemset(b->data(), 0, b->bytes()));
      float* per_channel = reinterpret_cast<float*>(channels.data());
      const auto channel = [&](int k) { return per_channel + k * s.out; };
      const Best plain = fastest_plan(handle, stream, problem, plans, repeat, rounds, x.data(), w.data(), y.data(),
                                      nullptr, nullptr);
      problem.statistics = true;
      const Best stats = fastest_plan(handle, stream, problem, plans, repeat, rounds, x.data(), w.data(), y.data(),
                                      channel(0), channel(1));
      // Our batch-norm + relu forward over y, as the engine runs it after the plain convolution.
      double bn_ms = std::numeric_limits<double>::quiet_NaN();
      if (kernels::batch_norm_relu_supported(s.out, type)) {
        const kernels::BatchNormGrid grid = kernels::batch_norm_grid(rows, s.out, type, multiprocessors);
        const DeviceBuffer workspace(std::max<std::size_t>(grid.workspace_bytes(), 1), "probe batch-norm workspace");
        const DeviceBuffer tickets(
            static_cast<std::size_t>(std::max<std::int64_t>(kernels::batch_norm_tickets(s.out, type), 1)) * 4,
            "probe batch-norm tickets");
        CB_CHECK_CUDA(cudaMemset(tickets.data(), 0, tickets.bytes()));
        kernels::BatchNormReluForward args;
        args.x = y.data();
        args.y = z.data();
        args.type = type;
        args.gamma = channel(2);
        args.beta = channel(3);
        args.running_mean = channel(4);
        args.running_variance = channel(5);
        args.saved_mean = channel(6);
        args.saved_inverse_std = channel(7);
        args.factor = 0.1f;
        args.tickets = reinterpret_cast<unsigned int*>(tickets.data());
        bn_ms = time_ms(stream, repeat, rounds, [&] {
          kernels::batch_norm_relu_forward(args, grid, workspace.data(), stream);
          return true;
        });
      }
      std::printf("%-26s %-5s %10.4f %10.4f %12.4f %12.4f  %s | %s (%d)\n", s.name, precision_name.c_str(), plain.ms,
                  stats.ms, stats.ms - plain.ms, bn_ms, plain.plan.c_str(), stats.plan.c_str(), stats.listed);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpu_genstats_probe: " << e.what() << "\n";
    return 1;
  }
}
