// The options schema: one row per key, the README's key table generated from
// it, values checked against each row, and the settings that change numbers.
#include "crossbench/options_schema.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <variant>

#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "crossbench/measure.hpp"
#include "crossbench/option_field.hpp"
#include "crossbench/options.hpp"

namespace crossbench {
namespace {

const std::vector<std::string> kCommands{"run", "plan", "check", "merge", "list", "describe", "export-network"};

// A key is declared once; a flag once per command (run's and merge's --output
// are rows of their own, each filling its command's field).
TEST(OptionsSchema, EveryKeyAndFlagIsDeclaredOnceWithHelp) {
  std::set<std::string> keys;
  std::map<std::string, std::set<std::string>> flags;  // command → its flags and their aliases
  for (const auto& spec : options_schema()) {
    EXPECT_FALSE(spec.help.empty()) << spec.key << spec.flag;
    EXPECT_FALSE(spec.commands.empty()) << spec.key << spec.flag;
    if (!spec.key.empty()) EXPECT_TRUE(keys.insert(spec.key).second) << spec.key << " declared twice";
    for (const auto& command : kCommands) {
      if (!spec.for_command(command)) continue;
      if (!spec.flag.empty()) EXPECT_TRUE(flags[command].insert(spec.flag).second) << command << " " << spec.flag << " declared twice";
      if (!spec.short_flag.empty())
        EXPECT_TRUE(flags[command].insert(spec.short_flag).second) << command << " " << spec.short_flag << " declared twice";
    }
    EXPECT_FALSE(spec.key.empty() && spec.flag.empty());
  }
  for (const auto& command : kCommands)
    if (command != "describe") EXPECT_FALSE(flags[command].empty()) << command << " has no flag";
  EXPECT_EQ(flags["merge"], (std::set<std::string>{"--output", "-o", "--prefer", "--strict", "--overwrite"}));
  EXPECT_EQ(flags["list"], std::set<std::string>{"--json"});
  EXPECT_TRUE(flags["describe"].empty());  // --help only: its network is its positional word
  EXPECT_EQ(flags["export-network"], (std::set<std::string>{"--output", "-o", "--force"}));
  EXPECT_TRUE(std::holds_alternative<std::filesystem::path ExportNetworkOptions::*>(find_option("-o", "export-network")->field));
  EXPECT_EQ(find_option("--force", "merge"), nullptr);
  // A flag of several commands: the command's own row.
  EXPECT_TRUE(std::holds_alternative<std::filesystem::path MergeOptions::*>(find_option("--output", "merge")->field));
  EXPECT_TRUE(std::holds_alternative<DerivedValue>(find_option("-o", "run")->field));
  EXPECT_EQ(find_option("--prefer", "run"), nullptr);
  for (const char* key : {"matrix.networks", "measure.warmup", "engine.algo", "output.path"}) EXPECT_TRUE(keys.count(key)) << key;
  EXPECT_EQ(find_option("--layer-times"), find_option("measure.layer_times"));
  EXPECT_EQ(find_option("measure.colour"), nullptr);
}

// Every row names where its value goes: a typed field, or the one place that
// reads it (option_field.hpp); none is left Unbound.
TEST(OptionsSchema, EveryRowNamesItsField) {
  for (const auto& spec : options_schema()) {
    EXPECT_FALSE(std::holds_alternative<Unbound>(spec.field)) << spec.id() << " names no field";
    // A [matrix] list, and only one, is read by the matrix reader.
    EXPECT_EQ(std::holds_alternative<MatrixAxis>(spec.field), spec.section() == "matrix") << spec.id();
  }
  EXPECT_TRUE(std::holds_alternative<int MeasureOptions::*>(find_option("measure.warmup")->field));
  EXPECT_TRUE(std::holds_alternative<bool RunOptions::*>(find_option("--resume")->field));
}

// The field a row fills belongs to the options of every command that takes the
// row (a run flag fills RunOptions, a job key JobOptions, MeasureOptions or
// EngineConfig within it), and a command-only field to no other command's.
TEST(OptionsSchema, EachRowsFieldBelongsToTheCommandsThatTakeIt) {
  const RunOptions run;
  const PlanOptions plan;
  const CheckOptions check;
  const MergeOptions merge;
  const ListOptions list;
  const ExportNetworkOptions export_network;
  for (const auto& spec : options_schema()) {
    if (!is_typed_field(spec.field)) continue;
    const std::map<std::string, bool> owns{{"run", field_text(spec.field, run).has_value()},
                                           {"plan", field_text(spec.field, plan).has_value()},
                                           {"check", field_text(spec.field, check).has_value()},
                                           {"merge", field_text(spec.field, merge).has_value()},
                                           {"list", field_text(spec.field, list).has_value()},
                                           {"describe", false},  // DescribeOptions has no flag's field
                                           {"export-network", field_text(spec.field, export_network).has_value()}};
    bool owned = false;
    for (const auto& [command, command_owns] : owns) {
      EXPECT_TRUE(command_owns || !spec.for_command(command)) << command << ": " << spec.id();
      // merge, list and export-network read no job: only their own rows fill their options.
      if (command == "merge" || command == "list" || command == "export-network") EXPECT_TRUE(!command_owns || spec.for_command(command)) << command << ": " << spec.id();
      owned = owned || command_owns;
    }
    EXPECT_TRUE(owned) << spec.id();
  }
  EXPECT_FALSE(field_text(find_option("--resume")->field, plan).has_value());
  EXPECT_FALSE(field_text(find_option("--json")->field, run).has_value());
  EXPECT_FALSE(field_text(find_option("--cpu")->field, plan).has_value());
  EXPECT_FALSE(field_text(find_option("measure.warmup")->field, merge).has_value());  // merge reads no job
  EXPECT_FALSE(field_text(find_option("--json", "plan")->field, list).has_value());
  EXPECT_FALSE(field_text(find_option("--json", "list")->field, plan).has_value());
  EXPECT_FALSE(field_text(find_option("--overwrite", "merge")->field, run).has_value());
  EXPECT_FALSE(field_text(find_option("--output", "export-network")->field, merge).has_value());
  EXPECT_FALSE(field_text(find_option("--output", "merge")->field, export_network).has_value());
  EXPECT_FALSE(field_text(find_option("--filter")->field, export_network).has_value());  // export-network reads no job
}

// The schema holds every default: a struct's initialiser is what a value-
// initialised struct means before the options fill it (tests, the plan's own
// callers), and must say the same as the schema, row by bound row.
template <typename Command>
void expect_defaults_are_the_schemas(const Command& options, const std::string& command) {
  for (const auto& spec : options_schema()) {
    const std::optional<std::string> value = field_text(spec.field, options);
    if (!value) continue;
    if (const std::optional<std::string> fallback = spec.default_canonical())
      EXPECT_EQ(*value, *fallback) << command << ": " << spec.id();
    else  // a default that describes what stands in ("(MPI world)"): the field is unset
      EXPECT_TRUE(*value == "0" || value->empty()) << command << ": " << spec.id() << " = " << *value;
  }
}

TEST(OptionsSchema, EveryStructDefaultIsTheSchemasDefault) {
  expect_defaults_are_the_schemas(RunOptions{}, "run");
  expect_defaults_are_the_schemas(PlanOptions{}, "plan");
  expect_defaults_are_the_schemas(CheckOptions{}, "check");
  expect_defaults_are_the_schemas(MergeOptions{}, "merge");
  expect_defaults_are_the_schemas(ListOptions{}, "list");
  expect_defaults_are_the_schemas(ExportNetworkOptions{}, "export-network");
  // Every merge, list and export-network row fills a field, with its default (or none, "(required)", "(stdout)").
  for (const char* command : {"merge", "list", "describe", "export-network"})
    for (const auto& spec : options_schema())
      if (spec.for_command(command)) EXPECT_TRUE(is_typed_field(spec.field)) << command << ": " << spec.id();
  EXPECT_FALSE(find_option("--output", "merge")->default_canonical().has_value());  // required: no default stands in
  EXPECT_EQ(find_option("--strict", "merge")->default_canonical(), "false");
  EXPECT_TRUE(MergeOptions{}.inputs.empty() && MergeOptions{}.prefer.empty() && ListOptions{}.topic.empty());
  EXPECT_FALSE(find_option("--output", "export-network")->default_canonical().has_value());  // absent: stdout
  EXPECT_EQ(find_option("--force", "export-network")->default_canonical(), "false");
  EXPECT_TRUE(ExportNetworkOptions{}.output.empty() && !ExportNetworkOptions{}.force && DescribeOptions{}.network.empty());
  // The rows whose value is derived (derive_compound_values): their fields' initialisers.
  const auto default_of = [](const std::string& key) { return find_option(key)->default_value; };
  const JobOptions job;
  EXPECT_EQ(job.engine.bucket_bytes, std::stoll(default_of("engine.bucket_mb")) << 20);  // [MiB] → [bytes]
  EXPECT_EQ(job.measure.layer_times, default_of("measure.layer_times") != "false");
  EXPECT_EQ(RunOptions{}.layer_times_shown, 10);  // layer_times = true prints each cell's 10 slowest layers
  EXPECT_EQ(job.matrix.gpus, std::vector<int>{std::stoi(default_of("matrix.gpus"))});
  EXPECT_TRUE(job.engine.settings.empty());  // absent keys read as their schema default (EngineConfig::setting)
  EXPECT_TRUE(job.device_tag.empty());       // --device-tag, else $CROSSBENCH_DEVICE_TAG: nothing when neither
}

// The one generic conversion: a row's canonical text stored in its field reads back the same.
TEST(OptionsSchema, AFieldStoresItsRowsCanonicalText) {
  RunOptions run;
  for (const auto& [id, text] : std::vector<std::pair<std::string, std::string>>{
           {"measure.warmup", "7"}, {"measure.target_ci", "0.02"}, {"measure.seed", "9000000000000000000"},
           {"measure.update", "sgd"}, {"--replicas", "3"}, {"--filter", "alexnet/.*"}, {"--resume", "true"},
           {"--checkpoint-s", "2.5"}, {"--jsonl", "cells.jsonl"}}) {
    const OptionSpec& spec = *find_option(id);
    EXPECT_TRUE(store_field(spec.field, text, run)) << id;
    EXPECT_EQ(field_text(spec.field, run), text) << id;
  }
  EXPECT_EQ(run.measure.warmup_steps, 7);
  EXPECT_EQ(run.engine.update, Update::sgd);
  EXPECT_EQ(run.engine.seed, 9000000000000000000ULL);
  EXPECT_TRUE(run.resume);
  EXPECT_FALSE(store_field(find_option("engine.algo")->field, "exhaustive", run));  // read by the engines, from the settings
  PlanOptions plan;
  EXPECT_THROW(static_cast<void>(store_field(find_option("--resume")->field, "true", plan)), Error);  // another command's
  MergeOptions merge;
  for (const auto& [flag, text] : std::vector<std::pair<std::string, std::string>>{
           {"--output", "all.h5"}, {"--prefer", "last"}, {"--strict", "true"}, {"--overwrite", "true"}}) {
    const OptionSpec& spec = *find_option(flag, "merge");
    EXPECT_TRUE(store_field(spec.field, text, merge)) << flag;
    EXPECT_EQ(field_text(spec.field, merge), text) << flag;
  }
  EXPECT_EQ(merge.output, std::filesystem::path("all.h5"));
  EXPECT_TRUE(merge.strict && merge.overwrite);
  EXPECT_THROW(static_cast<void>(store_field(find_option("--resume")->field, "true", merge)), Error);
  ListOptions list;
  EXPECT_TRUE(store_field(find_option("--json", "list")->field, "true", list));
  ExportNetworkOptions export_network;
  EXPECT_TRUE(store_field(find_option("-o", "export-network")->field, "g.json", export_network));
  EXPECT_TRUE(store_field(find_option("--force", "export-network")->field, "true", export_network));
  EXPECT_EQ(export_network.output, std::filesystem::path("g.json"));
  EXPECT_TRUE(export_network.force);
  EXPECT_EQ(field_text(find_option("--output", "export-network")->field, export_network), "g.json");
  EXPECT_THROW(static_cast<void>(store_field(find_option("--json", "list")->field, "true", export_network)), Error);
  EXPECT_TRUE(list.json);
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
  std::map<std::string, std::string> settings;  // as JobOptions::settings holds them
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
