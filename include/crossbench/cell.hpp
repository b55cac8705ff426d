// The vocabulary of a benchmark matrix: precision, phase, status, one cell,
// the matrix's expansion into cells, the one key that names a cell within a
// run, and the one mapping from a cell's failure to its status.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crossbench {

// One meaning in every engine (DESIGN.md "Vocabulary"): fp32 strict (no TF32
// anywhere); tf32: fp32 tensors, TF32 tensor-core math; fp16/bf16 "pure":
// weights, activations and gradients in 16 bits, fp32 accumulation, loss and
// batch-norm statistics; amp_fp16/amp_bf16 ("amp-fp16", "amp-bf16"): the
// frameworks' mixed precision, fp32 master weights and weight gradients with
// 16-bit compute through casts. New values go at the end (journals keep names).
enum class Precision : std::uint8_t { fp32, tf32, fp16, bf16, amp_fp16, amp_bf16 };
// amp_fp16, amp_bf16: the mixed-precision recipes, which only framework workers run.
constexpr bool is_mixed_precision(Precision precision) {
  return precision == Precision::amp_fp16 || precision == Precision::amp_bf16;
}
enum class Phase : std::uint8_t { inference, training };
// Order and values are the cube's committed HDF5 enum `status_t`: never reorder.
enum class Status : std::uint8_t { not_run = 0, ok = 1, oom = 2, unsupported = 3, failed = 4, timeout = 5 };

std::string_view to_string(Precision precision);
// The recipe a precision names, as every engine's `decisions` records it:
// "recipe=pure-bf16 (bf16 weights, activations, gradients; fp32 accumulation,
// loss and batch-norm statistics)". One text per precision, here only, so that
// the cube's rows say the same thing in every engine (the framework workers
// carry the same texts in src/workers/common/recipes.py; a test compares them).
std::string_view recipe_of(Precision precision);
// Why a native engine answers `unsupported` for amp-fp16/amp-bf16: it keeps no
// fp32 master copy of the weights, so it runs `pure` (its 16-bit recipe) instead.
std::string mixed_precision_refusal(Precision precision, std::string_view engine, std::string_view pure);
std::string_view to_string(Phase phase);
std::string_view to_string(Status status);
std::optional<Precision> precision_from_string(std::string_view name);
std::optional<Phase> phase_from_string(std::string_view name);
std::optional<Status> status_from_string(std::string_view name);
const std::vector<std::string>& precision_names();
const std::vector<std::string>& phase_names();
const std::vector<std::string>& status_names();

// One (engine, network, precision, batch, phase, gpus, replica) on the device
// of the rank that runs it: with the device key, a cell of DESIGN.md.
struct CellSpec {
  std::string engine;
  std::string network;
  Precision precision = Precision::fp32;
  std::int64_t batch = 1;  // images per step
  Phase phase = Phase::inference;
  int replica = 0;         // 0 .. replicas-1: the same cell on distinct devices of one key
  // Devices of one key training it together (data parallel); `batch` is per
  // device. After `replica` so that positional initialisers written before
  // the gpus axis ({..., phase, replica}) keep their meaning.
  int gpus = 1;
  bool operator==(const CellSpec&) const = default;
};

// "onednn/resnet50/fp32/b64/training/r0", with "/g4" before the replica when
// gpus > 1: stable, used in logs and the journal.
[[nodiscard]] std::string describe(const CellSpec& cell);
// Whether `describe(cell)` is selected by a --filter (an ECMAScript regular
// expression, checked when the options were parsed); an empty filter selects every cell.
[[nodiscard]] bool cell_selected(const std::string& filter, const CellSpec& cell);

// The key of a cell within a run: "<device key>|<describe(cell)>". The one
// name of a cell for the journal, the plan, resume, calibration and the cube
// (its layer-time index).
[[nodiscard]] std::string cell_key(const std::string& device_key, const CellSpec& cell);

// The axes of a job's matrix ([matrix] of the job file).
struct MatrixOptions {
  std::vector<std::string> networks;
  std::vector<std::string> engines;  // may hold "auto": each device's native engine
  std::vector<Precision> precisions;
  std::vector<std::int64_t> batches;
  std::vector<Phase> phases;
  std::vector<int> gpus{1};  // data-parallel group sizes; > 1 applies to training only
};

// The cells of `matrix` run by `engines` (its engines resolved for one device:
// no "auto"), `replicas` of each, in matrix order: engine, network, precision,
// batch, phase, gpus, replica (the innermost). The one expansion of the matrix
// (run's plan and `check`).
[[nodiscard]] std::vector<CellSpec> expand_matrix(const MatrixOptions& matrix, const std::vector<std::string>& engines,
                                                  int replicas);

// What a cell's failure records: its status and message.
struct CellFailure {
  Status status = Status::failed;
  std::string message;
};
// The one mapping from an exception thrown while preparing, measuring or
// checking a cell to its status (DESIGN.md "Measurement"): Unsupported →
// unsupported, CellInterrupted (a stop) → not_run, CellTimeout → timeout,
// OutOfMemory and std::bad_alloc → oom, anything else → failed. Used by `run`
// (the Runner) and `check`.
[[nodiscard]] CellFailure cell_failure(std::exception_ptr thrown);

}  // namespace crossbench
