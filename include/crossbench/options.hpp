// Options of `crossbench run` and `crossbench plan`: parsed once from the job
// file and the command line into this immutable struct, passed by const reference.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crossbench/cell.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/runner.hpp"

namespace crossbench {

struct MatrixOptions {
  std::vector<std::string> networks;
  std::vector<std::string> engines;  // may hold "auto": each device's native engine
  std::vector<Precision> precisions;
  std::vector<std::int64_t> batches;
  std::vector<Phase> phases;
  std::vector<int> gpus{1};  // data-parallel group sizes; > 1 applies to training only
};

struct Options {
  std::filesystem::path job_file;   // the job file read (absolute)
  std::string job_text;             // its full text, recorded in the cube
  std::string job_name;             // file stem: "quick"
  MatrixOptions matrix;
  MeasureOptions measure;
  EngineConfig engine;              // seed, update, learning rate (threads are set per rank)
  std::filesystem::path output;     // the cube
  bool output_from_command_line = false;  // --output (its directory must exist) or the job file's path
  std::string device_tag;           // --device-tag, else CROSSBENCH_DEVICE_TAG
  int replicas = 1;                 // --replicas
  bool quiet = false;
  bool resume = false;              // --resume: skip the cells the journal holds
  bool overwrite = false;           // --overwrite: replace an existing cube and journal
  bool allow_new_devices = false;   // --allow-new-devices: a resume may add device keys the journal lacks
  double checkpoint_s = 60;         // --checkpoint-s: rank 0 rewrites the cube this often [s]
  double stop_grace_s = 120;        // --stop-grace-s: after a stop signal, the running cell may finish this long [s]
  std::string command_line;         // as typed, recorded in the cube
};

// The keys a job file may hold, per section, with their one-line help.
const std::map<std::string, std::map<std::string, std::string>>& job_file_keys();

// Parses `crossbench run|plan` arguments (after the subcommand). Throws
// UsageError naming the offending file, key or value and the valid choices.
// `default_job` is used when --job is absent.
Options parse_run_options(const std::vector<std::string>& arguments, const std::filesystem::path& default_job,
                          const std::string& command_line);

// `run` only: refuses (UsageError) to touch an earlier run's cube or journal
// unless --resume or --overwrite says what to do with it.
void check_output_is_free(const Options& options);

// The help text of `crossbench run`.
std::string run_options_help();

}  // namespace crossbench
