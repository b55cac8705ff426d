// The settings every engine is created with (EngineConfig): plain data, filled
// from the options schema (include/crossbench/options_schema.hpp binds its
// rows to these fields), so it lives in core beside the schema rather than
// with the Engine interface (engine.hpp) that consumes it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace crossbench {

enum class Update : std::uint8_t { none, sgd };

// Settings shared by all cells of a run, fixed when the engine is created:
// what every engine uses, typed, and the run's canonical settings as text,
// from which each engine parses its own settings type (in its own folder:
// src/engines/cudnn/cudnn_settings.hpp, src/engines/worker/worker_settings.hpp).
// The initialisers are the schema's defaults (a test holds them to it), so
// that a value-initialised config (tests, a Runner's own callers) means what an
// empty job file means.
struct EngineConfig {
  std::uint64_t seed = 42;        // measure.seed: synthetic weights, inputs, labels, dropout
  Update update = Update::none;   // measure.update: training applies the weight update in each step
  double learning_rate = 0.01;    // measure.learning_rate: sgd
  int threads = 1;                // CPU engines and workers: threads of the rank's binding (set per rank, not an option)
  // engine.bucket_mb in bytes: data-parallel gradients are all-reduced in
  // buckets of about this size (derived from its row: app/options.cpp derive_compound_values).
  std::int64_t bucket_bytes = 25LL << 20;
  // Canonical text by key: the single-valued job-file keys of the options
  // schema ("engine.layout" → "nhwc"), and the [workers] command of each worker
  // engine of the matrix ("workers.pytorch" → "python3 {workers}/pytorch/worker.py").
  std::map<std::string, std::string> settings;
  // The value of a schema key: settings' (checked against its schema row,
  // UsageError when outside it) or, when absent, the schema default.
  [[nodiscard]] std::string setting(const std::string& key) const;
};

}  // namespace crossbench
