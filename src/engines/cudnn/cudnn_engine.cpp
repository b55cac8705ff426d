// The native cuDNN engine: what it supports, and prepare().
#include "engines/cudnn/cudnn_engine.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <climits>
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

std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

Support element_limit(const Device& device, const CellSpec& cell);

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
  CudnnEngine(const Device& device, const CudnnConfig& config)
      : device_(device),
        config_(config),
        algorithm_cache_(std::filesystem::path(config.algorithm_cache_path), measurement_context(device)) {}

  std::string_view name() const override { return "cudnn"; }
  DeviceKind device_kind() const override { return DeviceKind::gpu; }
  Support supports(const Device& device, const CellSpec& cell) const override { return cudnn::supports(device, cell); }

  std::unique_ptr<Session> prepare(const Network& network, const CellSpec& cell, Communicator* communicator) override {
    fault_injection::arm(describe(cell));  // test-only faults (CROSSBENCH_GPU_FAULT) apply to this cell or not
    try {
      auto session = std::make_unique<CudnnSession>(network, cell, config_, device_, communicator, &algorithm_cache_);
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
    try {
      algorithm_cache_.save();
    } catch (const Error& error) {
      if (!save_failed_) std::cerr << "crossbench: warning: the algorithm cache was not saved: " << error.what() << "\n";
      save_failed_ = true;
    }
  }

  Device device_;
  CudnnConfig config_;
  AlgorithmCache algorithm_cache_;
  bool save_failed_ = false;
};

// cuDNN's tensor descriptors take 32-bit sizes: a tensor of 2^31 elements or
// more cannot be described (cudnnSetTensor4dDescriptorEx fails). PyTorch
// splits such batches; this engine does not, and says so — unless the cell
// could not fit in the device's memory anyway, which prepare() reports as `oom`.
Support element_limit(const Device& device, const CellSpec& cell) {
  Network network;
  try {
    network = make_network(cell.network);
  } catch (const std::exception&) {
    return Support::yes();  // not a registry network (tests build their own): prepare() checks
  }
  const std::int64_t limit = INT32_MAX;
  const Layer* largest = &network.layers().front();
  for (const Layer& layer : network.layers())
    if (layer.output.elements() > largest->output.elements()) largest = &layer;
  const double elements = static_cast<double>(largest->output.elements()) * static_cast<double>(cell.batch);
  if (elements <= static_cast<double>(limit)) return Support::yes();
  // A lower bound of the cell's memory: weights (and their gradients), the largest activation (and its gradient).
  const double bytes = cell.precision == Precision::fp16 || cell.precision == Precision::bf16 ? 2 : 4;
  const double copies = cell.phase == Phase::training ? 2 : 1;
  const double lower_bound = copies * bytes * (static_cast<double>(network.parameters()) + elements);
  if (lower_bound > static_cast<double>(device.memory_bytes)) return Support::yes();  // prepare(): oom
  return Support::no("layer '" + largest->name + "' has " + std::to_string(static_cast<long long>(elements)) +
                     " elements at batch " + std::to_string(cell.batch) +
                     ", beyond the 2^31 - 1 that cuDNN's tensor descriptors hold (this engine does not split batches)");
}

}  // namespace

Support supports(const Device& device, const CellSpec& cell) {
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
      return element_limit(device, cell);
    case Precision::tf32:
      if (major >= 8) return element_limit(device, cell);
      return Support::no("tf32 needs tensor cores with TF32 (compute capability 8.0 or later); " + device.model +
                         " is " + cc);
    case Precision::bf16:
      if (major >= 8) return element_limit(device, cell);
      return Support::no("bf16 needs compute capability 8.0 or later; " + device.model + " is " + cc);
    case Precision::amp_fp16: case Precision::amp_bf16:  // DESIGN.md: amp-* is the frameworks' recipe
      return Support::no(mixed_precision_refusal(cell.precision, "cudnn", cell.precision == Precision::amp_fp16 ? "fp16" : "bf16"));
    case Precision::fp16:
      if (major >= 7) return element_limit(device, cell);
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
