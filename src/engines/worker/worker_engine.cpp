#include "engines/worker/worker_engine.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <nlohmann/json.hpp>

#include "crossbench/clock.hpp"
#include "crossbench/error.hpp"
#include "crossbench/synthetic.hpp"
#include "engines/worker/prepare_request.hpp"
#include "engines/worker/reply_validation.hpp"
#include "engines/worker/subprocess.hpp"

namespace crossbench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Beyond the cell's limit, a silent worker gets a quarter of that limit (5 to
// 60 s) to answer before it is declared hung.
double grace_seconds(double limit_s) { return std::clamp(0.25 * limit_s, 5.0, 60.0); }

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(seconds, 1.0)));
}

// A time limit as people write it: "5", "2.5", "0.125" [s], not "5.000000".
std::string seconds_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", seconds);
  return text;
}

class WorkerEngine;

// Its steps run in the worker process: the Runner drives them through RemoteSteps.
class WorkerSession final : public Session, public RemoteSteps {
 public:
  // `preparation`: where the cell's untimed preparation went on this side of the protocol (the worker's
  // decisions break its own share down further, e.g. compile=), kept after the worker's decisions.
  WorkerSession(WorkerEngine& engine, double peak_bytes, std::string versions, std::string preparation)
      : engine_(engine), peak_bytes_(peak_bytes), preparation_(std::move(preparation)) {
    record_.versions = std::move(versions);
    record_.decisions = preparation_;
  }
  ~WorkerSession() override;
  void step() override { throw Error("a worker session runs its steps in batches (RemoteSteps::run_steps); step() is not used"); }
  StepTimer& timer() override { return unused_timer_; }
  MemoryUse memory() const override { return {static_cast<std::int64_t>(peak_bytes_)}; }
  OutputCheck check() override;
  RemoteBatch run_steps(int count, double seconds_left, bool warmup) override;
  RemoteSteps* remote_steps() override { return this; }

 private:
  WorkerEngine& engine_;
  double peak_bytes_;
  std::string preparation_;
  SteadyClockTimer unused_timer_;
};

// "worker_start=2.31s(new process: spawn to hello) worker_prepare=37.80s": the two parts of a worker cell's
// preparation_s that crossbench sees, both untimed. A fresh worker's start is the interpreter, the framework's
// imports and its device's first use, paid again by every cell under engine.worker_per_cell.
std::string preparation_text(bool started, double start_s, double prepare_s) {
  char text[160];
  std::snprintf(text, sizeof text, "worker_start=%.2fs(%s) worker_prepare=%.2fs", start_s,
                started ? "new process: spawn to hello" : "running worker", prepare_s);
  return text;
}

class WorkerEngine final : public Engine {
 public:
  WorkerEngine(std::string name, const Device& device, const EngineConfig& config, WorkerSettings settings)
      : name_(std::move(name)), device_(device), config_(config), settings_(std::move(settings)) {}
  ~WorkerEngine() override {
    if (worker_) {
      try {
        worker_->write_line(json{{"protocol", kWorkerProtocol}, {"type", "exit"}}.dump());
      } catch (const std::exception&) {
      }
    }
  }

  std::string_view name() const override { return name_; }
  DeviceKind device_kind() const override { return device_.kind; }
  bool runs_on(DeviceKind) const override { return true; }  // the worker says what it can do
  Support supports(const Device&, const CellSpec&) const override { return Support::yes(); }

  std::unique_ptr<Session> prepare(const Network& network, const CellSpec& cell, Communicator* communicator) override {
    if (communicator != nullptr) return nullptr;  // workers train on one device
    const auto start = Clock::now();
    const bool started = start_if_needed();
    const double start_s = seconds_since(start);  // [s]
    const auto prepare_start = Clock::now();
    const json request = prepare_request(network, cell, config_, kWorkerProtocol);
    json reply;
    try {
      reply = exchange(request, "prepared", after(settings_.timeout_s));
      raise_for_status(reply, "preparing " + describe(cell));
    } catch (...) {
      end_of_cell();  // a cell that could not be prepared (oom, unsupported) ends here too
      throw;
    }
    const auto& peak = reply.contains("peak_memory_bytes") ? reply["peak_memory_bytes"] : json();
    return std::make_unique<WorkerSession>(*this, peak.is_number() ? peak.get<double>() : NAN, versions_,
                                           preparation_text(started, start_s, seconds_since(prepare_start)));
  }

  // One request, one reply of the expected type; any protocol failure costs the
  // worker (killed, restarted for the next cell) and throws with its stderr tail.
  json exchange(const json& request, const std::string& expected_type, Clock::time_point deadline) {
    if (!worker_) throw Error("worker '" + name_ + "' is not running");
    worker_->write_line(request.dump());
    std::string line;
    switch (worker_->read_line(line, deadline)) {
      case Subprocess::ReadOutcome::deadline:
        discard("did not answer '" + request.value("type", "") + "' in time", /*timeout=*/true);
      case Subprocess::ReadOutcome::end_of_file:
        worker_->wait_for_exit(std::chrono::seconds(5));  // its output ended: let it finish dying
        discard("ended while answering '" + request.value("type", "") + "' (" + worker_->exit_description() + ")");
      case Subprocess::ReadOutcome::line:
        break;
    }
    json reply;
    try {
      reply = json::parse(line);
    } catch (const json::exception&) {
      discard("answered with a line that is not JSON: '" + line.substr(0, 200) + "'");
    }
    if (const std::string problem = reply_problem(reply); !problem.empty())
      discard("answered '" + request.value("type", "") + "' with a malformed reply: " + problem);
    if (reply.value("protocol", -1) != kWorkerProtocol || reply.value("type", "") != expected_type)
      discard("answered '" + line.substr(0, 200) + "' where a protocol " + std::to_string(kWorkerProtocol) + " '" +
              expected_type + "' reply was due");
    return reply;
  }

  // Turns a reply's status into the cell's outcome.
  void raise_for_status(const json& reply, const std::string& what) {
    const std::string status = reply.value("status", "");
    const std::string message = name_ + " worker, " + what + ": " + bounded_message(reply);
    if (status == "ok") return;
    if (status == "oom") throw OutOfMemory(message);
    if (status == "unsupported") throw Unsupported(message);
    if (status == "failed") throw Error(message);
    discard("answered with unknown status '" + status + "'");
  }

  [[noreturn]] void discard(const std::string& what, bool timeout = false) {
    std::string tail = worker_ ? worker_->stderr_tail() : std::string{};
    worker_.reset();  // kills the whole process group; the next cell starts a fresh worker
    const std::string message = "worker '" + name_ + "' " + what + (tail.empty() ? "" : "; its stderr ended with:\n" + tail);
    if (timeout) throw CellTimeout(message);
    throw Error(message);
  }

  const WorkerSettings& settings() const { return settings_; }

  // engine.worker_per_cell: the worker's process ends with its cell, so that
  // nothing it keeps for its life (cudnn.benchmark's choices, allocator pools,
  // compiled graphs, a preallocated GPU arena) reaches the next cell, as when
  // a framework's users run one configuration per process. It is asked to
  // exit, given a few seconds, then its process group is killed.
  void end_of_cell() {
    if (!settings_.process_per_cell || !worker_) return;
    try {
      worker_->write_line(json{{"protocol", kWorkerProtocol}, {"type", "exit"}}.dump());
      worker_->wait_for_exit(std::chrono::seconds(10));
    } catch (const std::exception&) {
      // gone already: nothing to ask
    }
    worker_.reset();
  }

 private:
  // Whether it started a new process (false: the running worker serves the cell).
  bool start_if_needed() {
    if (worker_ && worker_->running()) return false;
    std::map<std::string, std::string> environment{{"PYTHONUNBUFFERED", "1"},
                                                   {"OMP_NUM_THREADS", std::to_string(std::max(1, config_.threads))},
                                                   {"CROSSBENCH_WORKER_ENGINE", name_}};
    // Where this binary is: the JAX worker looks there for libcrossbench_jax_events.so, which CMake
    // builds next to it (a build folder, a bundle's bin/); an installed worker finds it next to itself.
    std::error_code unreadable;
    const auto binary = std::filesystem::read_symlink("/proc/self/exe", unreadable);
    if (!unreadable) environment["CROSSBENCH_BINARY_DIR"] = binary.parent_path().string();
    // The rank's device binding: the worker sees exactly the rank's GPU, or no GPU at all.
    environment["CUDA_VISIBLE_DEVICES"] = device_.kind == DeviceKind::gpu ? device_.uuid : "";
    try {
      worker_ = std::make_unique<Subprocess>(settings_.command, environment);
    } catch (const Error& error) {
      throw Unsupported(std::string(error.what()) + "; install the interpreter or set [workers] " + name_ +
                        " = <command> in the job file");
    }
    std::string line;
    // Starting counts against the cell's time limit like everything else the cell waits for.
    const auto outcome = worker_->read_line(line, after(settings_.timeout_s));
    if (outcome != Subprocess::ReadOutcome::line) {
      if (outcome == Subprocess::ReadOutcome::end_of_file) worker_->wait_for_exit(std::chrono::seconds(5));
      const std::string tail = worker_->stderr_tail();
      const std::string state = worker_->exit_description();
      worker_.reset();
      if (outcome == Subprocess::ReadOutcome::deadline)
        throw CellTimeout("worker '" + name_ + "' did not say hello within the cell time limit of " +
                          seconds_text(settings_.timeout_s) + " s" + (tail.empty() ? "" : "; stderr:\n" + tail));
      throw Error("worker '" + name_ + "' did not say hello (" + state + ")" + (tail.empty() ? "" : "; stderr:\n" + tail));
    }
    json hello;
    try {
      hello = json::parse(line);
    } catch (const json::exception&) {
      discard("said '" + line.substr(0, 200) + "' instead of a JSON hello");
    }
    if (const std::string problem = reply_problem(hello); !problem.empty()) discard("said a malformed hello: " + problem);
    if (hello.value("type", "") != "hello") discard("said '" + line.substr(0, 200) + "' instead of hello");
    if (hello.value("protocol", -1) != kWorkerProtocol) {
      worker_.reset();
      throw Error("worker '" + name_ + "' speaks protocol " + hello.value("protocol", json(-1)).dump() +
                  "; this crossbench speaks protocol " + std::to_string(kWorkerProtocol) +
                  ": update the worker or crossbench so both match");
    }
    if (hello.value("status", "ok") == "unsupported") {
      const std::string message = bounded_message(hello);
      worker_.reset();
      throw Unsupported("worker '" + name_ + "' cannot run here: " + message);
    }
    framework_ = hello.value("framework", "");
    // Optional `versions` object (README "Worker protocol"): every library the
    // framework runs on; a worker without it is recorded by its `framework` text.
    const json versions = hello.value("versions", json::object());
    versions_ = versions.is_object() && !versions.empty() ? versions.dump() : json{{"framework", framework_}}.dump();
    return true;
  }

  std::string name_;
  Device device_;
  EngineConfig config_;
  WorkerSettings settings_;
  std::unique_ptr<Subprocess> worker_;
  std::string framework_;
  std::string versions_;  // JSON object text, from the hello
};

WorkerSession::~WorkerSession() {
  // A worker that ends with its cell (engine.worker_per_cell) frees everything by ending: asking it to
  // release first would only add the framework's teardown (torch._dynamo.reset() and a collection of
  // the compiled graphs) to every cell's wall time. A worker that serves the next cell releases this one.
  if (!engine_.settings().process_per_cell) {
    try {
      engine_.exchange(json{{"protocol", kWorkerProtocol}, {"type", "release"}}, "released",
                       after(grace_seconds(engine_.settings().timeout_s)));
    } catch (const std::exception&) {
      // The worker was discarded (and will be restarted); nothing else to free.
    }
  }
  engine_.end_of_cell();
}

RemoteBatch WorkerSession::run_steps(int count, double seconds_left, bool warmup) {
  const json request{{"protocol", kWorkerProtocol}, {"type", "steps"},
                     {"count", count},             {"warmup", warmup},
                     {"time_limit_s", std::max(seconds_left, 0.0)}};
  const double limit_s = engine_.settings().timeout_s;
  const json reply = engine_.exchange(request, "stepped", after(seconds_left + grace_seconds(limit_s)));
  engine_.raise_for_status(reply, warmup ? "warming up" : "running timed steps");
  // At most the steps asked for, each a finite time >= 0 (reply_validation.hpp names the bad field).
  if (const std::string problem = samples_problem(reply, count); !problem.empty())
    engine_.discard("sent malformed step times: " + problem);
  if (const std::string problem = steps_per_sample_problem(reply); !problem.empty())
    engine_.discard("sent a malformed batch: " + problem);
  RemoteBatch batch;
  for (const auto& sample : reply["samples_ms"]) batch.samples_ms.push_back(sample.get<double>());
  batch.steps_per_sample = reply.value("steps_per_sample", 1);
  if (reply.contains("peak_memory_bytes") && reply["peak_memory_bytes"].is_number())
    peak_bytes_ = reply["peak_memory_bytes"].get<double>();
  if (reply.contains("decisions")) {
    const std::string decisions = reply["decisions"].get<std::string>();
    record_.decisions = decisions.empty() ? preparation_ : decisions + " " + preparation_;
  }
  return batch;
}

OutputCheck WorkerSession::check() {
  const json reply = engine_.exchange(json{{"protocol", kWorkerProtocol}, {"type", "check"}}, "checked",
                                      after(engine_.settings().timeout_s));
  engine_.raise_for_status(reply, "checking the outputs");
  const auto number = [&](const char* key) {
    return reply.contains(key) && reply[key].is_number() ? reply[key].get<double>() : NAN;
  };
  OutputCheck check;
  check.finite = reply.value("finite", false);
  check.loss = number("loss");
  check.logits_checksum = number("logits_checksum");
  check.gradient_norm = number("gradient_norm");
  if (reply.contains("gradient_norms"))
    for (const auto& norm : reply["gradient_norms"]) check.gradient_norms.push_back(norm.is_number() ? norm.get<double>() : NAN);
  return check;
}

}  // namespace

std::unique_ptr<Engine> make_worker_engine(const std::string& name, const Device& device, const EngineConfig& config,
                                           const WorkerSettings& settings) {
  return std::make_unique<WorkerEngine>(name, device, config, settings);
}

}  // namespace crossbench
