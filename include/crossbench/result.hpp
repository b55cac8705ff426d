// The result of one cell: what a rank sends to rank 0 and what the cube stores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "crossbench/cell.hpp"
#include "crossbench/layer_time.hpp"
#include "crossbench/statistics.hpp"

namespace crossbench {

struct CellResult {
  std::string device_key;
  CellSpec cell;
  Status status = Status::not_run;
  Statistics statistics;                   // NaN unless status == ok
  double images_per_s = not_a_number;      // batch / median [images/s]
  double tflops = not_a_number;            // FLOPs per step / median [TFLOP/s]
  double peak_memory_bytes = not_a_number; // [bytes]; a double so that "unknown" is NaN
  double energy_j_per_image = not_a_number;// [J/image], NaN without an energy counter
  double mean_sm_clock_mhz = not_a_number; // [MHz], NaN without telemetry
  double min_sm_clock_mhz = not_a_number;  // [MHz] the lowest SM clock sampled, NaN without telemetry
  double mean_power_w = not_a_number;      // [W] mean board power, NaN without telemetry
  double max_temperature_c = not_a_number; // [°C] the hottest GPU temperature sampled, NaN without telemetry
  std::int8_t throttled = -1;              // 1 throttled, 0 not, -1 unknown
  // Data-parallel cells (gpus > 1): the median over timed steps of the time the
  // step waited for gradient all-reduces after its backward pass had finished,
  // the slowest rank's per step [ms]; NaN for single-device cells.
  double exposed_communication_ms = not_a_number;
  // throughput(g) / (g * throughput(1)) with the gpus = 1 cell of the same
  // coordinates in the same cube; set when the cube is assembled, NaN otherwise.
  double scaling_efficiency = not_a_number;
  std::vector<std::int32_t> group_ranks;   // data parallel: the ranks that trained together
  std::int32_t steps = 0;                  // timed steps measured
  std::int32_t rank = -1;                  // MPI rank that ran the cell
  // The run segment (one process group's lifetime: one mpirun or one resume)
  // that measured the cell: an index into the cube's /segments, set by rank 0
  // when the result arrives; -1 unknown (records of older journals). With
  // `rank` it names the /ranks row (segment, rank): the physical device.
  std::int32_t segment = -1;
  // Merged cubes: the input (/sources/source_<i>) the cell came from; -1 not merged.
  std::int32_t source = -1;
  std::string message;                     // why the cell is not ok; for ok cells, the stopping decision
  std::string decisions;                   // the engine's recorded decisions (SessionRecord::decisions)
  std::vector<double> samples_ms;          // every timed step [ms]
  // --repetitions: the median of each repetition, in run order [ms]; empty when measured once.
  std::vector<double> repetition_medians_ms;
  // Wall time of the cell (every status): when it started and ended (UTC,
  // ISO 8601 with milliseconds, "" unknown) and how long each part took [s],
  // NaN when the part did not happen or is unknown. preparation: prepare()
  // without the search; search: measured choices the engine reports
  // (SessionRecord::search_s, e.g. algorithm search, compilation); timed:
  // warm-up, timed steps and the output check.
  std::string versions;                    // SessionRecord::versions: a worker's framework versions (JSON object text)
  std::string started_utc;
  std::string finished_utc;
  double preparation_s = not_a_number;
  double search_s = not_a_number;
  double timed_s = not_a_number;
  // --layer-times: per layer in network order, from a profiling pass after the
  // timed steps (never part of them); empty when not asked for, when the cell
  // is not ok, or when the engine cannot profile. Cube: group /layer_times.
  std::vector<LayerTime> layer_times;
};

nlohmann::json to_json(const CellResult& result);
[[nodiscard]] CellResult cell_result_from_json(const nlohmann::json& json);  // throws Error on a malformed record

}  // namespace crossbench
