// The options of `crossbench run`, `plan`, `check`, `merge`, `list`,
// `describe` and `export-network`, one struct per command: what every command
// reads of a job (JobOptions: the matrix, the measurement and engine settings,
// the cell filter, the recorded settings) and, derived from it, each command's
// own flags (RunOptions, PlanOptions, CheckOptions); merge, list, describe and
// export-network read no job (MergeOptions, ListOptions, DescribeOptions,
// ExportNetworkOptions: their flags and their positional words).
// Parsed once from the job file and the command line (src/app/options.hpp),
// filled by the options schema's rows (each row names the field it fills:
// include/crossbench/options_schema.hpp), passed by const reference; a layer
// that needs less takes JobOptions or the few fields it reads.
//
// Every initialiser below is its schema row's default (held to it by
// tests/core/options_schema_test.cpp), so that a value-initialised struct
// (tests, the plan's own callers) means what an empty job file and command
// line mean.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crossbench/cell.hpp"
#include "crossbench/engine_config.hpp"
#include "crossbench/measure.hpp"

namespace crossbench {

// What every command that expands a job's matrix reads.
struct JobOptions {
  std::filesystem::path job_file;   // --job: the job file read (absolute)
  std::string job_text;             // its full text, recorded in the cube
  std::string job_name;             // file stem: "quick"
  MatrixOptions matrix;             // [matrix]
  MeasureOptions measure;           // [measure]
  EngineConfig engine;              // [engine], [measure] seed/update/learning_rate; threads: set per rank
  std::filesystem::path output;     // [output] path or run's --output: the cube (<output> in engine.compile_cache)
  std::string device_tag;           // --device-tag, else CROSSBENCH_DEVICE_TAG
  int replicas = 1;                 // --replicas
  std::string cell_filter;          // --filter: ECMAScript regular expression over describe(cell); empty = all
  std::string first_cells;          // --first: the cells (a regular expression, as --filter) taken first; empty = none
  std::string command_line;         // as typed, recorded in the cube
  // The canonical value of every schema key (options_schema.hpp), defaults
  // included: "measure.warmup" -> "10", "--replicas" -> "1". The journal header
  // and the cube attributes are written from it (recorded_settings()).
  std::map<std::string, std::string> settings;
};

// `crossbench run`: the job, where its cube goes, and how the run behaves.
struct RunOptions : JobOptions {
  bool output_from_command_line = false;  // --output (its directory must exist) or the job file's path
  bool quiet = false;               // --quiet
  bool resume = false;              // --resume: skip the cells the journal holds
  bool overwrite = false;           // --overwrite: replace an existing cube and journal
  bool allow_new_devices = false;   // --allow-new-devices: a resume may add device keys the journal lacks
  bool bind_near_gpu = false;       // --bind-near-gpu: the rank's threads on the cores nearest its GPU (hwloc)
  bool allow_build_change = false;  // --allow-build-change: a resume may run another revision or library versions (recorded)
  bool allow_setting_change = false;  // --allow-setting-change: a resume may change an engine-scoped setting (that engine's cells run again)
  bool salvage = false;             // --salvage: a resume may rebuild a damaged journal header (journal.hpp)
  double checkpoint_s = 60;         // --checkpoint-s: rank 0 rewrites the cube this often [s]
  double stop_grace_s = 120;        // --stop-grace-s: after a stop signal, the running cell may finish this long [s]
  double heartbeat_s = 30;          // --heartbeat-s: a line on stderr this often while a cell runs [s]; 0: none
  // measure.layer_times: the slowest layers printed per cell after the table; 0: every layer (layer_times = all).
  int layer_times_shown = 10;
  std::filesystem::path jsonl;      // --jsonl: one JSON line per finished cell; empty = none
};

// `crossbench plan`: the job, and for which ranks and with which estimates.
struct PlanOptions : JobOptions {
  bool json = false;                // --json
  std::vector<std::filesystem::path> calibrate;  // --calibrate CUBE.h5,...: recorded wall times (cluster/calibration.hpp)
  int simulated_ranks = 0;          // --ranks N (0: the MPI world)
  std::string device_json;          // --device-json FILE
};

// `crossbench check`: the job, and where the framework workers run.
struct CheckOptions : JobOptions {
  bool workers_on_cpu = false;      // --cpu
};

// `crossbench merge A.h5 B.h5 ... -o ALL.h5`: no job; the input cubes are its positional words.
struct MergeOptions {
  std::vector<std::filesystem::path> inputs;  // the input cubes, in command-line order
  std::filesystem::path output;     // -o/--output: the merged cube (required)
  std::string prefer;               // --prefer first|last|FILE; empty: a cell several inputs hold is refused
  bool strict = false;              // --strict: refuse what would only be warned about
  bool overwrite = false;           // --overwrite: replace an existing output
};

// `crossbench list networks|engines|devices|options|precisions`: the list is its one positional word.
struct ListOptions {
  std::string topic;                // networks, engines, devices, options or precisions
  bool json = false;                // --json
};

// `crossbench describe NETWORK`: no flag but --help; the network is its one positional word.
struct DescribeOptions {
  std::string network;              // one of crossbench list networks
};

// `crossbench export-network NETWORK [--output FILE [--force]]`: the network is its one positional word.
struct ExportNetworkOptions {
  std::string network;              // one of crossbench list networks
  std::filesystem::path output;     // -o/--output: the JSON's file; empty: stdout
  bool force = false;               // --force: replace an existing FILE
};

}  // namespace crossbench
