// What rank 0 prints: one line per finished cell with progress and ETA, and the final table.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "crossbench/result.hpp"

namespace crossbench {

// Fixed-width columns shared by the progress lines and the table.
std::string result_header();
std::string result_row(const CellResult& result);

class Progress {
 public:
  Progress(std::ostream& out, std::size_t total_cells, double estimated_total_s, bool quiet);
  // Prints "[k/n] <row>  ETA 1m05s"; `estimated_s` is the finished cell's planned cost.
  void finished(const CellResult& result, double estimated_s);

 private:
  std::ostream& out_;
  std::size_t total_cells_;
  std::size_t done_cells_ = 0;
  double estimated_total_s_;
  double estimated_done_s_ = 0;
  bool quiet_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

std::string format_duration(double seconds);
void print_table(std::ostream& out, const std::vector<CellResult>& results);
// --layer-times: per cell, its layers sorted by forward + backward time, with
// each layer's share of the profiled step (the sum over the cell's layers).
void print_layer_times(std::ostream& out, const std::vector<CellResult>& results, int repetitions);

}  // namespace crossbench
