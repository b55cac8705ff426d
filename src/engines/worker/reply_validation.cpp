#include "engines/worker/reply_validation.hpp"

#include <cmath>
#include <utility>
#include <vector>

namespace crossbench {
namespace {

using nlohmann::json;

enum class Kind { string, long_string, number_or_null, boolean, integer, number_list };

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::string: return "a string";
    case Kind::long_string: return "a string";
    case Kind::number_or_null: return "a number or null";
    case Kind::boolean: return "true or false";
    case Kind::integer: return "an integer";
    case Kind::number_list: return "a list of numbers (or nulls)";
  }
  return "?";
}

std::string type_of(const json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number()) return "a number";
  if (value.is_null()) return "null";
  if (value.is_array()) return "a list";
  return "an object";
}

bool has_kind(const json& value, Kind kind) {
  switch (kind) {
    case Kind::string: return value.is_string() && value.get_ref<const std::string&>().size() <= kMaxWorkerTextBytes;
    case Kind::long_string: return value.is_string();  // cut by bounded_message
    case Kind::number_or_null: return value.is_number() || value.is_null();
    case Kind::boolean: return value.is_boolean();
    case Kind::integer: return value.is_number_integer();
    case Kind::number_list:
      if (!value.is_array()) return false;
      for (const auto& item : value)
        if (!item.is_number() && !item.is_null()) return false;
      return true;
  }
  return false;
}

// Every reply field the engine reads, with its protocol type.
const std::vector<std::pair<const char*, Kind>>& reply_fields() {
  static const std::vector<std::pair<const char*, Kind>> fields{
      {"protocol", Kind::integer},         {"type", Kind::string},
      {"status", Kind::string},            {"message", Kind::long_string},
      {"framework", Kind::string},         {"stop_reason", Kind::string},
      {"decisions", Kind::string},         {"peak_memory_bytes", Kind::number_or_null},
      {"finite", Kind::boolean},           {"loss", Kind::number_or_null},
      {"logits_checksum", Kind::number_or_null}, {"gradient_norm", Kind::number_or_null},
      {"gradient_norms", Kind::number_list},
  };
  return fields;
}

}  // namespace

std::string reply_problem(const json& reply) {
  if (!reply.is_object()) return "the reply is " + type_of(reply) + ", not a JSON object";
  for (const auto& [name, kind] : reply_fields()) {
    if (!reply.contains(name) || has_kind(reply[name], kind)) continue;
    const json& value = reply[name];
    if (value.is_array() && kind == Kind::number_list)
      for (std::size_t i = 0; i < value.size(); ++i)
        if (!value[i].is_number() && !value[i].is_null())
          return std::string(name) + "[" + std::to_string(i) + "] is " + type_of(value[i]) + ", not a number";
    if (value.is_string() && kind == Kind::string)
      return std::string("field '") + name + "' is a string of " + std::to_string(value.get_ref<const std::string&>().size()) +
             " bytes; at most " + std::to_string(kMaxWorkerTextBytes) + " are accepted";
    return std::string("field '") + name + "' is " + type_of(value) + ", not " + kind_name(kind);
  }
  return {};
}

std::string steps_per_sample_problem(const json& reply) {
  if (!reply.contains("steps_per_sample")) return {};
  const json& value = reply["steps_per_sample"];
  if (!value.is_number_integer()) return "field 'steps_per_sample' is " + type_of(value) + ", not an integer";
  if (value.get<long long>() < 1 || value.get<long long>() > 1'000'000)
    return "field 'steps_per_sample' = " + value.dump() + " is not a step count from 1 to 1000000";
  return {};
}

std::string samples_problem(const json& reply, int steps_asked) {
  if (!reply.contains("samples_ms")) return "field 'samples_ms' is missing";
  const json& samples = reply["samples_ms"];
  if (!samples.is_array()) return "field 'samples_ms' is " + type_of(samples) + ", not a list of numbers";
  if (samples.size() > static_cast<std::size_t>(std::max(steps_asked, 0)))
    return "field 'samples_ms' holds " + std::to_string(samples.size()) + " step times; " +
           std::to_string(steps_asked) + " were asked for";
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const json& sample = samples[i];
    if (!sample.is_number()) return "samples_ms[" + std::to_string(i) + "] is " + type_of(sample) + ", not a number";
    const double value = sample.get<double>();
    if (!std::isfinite(value) || value < 0)
      return "samples_ms[" + std::to_string(i) + "] = " + sample.dump() + " is not a finite step time >= 0 ms";
  }
  return {};
}

std::string bounded_message(const json& reply) {
  if (!reply.is_object() || !reply.contains("message") || !reply["message"].is_string()) return {};
  const auto& message = reply["message"].get_ref<const std::string&>();
  if (message.size() <= kWorkerMessageBytes) return message;
  return message.substr(0, kWorkerMessageBytes) + " [... " + std::to_string(message.size() - kWorkerMessageBytes) +
         " more bytes]";
}

}  // namespace crossbench
