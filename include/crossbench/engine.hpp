// The engine interface (DESIGN.md "Engine interface"): what executes a network.
//
// Engines never decide how many steps to run or how to summarise them: the
// Runner owns measurement. Engines are created by the explicit registry in
// src/engines/registry.cpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "crossbench/cell.hpp"
#include "crossbench/communicator.hpp"
#include "crossbench/device.hpp"
#include "crossbench/engine_config.hpp"
#include "crossbench/layer_time.hpp"
#include "crossbench/measure.hpp"
#include "crossbench/network.hpp"

namespace crossbench {

// Whether an engine can run a cell on a device, and why not.
struct Support {
  bool supported = true;
  std::string reason;  // set when !supported, e.g. "bf16 needs avx512_core_bf16; this CPU has avx2"
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// Device-side timer of one step. The Runner calls start(); step(); stop();
// elapsed_ms() for every timed step.
class StepTimer {
 public:
  virtual ~StepTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double elapsed_ms() = 0;  // waits until the stopped step has finished [ms]
  // Data-parallel sessions: how long the timed step waited, after its backward
  // pass, for gradient averages that computation did not hide [ms]; valid once
  // elapsed_ms() has returned the step's time. NaN for single-device sessions.
  virtual double exposed_communication_ms() { return std::numeric_limits<double>::quiet_NaN(); }
};

// For engines whose step() is synchronous on the host (CPU engines).
class SteadyClockTimer final : public StepTimer {
 public:
  void start() override { begin_ = std::chrono::steady_clock::now(); }
  void stop() override { end_ = std::chrono::steady_clock::now(); }
  double elapsed_ms() override { return std::chrono::duration<double, std::milli>(end_ - begin_).count(); }

 private:
  std::chrono::steady_clock::time_point begin_, end_;
};

struct MemoryUse {
  std::int64_t peak_bytes = 0;  // tensors, weights, gradients, workspaces of the session [bytes]
};

// Computed outside timing by Session::check(): one deterministic forward (and
// backward in training) on the synthetic batch with dropout mask step 0 and
// without changing the weights.
struct OutputCheck {
  bool finite = false;                 // logits, loss and gradients all finite
  double loss = 0;                     // mean softmax cross-entropy over the batch
  double logits_checksum = 0;          // sum of logits
  double gradient_norm = 0;            // L2 norm over all weight gradients (training), else NaN
  std::vector<double> gradient_norms;  // per trainable tensor, in layer order (weight, bias, gamma, beta)
};

// What a session records with its cell besides the measurements: plain facts
// the engine fills while preparing (a worker session also after its steps).
struct SessionRecord {
  // The engine's decisions, one line: e.g. the algorithm of every convolution
  // (forward, backward-data, backward-filter), the layout, whether the step is
  // a CUDA graph. Stored in the cube's `decisions`.
  std::string decisions;
  // Wall seconds of measured choices made while preparing (algorithm search,
  // autotuning, compilation), recorded apart from the rest of the preparation
  // (CellResult::search_s) [s]. NaN: the engine does not report it separately.
  double search_s = std::numeric_limits<double>::quiet_NaN();
  // The framework and library versions a worker session ran with, as a JSON
  // object's text ({"torch": "2.5.1", "cuda": "12.4"}); empty for native
  // engines, whose libraries are the cube's root attributes.
  std::string versions;
};

// A session whose steps run in another process (a framework worker) cannot be
// timed here step by step; it declares this capability (Session::remote_steps
// returns it), and the Runner asks it for
// `count` samples at a time (the batches of its stopping rule, so the protocol
// costs nothing per step) and gets back each sample's time per step [ms],
// measured with the framework's device timer; fewer than `count` when
// `seconds_left` [s] runs out first. A sample is one step, or the mean of
// `steps_per_sample` consecutive steps where the worker's timer costs more
// than a short step (the JAX worker's marks: nvbench's batch measurement).
// `warmup`: the steps are warm-up, their times are discarded. The Runner alone
// decides how many batches to ask for and when to stop.
struct RemoteBatch {
  std::vector<double> samples_ms;  // per sample: its time per step [ms]
  int steps_per_sample = 1;        // consecutive steps each sample averages
};
class RemoteSteps {
 public:
  virtual ~RemoteSteps() = default;
  [[nodiscard]] virtual RemoteBatch run_steps(int count, double seconds_left, bool warmup) = 0;
};

// One prepared network/batch/precision/phase on one device. The Runner times
// step() with timer(); it alone decides how many steps to run.
class Session {
 public:
  virtual ~Session() = default;
  virtual void step() = 0;  // one inference or training step; may be asynchronous
  virtual StepTimer& timer() = 0;
  virtual MemoryUse memory() const = 0;
  virtual OutputCheck check() = 0;
  // --layer-times: an extra profiling pass, outside the timed steps. Every op
  // of `repetitions` steps timed (device events or the steady clock around
  // it), raw and tagged (layer, stage); the Runner takes the medians
  // (layer_medians). No ops when the engine cannot profile.
  virtual OpSamples profile(int repetitions) { return {}; }
  // A declared capability: the session whose steps run in another process
  // returns its RemoteSteps, and the Runner asks it for batches of steps
  // instead of timing step(); nullptr (every in-process session): step() is timed.
  [[nodiscard]] virtual RemoteSteps* remote_steps() { return nullptr; }
  const SessionRecord& record() const { return record_; }

 protected:
  SessionRecord record_;  // filled by the engine
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string_view name() const = 0;
  // The device kinds this engine runs on; `engines = auto` picks the native one.
  virtual DeviceKind device_kind() const = 0;
  // Whether the engine can run on a kind of device at all (workers run on both).
  virtual bool runs_on(DeviceKind kind) const { return kind == device_kind(); }
  [[nodiscard]] virtual Support supports(const Device& device, const CellSpec& cell) const = 0;
  // Allocates everything the cell needs; throws OutOfMemory when an allocation fails.
  // With a `communicator`, data-parallel training (cell.gpus > 1): this rank
  // trains shard communicator->rank() of a global batch of
  // communicator->size() * cell.batch images (the synthetic images, labels and
  // dropout masks of those positions) and every step averages its weight
  // gradients over the group, in buckets of EngineConfig::bucket_bytes, before
  // the weight update; an engine that cannot returns nullptr (the cell is then
  // `unsupported`).
  [[nodiscard]] virtual std::unique_ptr<Session> prepare(const Network& network, const CellSpec& cell,
                                           Communicator* communicator = nullptr) = 0;
};

// The registry: every engine this build knows, whether or not it was built.
struct EngineInfo {
  std::string name;
  DeviceKind device_kind;
  bool built;               // compiled into this binary
  std::string description;  // one line; when !built, why (e.g. "built without cuDNN")
};
const std::vector<EngineInfo>& engine_catalog();
// What a built native engine says of a cell on a device, from the Device record alone (no device is
// touched): the cudnn engine's answer (capabilities, precisions, cuDNN's 2^31-element tensors), so
// that `plan` records the cells a run will refuse as the run does; yes for onednn (its bf16 depends on
// the ISA of the CPU it runs on, which a device record does not hold) and for any other name. `config`:
// the run's engine settings (cuDNN's engine.layout decides how the input batch is stored).
[[nodiscard]] Support native_engine_support(std::string_view name, const Device& device, const CellSpec& cell,
                                            const EngineConfig& config);
// The native engine of a device kind: cudnn (gpu), onednn (cpu).
std::string_view native_engine(DeviceKind kind);
// Creates a built engine for a rank's device: a native one from the catalogue,
// or a worker engine when config.settings has its [workers] command. Throws UsageError for
// a name that is neither; returns nullptr for a known engine not built into this binary.
[[nodiscard]] std::unique_ptr<Engine> make_engine(std::string_view name, const Device& device, const EngineConfig& config);
// Parses every engine's own settings out of config.settings as make_engine
// will, in every build, so that a bad value or combination is refused
// (UsageError) before anything runs.
void check_engine_settings(const EngineConfig& config);
// The framework workers (engines run as worker processes, src/engines/worker/),
// reached by the rest of crossbench only through these and make_engine:
// the built-in engine → command mapping (pytorch, pytorch-compile, jax;
// "{workers}" in a command stands for data_paths().workers, crossbench/data_paths.hpp);
std::map<std::string, std::string> default_worker_commands();
// a command line split on whitespace (no shell), "{workers}" expanded;
[[nodiscard]] std::vector<std::string> split_worker_command(const std::string& command);
// the key of a worker engine's command in EngineConfig::settings: "workers.pytorch".
[[nodiscard]] std::string worker_command_key(std::string_view name);
// Versions of the libraries of the built engines ("onednn_version" → "2.6.3"), for the cube's attributes.
std::vector<std::pair<std::string, std::string>> engine_library_versions();

}  // namespace crossbench
