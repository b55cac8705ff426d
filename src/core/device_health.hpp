// A CUDA error that poisons the context (a sticky error: a device-side trap,
// an illegal address) ends the rank's GPU work (DESIGN.md "Measurement"):
// the cell that met it is `failed`, the rank's remaining cells `not_run`,
// and the job finishes. The checked CUDA calls (core/cuda/cuda_check.hpp)
// mark the device lost here; the run loop reads it before each cell.
#pragma once

#include <string>

namespace crossbench::device_health {

// Records the first sticky error's text; later ones add nothing. Thread-safe.
void mark_lost(const std::string& why);
// Empty while the rank's device is usable; else the sticky error's text.
std::string lost();

}  // namespace crossbench::device_health
