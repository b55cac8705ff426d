#include "crossbench/cell.hpp"

#include <array>
#include <new>

#include "crossbench/error.hpp"
#include "crossbench/stop_flag.hpp"

namespace crossbench {
namespace {

template <typename Enum, std::size_t N>
std::optional<Enum> lookup(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<Enum>(i);
  return std::nullopt;
}

template <std::size_t N>
std::vector<std::string> as_vector(const std::array<std::string_view, N>& names) {
  return {names.begin(), names.end()};
}

constexpr std::array<std::string_view, 6> kPrecisions{"fp32", "tf32", "fp16", "bf16", "amp-fp16", "amp-bf16"};
// DESIGN.md "Vocabulary", in the order of Precision.
constexpr std::array<std::string_view, 6> kRecipes{
    "recipe=fp32-strict (fp32 tensors and math; TF32 off everywhere)",
    "recipe=tf32 (fp32 tensors, TF32 tensor-core math)",
    "recipe=pure-fp16 (fp16 weights, activations, gradients; fp32 accumulation, loss and batch-norm statistics)",
    "recipe=pure-bf16 (bf16 weights, activations, gradients; fp32 accumulation, loss and batch-norm statistics)",
    "recipe=amp-fp16 (fp32 master weights and gradients; fp16 compute through casts)",
    "recipe=amp-bf16 (fp32 master weights and gradients; bf16 compute through casts)"};
constexpr std::array<std::string_view, 2> kPhases{"inference", "training"};
constexpr std::array<std::string_view, 6> kStatuses{"not_run", "ok", "oom", "unsupported", "failed", "timeout"};

}  // namespace

std::string_view to_string(Precision precision) { return kPrecisions.at(static_cast<std::size_t>(precision)); }
std::string_view recipe_of(Precision precision) { return kRecipes.at(static_cast<std::size_t>(precision)); }
std::string mixed_precision_refusal(Precision precision, std::string_view engine, std::string_view pure) {
  return std::string(to_string(precision)) + " is the frameworks' mixed-precision recipe (fp32 master weights and " +
         "gradients, 16-bit compute through casts); the " + std::string(engine) +
         " engine keeps no fp32 master copy and runs the pure recipe instead: precision " + std::string(pure);
}
std::string_view to_string(Phase phase) { return kPhases.at(static_cast<std::size_t>(phase)); }
std::string_view to_string(Status status) { return kStatuses.at(static_cast<std::size_t>(status)); }
std::optional<Precision> precision_from_string(std::string_view name) { return lookup<Precision>(kPrecisions, name); }
std::optional<Phase> phase_from_string(std::string_view name) { return lookup<Phase>(kPhases, name); }
std::optional<Status> status_from_string(std::string_view name) { return lookup<Status>(kStatuses, name); }
const std::vector<std::string>& precision_names() { static const auto names = as_vector(kPrecisions); return names; }
const std::vector<std::string>& phase_names() { static const auto names = as_vector(kPhases); return names; }
const std::vector<std::string>& status_names() { static const auto names = as_vector(kStatuses); return names; }

std::string describe(const CellSpec& cell) {
  std::string text = cell.engine + "/" + cell.network + "/" + std::string(to_string(cell.precision));
  text += "/b" + std::to_string(cell.batch) + "/" + std::string(to_string(cell.phase));
  if (cell.gpus != 1) text += "/g" + std::to_string(cell.gpus);
  text += "/r" + std::to_string(cell.replica);
  return text;
}

std::string cell_key(const std::string& device_key, const CellSpec& cell) { return device_key + "|" + describe(cell); }

std::vector<CellSpec> expand_matrix(const MatrixOptions& matrix, const std::vector<std::string>& engines, int replicas) {
  std::vector<CellSpec> cells;
  for (const auto& engine : engines)
    for (const auto& network : matrix.networks)
      for (const Precision precision : matrix.precisions)
        for (const std::int64_t batch : matrix.batches)
          for (const Phase phase : matrix.phases)
            for (const int gpus : matrix.gpus)
              for (int replica = 0; replica < replicas; ++replica)
                cells.push_back({engine, network, precision, batch, phase, replica, gpus});
  return cells;
}

CellFailure cell_failure(std::exception_ptr thrown) {
  try {
    std::rethrow_exception(thrown);
  } catch (const Unsupported& error) {
    return {Status::unsupported, error.what()};
  } catch (const CellInterrupted& error) {
    return {Status::not_run, error.what()};
  } catch (const CellTimeout& error) {
    return {Status::timeout, error.what()};
  } catch (const OutOfMemory& error) {
    return {Status::oom, error.what()};
  } catch (const std::bad_alloc&) {
    return {Status::oom, "host allocation failed (std::bad_alloc)"};
  } catch (const std::exception& error) {
    return {Status::failed, error.what()};
  } catch (...) {
    return {Status::failed, "unknown exception"};
  }
}

}  // namespace crossbench
