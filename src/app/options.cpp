// Parsing of job files (INI) and the command line of `crossbench
// run|plan|check|merge|list|describe|export-network`, both by Boost.ProgramOptions from the options schema
// (src/core/options_schema.cpp): the schema knows which keys and flags exist,
// what they accept and which field each fills; this file reads the text,
// checks it by the rows, fills the fields by one loop (fill_fields), and
// computes the few compound values in one place (derive_compound_values).
#include "app/options.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>
#include <type_traits>

#include "crossbench/data_paths.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/option_field.hpp"
#include "crossbench/options_schema.hpp"
#include "crossbench/text_file.hpp"

namespace po = boost::program_options;

namespace crossbench {
namespace {

std::string join(const std::vector<std::string>& values) {
  std::string text;
  for (const auto& value : values) text += (text.empty() ? "" : ", ") + value;
  return text;
}

std::string section_list() {
  std::vector<std::string> sections;
  for (const auto& section : option_sections())
    if (section != "workers") sections.push_back("[" + section + "]");
  return join(sections);
}

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> keys;
  for (const auto& spec : options_schema())
    if (!spec.key.empty() && spec.section() == section) keys.push_back(spec.name());
  return keys;
}

po::options_description job_description() {
  po::options_description description("job file");
  for (const auto& spec : options_schema())
    if (!spec.key.empty()) description.add_options()(spec.key.c_str(), po::value<std::string>(), spec.help.c_str());
  return description;
}

// Explains an unknown "section.key" against the table.
[[noreturn]] void throw_unknown_key(const std::string& origin, const std::string& dotted) {
  const auto dot = dotted.find('.');
  if (dot == std::string::npos)
    throw UsageError(origin + ": key '" + dotted + "' is outside any section; valid sections: " + section_list());
  const std::string section = dotted.substr(0, dot), key = dotted.substr(dot + 1);
  const auto keys = keys_of(section);
  if (keys.empty())
    throw UsageError(origin + ": unknown section [" + section + "]; valid sections: " + section_list() + ", [workers]");
  throw UsageError(origin + ": unknown key '" + key + "' in section [" + section + "]; valid keys: " + join(keys));
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream stream(text);
  while (std::getline(stream, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    items.push_back(first == std::string::npos ? "" : item.substr(first, last - first + 1));
  }
  return items;
}

// Parses a list of names; each must be one of `valid` (or accepted by `accept`).
template <typename Parse>
auto parse_names(const std::string& origin, const std::string& key, const std::string& text,
                 const std::vector<std::string>& valid, Parse parse) {
  using Value = typename std::invoke_result_t<Parse, const std::string&>::value_type;
  std::vector<Value> values;
  std::set<std::string> seen;
  for (const auto& item : split_list(text)) {
    if (item.empty()) throw UsageError(origin + ": [matrix] " + key + " has an empty entry in '" + text + "'");
    if (!seen.insert(item).second)
      throw UsageError(origin + ": [matrix] " + key + " lists '" + item + "' twice");
    const auto parsed = parse(item);
    if (!parsed) throw UsageError(origin + ": unknown " + key.substr(0, key.size() - 1) + " '" + item +
                                  "' in [matrix] " + key + "; valid: " + join(valid));
    values.push_back(*parsed);
  }
  if (values.empty())
    throw UsageError(origin + ": the matrix is empty: [matrix] " + key + " has no values");
  return values;
}

// Values of the job file with the --set overrides applied: "section.key" → (value, origin).
using Settings = std::map<std::string, std::pair<std::string, std::string>>;

Settings read_job_file(const std::filesystem::path& path, const std::string& text) {
  Settings settings;
  // Editors on Windows start a UTF-8 file with a byte-order mark: it is not part of the first line.
  const bool byte_order_mark = text.rfind("\xEF\xBB\xBF", 0) == 0;
  std::istringstream stream(byte_order_mark ? text.substr(3) : text);
  const std::string origin = "job file '" + path.string() + "'";
  po::parsed_options parsed(nullptr);
  try {
    parsed = po::parse_config_file(stream, job_description(), /*allow_unregistered=*/true);
  } catch (const po::error& error) {
    throw UsageError(origin + ": " + error.what());
  }
  for (const auto& option : parsed.options) {
    // [workers] maps engine names to commands: any name is a key there.
    if (option.unregistered && option.string_key.rfind("workers.", 0) != 0) throw_unknown_key(origin, option.string_key);
    if (settings.count(option.string_key))
      throw UsageError(origin + ": key '" + option.string_key + "' is given twice");
    settings[option.string_key] = {option.value.empty() ? "" : option.value.front(), origin};
  }
  return settings;
}

// A --set or a flag that stands for a key; each key may be set once on the command line.
void apply_override(Settings& settings, std::set<std::string>& overridden, const std::string& assignment,
                    const std::string& origin) {
  const auto equals = assignment.find('=');
  if (equals == std::string::npos)
    throw UsageError(origin + ": expected section.key=value, e.g. --set matrix.batches=1,2");
  const std::string dotted = assignment.substr(0, equals);
  const OptionSpec* spec = find_option(dotted);
  if ((spec == nullptr || spec->key.empty()) && dotted.rfind("workers.", 0) != 0) throw_unknown_key(origin, dotted);
  if (!overridden.insert(dotted).second)
    throw UsageError(origin + ": '" + dotted + "' is set twice on the command line; give each key once");
  settings[dotted] = {assignment.substr(equals + 1), origin};
}

// The command line, split by the schema: flag -> values (in order), and the words that are no flag's value.
struct CommandLine {
  std::map<std::string, std::vector<std::string>> values;
  std::vector<std::string> words;  // merge's input cubes, list's list, describe's and export-network's network; run, plan and check take none
  bool help = false;
};

// The name under which Boost.ProgramOptions collects a command's positional words; "" for none.
std::string positional_name(const std::string& command) {
  if (command == "merge") return "input-cubes";
  if (command == "list") return "list-name";
  if (command == "describe" || command == "export-network") return "network-name";
  return "";
}

// The command's flags as Boost.ProgramOptions reads them, from the schema: a
// switch takes no value, a boolean (or a choice with "true") an optional one
// (`--layer-times`, `--layer-times=false`, `--layer-times=all`), every other
// flag one value; --set may repeat; a flag's one-letter alias (-o for --output)
// is the same option.
po::options_description command_line_description(const std::string& command) {
  po::options_description description("crossbench " + command);
  description.add_options()("help,h", "this text");
  for (const auto& spec : options_schema()) {
    if (spec.flag.empty() || !spec.for_command(command)) continue;
    std::string name = spec.flag.substr(2);  // "--replicas" → "replicas"
    if (!spec.short_flag.empty()) name += "," + spec.short_flag.substr(1);  // "output,o"
    if (spec.type == OptionType::flag)
      description.add_options()(name.c_str(), spec.help.c_str());
    else if (spec.is_switch())
      description.add_options()(name.c_str(), po::value<std::string>()->implicit_value("true"), spec.help.c_str());
    else
      description.add_options()(name.c_str(), po::value<std::string>(), spec.help.c_str());
  }
  return description;
}

CommandLine split_command_line(const std::string& command, const std::vector<std::string>& arguments) {
  po::options_description description = command_line_description(command);
  const std::string positional = positional_name(command);
  po::positional_options_description words;
  if (!positional.empty()) {
    description.add_options()(positional.c_str(), po::value<std::vector<std::string>>(), "");
    words.add(positional.c_str(), -1);
  }
  po::parsed_options parsed(&description);
  try {
    // Long flags exactly as the schema spells them (no abbreviations), -h.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    // Commands without words (run, plan, check) take no positional description: a stray
    // word then comes back as a positional option, refused below with a hint.
    po::command_line_parser parser(arguments);
    parser.options(description).style(style);
    if (!positional.empty()) parser.positional(words);
    parsed = parser.run();
  } catch (const po::unknown_option& error) {
    std::vector<std::string> valid;
    for (const auto& row : options_schema())
      if (!row.flag.empty() && row.for_command(command)) valid.push_back(row.flag);
    valid.push_back("--help");  // describe has no other
    throw UsageError("crossbench " + command + ": unknown flag '" + error.get_option_name() + "'; valid: " + join(valid));
  } catch (const po::invalid_command_line_syntax& error) {
    const std::string flag = error.get_option_name();
    const OptionSpec* spec = find_option(flag, command);
    if (error.kind() == po::invalid_command_line_syntax::extra_parameter) throw UsageError(flag + " takes no value");
    throw UsageError(flag + " needs a value" + (spec != nullptr ? " (" + spec->help + ")" : std::string()));
  } catch (const po::error& error) {
    throw UsageError("crossbench " + command + ": " + error.what() + " (crossbench " + command + " --help lists the flags)");
  }
  CommandLine line;
  for (const po::option& option : parsed.options) {
    if (!positional.empty() && option.string_key == positional) {
      if (option.position_key < 0)  // spelt as a flag: it is none
        throw UsageError("crossbench " + command + ": unknown flag '--" + positional + "' (crossbench " + command +
                         " --help lists the flags)");
      line.words.push_back(option.value.front());
      continue;
    }
    if (option.position_key >= 0) {  // a word that is no flag's value
      const std::string& argument = option.value.front();
      std::string hint;
      if (argument.size() > 4 && argument.substr(argument.size() - 4) == ".ini") hint = "; did you mean --job " + argument + "?";
      throw UsageError("crossbench " + command + ": unexpected argument '" + argument + "'" + hint +
                       " (crossbench " + command + " --help lists the flags)");
    }
    if (option.string_key == "help") {
      line.help = true;
      continue;
    }
    const std::string flag = "--" + option.string_key;
    auto& values = line.values[flag];
    if (!values.empty() && flag != "--set") throw UsageError(flag + " is given twice; give it once");
    // A switch has no value; a boolean given bare is "true" (its implicit value).
    values.push_back(option.value.empty() ? (find_option(flag, command)->type == OptionType::flag ? "" : "true") : option.value.front());
  }
  return line;
}

// A key's setting from the job file or the command line: its value and where it came from; nullptr when absent.
const std::pair<std::string, std::string>* find_setting(const Settings& settings, const std::string& dotted) {
  const auto found = settings.find(dotted);
  return found == settings.end() ? nullptr : &found->second;
}

// [matrix] and [workers]: the matrix's axes into `matrix`; returns the worker
// engine → command of the run (the built-in ones and the job file's).
std::map<std::string, std::string> read_matrix(const Settings& settings, const std::filesystem::path& job_file,
                                               MatrixOptions& matrix) {
  const auto value = [&](const std::string& dotted) { return find_setting(settings, dotted); };
  const auto require = [&](const std::string& dotted) {
    const auto* setting = value(dotted);
    if (!setting)
      throw UsageError("job file '" + job_file.string() + "': the matrix is empty: [matrix] " +
                       dotted.substr(dotted.find('.') + 1) + " is missing");
    return *setting;
  };
  // [matrix]
  {
    const auto [text, origin] = require("matrix.networks");
    matrix.networks = parse_names(origin, "networks", text, network_names(),
                                          [&](const std::string& name) -> std::optional<std::string> {
                                            const auto& names = network_names();
                                            if (std::find(names.begin(), names.end(), name) == names.end()) return std::nullopt;
                                            return name;
                                          });
  }
  // [workers]: the built-in framework workers, and any the job file adds or redefines.
  std::map<std::string, std::string> worker_commands = default_worker_commands();
  for (const auto& [dotted, setting] : settings)
    if (dotted.rfind("workers.", 0) == 0) {
      const std::string engine = dotted.substr(8);
      const bool native = std::any_of(engine_catalog().begin(), engine_catalog().end(),
                                      [&](const EngineInfo& info) { return info.name == engine; });
      if (engine.empty())
        throw UsageError(setting.second + ": '" + dotted + "' names no worker engine; write workers.NAME = COMMAND");
      if (native || engine == "auto")
        throw UsageError(setting.second + ": [workers] " + engine + ": '" + engine + "' is " +
                         (native ? "a native engine name" : "the engine chooser's name") + ", not a worker");
      if (split_worker_command(setting.first).empty())
        throw UsageError(setting.second + ": [workers] " + engine + " has an empty command");
      worker_commands[engine] = setting.first;
    }
  {
    std::vector<std::string> valid{"auto"};
    for (const auto& info : engine_catalog()) valid.push_back(info.name);
    for (const auto& [engine, command] : worker_commands) valid.push_back(engine);
    const auto [text, origin] = require("matrix.engines");
    matrix.engines = parse_names(origin, "engines", text, valid,
                                         [&](const std::string& name) -> std::optional<std::string> {
                                           if (std::find(valid.begin(), valid.end(), name) == valid.end()) return std::nullopt;
                                           return name;
                                         });
  }
  {
    const auto [text, origin] = require("matrix.precisions");
    matrix.precisions = parse_names(origin, "precisions", text, precision_names(), precision_from_string);
  }
  {
    const auto [text, origin] = require("matrix.phases");
    matrix.phases = parse_names(origin, "phases", text, phase_names(), phase_from_string);
  }
  // Integer lists, within their schema row's range.
  const auto integer_list = [&](const std::string& key, const std::string& text, const std::string& origin) {
    const OptionSpec& spec = *find_option(key);
    const std::string name = spec.name(), singular = name == "batches" ? "batch" : name;
    return parse_names(origin, name, text, {"integers from " + spec.range_text()},
                       [&](const std::string& item) -> std::optional<std::int64_t> {
                         const std::optional<std::int64_t> number = parse_integer(item);
                         if (!number)
                           throw UsageError(origin + ": " + singular + " '" + item + "' in [matrix] " + name +
                                            " must be an integer, not '" + item + "'");
                         if (*number < spec.low || *number > spec.high)
                           throw UsageError(origin + ": " + singular + " " + item + " in [matrix] " + name +
                                            " is out of range; valid: " + spec.range_text());
                         return number;
                       });
  };
  {
    const auto [text, origin] = require("matrix.batches");
    matrix.batches = integer_list("matrix.batches", text, origin);
  }
  if (const auto* gpus = value("matrix.gpus")) {
    matrix.gpus.clear();
    for (const auto count : integer_list("matrix.gpus", gpus->first, gpus->second)) matrix.gpus.push_back(static_cast<int>(count));
  }

  return worker_commands;
}

// The job file's settings with the command line's --set and key flags (--algo ...) applied over them.
Settings read_settings(const CommandLine& line, const JobOptions& options) {
  const auto given = [&](const std::string& flag) { return line.values.count(flag) > 0; };
  Settings settings = read_job_file(options.job_file, options.job_text);
  std::set<std::string> overridden;
  if (given("--set"))
    for (const auto& assignment : line.values.at("--set")) apply_override(settings, overridden, assignment, "--set " + assignment);
  // Flags that stand for job-file keys, validated the same way.
  for (const auto& spec : options_schema())
    if (!spec.key.empty() && !spec.flag.empty() && given(spec.flag))
      apply_override(settings, overridden, spec.key + "=" + line.values.at(spec.flag).front(), spec.flag);
  return settings;
}

// A row's canonical value by its key or flag: "measure.warmup" → "10", "--quiet" → "true".
using CanonicalValues = std::map<std::string, std::string>;

// The one generic loop of item "each schema row names the field it fills": every
// row with a typed field (OptionSpec::field) gets its canonical value, converted
// to the field's type (store_field). The rows that name another place are read there.
// A flag's value fills the row of the command's own flag (--output is run's
// and merge's, each a row of its own); a job-file key's, the job's field.
template <typename Command>
void fill_fields(const std::string& command, const CanonicalValues& values, Command& options) {
  for (const auto& spec : options_schema()) {
    if (spec.key.empty() && !spec.for_command(command)) continue;
    const auto found = values.find(spec.id());
    if (found != values.end()) static_cast<void>(store_field(spec.field, found->second, options));
  }
}

// The command's own flags with a typed field (the rows without a job-file key):
// a switch is "true" when given; a value is checked by its row (a text value,
// a path or a regular expression, is taken verbatim); an absent flag has its
// row's default where that is a value ("(MPI world)" is not: the field keeps it).
CanonicalValues read_flag_values(const std::string& command, const CommandLine& line) {
  CanonicalValues values;
  for (const auto& spec : options_schema()) {
    if (!spec.key.empty() || !spec.for_command(command) || !is_typed_field(spec.field)) continue;
    const auto given = line.values.find(spec.flag);
    if (spec.type == OptionType::flag)
      values[spec.flag] = given != line.values.end() ? "true" : "false";
    else if (given != line.values.end())
      values[spec.flag] = spec.type == OptionType::text ? given->second.front()
                                                        : validated_setting(spec, given->second.front(), "command line");
    else if (const auto fallback = spec.default_canonical())
      values[spec.flag] = *fallback;
  }
  return values;
}

// Every single-valued job-file key (the [matrix] lists are read by read_matrix):
// checked against its row, or its row's default.
CanonicalValues read_key_values(const Settings& settings) {
  CanonicalValues values;
  for (const auto& spec : options_schema()) {
    if (spec.key.empty() || spec.type == OptionType::names || spec.type == OptionType::integers) continue;
    const auto* setting = find_setting(settings, spec.key);
    values[spec.key] = setting ? validated_setting(spec, setting->first, setting->second) : spec.default_value;
  }
  return values;
}

// Rules between flags, refused before the job file is read.
void check_flag_rules(const RunOptions& options) {
  if (options.resume && options.overwrite) throw UsageError("--resume and --overwrite exclude each other");
  if (options.allow_new_devices && !options.resume) throw UsageError("--allow-new-devices applies to --resume only");
  if (options.allow_build_change && !options.resume) throw UsageError("--allow-build-change applies to --resume only");
  if (options.allow_setting_change && !options.resume) throw UsageError("--allow-setting-change applies to --resume only");
  if (options.salvage && !options.resume) throw UsageError("--salvage applies to --resume only");
}
void check_flag_rules(const PlanOptions& options) {
  if (!options.device_json.empty() && options.simulated_ranks == 0) throw UsageError("--device-json needs --ranks N");
}
void check_flag_rules(const CheckOptions&) {}  // --cpu stands alone

// --filter and --first: ECMAScript regular expressions over cell names.
void check_cell_regex(const std::string& flag, const std::string& regex) {
  try {
    std::regex(regex, std::regex::ECMAScript);
  } catch (const std::regex_error& error) {
    throw UsageError(flag + " '" + regex + "' is not a regular expression: " + error.what());
  }
}

// engine.compile_cache: "<output>" becomes the cube's path and the directory is named absolutely
// (every rank's workers share it, whatever their working directory); `check` writes no cube, so
// there it is none unless the job or the command line names a directory.
std::string resolved_compile_cache(const std::string& command, bool given, const std::string& setting,
                                   const std::filesystem::path& output) {
  std::string cache = command == "check" && !given ? "none" : setting;
  if (cache == "none") return cache;
  static const std::string placeholder = "<output>";
  for (auto at = cache.find(placeholder); at != std::string::npos; at = cache.find(placeholder, at))
    cache.replace(at, placeholder.size(), output.string());
  if (cache.empty())
    throw UsageError("[engine] compile_cache is empty: name a directory, or none for no persistent compile cache");
  return std::filesystem::absolute(cache).lexically_normal().string();
}

// The command's own values that are no single typed field (their rows say DerivedValue).
void derive_command_values(const CommandLine& line, const CanonicalValues& keys, RunOptions& options) {
  // A run writes its algorithm cache after the searches it measured: a directory that is not there would
  // cost the replay of all of them at the first save, so it is refused before anything runs (as --output's).
  if (const std::string& cache = keys.at("engine.algo_cache"); !cache.empty()) {
    const std::filesystem::path directory = std::filesystem::path(cache).parent_path();
    std::error_code error;
    if (!directory.empty() && !std::filesystem::is_directory(directory, error))
      throw UsageError("--algo-cache '" + cache + "': directory '" + directory.string() + "' does not exist");
  }
  options.output_from_command_line = line.values.count("--output") > 0;
  if (options.output_from_command_line) options.output = line.values.at("--output").front();
  options.layer_times_shown = keys.at("measure.layer_times") == "all" ? 0 : 10;  // 0: every layer
}
void derive_command_values(const CommandLine& line, const CanonicalValues&, PlanOptions& options) {
  if (!line.values.count("--calibrate")) return;
  const std::string& cubes = line.values.at("--calibrate").front();
  for (const auto& cube : split_list(cubes)) {
    if (cube.empty()) throw UsageError("--calibrate '" + cubes + "' has an empty entry; give CUBE.h5[,CUBE.h5...]");
    options.calibrate.emplace_back(cube);
  }
}
void derive_command_values(const CommandLine&, const CanonicalValues&, CheckOptions&) {}  // none

// The one place for the values the schema's rows cannot fill as one typed field
// each (rows marked DerivedValue): every command's, then the command's own.
//   engine.bucket_mb        → EngineConfig::bucket_bytes ([MiB] → [bytes])
//   measure.layer_times     → MeasureOptions::layer_times (not "false"); run: layer_times_shown ("all": 0, every layer)
//   measure.oom_boundary    → MeasureOptions::stop_at_oom_boundary ("stop")
//   engine.algo_cache       → named absolutely in the settings (a file every rank reads and writes)
//   output.path, --output   → JobOptions::output (run: --output first); default results/<job name>.h5
//   engine.compile_cache    → "<output>" replaced by the cube's path, absolute; check: none unless set
//   --device-tag            → JobOptions::device_tag, else $CROSSBENCH_DEVICE_TAG
//   --calibrate             → PlanOptions::calibrate (a list of cubes)
// (--job and the [matrix] lists are read before: parse_job_options, read_matrix.)
template <typename Command>
void derive_compound_values(const std::string& command, const CommandLine& line, const Settings& settings,
                            CanonicalValues& keys, Command& options) {
  options.engine.bucket_bytes = std::stoll(keys.at("engine.bucket_mb")) << 20;
  options.measure.layer_times = keys.at("measure.layer_times") != "false";
  options.measure.stop_at_oom_boundary = keys.at("measure.oom_boundary") == "stop";
  if (const std::string& cache = keys.at("engine.algo_cache"); !cache.empty())
    keys["engine.algo_cache"] = std::filesystem::absolute(cache).string();
  const auto* output_path = find_setting(settings, "output.path");
  options.output = output_path ? std::filesystem::path(output_path->first)
                               : std::filesystem::path("results") / (options.job_name + ".h5");
  derive_command_values(line, keys, options);
  keys["engine.compile_cache"] = resolved_compile_cache(command, find_setting(settings, "engine.compile_cache") != nullptr,
                                                        keys.at("engine.compile_cache"), options.output);
  if (line.values.count("--device-tag")) options.device_tag = line.values.at("--device-tag").front();
  else if (const char* tag = std::getenv("CROSSBENCH_DEVICE_TAG")) options.device_tag = tag;
}

// JobOptions::settings: the canonical value of every schema key and of the
// recorded flags (the journal header and the cube attributes are written from
// it), and the engines' settings text (each engine parses its own).
template <typename Command>
void record_settings(const CanonicalValues& keys, const Settings& settings,
                     const std::map<std::string, std::string>& worker_commands, Command& options) {
  options.settings = keys;
  for (const auto& [key, setting] : options.settings) options.engine.settings[key] = setting;
  for (const auto& engine : options.matrix.engines)
    if (worker_commands.count(engine)) options.engine.settings[worker_command_key(engine)] = worker_commands.at(engine);
  options.settings["output.path"] = options.output.string();
  // The matrix keys as written.
  for (const auto& key : {"matrix.networks", "matrix.engines", "matrix.precisions", "matrix.batches", "matrix.phases"})
    options.settings[key] = find_setting(settings, key)->first;
  const auto* gpus = find_setting(settings, "matrix.gpus");
  options.settings["matrix.gpus"] = gpus ? gpus->first : find_option("matrix.gpus")->default_value;
  // The recorded flags: a field's value, or (another command's flag: --resume in
  // a plan) its row's default; --job and --device-tag as derived.
  for (const auto& spec : options_schema())
    if (spec.key.empty() && !spec.recorded_as.empty())
      options.settings[spec.flag] = field_text(spec.field, options).value_or(spec.default_canonical().value_or(""));
  options.settings["--job"] = options.job_file.string();
  options.settings["--device-tag"] = options.device_tag;
}

template <typename Command>
constexpr const char* command_name() {
  if constexpr (std::is_same_v<Command, RunOptions>) return "run";
  else if constexpr (std::is_same_v<Command, PlanOptions>) return "plan";
  else if constexpr (std::is_same_v<Command, CheckOptions>) return "check";
  else if constexpr (std::is_same_v<Command, MergeOptions>) return "merge";
  else if constexpr (std::is_same_v<Command, ListOptions>) return "list";
  else if constexpr (std::is_same_v<Command, DescribeOptions>) return "describe";
  else return "export-network";
}

// The one positional word of a command that takes exactly one (list's list, a network); a second
// one is named.
std::string the_one_word(const std::string& command, const std::vector<std::string>& words) {
  if (words.empty()) throw UsageError("usage: " + command_usage(command));
  if (words.size() > 1) throw UsageError("usage: " + command_usage(command) + "; unexpected '" + words[1] + "'");
  return words.front();
}

// The positional words of the commands that read no job (merge's input cubes, list's one list,
// describe's and export-network's network) and the checks of their flags that no row states.
void take_words(const CommandLine& line, MergeOptions& options) {
  options.inputs.assign(line.words.begin(), line.words.end());
}
void take_words(const CommandLine& line, ListOptions& options) { options.topic = the_one_word("list", line.words); }
void take_words(const CommandLine& line, DescribeOptions& options) { options.network = the_one_word("describe", line.words); }
void take_words(const CommandLine& line, ExportNetworkOptions& options) {
  options.network = the_one_word("export-network", line.words);
  // Absent, --output leaves the field empty (stdout); given, it must name a file.
  if (line.values.count("--output") && options.output.empty())
    throw UsageError("export-network: --output is empty; usage: " + command_usage("export-network"));
}

// `crossbench merge|list|describe|export-network`: the command's flags by its schema
// rows, its positional words into its struct; nullopt when --help asked for the command's help.
template <typename Command>
std::optional<Command> parse_command_words(const std::vector<std::string>& arguments) {
  const std::string command = command_name<Command>();
  const CommandLine line = split_command_line(command, arguments);
  if (line.help) return std::nullopt;
  Command options;
  fill_fields(command, read_flag_values(command, line), options);
  take_words(line, options);
  return options;
}

}  // namespace

template <typename Command>
std::optional<Command> parse_command_options(const std::vector<std::string>& arguments,
                                             const std::filesystem::path& default_job, const std::string& command_line) {
  const std::string command = command_name<Command>();
  const CommandLine line = split_command_line(command, arguments);
  if (line.help) return std::nullopt;
  Command options;
  options.command_line = command_line;
  // The command's own flags first: a bad flag is refused before the job file is read.
  fill_fields(command, read_flag_values(command, line), options);
  check_flag_rules(options);
  check_cell_regex("--filter", options.cell_filter);
  check_cell_regex("--first", options.first_cells);
  const auto given_job = line.values.find("--job");
  options.job_file = given_job != line.values.end() ? resolve_job_file(given_job->second.front()) : default_job;
  options.job_text = read_regular_text_file(options.job_file, "job file");
  options.job_file = std::filesystem::absolute(options.job_file);
  options.job_name = options.job_file.stem().string();
  const Settings settings = read_settings(line, options);
  const std::map<std::string, std::string> worker_commands = read_matrix(settings, options.job_file, options.matrix);
  CanonicalValues keys = read_key_values(settings);
  fill_fields(command, keys, options);
  if (options.measure.max_steps < options.measure.min_steps)
    throw UsageError("job file '" + options.job_file.string() + "': [measure] max_steps (" +
                     std::to_string(options.measure.max_steps) + ") is below min_steps (" +
                     std::to_string(options.measure.min_steps) + ")");
  derive_compound_values(command, line, settings, keys, options);
  record_settings(keys, settings, worker_commands, options);
  // The engines' own settings, checked here, before MPI starts, so that a bad
  // combination or file is refused (exit 2) before any output exists.
  check_engine_settings(options.engine);
  return options;
}

template std::optional<RunOptions> parse_command_options<RunOptions>(const std::vector<std::string>&,
                                                                     const std::filesystem::path&, const std::string&);
template std::optional<PlanOptions> parse_command_options<PlanOptions>(const std::vector<std::string>&,
                                                                       const std::filesystem::path&, const std::string&);
template std::optional<CheckOptions> parse_command_options<CheckOptions>(const std::vector<std::string>&,
                                                                         const std::filesystem::path&, const std::string&);

template <typename Command>
std::optional<Command> command_options_or_help(const CommandContext& context) {
  std::optional<Command> options;
  if constexpr (std::is_base_of_v<JobOptions, Command>)
    options = parse_command_options<Command>(context.arguments, context.default_job, context.command_line);
  else
    options = parse_command_words<Command>(context.arguments);
  if (!options) std::cout << command_help(command_name<Command>());
  return options;
}

template std::optional<RunOptions> command_options_or_help<RunOptions>(const CommandContext&);
template std::optional<PlanOptions> command_options_or_help<PlanOptions>(const CommandContext&);
template std::optional<CheckOptions> command_options_or_help<CheckOptions>(const CommandContext&);
template std::optional<MergeOptions> command_options_or_help<MergeOptions>(const CommandContext&);
template std::optional<ListOptions> command_options_or_help<ListOptions>(const CommandContext&);
template std::optional<DescribeOptions> command_options_or_help<DescribeOptions>(const CommandContext&);
template std::optional<ExportNetworkOptions> command_options_or_help<ExportNetworkOptions>(const CommandContext&);

void check_output_is_free(const RunOptions& options) {
  // --output must name a file in an existing directory: a typo must not scatter
  // results; the job file's own [output] path (or the default results/) is created.
  std::error_code error;
  const auto directory = options.output.has_parent_path() ? options.output.parent_path() : std::filesystem::path(".");
  if (options.output_from_command_line && !std::filesystem::is_directory(directory, error))
    throw UsageError("--output '" + options.output.string() + "': directory '" + directory.string() +
                     "' does not exist");
  if (std::filesystem::is_directory(options.output, error))
    throw UsageError("output '" + options.output.string() + "' is a directory; give a file path such as " +
                     (options.output / (options.job_name + ".h5")).string());
  // No data is lost: an earlier run's cube or journal is continued or replaced only when asked.
  const std::filesystem::path journal(options.output.string() + ".journal");
  if (options.resume && !std::filesystem::exists(journal, error))
    throw UsageError("--resume: nothing to resume: there is no journal '" + journal.string() + "'");
  if (!options.resume && !options.overwrite) {
    for (const auto& existing : {options.output, journal})
      if (std::filesystem::exists(existing, error))
        throw UsageError("'" + existing.string() + "' exists from an earlier run; continue it with --resume, " +
                         "replace it with --overwrite, or choose another --output");
  }
}

}  // namespace crossbench
