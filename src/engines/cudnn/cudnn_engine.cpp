// The native cuDNN engine: what it supports, and prepare().
#include "engines/cudnn/cudnn_engine.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <climits>
#include <cstdio>
#include <iostream>
#include <new>

#include "crossbench/error.hpp"
#include "core/cuda/cudnn_compat.hpp"
#include "engines/cudnn/cudnn_session.hpp"
#include "engines/cudnn/fault_injection.hpp"
#include "crossbench/telemetry.hpp"

namespace crossbench {
namespace cudnn {
namespace {

// Compute capability from Device::architecture: "90", "9.0", "120" or "12.0".
bool parse_capability(const std::string& text, int& major, int& minor) {
  const auto dot = text.find('.');
  try {
    if (dot != std::string::npos) {
      major = std::stoi(text.substr(0, dot));
      minor = std::stoi(text.substr(dot + 1));
    } else {
      if (text.size() < 2) return false;
      major = std::stoi(text.substr(0, text.size() - 1));
      minor = std::stoi(text.substr(text.size() - 1));
    }
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

std::string version_text(std::size_t v) {  // cuDNN 9: major * 10000 + minor * 100 + patch
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string gib_text(double bytes) {  // [GiB], one decimal
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / static_cast<double>(1ULL << 30));
  return text;
}

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The cell's largest tensor as the engine stores it, and a lower bound of its memory (below).
struct LargestTensor {
  std::string name;            // the layer whose output it is
  double elements = 0;         // at the cell's batch
  double lower_bound_bytes = 0;  // weights (and their gradients), this tensor (and its gradient)
};
LargestTensor largest_tensor(const Network& network, const CellSpec& cell, Layout layout);
Support element_limit(const Device& device, const CellSpec& cell, Layout layout);

// Where the measured choices apply: the device (name, compute capability,
// SMs) and the libraries that ran them (cuDNN, cuBLAS, CUDA runtime).
MeasurementContext measurement_context(const Device& device) {
  MeasurementContext context;
  context.device = measurement_device(device);
  for (const auto& [name, version] : library_versions())
    if (name == "cudnn_version" || name == "cublas_version" || name == "cuda_runtime_version") {
      if (!context.libraries.empty()) context.libraries += ' ';
      context.libraries.append(name, 0, name.rfind("_version")).append("=").append(version);
    }
  return context;
}

class CudnnEngine final : public Engine {
 public:
  // The algorithm cache lives as long as the engine (all of a rank's cells):
  // identical convolutions are measured once per process; with
  // CudnnSettings::algorithm_cache_path it is read here (a corrupt file:
  // UsageError) and appended to after each cell that measured something new.
  // With engine.graph_plan_reuse and a file-backed cache, the runtime-compiled plans persist beside it
  // (FILE.plans, the same context), so that a later process restores them instead of compiling them.
  CudnnEngine(const Device& device, const CudnnConfig& config)
      : device_(device),
        config_(config),
        algorithm_cache_(std::filesystem::path(config.algorithm_cache_path), measurement_context(device)),
        graph_plans_(graph_plan_file(config), measurement_context(device).text()) {}

  std::string_view name() const override { return "cudnn"; }
  DeviceKind device_kind() const override { return DeviceKind::gpu; }
  Support supports(const Device& device, const CellSpec& cell) const override {
    return cudnn::supports(device, cell, config_.layout);
  }

  std::unique_ptr<Session> prepare(const Network& network, const CellSpec& cell, Communicator* communicator) override {
    fault_injection::arm(describe(cell));  // test-only faults (CROSSBENCH_GPU_FAULT) apply to this cell or not
    // supports() let a cell past cuDNN's 2^31 elements through only because it cannot fit in the
    // device's memory: say so before any descriptor of it is made (cuDNN would refuse that first).
    if (const LargestTensor largest = largest_tensor(network, cell, config_.layout);
        largest.elements > static_cast<double>(INT32_MAX))
      throw OutOfMemory("cuDNN " + describe(cell) + " needs at least " + gib_text(largest.lower_bound_bytes) +
                        " GiB (the weights and layer '" + largest.name + "' of " +
                        std::to_string(static_cast<long long>(largest.elements)) +
                        " elements, with their gradients in training), beyond the " +
                        gib_text(static_cast<double>(device_.memory_bytes)) + " GiB of " + device_.model +
                        "; that layer is also beyond the 2^31 - 1 elements that cuDNN's tensor descriptors hold");
    try {
      CudnnConfig session_config = config_;
      // engine.pool_spacer_mb: the same cell again (a repetition) counts on; another cell starts at 0, so
      // every process samples the same placements for a cell, whatever ran before it.
      const std::string cell_name = describe(cell);
      sessions_of_cell_ = cell_name == last_cell_ ? sessions_of_cell_ + 1 : 0;
      last_cell_ = cell_name;
      session_config.session_of_cell = sessions_of_cell_;
      auto session =
          std::make_unique<CudnnSession>(network, cell, session_config, device_, communicator, &algorithm_cache_,
                                         config_.graph_plan_reuse ? &graph_plans_ : nullptr);
      save_algorithm_cache();
      return session;
    } catch (const std::bad_alloc&) {
      (void)cudaGetLastError();
      throw OutOfMemory("cuDNN " + describe(cell) + ": a host allocation failed while preparing the session");
    } catch (...) {
      (void)cudaGetLastError();  // a failed allocation must not leak into the next cell's first check
      throw;
    }
  }

  // A cache that cannot be written costs the replay, never the cell's measurement.
  void save_algorithm_cache() {
    const auto save = [this](auto& file, const char* what) {
      try {
        file.save();
      } catch (const Error& error) {
        if (!save_failed_) std::cerr << "crossbench: warning: " << what << " was not saved: " << error.what() << "\n";
        save_failed_ = true;
      }
    };
    save(algorithm_cache_, "the algorithm cache");
    save(graph_plans_, "the compiled graph plans beside it (FILE.plans)");
  }

  static std::filesystem::path graph_plan_file(const CudnnConfig& config) {
    if (!config.graph_plan_reuse || config.algorithm_cache_path.empty()) return {};
    return std::filesystem::path(config.algorithm_cache_path + ".plans");
  }

  Device device_;
  CudnnConfig config_;
  AlgorithmCache algorithm_cache_;
  bool save_failed_ = false;
  std::string last_cell_;     // the cell of the last session prepared (describe()), attempts included
  int sessions_of_cell_ = 0;  // its index among consecutive sessions of that cell (engine.pool_spacer_mb)
  GraphPlanStore graph_plans_;  // engine.graph_plan_reuse: the process's runtime-compiled plans, as bytes
};

// cuDNN's tensor descriptors take 32-bit sizes: a tensor of 2^31 elements or
// more cannot be described (cudnnSetTensor4dDescriptorEx fails). PyTorch
// splits such batches; this engine does not, and says so — unless the cell
// could not fit in the device's memory anyway, which prepare() reports as `oom`.
// The tensors counted are those the engine stores: every layer's output, and the
// input batch as 16-bit NHWC stores it for convolutions, its channels padded to 8
// (graph_builder.cpp forward_input; AlexNet bf16 at batch 8192: 8 x 224 x 224 x
// 8192 = 3.3e9 elements where the 3-channel image is 1.2e9).
LargestTensor largest_tensor(const Network& network, const CellSpec& cell, Layout layout) {
  const bool nhwc = layout == Layout::nhwc || (layout == Layout::automatic && cell.precision != Precision::fp32);
  const bool sixteen_bit = cell.precision == Precision::fp16 || cell.precision == Precision::bf16;
  const auto stored_elements = [&](int index) {
    const Layer& layer = network.layers()[static_cast<std::size_t>(index)];
    if (layer.kind != LayerKind::input || !nhwc || !sixteen_bit || layer.output.channels % 8 == 0)
      return layer.output.elements();
    for (const Layer& reader : network.layers())
      for (int from : reader.inputs)
        if (from == index && reader.kind != LayerKind::convolution) return layer.output.elements();
    TensorShape padded = layer.output;
    padded.channels = (padded.channels + 7) / 8 * 8;
    return padded.elements();
  };
  LargestTensor largest;
  std::int64_t most = -1;
  for (std::size_t i = 0; i < network.layers().size(); ++i)
    if (const std::int64_t elements = stored_elements(static_cast<int>(i)); elements > most) {
      most = elements;
      largest.name = network.layers()[i].name;
    }
  largest.elements = static_cast<double>(most) * static_cast<double>(cell.batch);
  const double bytes = sixteen_bit ? 2 : 4;
  const double copies = cell.phase == Phase::training ? 2 : 1;
  largest.lower_bound_bytes = copies * bytes * (static_cast<double>(network.parameters()) + largest.elements);
  return largest;
}

Support element_limit(const Device& device, const CellSpec& cell, Layout layout) {
  Network network;
  try {
    network = make_network(cell.network);
  } catch (const std::exception&) {
    return Support::yes();  // not a registry network (tests build their own): prepare() checks
  }
  const LargestTensor largest = largest_tensor(network, cell, layout);
  if (largest.elements <= static_cast<double>(INT32_MAX)) return Support::yes();
  if (largest.lower_bound_bytes > static_cast<double>(device.memory_bytes)) return Support::yes();  // prepare(): oom
  return Support::no("layer '" + largest.name + "' has " + std::to_string(static_cast<long long>(largest.elements)) +
                     " elements at batch " + std::to_string(cell.batch) +
                     ", beyond the 2^31 - 1 that cuDNN's tensor descriptors hold (this engine does not split batches)");
}

}  // namespace

Support supports(const Device& device, const CellSpec& cell, Layout layout) {
  if (device.kind != DeviceKind::gpu) return Support::no("cudnn runs on GPUs; this device is a CPU");
  int major = 0, minor = 0;
  if (!parse_capability(device.architecture, major, minor))
    return Support::no("unknown compute capability '" + device.architecture + "' of " + device.model);
  const std::string cc = std::to_string(major) + "." + std::to_string(minor);
  if (major * 10 + minor < compat::oldest_compute_capability())
    return Support::no("this build (CUDA " + std::to_string(CUDART_VERSION / 1000) + ") has no kernels for " +
                       device.model + " (compute capability " + cc + "): use " + compat::toolkit_for_older_gpus());
  switch (cell.precision) {
    case Precision::fp32:
      return element_limit(device, cell, layout);
    case Precision::tf32:
      if (major >= 8) return element_limit(device, cell, layout);
      return Support::no("tf32 needs tensor cores with TF32 (compute capability 8.0 or later); " + device.model +
                         " is " + cc);
    case Precision::bf16:
      if (major >= 8) return element_limit(device, cell, layout);
      return Support::no("bf16 needs compute capability 8.0 or later; " + device.model + " is " + cc);
    case Precision::amp_fp16: case Precision::amp_bf16:  // DESIGN.md: amp-* is the frameworks' recipe
      return Support::no(mixed_precision_refusal(cell.precision, "cudnn", cell.precision == Precision::amp_fp16 ? "fp16" : "bf16"));
    case Precision::fp16:
      if (major >= 7) return element_limit(device, cell, layout);
      return Support::no("fp16 tensor-core convolutions need compute capability 7.0 or later; " + device.model +
                         " is " + cc);
  }
  return Support::no("unknown precision");
}

std::vector<std::pair<std::string, std::string>> library_versions() {
  std::vector<std::pair<std::string, std::string>> versions;
  versions.emplace_back("cudnn_version", version_text(cudnnGetVersion()) + " (built with " +
                                             std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." +
                                             std::to_string(CUDNN_PATCHLEVEL) + ")");
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    versions.emplace_back("cublas_version",
                          std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
  int runtime = 0, driver = 0;
  // The runtime loaded and the toolkit compiled with (CUDA 11.8, 12.x and 13.x builds tell apart here).
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    versions.emplace_back("cuda_runtime_version",
                          cuda_version_text(runtime) + " (built with " + cuda_version_text(CUDART_VERSION) + ")");
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0)
    versions.emplace_back("cuda_driver_version", cuda_version_text(driver));
  (void)cudaGetLastError();
  versions.emplace_back("nvml", nvml_version());
  return versions;
}

}  // namespace cudnn

std::unique_ptr<Engine> make_cudnn_engine(const Device& device, const EngineConfig& config,
                                          const cudnn::CudnnSettings& settings) {
  return std::make_unique<cudnn::CudnnEngine>(device, cudnn::CudnnConfig(config, settings));
}

}  // namespace crossbench
