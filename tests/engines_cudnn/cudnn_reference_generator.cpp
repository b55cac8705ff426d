// Writes the reference values the GPU test (cudnn_engine_test) compares the
// cuDNN engine against: OutputCheck of the oneDNN engine (the CPU reference)
// for every tiny layer-kind network at batch 4 and every network of
// DESIGN.md at batch 2, both phases, fp32, seed 42. The GPU machine has no
// oneDNN, so the values are computed here and committed:
//
//   build/cudnn_reference_generator tests/engines_cudnn/reference.json
//
// Rerun it whenever the networks, the synthetic generator or the oneDNN
// engine's semantics change.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>

#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"
#include "engines_cudnn/tiny_networks.hpp"

namespace {

using nlohmann::json;
using namespace crossbench;

json entry(const OutputCheck& check) {
  json e;
  e["finite"] = check.finite;
  e["loss"] = check.loss;
  e["logits_checksum"] = check.logits_checksum;
  e["gradient_norm"] = std::isfinite(check.gradient_norm) ? json(check.gradient_norm) : json(nullptr);
  e["gradient_norms"] = check.gradient_norms;
  return e;
}

json both_phases(Engine& engine, const Network& network, std::int64_t batch) {
  json phases;
  for (Phase phase : {Phase::training, Phase::inference}) {
    CellSpec cell{"onednn", network.name(), Precision::fp32, batch, phase, 0};
    auto session = engine.prepare(network, cell);
    phases[std::string(to_string(phase))] = entry(session->check());
  }
  return phases;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: cudnn_reference_generator OUTPUT.json\n";
    return 2;
  }
  const Device device = probe_cpu(cpu_threads_of_binding(), "");
  EngineConfig config;
  config.seed = 42;
  config.threads = device.compute_units;
  auto engine = make_engine("onednn", device, config);
  if (!engine) {
    std::cerr << "this build has no oneDNN engine\n";
    return 1;
  }
  json out;
  out["format"] = "crossbench-cudnn-reference/1";
  out["generated_by"] = "onednn engine (tests/engines_cudnn/cudnn_reference_generator.cpp)";
  for (const auto& [name, version] : engine_library_versions())
    if (name == "onednn_version") out["onednn_version"] = version;
  out["seed"] = config.seed;
  out["tiny_batch"] = tiny::kBatch;
  out["network_batch"] = 2;
  for (const tiny::Case& c : tiny::cases()) {
    std::cerr << "tiny " << c.name << "\n";
    out["tiny"][c.name] = both_phases(*engine, c.build(), tiny::kBatch);
  }
  for (const std::string& name : network_names()) {
    std::cerr << "network " << name << "\n";
    out["networks"][name] = both_phases(*engine, make_network(name), 2);
  }
  std::ofstream file(argv[1]);
  file << std::setprecision(17) << out.dump(1) << "\n";
  return file ? 0 : 1;
}
