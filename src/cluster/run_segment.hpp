// Run segments (DESIGN.md "Run segments"): one process group's lifetime, one
// mpirun or one resume. Rank 0 journals each segment when it starts (its ranks'
// devices, build, libraries, command line) and when it ends; every cell records
// the segment that measured it, so a resumed cube keeps who ran each cell, when
// and with what, and never only the last run's facts.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "crossbench/cube.hpp"
#include "crossbench/device.hpp"
#include "crossbench/options.hpp"
#include "cluster/mpi_session.hpp"

namespace crossbench {

struct RunSegment {
  // started, ended, command_line, crossbench_version, git_revision, the loaded
  // libraries (*_version), mpi_ranks, hosts, run_state, allowed_build_change.
  std::map<std::string, std::string> attributes;
  std::vector<Device> devices;  // rank order
};

// This process group's segment, started now: the command line as typed and
// whether it resumes a journal (run --resume) are what it records of the options.
[[nodiscard]] RunSegment start_segment(const std::string& command_line, bool resumed, const MpiSession& mpi,
                                       const std::vector<Device>& devices);

// The attributes that identify a build: the binary's revision and version and every
// library version it loaded (a segment's *_version attributes, except the GPU
// driver's, which belongs to the machine like the GPU itself: a requeue onto
// another node may meet another driver, and the ranks table records it).
std::map<std::string, std::string> build_identity(const std::map<std::string, std::string>& attributes);

// "git_revision is 'a' in segment 0, 'b' now" for each build fact that differs; empty when none.
std::vector<std::string> build_differences(const RunSegment& earlier, int earlier_index, const RunSegment& now);

// Journal records (cluster/journal.hpp): {"type": "segment", ...} when a segment
// starts, {"type": "segment_end", ...} when it ends; the segments of a journal's
// records, in order (an end record completes its segment's `ended` and `run_state`).
nlohmann::json segment_record(const RunSegment& segment, int index);
nlohmann::json segment_end_record(int index, const std::string& ended_utc, const std::string& run_state);
std::vector<RunSegment> segments_from_records(const std::vector<nlohmann::json>& records);

// The /ranks rows of a segment's devices.
std::vector<RankRecord> rank_records(const std::vector<Device>& devices, int segment);

}  // namespace crossbench
