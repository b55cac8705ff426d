#include "engines/worker/prepare_request.hpp"

#include <string>

#include "crossbench/error.hpp"
#include "crossbench/options_schema.hpp"

namespace crossbench {
namespace {

// A canonical value (validated_setting's text) as the JSON type its row
// declares, so that a worker reads `"measure.seed": 42`, not "42".
nlohmann::json typed_value(const std::string& key, const std::string& text) {
  const OptionSpec* spec = find_option(key);
  if (spec == nullptr || spec->key != key) throw Error("worker setting '" + key + "' is not a key of the options schema");
  switch (spec->type) {
    case OptionType::integer: return std::stoll(text);
    case OptionType::number: return std::stod(text);
    case OptionType::boolean: return text == "true";
    default: return text;
  }
}

}  // namespace

nlohmann::json prepare_request(const Network& network, const CellSpec& cell, const EngineConfig& config, int protocol) {
  nlohmann::json settings = nlohmann::json::object();
  for (const std::string& key : worker_setting_keys()) settings[key] = typed_value(key, config.setting(key));
  return {{"protocol", protocol},
          {"type", "prepare"},
          {"cell", {{"network", cell.network}, {"precision", to_string(cell.precision)}, {"batch", cell.batch},
                    {"phase", to_string(cell.phase)}, {"replica", cell.replica}}},
          {"graph", to_json(network)},
          {"threads", config.threads},  // the rank's binding, not an option: a worker on the CPU uses this many
          {"settings", settings}};
}

}  // namespace crossbench
