// The options schema: one row per key, the README's key table generated from
// it, values checked against each row, and the settings that change numbers.
#include "crossbench/options_schema.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>

#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "crossbench/measure.hpp"
#include "crossbench/options.hpp"

namespace crossbench {
namespace {

TEST(OptionsSchema, EveryKeyAndFlagIsDeclaredOnceWithHelp) {
  std::set<std::string> keys, flags;
  for (const auto& spec : options_schema()) {
    EXPECT_FALSE(spec.help.empty()) << spec.key << spec.flag;
    EXPECT_FALSE(spec.commands.empty()) << spec.key << spec.flag;
    if (!spec.key.empty()) EXPECT_TRUE(keys.insert(spec.key).second) << spec.key << " declared twice";
    if (!spec.flag.empty()) EXPECT_TRUE(flags.insert(spec.flag).second) << spec.flag << " declared twice";
    EXPECT_FALSE(spec.key.empty() && spec.flag.empty());
  }
  for (const char* key : {"matrix.networks", "measure.warmup", "engine.algo", "output.path"}) EXPECT_TRUE(keys.count(key)) << key;
  EXPECT_EQ(find_option("--layer-times"), find_option("measure.layer_times"));
  EXPECT_EQ(find_option("measure.colour"), nullptr);
}

// The schema holds every default: a struct's initialiser is what a value-
// initialised struct means before the options fill it (tests, the Runner's
// own callers), and must say the same as the schema.
TEST(OptionsSchema, EveryStructDefaultIsTheSchemasDefault) {
  const auto default_of = [](const std::string& key) {
    const OptionSpec* spec = find_option(key);
    EXPECT_NE(spec, nullptr) << key;
    return spec == nullptr ? std::string() : spec->default_value;
  };
  const auto as_number = [&](const std::string& key) { return std::stod(default_of(key)); };
  const auto as_switch = [&](const std::string& key) { return default_of(key) == "true" || default_of(key) == "on"; };
  const MeasureOptions measure;
  EXPECT_EQ(measure.warmup_steps, as_number("measure.warmup"));
  EXPECT_EQ(measure.min_steps, as_number("measure.min_steps"));
  EXPECT_EQ(measure.max_steps, as_number("measure.max_steps"));
  EXPECT_EQ(measure.target_ci, as_number("measure.target_ci"));
  EXPECT_EQ(measure.cell_time_limit_s, as_number("measure.cell_time_limit_s"));
  EXPECT_EQ(measure.layer_times, as_switch("measure.layer_times"));
  EXPECT_EQ(measure.layer_time_repetitions, as_number("measure.layer_time_repetitions"));
  const EngineConfig engine;
  EXPECT_EQ(std::to_string(engine.seed), default_of("measure.seed"));
  EXPECT_EQ(engine.update == Update::sgd ? "sgd" : "none", default_of("measure.update"));
  EXPECT_EQ(engine.learning_rate, as_number("measure.learning_rate"));
  EXPECT_EQ(engine.bucket_bytes, static_cast<std::int64_t>(as_number("engine.bucket_mb")) << 20);  // [MiB] → [bytes]
  EXPECT_TRUE(engine.settings.empty());  // absent keys read as their schema default (EngineConfig::setting)
  const Options options;
  EXPECT_EQ(options.matrix.gpus, std::vector<int>{std::stoi(default_of("matrix.gpus"))});
  EXPECT_EQ(options.replicas, as_number("--replicas"));
  EXPECT_EQ(options.checkpoint_s, as_number("--checkpoint-s"));
  EXPECT_EQ(options.stop_grace_s, as_number("--stop-grace-s"));
  for (const auto& [flag, value] : std::vector<std::pair<std::string, bool>>{{"--quiet", options.quiet},
                                                                             {"--resume", options.resume},
                                                                             {"--overwrite", options.overwrite},
                                                                             {"--allow-new-devices", options.allow_new_devices},
                                                                             {"--json", options.json},
                                                                             {"--cpu", options.workers_on_cpu}})
    EXPECT_EQ(value, as_switch(flag)) << flag;
  EXPECT_EQ(options.cell_filter, default_of("--filter"));
  EXPECT_EQ(options.jsonl.string(), default_of("--jsonl"));
}

TEST(OptionsSchema, ReadmeKeyTableIsTheSchema) {
  std::ifstream file(std::string(CROSSBENCH_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(file) << "README.md not found";
  std::stringstream text;
  text << file.rdbuf();
  const std::string readme = text.str();
  const std::string begin = "<!-- options-schema:begin -->\n", end = "<!-- options-schema:end -->";
  const auto from = readme.find(begin), to = readme.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  EXPECT_EQ(readme.substr(from + begin.size(), to - from - begin.size()), options_markdown_table())
      << "regenerate the table between the markers with `crossbench list options`";
}

TEST(OptionsSchema, ValuesAreCheckedAgainstTheirRow) {
  const OptionSpec& warmup = *find_option("measure.warmup");
  EXPECT_EQ(validated_setting(warmup, " 5 ", "test"), "5");
  EXPECT_THROW(validated_setting(warmup, "-1", "test"), UsageError);
  EXPECT_THROW(validated_setting(warmup, "1.5", "test"), UsageError);
  const OptionSpec& target = *find_option("measure.target_ci");
  EXPECT_EQ(validated_setting(target, "1e-2", "test"), "0.01");
  EXPECT_THROW(validated_setting(target, "0", "test"), UsageError);  // (0, 1]
  EXPECT_EQ(validated_setting(target, "1", "test"), "1");
  const OptionSpec& update = *find_option("measure.update");
  EXPECT_EQ(validated_setting(update, "sgd", "test"), "sgd");
  try {
    validated_setting(update, "adam", "--set measure.update=adam");
    FAIL() << "adam accepted";
  } catch (const UsageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("--set measure.update=adam"), std::string::npos) << message;
    EXPECT_NE(message.find("none, sgd"), std::string::npos) << message;
  }
  EXPECT_THROW(validated_setting(*find_option("engine.cuda_graphs"), "yes", "test"), UsageError);
}

// A command-line option's value is named by its flag, a job-file key's by its section.
TEST(OptionsSchema, AFlagsBadValueIsNamedByTheFlag) {
  const auto message_of = [](const std::string& key_or_flag, const std::string& value, const std::string& origin) {
    try {
      static_cast<void>(validated_setting(*find_option(key_or_flag), value, origin));
    } catch (const UsageError& error) {
      return std::string(error.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(message_of("--replicas", "abc", "command line"), "command line: --replicas 'abc' must be an integer");
  EXPECT_EQ(message_of("--checkpoint-s", "soon", "command line"), "command line: --checkpoint-s 'soon' must be a number");
  EXPECT_EQ(message_of("--ranks", "0", "command line"), "command line: --ranks '0' is out of range; valid: 1 to 1048576");
  EXPECT_EQ(message_of("measure.warmup", "x", "job file 'j.ini'"), "job file 'j.ini': [measure] warmup = 'x' must be an integer");
}

// The one integer parser of the options: all of the text, or nothing.
TEST(OptionsSchema, ParseIntegerTakesWholeIntegersOnly) {
  EXPECT_EQ(parse_integer("42"), 42);
  EXPECT_EQ(parse_integer("-7"), -7);
  EXPECT_EQ(parse_integer("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", " ", "1.5", "3x", "x3", "1e3", "9223372036854775808"})
    EXPECT_EQ(parse_integer(bad), std::nullopt) << "'" << bad << "'";
}

TEST(OptionsSchema, NumberChangingSettingsAreThoseTheSchemaMarks) {
  std::map<std::string, std::string> settings;  // as Options::settings holds them
  for (const auto& spec : options_schema()) settings[spec.key.empty() ? spec.flag : spec.key] = spec.default_value;
  settings["measure.warmup"] = "7";
  const auto changing = number_changing_settings(settings);
  std::set<std::string> names;
  for (const auto& setting : changing) {
    EXPECT_TRUE(setting.changes_numbers);
    EXPECT_FALSE(setting.recorded_as.empty());
    names.insert(setting.key);
    if (setting.key == "measure.warmup") EXPECT_EQ(setting.value, "7");
  }
  std::set<std::string> expected;
  for (const auto& spec : options_schema())
    if (spec.changes_numbers) expected.insert(spec.key);
  EXPECT_EQ(names, expected);
  EXPECT_TRUE(names.count("engine.algo") && names.count("measure.seed") && !names.count("measure.layer_times"));
  // Every recorded setting has a distinct cube attribute.
  std::set<std::string> attributes;
  for (const auto& setting : recorded_settings(settings)) EXPECT_TRUE(attributes.insert(setting.recorded_as).second) << setting.recorded_as;
}

}  // namespace
}  // namespace crossbench
