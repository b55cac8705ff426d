// The options schema (DESIGN.md "Options"): every option of `crossbench run`,
// `plan`, `check`, `merge`, `list` and `export-network` declared once, with its type, default, range, help,
// whether it changes the numbers, and where it is recorded. INI parsing,
// --set, every command's --help, the journal header, the cube attributes, the
// settings of a framework worker's prepare request and the README's key table
// all come from this one table.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crossbench/option_field.hpp"

namespace crossbench {

enum class OptionType {
  integer,        // whole number within [low, high]
  number,         // real number within (low, high]
  boolean,        // true | false
  choice,         // one of `choices`
  names,          // comma-separated list of names (validated by the parser that knows them)
  integers,       // comma-separated list of integers within [low, high]
  text,           // free text (a path, a tag)
  flag,           // a command-line switch without a value
};

struct OptionSpec {
  std::string key;            // job-file "section.key" ("measure.warmup"); empty: command line only
  std::string flag;           // command-line flag ("--layer-times") or empty; "--set KEY=VALUE" reaches every key
  OptionType type = OptionType::text;
  std::string default_value;  // as text; "(required)" for a key without a default
  double low = 0, high = 0;   // integer, integers: [low, high]; number: (low, high]
  std::vector<std::string> choices;  // choice
  std::string help;
  bool changes_numbers = false;  // a different value measures different numbers: resume refuses a change
  std::string recorded_as;       // root attribute of the cube (and key of the journal's settings); empty: not recorded
  std::string commands;          // the commands that take it: "run plan check"; a flag is one row per command at most
  // Where its value goes: the typed field it fills (a pointer to a member of
  // the options structs, include/crossbench/options.hpp), filled by one
  // generic loop, or the one place that reads it (option_field.hpp).
  OptionField field;
  // A framework worker's prepare request carries it in `settings` (README
  // "Framework workers"): the worker runs the cell with it, so it is declared
  // here once rather than named by hand in the request.
  bool sent_to_workers = false;
  // A one-letter alias of `flag` ("-o" for "--output"), as the other commands
  // (merge, export-network, the analysis tools) take it; empty: none.
  std::string short_flag = {};
  // The engines whose numbers a change of it changes; empty: every engine
  // (conservative). `--resume --allow-setting-change` accepts a changed
  // setting that names its engines and runs the journal's cells of those
  // engines again, keeping every other cell (cluster/resume.cpp).
  std::vector<std::string> engines = {};

  std::string id() const;               // the key, or the flag of a command-line option: "measure.warmup", "--replicas"
  std::string section() const;          // "measure" ("" for a command-line option)
  std::string name() const;             // "warmup"
  std::string range_text() const;       // "0 to 1000000", "none, sgd", "above 0 up to 1"
  bool for_command(const std::string& command) const;
  // A flag that means "true" on its own and takes an optional value: a boolean,
  // or a choice that has "true" among more values (--layer-times, --layer-times=all).
  [[nodiscard]] bool is_switch() const;
  // The default as a canonical value ("off" → "false" for a switch); nullopt
  // where the default describes what stands in for a value ("(MPI world)").
  [[nodiscard]] std::optional<std::string> default_canonical() const;
};

// Every option, in the order --help and the README list them.
const std::vector<OptionSpec>& options_schema();
// The row of a job-file key ("measure.warmup"), a flag ("--replicas") or its alias ("-o"); nullptr when unknown.
// A flag that several commands take in rows of their own (--output: run's and merge's) is the first such row.
[[nodiscard]] const OptionSpec* find_option(const std::string& key_or_flag);
// The row of a command's flag ("--output" of merge) or its alias; nullptr when the command has no such flag.
[[nodiscard]] const OptionSpec* find_option(const std::string& flag, const std::string& command);
// The job-file sections, in schema order, then [workers] (engine name = command).
std::vector<std::string> option_sections();

// The one integer parser of the options: all of `text` as a 64-bit integer
// (decimal, an optional sign); nullopt for anything else ("", "1.5", "3x",
// a value beyond the 64-bit range).
[[nodiscard]] std::optional<std::int64_t> parse_integer(const std::string& text);

// Checks `text` against the row's type and range; returns its canonical text
// ("1e-2" → "0.01", " true" → "true"). Throws UsageError naming `origin`
// (the job file or the --set), the key, the value and the valid range.
std::string validated_setting(const OptionSpec& spec, const std::string& text, const std::string& origin);

// The canonical value of a key in a run's settings (JobOptions::settings,
// EngineConfig::settings: "engine.algo" -> "exhaustive"), or its schema
// default where the settings lack it (options not parsed from a job: tests).
[[nodiscard]] std::string setting_value(const std::map<std::string, std::string>& values, const std::string& key);

// A recorded setting: the canonical value of one schema key in a run.
struct RecordedSetting {
  std::string key;            // "measure.warmup"
  std::string value;          // canonical text
  bool changes_numbers = false;
  std::string recorded_as;    // the cube attribute
};

// Every recorded setting of a run (keys with recorded_as), in schema order,
// from the canonical value of every schema key (JobOptions::settings).
[[nodiscard]] std::vector<RecordedSetting> recorded_settings(const std::map<std::string, std::string>& settings);
// Those that change the numbers: what `run --resume` must find unchanged.
[[nodiscard]] std::vector<RecordedSetting> number_changing_settings(const std::map<std::string, std::string>& settings);

// The keys a framework worker's prepare request carries (its `settings`
// object): every key marked sent_to_workers, in schema order.
std::vector<std::string> worker_setting_keys();

// The reference of the job-file keys as a Markdown table (README "Job file keys").
std::string options_markdown_table();

}  // namespace crossbench
