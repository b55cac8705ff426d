// CellResult as JSON: the record a rank sends to rank 0 and one line of the
// journal. It must round-trip exactly: nlohmann prints doubles with the
// shortest text that parses back to the same bits; NaN (JSON has none) is
// written as null and ±infinity as the strings "Infinity" / "-Infinity".
#include "crossbench/result.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

using nlohmann::json;

json number_to_json(double value) {
  if (std::isnan(value)) return nullptr;
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

[[noreturn]] void malformed(const std::string& field, const std::string& why) {
  throw Error("malformed cell result record: field `" + field + "` " + why);
}

std::string type_of(const json& value) { return value.type_name(); }

const json& field_of(const json& record, const char* field) {
  const auto found = record.find(field);
  if (found == record.end()) malformed(field, "is missing");
  return *found;
}

double double_from_json(const json& value, const std::string& field) {
  if (value.is_null()) return not_a_number;
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  }
  malformed(field, "must be a number, null (NaN), \"Infinity\" or \"-Infinity\", not " + value.dump());
}

double read_double(const json& record, const char* field) {
  return double_from_json(field_of(record, field), field);
}

std::int64_t read_integer(const json& record, const char* field, std::int64_t lowest,
                          std::int64_t highest) {
  const json& value = field_of(record, field);
  if (!value.is_number_integer()) malformed(field, "must be an integer, not a " + type_of(value));
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    malformed(field, "is out of range: " + value.dump());
  const auto integer = value.get<std::int64_t>();
  if (integer < lowest || integer > highest)
    malformed(field, "is out of range [" + std::to_string(lowest) + ", " + std::to_string(highest) +
                         "]: " + std::to_string(integer));
  return integer;
}

std::string read_string(const json& record, const char* field) {
  const json& value = field_of(record, field);
  if (!value.is_string()) malformed(field, "must be a string, not a " + type_of(value));
  return value.get<std::string>();
}

template <typename Enum>
Enum read_name(const json& record, const char* field, std::optional<Enum> (*parse)(std::string_view)) {
  const std::string name = read_string(record, field);
  const std::optional<Enum> parsed = parse(name);
  if (!parsed) malformed(field, "has an unknown value \"" + name + "\"");
  return *parsed;
}

constexpr std::int64_t int32_highest = std::numeric_limits<std::int32_t>::max();

}  // namespace

nlohmann::json to_json(const CellResult& result) {
  const Statistics& statistics = result.statistics;
  json samples = json::array();
  for (const double sample : result.samples_ms) samples.push_back(number_to_json(sample));
  json layer_times = json::array();
  for (const LayerTime& time : result.layer_times)
    layer_times.push_back({{"layer", time.layer},
                           {"kind", time.kind},
                           {"forward_ms", number_to_json(time.forward_ms)},
                           {"backward_ms", number_to_json(time.backward_ms)}});
  return json{
      {"device_key", result.device_key},
      {"engine", result.cell.engine},
      {"network", result.cell.network},
      {"precision", to_string(result.cell.precision)},
      {"batch", result.cell.batch},
      {"phase", to_string(result.cell.phase)},
      {"gpus", result.cell.gpus},
      {"replica", result.cell.replica},
      {"status", to_string(result.status)},
      {"median_ms", number_to_json(statistics.median_ms)},
      {"mean_ms", number_to_json(statistics.mean_ms)},
      {"std_ms", number_to_json(statistics.std_ms)},
      {"min_ms", number_to_json(statistics.min_ms)},
      {"max_ms", number_to_json(statistics.max_ms)},
      {"p05_ms", number_to_json(statistics.p05_ms)},
      {"p95_ms", number_to_json(statistics.p95_ms)},
      {"ci_low_ms", number_to_json(statistics.ci_low_ms)},
      {"ci_high_ms", number_to_json(statistics.ci_high_ms)},
      {"images_per_s", number_to_json(result.images_per_s)},
      {"tflops", number_to_json(result.tflops)},
      {"peak_memory_bytes", number_to_json(result.peak_memory_bytes)},
      {"energy_j_per_image", number_to_json(result.energy_j_per_image)},
      {"mean_sm_clock_mhz", number_to_json(result.mean_sm_clock_mhz)},
      {"min_sm_clock_mhz", number_to_json(result.min_sm_clock_mhz)},
      {"mean_power_w", number_to_json(result.mean_power_w)},
      {"max_temperature_c", number_to_json(result.max_temperature_c)},
      {"exposed_communication_ms", number_to_json(result.exposed_communication_ms)},
      {"scaling_efficiency", number_to_json(result.scaling_efficiency)},
      {"group_ranks", result.group_ranks},
      {"throttled", result.throttled},
      {"steps", result.steps},
      {"rank", result.rank},
      {"segment", result.segment},
      {"source", result.source},
      {"message", result.message},
      {"decisions", result.decisions},
      {"samples_ms", std::move(samples)},
      {"repetition_medians_ms", [&] {
         json medians = json::array();
         for (const double median : result.repetition_medians_ms) medians.push_back(number_to_json(median));
         return medians;
       }()},
      {"layer_times", std::move(layer_times)},
      {"versions", result.versions},
      {"started_utc", result.started_utc},
      {"finished_utc", result.finished_utc},
      {"preparation_s", number_to_json(result.preparation_s)},
      {"search_s", number_to_json(result.search_s)},
      {"timed_s", number_to_json(result.timed_s)},
  };
}

CellResult cell_result_from_json(const nlohmann::json& record) {
  if (!record.is_object())
    throw Error("malformed cell result record: expected a JSON object, got a " + type_of(record));
  CellResult result;
  result.device_key = read_string(record, "device_key");
  result.cell.engine = read_string(record, "engine");
  result.cell.network = read_string(record, "network");
  result.cell.precision = read_name<Precision>(record, "precision", precision_from_string);
  result.cell.batch = read_integer(record, "batch", 1, std::numeric_limits<std::int64_t>::max());
  result.cell.phase = read_name<Phase>(record, "phase", phase_from_string);
  // Journals written before the gpus axis existed hold single-device cells.
  result.cell.gpus = record.contains("gpus") ? static_cast<int>(read_integer(record, "gpus", 1, int32_highest)) : 1;
  result.cell.replica = static_cast<int>(read_integer(record, "replica", 0, int32_highest));
  result.status = read_name<Status>(record, "status", status_from_string);

  Statistics& statistics = result.statistics;
  statistics.median_ms = read_double(record, "median_ms");
  statistics.mean_ms = read_double(record, "mean_ms");
  statistics.std_ms = read_double(record, "std_ms");
  statistics.min_ms = read_double(record, "min_ms");
  statistics.max_ms = read_double(record, "max_ms");
  statistics.p05_ms = read_double(record, "p05_ms");
  statistics.p95_ms = read_double(record, "p95_ms");
  statistics.ci_low_ms = read_double(record, "ci_low_ms");
  statistics.ci_high_ms = read_double(record, "ci_high_ms");
  result.images_per_s = read_double(record, "images_per_s");
  result.tflops = read_double(record, "tflops");
  result.peak_memory_bytes = read_double(record, "peak_memory_bytes");
  result.energy_j_per_image = read_double(record, "energy_j_per_image");
  result.mean_sm_clock_mhz = read_double(record, "mean_sm_clock_mhz");
  // Optional: records written before these were recorded have none (NaN).
  if (record.contains("min_sm_clock_mhz")) result.min_sm_clock_mhz = read_double(record, "min_sm_clock_mhz");
  if (record.contains("mean_power_w")) result.mean_power_w = read_double(record, "mean_power_w");
  if (record.contains("max_temperature_c")) result.max_temperature_c = read_double(record, "max_temperature_c");
  if (record.contains("exposed_communication_ms"))
    result.exposed_communication_ms = read_double(record, "exposed_communication_ms");
  if (record.contains("scaling_efficiency")) result.scaling_efficiency = read_double(record, "scaling_efficiency");
  if (record.contains("group_ranks")) {
    const json& ranks = record["group_ranks"];
    if (!ranks.is_array()) malformed("group_ranks", "must be an array, not a " + type_of(ranks));
    for (const json& rank : ranks) {
      if (!rank.is_number_integer()) malformed("group_ranks", "must hold integers, not " + rank.dump());
      result.group_ranks.push_back(rank.get<std::int32_t>());
    }
  }

  result.throttled = static_cast<std::int8_t>(read_integer(record, "throttled", -1, 1));
  result.steps = static_cast<std::int32_t>(read_integer(record, "steps", 0, int32_highest));
  result.rank = static_cast<std::int32_t>(read_integer(record, "rank", -1, int32_highest));
  // Optional: records written before run segments existed name none (-1).
  if (record.contains("segment")) result.segment = static_cast<std::int32_t>(read_integer(record, "segment", -1, int32_highest));
  if (record.contains("source")) result.source = static_cast<std::int32_t>(read_integer(record, "source", -1, int32_highest));
  result.message = read_string(record, "message");
  result.decisions = read_string(record, "decisions");
  // Optional: records written before cells had wall times have none.
  if (record.contains("versions")) result.versions = read_string(record, "versions");
  if (record.contains("started_utc")) result.started_utc = read_string(record, "started_utc");
  if (record.contains("finished_utc")) result.finished_utc = read_string(record, "finished_utc");
  if (record.contains("preparation_s")) result.preparation_s = read_double(record, "preparation_s");
  if (record.contains("search_s")) result.search_s = read_double(record, "search_s");
  if (record.contains("timed_s")) result.timed_s = read_double(record, "timed_s");

  const json& samples = field_of(record, "samples_ms");
  if (!samples.is_array()) malformed("samples_ms", "must be an array, not a " + type_of(samples));
  result.samples_ms.reserve(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i)
    result.samples_ms.push_back(double_from_json(samples[i], "samples_ms[" + std::to_string(i) + "]"));

  // Optional: records written before --repetitions have none.
  if (const auto found = record.find("repetition_medians_ms"); found != record.end()) {
    if (!found->is_array()) malformed("repetition_medians_ms", "must be an array, not a " + type_of(*found));
    for (std::size_t i = 0; i < found->size(); ++i)
      result.repetition_medians_ms.push_back(
          double_from_json((*found)[i], "repetition_medians_ms[" + std::to_string(i) + "]"));
  }

  // Optional: journals written before --layer-times existed have no such field.
  if (const auto found = record.find("layer_times"); found != record.end()) {
    if (!found->is_array()) malformed("layer_times", "must be an array, not a " + type_of(*found));
    result.layer_times.reserve(found->size());
    for (std::size_t i = 0; i < found->size(); ++i) {
      const json& entry = (*found)[i];
      const std::string where = "layer_times[" + std::to_string(i) + "]";
      if (!entry.is_object()) malformed(where, "must be an object, not a " + type_of(entry));
      LayerTime time;
      try {
        time.layer = read_string(entry, "layer");
        time.kind = read_string(entry, "kind");
        time.forward_ms = read_double(entry, "forward_ms");
        time.backward_ms = read_double(entry, "backward_ms");
      } catch (const Error& error) {
        throw Error(std::string(error.what()) + " (in `" + where + "`)");
      }
      result.layer_times.push_back(std::move(time));
    }
  }
  return result;
}

}  // namespace crossbench
