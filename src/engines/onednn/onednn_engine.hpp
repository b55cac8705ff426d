// The native oneDNN CPU engine (created by src/engines/registry.cpp).
#pragma once

#include <memory>

#include "crossbench/engine.hpp"

namespace crossbench {

std::unique_ptr<Engine> make_onednn_engine(const Device& device, const EngineConfig& config);

}  // namespace crossbench
