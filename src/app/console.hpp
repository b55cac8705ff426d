// What rank 0 prints: one line per finished cell with progress and ETA, and the final table.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "crossbench/device.hpp"
#include "crossbench/result.hpp"

namespace crossbench {

// Device keys are long ("NVIDIA H200 (132 SMs, cc 9.0, 140 GiB) [power=300W]"):
// rows name them D0, D1, ... and the legend, printed once, says which is which
// with the full key and tag, hosts, ranks, UUIDs and versions.
class DeviceLegend {
 public:
  // `rank_devices[r]`: the device of rank r.
  explicit DeviceLegend(const std::vector<Device>& rank_devices);
  // "D3"; a key no rank has (a resumed run's) gets the next label.
  std::string label(const std::string& device_key);
  void print(std::ostream& out) const;

 private:
  struct Entry {
    std::string label;
    const Device* device = nullptr;  // the first rank's, nullptr for a key no rank has
    std::vector<int> ranks;
    std::vector<std::string> hosts, uuids;
  };
  std::vector<std::string> order_;
  std::map<std::string, Entry> entries_;
};

// Fixed-width columns shared by the progress lines and the table.
std::string result_header();
// `target_ci` (measure.target_ci): an ok cell whose CI half-width exceeds it is marked "*" in the ±ci% column.
std::string result_row(const CellResult& result, const std::string& device_label, double target_ci);

class Progress {
 public:
  Progress(std::ostream& out, DeviceLegend& legend, std::size_t total_cells, double estimated_total_s, bool quiet,
           double target_ci);
  // Prints "[k/n] <row>  ETA 1m05s"; `estimated_s` is the finished cell's planned cost.
  void finished(const CellResult& result, double estimated_s);

 private:
  std::ostream& out_;
  DeviceLegend& legend_;
  std::size_t total_cells_;
  std::size_t done_cells_ = 0;
  double estimated_total_s_;
  double estimated_done_s_ = 0;
  bool quiet_;
  double target_ci_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

std::string format_duration(double seconds);

// While a cell runs, a line on stderr every `period_s` (the progress stream):
// a cell can take minutes (a search, a compile, a slow device), and a run that
// prints nothing for that long looks hung. Every rank prints its own cell's
// (run --heartbeat-s; 0: none).
class Heartbeat {
 public:
  Heartbeat(double period_s, int rank, std::string cell);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;
};

// The analysis command to suggest in `next:` hints: the binary's own
// (crossbench/data_paths.hpp), relative to the working directory when inside it
// ("scripts/report" in a source tree).
std::string report_command();
void print_table(std::ostream& out, DeviceLegend& legend, const std::vector<CellResult>& results, double target_ci);
// --layer-times: per cell, its `shown` slowest layers (0: all) sorted by forward +
// backward time, with each layer's share of the profiled step (the sum over all
// the cell's layers), and one line for the rest.
void print_layer_times(std::ostream& out, const std::vector<CellResult>& results, int repetitions, int shown);

}  // namespace crossbench
