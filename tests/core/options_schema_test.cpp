// The options schema: one row per key, the README's key table generated from
// it, values checked against each row, and the settings that change numbers.
#include "crossbench/options_schema.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "crossbench/error.hpp"

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
