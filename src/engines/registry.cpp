// The explicit engine registry (DESIGN.md: no static-initialisation tricks).
#include <algorithm>

#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "engines/cudnn/cudnn_settings.hpp"
#include "engines/worker/worker_engine.hpp"
#include "engines/worker/worker_settings.hpp"

#if CROSSBENCH_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include "engines/onednn/onednn_engine.hpp"
#endif
#if CROSSBENCH_HAVE_CUDA
#include "engines/cudnn/cudnn_engine.hpp"
#endif

namespace crossbench {

const std::vector<EngineInfo>& engine_catalog() {
  static const std::vector<EngineInfo> catalog{
      {"onednn", DeviceKind::cpu,
#if CROSSBENCH_HAVE_ONEDNN
       true, "native CPU engine: oneDNN primitives, no framework"
#else
       false, "not built: configured without oneDNN (CROSSBENCH_ENABLE_ONEDNN=OFF)"
#endif
      },
      {"cudnn", DeviceKind::gpu,
#if CROSSBENCH_HAVE_CUDA
       true, "native GPU engine: cuDNN + cuBLAS, no framework"
#else
       false, "not built: configured without CUDA/cuDNN (CROSSBENCH_ENABLE_CUDA=OFF)"
#endif
      },
  };
  return catalog;
}

std::string_view native_engine(DeviceKind kind) { return kind == DeviceKind::gpu ? "cudnn" : "onednn"; }

std::unique_ptr<Engine> make_engine(std::string_view name, const Device& device, const EngineConfig& config) {
  if (auto worker = worker_settings(config, name)) return make_worker_engine(std::string(name), device, config, *worker);
  const auto& catalog = engine_catalog();
  const auto found = std::find_if(catalog.begin(), catalog.end(), [&](const EngineInfo& info) { return info.name == name; });
  if (found == catalog.end()) {
    std::string valid;
    for (const auto& info : catalog) valid += (valid.empty() ? "" : ", ") + info.name;
    throw UsageError("unknown engine '" + std::string(name) + "'; valid engines: " + valid + ", auto");
  }
#if CROSSBENCH_HAVE_ONEDNN
  if (name == "onednn") return make_onednn_engine(device, config);
#endif
#if CROSSBENCH_HAVE_CUDA
  if (name == "cudnn") return make_cudnn_engine(device, config, cudnn::cudnn_settings(config));
#endif
  return nullptr;
}

Support native_engine_support(std::string_view name, const Device& device, const CellSpec& cell,
                              const EngineConfig& config) {
#if CROSSBENCH_HAVE_CUDA
  if (name == "cudnn") return cudnn::supports(device, cell, cudnn::cudnn_settings(config).layout);
#endif
  (void)name, (void)device, (void)cell, (void)config;
  return Support::yes();
}

void check_engine_settings(const EngineConfig& config) {
  // The cuDNN engine's keys are checked in every build: a job file means the same on every machine.
  cudnn::check_cudnn_settings(config);
  for (const auto& [key, command] : config.settings)
    if (key.rfind("workers.", 0) == 0) worker_settings(config, key.substr(8));
}

std::vector<std::pair<std::string, std::string>> engine_library_versions() {
  std::vector<std::pair<std::string, std::string>> versions;
#if CROSSBENCH_HAVE_ONEDNN
  const dnnl_version_t* version = dnnl_version();
  versions.emplace_back("onednn_version", std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
                                              std::to_string(version->patch) + " (" + version->hash + ")");
#endif
#if CROSSBENCH_HAVE_CUDA
  for (auto& entry : cudnn::library_versions()) versions.push_back(std::move(entry));
#endif
  return versions;
}

}  // namespace crossbench
