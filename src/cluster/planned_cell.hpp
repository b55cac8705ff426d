// One cell of the plan: where it runs and what it is estimated to cost.
// Its own header so that the plan (plan.hpp) and `plan --calibrate`
// (calibration.hpp), which sets its estimate, both use it without including
// each other.
#pragma once

#include <string>
#include <vector>

#include "crossbench/cell.hpp"
#include "cluster/cost_model.hpp"

namespace crossbench {

// Where a cell's estimate comes from (PlannedCell::estimate_source).
inline constexpr const char* kEstimateModel = "model";
inline constexpr const char* kEstimateRecorded = "recorded";
inline constexpr const char* kEstimateScaledModel = "scaled model";
// A recorded preparation of the same engine, network and phase + the model's steps (scaled).
inline constexpr const char* kEstimateRecordedPreparation = "recorded preparation";

struct PlannedCell {
  std::string device_key;
  CellSpec cell;
  int rank = 0;              // the rank that runs it (and reports it: the group's first rank)
  double estimated_s = 0;    // what the plan balances on [s]: the model, or plan --calibrate's estimate
  CellEstimate model;        // the cost model's estimate, in parts [s]
  std::string estimate_source = kEstimateModel;  // model, recorded or scaled model (calibration.hpp)
  // The key the run orders its cells by [s]: the model's estimate with empty caches (plan.cpp, ordering_seconds).
  double cold_cache_s = 0;
  // Data parallel (gpus > 1): the cell.gpus ranks that train it together, in
  // rank order (front() == rank); empty for a single-device cell.
  std::vector<int> group_ranks;
  int group_tag = 0;         // unique per data-parallel cell: the tag of its MPI group communicator
  // Set when the plan cannot give the cell what it needs (e.g. more ranks of
  // the device key than the run has): the cell is recorded `unsupported` with it.
  std::string unrunnable_reason;
  bool taken_first = false;  // --first names it: the run takes it before the cells --first does not name
  bool data_parallel() const { return !group_ranks.empty(); }
};

}  // namespace crossbench
