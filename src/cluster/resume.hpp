// Resuming a run (DESIGN.md "Distribution", resume): rank 0 reads the
// journal, refuses one that does not belong to this run (naming each
// difference: matrix, a setting that changes the numbers, a worker command,
// the device keys), drops records outside this run's plan with a warning, and
// tells every rank which cells are done.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "crossbench/device.hpp"
#include "crossbench/options.hpp"
#include "crossbench/result.hpp"
#include "cluster/mpi_session.hpp"
#include "cluster/run_segment.hpp"

namespace crossbench {

struct ResumeState {
  std::vector<CellResult> earlier;       // rank 0: the journal's results that this run keeps
  std::set<std::string> done;            // every rank: their cell keys
  std::vector<std::string> new_devices;  // --allow-new-devices: keys this run adds to the journal
  std::vector<RunSegment> segments;      // rank 0: the journal's run segments, in order
  std::vector<std::string> build_changes;  // rank 0, --allow-build-change: how this build differs from the last segment's
  std::vector<std::string> setting_changes;  // rank 0, --allow-setting-change: each engine-scoped change, and what ran again
};

// Every rank calls it; without --resume it returns an empty state. Throws
// UsageError on every rank when the journal does not fit this run, or when
// this run's build (revision, library versions: build_identity) differs from
// the journal's last segment and --allow-build-change was not given. Another
// physical GPU of the same device key is accepted (a Slurm requeue): the new
// segment records it.
[[nodiscard]] ResumeState agree_on_resume(const RunOptions& options, const MpiSession& mpi, const std::vector<Device>& devices,
                            const RunSegment& now);

[[nodiscard]] std::vector<std::string> device_keys_of(const std::vector<Device>& devices);

}  // namespace crossbench
