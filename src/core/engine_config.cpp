// EngineConfig::setting: an engine's view of one schema key (include/crossbench/engine_config.hpp).
#include "crossbench/engine_config.hpp"

#include "crossbench/error.hpp"
#include "crossbench/options_schema.hpp"

namespace crossbench {

std::string EngineConfig::setting(const std::string& key) const {
  const OptionSpec* spec = find_option(key);
  if (spec == nullptr || spec->key.empty()) throw Error("engine setting '" + key + "' is not a job-file key of the options schema");
  const auto found = settings.find(key);
  return found == settings.end() ? spec->default_value : validated_setting(*spec, found->second, "engine settings");
}

}  // namespace crossbench
