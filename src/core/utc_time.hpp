// The one wall-clock time stamp of crossbench: a cell's start and end, a
// cube's creation (a run's and a merge's).
#pragma once

#include <string>

namespace crossbench {

// Now in UTC, ISO 8601 with milliseconds: "2026-12-01T04:05:06.789Z"
// (sorts as time; Python's datetime.fromisoformat reads it).
[[nodiscard]] std::string utc_now();

// Seconds from `started` to `finished`, both as utc_now() writes them (the
// fraction may have any number of digits or none); NaN when either is empty
// or not such a time (an old cube, a cell that never ran).
[[nodiscard]] double utc_seconds_between(const std::string& started, const std::string& finished);

}  // namespace crossbench
