// What a resumed run must share with the run that wrote the journal, beyond
// the matrix: every setting that changes the numbers, and the worker commands.
// A resume that changed any of them would mix two different measurements into
// one cube, so --resume refuses it, naming what differs (DESIGN.md "Resume").
#pragma once

#include <map>
#include <string>

#include "crossbench/options.hpp"

namespace crossbench {

// Every setting that changes the numbers, as "section.key" → its canonical
// text: the rows of the options schema (src/core/options_schema.cpp) marked
// `changes_numbers`. The journal header records them and --resume compares
// them key by key.
[[nodiscard]] std::map<std::string, std::string> resume_settings(const JobOptions& options);

// The worker command of each engine of the matrix that runs a worker, as
// "workers.<engine>" → the command's arguments joined by spaces.
[[nodiscard]] std::map<std::string, std::string> resume_worker_commands(const JobOptions& options);

}  // namespace crossbench
