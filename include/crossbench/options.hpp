// Options of `crossbench run`, `plan` and `check`: parsed once from the job
// file and the command line (src/app/options.hpp) into this immutable struct,
// passed by const reference.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crossbench/cell.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/measure.hpp"

namespace crossbench {

struct Options {
  std::filesystem::path job_file;   // the job file read (absolute)
  std::string job_text;             // its full text, recorded in the cube
  std::string job_name;             // file stem: "quick"
  MatrixOptions matrix;
  MeasureOptions measure;
  EngineConfig engine;              // shared settings and the engines' settings text (threads: set per rank)
  std::filesystem::path output;     // the cube
  bool output_from_command_line = false;  // --output (its directory must exist) or the job file's path
  std::string device_tag;           // --device-tag, else CROSSBENCH_DEVICE_TAG
  int replicas = 1;                 // --replicas
  bool quiet = false;
  bool resume = false;              // --resume: skip the cells the journal holds
  bool overwrite = false;           // --overwrite: replace an existing cube and journal
  bool allow_new_devices = false;   // --allow-new-devices: a resume may add device keys the journal lacks
  bool bind_near_gpu = false;       // --bind-near-gpu: the rank's threads on the cores nearest its GPU (hwloc)
  bool allow_build_change = false;  // --allow-build-change: a resume may run another revision or library versions (recorded)
  bool salvage = false;             // --salvage: a resume may rebuild a damaged journal header (journal.hpp)
  double checkpoint_s = 60;         // --checkpoint-s: rank 0 rewrites the cube this often [s]
  double stop_grace_s = 120;        // --stop-grace-s: after a stop signal, the running cell may finish this long [s]
  // --layer-times: the slowest layers printed per cell after the table; 0: every layer (--layer-times=all).
  int layer_times_shown = 10;
  double heartbeat_s = 30;          // --heartbeat-s: a line on stderr this often while a cell runs [s]; 0: none
  std::string command_line;         // as typed, recorded in the cube
  // The canonical value of every schema key (options_schema.hpp), defaults
  // included: "measure.warmup" -> "10", "--replicas" -> "1". The journal header
  // and the cube attributes are written from it (recorded_settings()).
  std::map<std::string, std::string> settings;
  std::string cell_filter;          // --filter: ECMAScript regular expression over describe(cell); empty = all
  std::filesystem::path jsonl;      // run --jsonl: one JSON line per finished cell; empty = none
  bool json = false;                // plan --json
  std::vector<std::filesystem::path> calibrate;  // plan --calibrate CUBE.h5,...: recorded wall times (cluster/calibration.hpp)
  int simulated_ranks = 0;          // plan --ranks N (0: the MPI world)
  std::string device_json;          // plan --device-json FILE
  bool workers_on_cpu = false;      // check --cpu
  bool help = false;                // --help / -h: print command_help() and exit 0
};

// Whether `describe(cell)` is selected by --filter.
[[nodiscard]] bool cell_selected(const Options& options, const CellSpec& cell);

}  // namespace crossbench
