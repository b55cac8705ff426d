// The results cube (DESIGN.md "The results cube"): HDF5, netCDF-4 compatible.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crossbench/result.hpp"

namespace crossbench {

// 3 added per-cell wall times, per-rank provenance columns and /sources (merged cubes);
// 4 added run segments: /segments, each cell's `segment` and `source`, and the
// /ranks columns `segment`, `source`, `cpu_set` and `numa_node` (every segment's ranks).
inline constexpr const char* cube_schema = "crossbench-cube/4";
// The schemas read_cube reads (a schema-2 cube reads with empty provenance and NaN wall times;
// a schema-2 or 3 cube with no segments and every cell's segment -1).
inline constexpr const char* cube_schemas_read[] = {"crossbench-cube/2", "crossbench-cube/3", "crossbench-cube/4"};

// The coordinates of the cube, in the order they appear on its axes.
struct CubeAxes {
  std::vector<std::string> devices;     // device keys
  std::vector<std::string> engines;
  std::vector<std::string> networks;
  std::vector<std::string> precisions;
  std::vector<std::int64_t> batches;
  std::vector<std::string> phases;
  std::vector<std::int32_t> gpus;       // data-parallel group sizes, 1 = single device
  std::vector<std::int32_t> replicas;   // 0 .. R-1
};

// One row of the /ranks group.
struct RankRecord {
  std::int32_t rank = 0;
  std::string host;
  std::string device_key;
  std::int32_t device_index = -1;
  std::string uuid;
  std::string pci_bus_id;
  double memory_bytes = 0;       // [bytes]
  double sm_clock_mhz = 0;       // [MHz]
  double memory_clock_mhz = 0;   // [MHz]
  double power_limit_w = 0;      // [W]
  std::string driver;
  std::int32_t threads = 0;      // CPU threads of the binding (CPU devices), else 0
  // Schema 3: the system description (Device's provenance fields).
  double application_sm_clock_mhz = 0;      // [MHz], 0: unknown
  double application_memory_clock_mhz = 0;  // [MHz], 0: unknown
  std::string clock_policy;
  std::string ecc;
  std::string cpu_model;
  std::string os;
  std::string kernel;
  std::string container;
  // Schema 4: the run segment whose rank this is (-1 unknown), and in a merged cube the input (-1 not merged).
  std::int32_t segment = -1;
  std::int32_t source = -1;
  // Schema 4: the CPUs the rank's process may run on (Linux list syntax, "0-3,8"), and the NUMA
  // node nearest its GPU (-1 unknown or no GPU).
  std::string cpu_set;
  std::int32_t numa_node = -1;
};

// One run segment: one process group's lifetime (one mpirun or one resume). Its
// attributes: started, ended, command_line, git_revision, crossbench_version, the
// libraries loaded (*_version), worker_versions, mpi_ranks, hosts, run_state,
// allowed_build_change; its ranks are the /ranks rows whose `segment` is its index.
// Written as group /segments/segment_<i>.
struct CubeSegment {
  std::map<std::string, std::string> attributes;
};

// One input of a merged cube (`crossbench merge`): its root attributes
// (schema, git revision, command line, library versions, ...) and its /ranks.
// Written as group /sources/source_<i>.
struct CubeSource {
  std::map<std::string, std::string> attributes;
  std::vector<RankRecord> ranks;
};

struct CubeContents {
  // Root attributes besides `schema` (written by the writer): created, command_line,
  // job_file, crossbench_version, git_revision, versions of libraries, ...
  std::map<std::string, std::string> attributes;
  CubeAxes axes;
  // Cells with a result; every other cell of the axes is `not_run`. A cell whose
  // coordinates are not on the axes is an error (Error naming the cell).
  std::vector<CellResult> cells;
  std::vector<RankRecord> ranks;    // schema 4: every segment's ranks (column `segment`)
  std::vector<CubeSegment> segments;  // schema 4: every run segment, in order
  std::vector<CubeSource> sources;  // merged cubes only
  std::string schema = cube_schema; // read_cube: the file's schema (write_cube writes cube_schema)
};

// Writes the whole cube to `path` atomically: a temporary file in the same
// directory, then rename(). Throws Error (naming the HDF5 call) on failure.
void write_cube(const std::filesystem::path& path, const CubeContents& contents);

// Reads a cube written by write_cube; refuses (Error) a file whose `schema`
// is not one of cube_schemas_read; `schema` says which it is. Returns only cells whose status is not `not_run`, samples without
// NaN padding.
[[nodiscard]] CubeContents read_cube(const std::filesystem::path& path);

}  // namespace crossbench
