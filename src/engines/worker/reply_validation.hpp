// The checks of a worker's reply that the worker engine applies before it
// reads a field: a worker is a separate program and is not trusted with the
// shape of what it sends (README "Workers", protocol).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace crossbench {

inline constexpr std::size_t kMaxWorkerTextBytes = std::size_t{1} << 20;  // [bytes] any text field
inline constexpr std::size_t kWorkerMessageBytes = 4096;                  // [bytes] kept of a message

// "" when every field the engine reads has its protocol type; else a sentence
// naming the first field that does not ("field 'status' is a number, not a string").
std::string reply_problem(const nlohmann::json& reply);

// "" when `samples_ms` is an array of at most `steps_asked` finite numbers >= 0
// (the Runner asks a worker for a batch of steps; it never gets more, so no
// worker can go past max_steps); else a sentence naming what is wrong.
std::string samples_problem(const nlohmann::json& reply, int steps_asked);
// A `stepped` reply's optional `steps_per_sample`: absent (1), or an integer >= 1.
std::string steps_per_sample_problem(const nlohmann::json& reply);

// The reply's `message`, cut to kWorkerMessageBytes ("" when absent).
std::string bounded_message(const nlohmann::json& reply);

}  // namespace crossbench
