// What the cuDNN forms probes share (gpu_genstats_forms.cpp, gpu_bnbackward_forms.cpp): a form's data types,
// cuDNN's refusal in one line, the steps from a built graph to its plans (each step's refusal named), and the
// command line and handle. Plain cudnn-frontend calls, no crossbench type: what is probed is cuDNN itself.
#pragma once

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>

namespace cudnn_forms_probe {

namespace fe = cudnn_frontend;

struct Form {
  fe::DataType_t io;
  fe::DataType_t intermediate;
  const char* io_name;
  const char* intermediate_name;
};

// The first lines of cuDNN's refusal that say why (its "Reason" lines, deduplicated), on one line.
inline std::string reasons(const std::string& message) {
  std::istringstream lines(message);
  std::string line, out;
  int kept = 0;
  while (std::getline(lines, line) && kept < 6) {
    const auto at = line.find("Reason: ");
    if (at == std::string::npos) continue;
    const std::string reason = line.substr(at + 8);
    if (out.find(reason) != std::string::npos) continue;
    out += (out.empty() ? "" : " | ") + reason;
    ++kept;
  }
  return out.empty() ? message.substr(0, 240) : out;
}

// A graph's answer: validated, lowered, its plans listed (heuristics A and fallback), supported, and its first
// four built. "SUPPORTED: N plans listed, B of the first 4 built", or "refused at STEP: reasons".
inline std::string plans_text(cudnnHandle_t handle, fe::graph::Graph& g) {
  std::ostringstream out;
  const auto step = [&](const char* what, fe::error_object status) {
    if (status.is_good()) return true;
    out << "refused at " << what << ": " << reasons(status.get_message());
    return false;
  };
  if (!step("validate", g.validate())) return out.str();
  if (!step("build_operation_graph", g.build_operation_graph(handle))) return out.str();
  if (!step("create_execution_plans", g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})))
    return out.str();
  if (!step("check_support", g.check_support(handle))) return out.str();
  const std::int64_t listed = g.get_execution_plan_count();
  int built = 0;
  std::string first_build_refusal;
  for (std::int64_t i = 0; i < listed && i < 4; ++i) {
    fe::error_object status = g.build_plan_at_index(handle, i);
    if (status.is_good())
      ++built;
    else if (first_build_refusal.empty())
      first_build_refusal = reasons(status.get_message());
  }
  if (built == 0) {
    out << "refused at build_plan_at_index: " << listed << " plans listed, none of the first 4 built: "
        << first_build_refusal;
    return out.str();
  }
  out << "SUPPORTED: " << listed << " plans listed, " << built << " of the first 4 built";
  return out.str();
}

// `program [--batch N]`: the batch (default 32), or -1 after printing the usage (an unknown option).
inline std::int64_t batch_argument(int argc, char** argv, const char* program) {
  std::int64_t batch = 32;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--batch" && i + 1 < argc) {
      batch = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "%s: unknown option %s (usage: %s [--batch N])\n", program, argv[i], program);
      return -1;
    }
  }
  return batch;
}

using Handle = std::unique_ptr<cudnnContext, decltype(&cudnnDestroy)>;

// A cuDNN handle, or null after printing why not (no GPU, no driver).
inline Handle make_handle(const char* program) {
  cudnnHandle_t raw = nullptr;
  if (const cudnnStatus_t status = cudnnCreate(&raw); status != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cudnnCreate failed: %s\n", program, cudnnGetErrorString(status));
    return Handle(nullptr, &cudnnDestroy);
  }
  return Handle(raw, &cudnnDestroy);
}

}  // namespace cudnn_forms_probe
