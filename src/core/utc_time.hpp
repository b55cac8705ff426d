// The one wall-clock time stamp of crossbench: a cell's start and end, a
// cube's creation (a run's and a merge's).
#pragma once

#include <string>

namespace crossbench {

// Now in UTC, ISO 8601 with milliseconds: "2026-12-01T04:05:06.789Z"
// (sorts as time; Python's datetime.fromisoformat reads it).
[[nodiscard]] std::string utc_now();

}  // namespace crossbench
