// Where crossbench finds its data: the job files, the framework workers and
// the analysis command (DESIGN.md "Installed like an HPC tool").
//
// Found from the running binary's own path, never from where it was built:
//   - installed (cmake --install, a module tree): PREFIX/bin/crossbench reads
//     PREFIX/share/crossbench/{jobs,workers} and names PREFIX/bin/crossbench-report;
//   - a source tree (build/crossbench, a bundle's .bundle/bin/crossbench): the
//     nearest folder above the binary holding jobs/ and src/workers/;
//   - a binary still in the build folder it was made in (an out-of-tree build)
//     reads the source tree of that build.
#pragma once

#include <filesystem>
#include <string>

namespace crossbench {

struct DataPaths {
  std::filesystem::path jobs;     // the job files (quick.ini, seed2017.ini, ...)
  std::filesystem::path workers;  // the framework workers: common/, pytorch/, jax/ ({workers} in a worker command)
  std::string report_command;     // the analysis command line: ".../bin/crossbench-report" or ".../scripts/report"
  bool installed = false;         // the PREFIX/share/crossbench layout
};

// The paths of this process's binary (computed once). When nothing is found,
// they name where the installed layout would be, so that a missing file's
// message says where it was looked for.
const DataPaths& data_paths();

// The paths for a binary at `executable`, as data_paths() computes them (tests).
DataPaths data_paths_for(const std::filesystem::path& executable);

// A job file given as `--job PATH`: PATH itself when it exists (relative to the
// working directory); otherwise, for a bare name or jobs/NAME, the job of that
// name in data_paths().jobs, so that `--job jobs/seed2017.ini` works from any
// directory with an installed crossbench; otherwise PATH (reading it fails
// with a message naming it).
std::filesystem::path resolve_job_file(const std::filesystem::path& path);

}  // namespace crossbench
