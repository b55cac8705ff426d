#pragma once
// Host wall time on the steady clock, for what is not a timed step: a cell's preparation and search,
// a worker's start, a communicator's waits. Timed steps are the StepTimer's (engine.hpp).
#include <chrono>

namespace crossbench {

// [s] since `start` on the steady clock.
[[nodiscard]] inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace crossbench
