// The native cuDNN GPU engine (created by src/engines/registry.cpp).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crossbench/engine.hpp"
#include "engines/cudnn/cudnn_settings.hpp"

namespace crossbench {

// `settings`: the engine's own (cudnn_settings(config) in the registry; typed in tests and benches).
std::unique_ptr<Engine> make_cudnn_engine(const Device& device, const EngineConfig& config,
                                          const cudnn::CudnnSettings& settings);

namespace cudnn {
// What the engine supports on a device (no GPU needed: it reads the Device), with the
// engine.layout it runs (the input batch it stores depends on it).
Support supports(const Device& device, const CellSpec& cell, Layout layout = Layout::automatic);
// cuDNN, cuBLAS, CUDA runtime and driver, NVML versions for the cube's attributes.
std::vector<std::pair<std::string, std::string>> library_versions();
}  // namespace cudnn

}  // namespace crossbench
