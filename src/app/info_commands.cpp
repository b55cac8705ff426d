// `crossbench list`, `describe` and `export-network`: facts, no measurement.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"
#include "crossbench/options_schema.hpp"

namespace crossbench {
namespace {

std::string shape_text(const TensorShape& shape) {
  return std::to_string(shape.channels) + "x" + std::to_string(shape.height) + "x" + std::to_string(shape.width);
}

}  // namespace

// Its --json and its list are parsed by the options schema (ListOptions, src/app/options.cpp).
int list_command(const CommandContext& context) {
  const std::optional<ListOptions> options = command_options_or_help<ListOptions>(context);
  if (!options) return 0;  // --help
  const std::string& what = options->topic;
  const bool as_json = options->json;
  if (as_json) {
    nlohmann::json list = nlohmann::json::array();
    if (what == "networks") {
      for (const auto& name : network_names()) {
        const Network network = make_network(name);
        const TensorShape input = network.input_shape();
        list.push_back({{"name", name},
                        {"input", {input.channels, input.height, input.width}},
                        {"forward_flops_per_image", network.forward_flops_per_image()},
                        {"training_flops_per_image", network.training_flops_per_image()},
                        {"parameters", network.parameters()}});
      }
    } else if (what == "engines") {
      for (const auto& info : engine_catalog())
        list.push_back({{"name", info.name}, {"kind", "native"}, {"device", info.device_kind == DeviceKind::gpu ? "gpu" : "cpu"},
                        {"built", info.built}, {"description", info.description}});
      for (const auto& [engine, command] : default_worker_commands())
        list.push_back({{"name", engine}, {"kind", "worker"}, {"device", "any"}, {"command", command}});
    } else if (what == "options") {
      for (const auto& spec : options_schema())
        list.push_back({{"key", spec.key}, {"flag", spec.flag}, {"default", spec.default_value}, {"valid", spec.range_text()},
                        {"help", spec.help}, {"changes_numbers", spec.changes_numbers}, {"recorded_as", spec.recorded_as},
                        {"commands", spec.commands}, {"sent_to_workers", spec.sent_to_workers}});
    } else if (what == "precisions") {
      for (const auto& name : precision_names())
        list.push_back({{"name", name}, {"recipe", recipe_of(*precision_from_string(name))}});
    } else if (what == "devices") {
      for (int ordinal = 0; ordinal < visible_gpu_count(); ++ordinal) list.push_back(to_json(probe_gpu(ordinal, "")));
      list.push_back(to_json(probe_cpu(cpu_threads_of_binding(), "")));
    } else {
      throw UsageError("crossbench list: unknown list '" + what + "'; valid: networks, engines, devices, options, precisions");
    }
    std::cout << list.dump(1) << "\n";
    return 0;
  }
  if (what == "options") {
    std::cout << options_markdown_table();  // the README's key table
  } else if (what == "precisions") {
    for (const auto& name : precision_names())
      std::printf("%-9s %s\n", name.c_str(), std::string(recipe_of(*precision_from_string(name))).c_str());
  } else if (what == "networks") {
    std::printf("%-10s %-11s %14s %14s %12s\n", "network", "input", "GFLOP/image", "train GFLOP", "params [M]");
    for (const auto& name : network_names()) {
      const Network network = make_network(name);
      std::printf("%-10s %-11s %14.2f %14.2f %12.1f\n", name.c_str(), shape_text(network.input_shape()).c_str(),
                  network.forward_flops_per_image() / 1e9, network.training_flops_per_image() / 1e9,
                  static_cast<double>(network.parameters()) / 1e6);
    }
  } else if (what == "engines") {
    std::printf("%-16s %-6s %-6s %s\n", "engine", "device", "built", "description");
    for (const auto& info : engine_catalog())
      std::printf("%-16s %-6s %-6s %s\n", info.name.c_str(), info.device_kind == DeviceKind::gpu ? "gpu" : "cpu",
                  info.built ? "yes" : "no", info.description.c_str());
    for (const auto& [engine, command] : default_worker_commands())
      std::printf("%-16s %-6s %-6s worker process: %s\n", engine.c_str(), "any", "-", command.c_str());
    std::printf("\nWorkers are separate processes; a job file's [workers] section adds or redefines them.\n");
  } else if (what == "devices") {
    const int gpus = visible_gpu_count();
    for (int ordinal = 0; ordinal < gpus; ++ordinal) {
      const Device gpu = probe_gpu(ordinal, "");
      std::printf("gpu %d: %s  uuid %s  pci %s  %s\n", ordinal, gpu.key().c_str(), gpu.uuid.c_str(),
                  gpu.pci_bus_id.c_str(), gpu.driver.c_str());
    }
    if (gpus == 0) std::printf("no GPU visible (CUDA reports none, or this binary was built without CUDA)\n");
    const Device cpu = probe_cpu(cpu_threads_of_binding(), "");
    std::printf("cpu: %s  peak fp32 estimate %.2f TFLOP/s  bf16 %s  %s\n", cpu.key().c_str(), cpu.peak_fp32_tflops,
                cpu.native_bf16 ? "native" : "not native", cpu.driver.c_str());
  } else {
    throw UsageError("crossbench list: unknown list '" + what + "'; valid: networks, engines, devices, options, precisions");
  }
  return 0;
}

// Its network is parsed by the options schema (DescribeOptions, src/app/options.cpp).
int describe_command(const CommandContext& context) {
  const std::optional<DescribeOptions> options = command_options_or_help<DescribeOptions>(context);
  if (!options) return 0;  // --help
  const Network network = make_network(options->network);
  std::printf("%s: input %s, %lld classes\n\n", network.name().c_str(), shape_text(network.input_shape()).c_str(),
              static_cast<long long>(network.classes()));
  std::printf("%4s %-28s %-22s %-14s %12s %12s %14s\n", "#", "layer", "kind", "output", "MFLOP", "params",
              "act. KiB/img");
  for (std::size_t i = 0; i < network.layers().size(); ++i) {
    const Layer& layer = network.layers()[i];
    std::printf("%4zu %-28s %-22s %-14s %12.2f %12lld %14.1f\n", i, layer.name.c_str(),
                std::string(to_string(layer.kind)).c_str(), shape_text(layer.output).c_str(),
                layer.cost.forward_flops / 1e6, static_cast<long long>(layer.cost.parameters),
                static_cast<double>(layer.cost.activation_bytes) / 1024.0);
  }
  // The headline counts what the literature counts: 2 × the multiply-adds of the
  // convolutions and fully-connected layers; element-wise ops are shown beside it.
  double multiply_add_flops = 0;
  for (const Layer& layer : network.layers())
    if (layer.kind == LayerKind::convolution || layer.kind == LayerKind::fully_connected)
      multiply_add_flops += layer.cost.forward_flops;
  std::printf("\ntotal: %.2f GFLOP/image forward (2 x multiply-adds of convolutions and fully-connected layers; "
              "%.2f with element-wise ops), %.2f GFLOP/image training, %.1f M parameters, "
              "%.1f MiB activations/image (fp32)\n",
              multiply_add_flops / 1e9, network.forward_flops_per_image() / 1e9, network.training_flops_per_image() / 1e9,
              static_cast<double>(network.parameters()) / 1e6,
              static_cast<double>(network.activation_bytes_per_image()) / (1 << 20));
  return 0;
}

namespace {

// Writes `text` to `path` as a new file (temporary + rename): an existing file
// is replaced only with --force, and a symlink at `path` is replaced itself,
// never followed to its target.
void write_new_file(const std::filesystem::path& path, const std::string& text, bool force) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) throw UsageError("export-network: '" + path.string() + "' is a directory");
  if (!force && std::filesystem::symlink_status(path, error).type() != std::filesystem::file_type::not_found)
    throw UsageError("export-network: '" + path.string() + "' exists; replace it with --force or choose another --output");
  const std::filesystem::path temporary = path.string() + ".tmp." + std::to_string(::getpid());
  const int descriptor = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (descriptor < 0) {
    const int code = errno;
    const std::string message = "export-network: cannot write '" + path.string() + "': " + std::strerror(code);
    if (is_storage_failure(code)) throw Error(message);  // exit 1: the disk, not the path, is at fault
    throw UsageError(message);
  }
  std::size_t written = 0;
  while (written < text.size()) {
    const auto count = ::write(descriptor, text.data() + written, text.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) break;
    written += static_cast<std::size_t>(count);
  }
  const int write_error = written == text.size() ? 0 : errno;
  if (::close(descriptor) != 0 || write_error != 0 || std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(write_error != 0 ? write_error : errno);
    ::unlink(temporary.c_str());
    throw Error("export-network: writing '" + path.string() + "' failed: " + reason);
  }
}

}  // namespace

// Its network, --output and --force are parsed by the options schema (ExportNetworkOptions, src/app/options.cpp).
int export_network_command(const CommandContext& context) {
  const std::optional<ExportNetworkOptions> options = command_options_or_help<ExportNetworkOptions>(context);
  if (!options) return 0;  // --help
  const std::string text = to_json(make_network(options->network)).dump(1);
  if (options->output.empty()) {  // no --output: stdout
    std::cout << text << "\n";
    return 0;
  }
  write_new_file(options->output, text + "\n", options->force);
  return 0;
}

}  // namespace crossbench
