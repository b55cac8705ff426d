// Parsing of job files (INI) and the command line of `crossbench
// run|plan|check`, both by Boost.ProgramOptions from the options schema
// (src/core/options_schema.cpp): this file knows how to turn checked text into
// Options, the schema knows which keys and flags exist and what they accept.
#include "app/options.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <type_traits>
#include <sstream>

#include "crossbench/data_paths.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/options_schema.hpp"
#include "crossbench/text_file.hpp"

namespace po = boost::program_options;

namespace crossbench {
namespace {

std::string join(const std::vector<std::string>& values, const char* separator = ", ") {
  std::string text;
  for (const auto& value : values) text += (text.empty() ? "" : separator) + value;
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
  bool help = false;
};

// The command's flags as Boost.ProgramOptions reads them, from the schema: a
// switch takes no value, a boolean an optional one (`--layer-times`,
// `--layer-times=false`), every other flag one value; --set may repeat.
// A flag that means "true" on its own: a boolean, or a choice that has "true"
// among more values (--layer-times, --layer-times=all).
bool is_switch(const OptionSpec& spec) {
  return spec.type == OptionType::boolean ||
         (spec.type == OptionType::choice && std::find(spec.choices.begin(), spec.choices.end(), "true") != spec.choices.end());
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
    else if (is_switch(spec))
      description.add_options()(name.c_str(), po::value<std::string>()->implicit_value("true"), spec.help.c_str());
    else
      description.add_options()(name.c_str(), po::value<std::string>(), spec.help.c_str());
  }
  return description;
}

CommandLine split_command_line(const std::string& command, const std::vector<std::string>& arguments) {
  const po::options_description description = command_line_description(command);
  po::parsed_options parsed(&description);
  try {
    // Long flags exactly as the schema spells them (no abbreviations), -h.
    const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    parsed = po::command_line_parser(arguments).options(description).style(style).run();
  } catch (const po::unknown_option& error) {
    std::vector<std::string> valid;
    for (const auto& row : options_schema())
      if (!row.flag.empty() && row.for_command(command)) valid.push_back(row.flag);
    throw UsageError("crossbench " + command + ": unknown flag '" + error.get_option_name() + "'; valid: " + join(valid) +
                     ", --help");
  } catch (const po::invalid_command_line_syntax& error) {
    const std::string flag = error.get_option_name();
    const OptionSpec* spec = find_option(flag);
    if (error.kind() == po::invalid_command_line_syntax::extra_parameter) throw UsageError(flag + " takes no value");
    throw UsageError(flag + " needs a value" + (spec != nullptr ? " (" + spec->help + ")" : std::string()));
  } catch (const po::error& error) {
    throw UsageError("crossbench " + command + ": " + error.what() + " (crossbench " + command + " --help lists the flags)");
  }
  CommandLine line;
  for (const po::option& option : parsed.options) {
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
    values.push_back(option.value.empty() ? (find_option(flag)->type == OptionType::flag ? "" : "true") : option.value.front());
  }
  return line;
}

// The placeholder of a flag's value in --help.
std::string value_name(const OptionSpec& spec) {
  static const std::map<std::string, std::string> names{
      {"--job", "FILE"},  {"--set", "KEY=VALUE"}, {"--output", "PATH"},    {"--device-tag", "TAG"},
      {"--replicas", "R"}, {"--filter", "REGEX"},  {"--jsonl", "FILE"},     {"--ranks", "N"},
      {"--device-json", "FILE"}, {"--checkpoint-s", "SECONDS"}, {"--heartbeat-s", "SECONDS"}, {"--stop-grace-s", "SECONDS"}, {"--calibrate", "CUBE.h5[,CUBE.h5...]"},
      {"--repetitions", "N"}};
  const auto found = names.find(spec.flag);
  if (found != names.end()) return found->second;
  return spec.type == OptionType::choice ? join(spec.choices, "|") : "LIST";
}

// A key's setting from the job file or the command line: its value and where it came from; nullptr when absent.
const std::pair<std::string, std::string>* find_setting(const Settings& settings, const std::string& dotted) {
  const auto found = settings.find(dotted);
  return found == settings.end() ? nullptr : &found->second;
}

// The flags of the command line that stand for no job-file key (--quiet, --ranks, --filter, ...).
void read_flags(const CommandLine& line, Options& options) {
  const auto given = [&](const std::string& flag) { return line.values.count(flag) > 0; };
  const auto flag_value = [&](const std::string& flag) { return line.values.at(flag).front(); };
  options.quiet = given("--quiet");
  options.resume = given("--resume");
  options.overwrite = given("--overwrite");
  options.json = given("--json");
  options.workers_on_cpu = given("--cpu");
  if (options.resume && options.overwrite) throw UsageError("--resume and --overwrite exclude each other");
  // Command-line values checked by their schema rows.
  const auto checked_flag = [&](const std::string& flag) {
    return validated_setting(*find_option(flag), flag_value(flag), "command line");
  };
  if (given("--checkpoint-s")) options.checkpoint_s = std::stod(checked_flag("--checkpoint-s"));
  if (given("--stop-grace-s")) options.stop_grace_s = std::stod(checked_flag("--stop-grace-s"));
  if (given("--heartbeat-s")) options.heartbeat_s = std::stod(checked_flag("--heartbeat-s"));
  options.allow_new_devices = given("--allow-new-devices");
  if (options.allow_new_devices && !options.resume) throw UsageError("--allow-new-devices applies to --resume only");
  options.bind_near_gpu = given("--bind-near-gpu");
  options.allow_build_change = given("--allow-build-change");
  if (options.allow_build_change && !options.resume) throw UsageError("--allow-build-change applies to --resume only");
  options.salvage = given("--salvage");
  if (options.salvage && !options.resume) throw UsageError("--salvage applies to --resume only");
  if (given("--ranks")) options.simulated_ranks = std::stoi(checked_flag("--ranks"));
  if (given("--device-json")) options.device_json = flag_value("--device-json");
  if (!options.device_json.empty() && options.simulated_ranks == 0) throw UsageError("--device-json needs --ranks N");
  if (given("--jsonl")) options.jsonl = flag_value("--jsonl");
  if (given("--calibrate"))
    for (const auto& cube : split_list(flag_value("--calibrate"))) {
      if (cube.empty()) throw UsageError("--calibrate '" + flag_value("--calibrate") + "' has an empty entry; give CUBE.h5[,CUBE.h5...]");
      options.calibrate.emplace_back(cube);
    }
  if (given("--filter")) {
    options.cell_filter = flag_value("--filter");
    try {
      std::regex(options.cell_filter, std::regex::ECMAScript);
    } catch (const std::regex_error& error) {
      throw UsageError("--filter '" + options.cell_filter + "' is not a regular expression: " + error.what());
    }
  }
}

// The job file's settings with the command line's --set and key flags (--algo ...) applied over them.
Settings read_settings(const CommandLine& line, const Options& options) {
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

// Every single-valued key: checked against its schema row, its canonical
// text recorded in options.settings, and the typed fields filled from it.
void read_single_valued(const Settings& settings, Options& options) {
  const auto value = [&](const std::string& dotted) { return find_setting(settings, dotted); };
  for (const auto& spec : options_schema()) {
    if (spec.key.empty() || spec.type == OptionType::names || spec.type == OptionType::integers) continue;
    const auto* setting = value(spec.key);
    options.settings[spec.key] = setting ? validated_setting(spec, setting->first, setting->second) : spec.default_value;
  }
  const auto integer = [&](const std::string& key) { return std::stoll(options.settings.at(key)); };
  const auto number = [&](const std::string& key) { return std::stod(options.settings.at(key)); };
  const auto text = [&](const std::string& key) -> const std::string& { return options.settings.at(key); };
  options.measure.warmup_steps = static_cast<int>(integer("measure.warmup"));
  options.measure.min_steps = static_cast<int>(integer("measure.min_steps"));
  options.measure.max_steps = static_cast<int>(integer("measure.max_steps"));
  if (options.measure.max_steps < options.measure.min_steps)
    throw UsageError("job file '" + options.job_file.string() + "': [measure] max_steps (" +
                     std::to_string(options.measure.max_steps) + ") is below min_steps (" +
                     std::to_string(options.measure.min_steps) + ")");
  options.measure.target_ci = number("measure.target_ci");
  options.measure.cell_time_limit_s = number("measure.cell_time_limit_s");
  options.engine.seed = static_cast<std::uint64_t>(integer("measure.seed"));
  options.engine.learning_rate = number("measure.learning_rate");
  options.engine.update = text("measure.update") == "sgd" ? Update::sgd : Update::none;
  options.measure.layer_times = text("measure.layer_times") != "false";
  options.layer_times_shown = text("measure.layer_times") == "all" ? 0 : 10;
  options.measure.layer_time_repetitions = static_cast<int>(integer("measure.layer_time_repetitions"));
  options.measure.repetitions = static_cast<int>(integer("measure.repetitions"));

  options.engine.bucket_bytes = integer("engine.bucket_mb") << 20;
  // A file every rank reads and writes: named absolutely, as recorded.
  if (const std::string& cache = text("engine.algo_cache"); !cache.empty())
    options.settings["engine.algo_cache"] = std::filesystem::absolute(cache).string();
}

// engine.compile_cache: "<output>" becomes the cube's path and the directory is named absolutely
// (every rank's workers share it, whatever their working directory); `check` writes no cube, so
// there it is none unless the job or the command line names a directory.
void resolve_compile_cache(const std::string& command, bool given, Options& options) {
  const std::string key = "engine.compile_cache";
  std::string cache = options.settings.at(key);
  if (command == "check" && !given) cache = "none";
  if (cache != "none") {
    static const std::string placeholder = "<output>";
    for (auto at = cache.find(placeholder); at != std::string::npos; at = cache.find(placeholder, at))
      cache.replace(at, placeholder.size(), options.output.string());
    if (cache.empty())
      throw UsageError("[engine] compile_cache is empty: name a directory, or none for no persistent compile cache");
    cache = std::filesystem::absolute(cache).lexically_normal().string();
  }
  options.settings[key] = options.engine.settings[key] = cache;
}

}  // namespace

std::string command_help(const std::string& command) {
  std::ostringstream text;
  const bool measures = command == "run" || command == "plan";
  text << "usage: crossbench " << command << " [--job FILE] [--set section.key=value ...] [flags]\n\n";
  if (command == "run")
    text << "Runs the job's matrix on every rank (mpirun/srun for more than one) and writes the results cube.\n";
  else if (command == "plan")
    text << "Prints the cells each rank would run, with their estimated cost (the cost model, or with --calibrate\n"
            "the wall times earlier runs recorded) and where each estimate comes from; runs nothing.\n";
  else
    text << "Runs each cell's output check (loss, gradient norms) and prints JSON lines; no timing, no cube.\n";
  text << "\nFlags (default in brackets):\n";
  for (const auto& spec : options_schema()) {
    if (spec.flag.empty() || !spec.for_command(command)) continue;
    std::string name = spec.short_flag.empty() ? spec.flag : spec.short_flag + ", " + spec.flag;
    if (spec.type != OptionType::flag && !is_switch(spec)) name += " " + value_name(spec);
    else if (spec.type == OptionType::choice) name += "[=" + join(spec.choices, "|") + "]";
    text << "  " << name << "\n      " << spec.help << (spec.key.empty() ? "" : " (= --set " + spec.key + "=...)")
         << " [" << spec.default_value << "]\n";
  }
  text << "  --help\n      this text\n\nJob-file keys ([section] key = value; --set section.key=value):\n";
  std::string section;
  for (const auto& spec : options_schema()) {
    if (spec.key.empty() || !(spec.for_command(command) || measures)) continue;
    if (spec.section() != section) text << "  [" << (section = spec.section()) << "]\n";
    text << "    " << spec.name() << " = " << spec.default_value;
    if (!spec.range_text().empty()) text << "   (valid: " << spec.range_text() << ")";
    text << (spec.changes_numbers ? "   changes the numbers" : "") << "\n        " << spec.help << "\n";
  }
  text << "  [workers]\n    ENGINE = COMMAND   a framework worker (src/workers/README protocol)\n";
  text << "\nExit codes: 0 done; 1 a failure (library error, I/O); 2 bad input (nothing written)";
  if (command == "run") text << "; 3 stopped by a signal (cube written, continue with --resume)";
  text << "\n\nExamples:\n";
  if (command == "run")
    text << "  crossbench run --job jobs/seed2017.ini --output results/h200.h5\n"
            "  mpirun -n 8 crossbench run --job jobs/seed2017.ini --filter 'resnet50/.*/training'\n"
            "  crossbench run --job jobs/quick.ini --set measure.warmup=5 --device-tag power=300W --jsonl cells.jsonl\n";
  else if (command == "plan")
    text << "  crossbench plan --job jobs/seed2017.ini --ranks 8\n"
            "  crossbench list devices --json > devices.json\n"
            "  crossbench plan --job jobs/seed2017.ini --ranks 4 --device-json devices.json --json\n"
            "  crossbench plan --job jobs/seed2017.ini --ranks 8 --calibrate results/h200.h5\n";
  else
    text << "  crossbench check --job jobs/quick.ini --filter alexnet\n";
  return text.str();
}

Options parse_command_options(const std::string& command, const std::vector<std::string>& arguments,
                              const std::filesystem::path& default_job, const std::string& command_line) {
  const CommandLine line = split_command_line(command, arguments);
  const auto given = [&](const std::string& flag) { return line.values.count(flag) > 0; };
  const auto flag_value = [&](const std::string& flag) { return line.values.at(flag).front(); };
  Options options;
  if (line.help) {
    options.help = true;
    return options;
  }
  options.command_line = command_line;
  read_flags(line, options);
  options.job_file = given("--job") ? resolve_job_file(flag_value("--job")) : default_job;
  options.job_text = read_regular_text_file(options.job_file, "job file");
  options.job_file = std::filesystem::absolute(options.job_file);
  options.job_name = options.job_file.stem().string();
  const Settings settings = read_settings(line, options);
  const auto value = [&](const std::string& dotted) { return find_setting(settings, dotted); };
  std::map<std::string, std::string> worker_commands = read_matrix(settings, options.job_file, options.matrix);
  read_single_valued(settings, options);
  // The engines' own settings travel as text; each engine parses its own
  // (EngineConfig::settings). Checked here, before MPI starts, so that a bad
  // combination or file is refused (exit 2) before any output exists.
  for (const auto& [key, setting] : options.settings) options.engine.settings[key] = setting;
  for (const auto& engine : options.matrix.engines)
    if (worker_commands.count(engine)) options.engine.settings[worker_command_key(engine)] = worker_commands[engine];
  check_engine_settings(options.engine);

  // [output] and the command line.
  options.output_from_command_line = given("--output");
  options.output = options.output_from_command_line ? std::filesystem::path(flag_value("--output"))
                   : value("output.path") ? std::filesystem::path(value("output.path")->first)
                                          : std::filesystem::path("results") / (options.job_name + ".h5");
  options.settings["output.path"] = options.output.string();
  resolve_compile_cache(command, value("engine.compile_cache") != nullptr, options);

  if (given("--device-tag")) options.device_tag = flag_value("--device-tag");
  else if (const char* tag = std::getenv("CROSSBENCH_DEVICE_TAG")) options.device_tag = tag;
  if (given("--replicas"))
    options.replicas = std::stoi(validated_setting(*find_option("--replicas"), flag_value("--replicas"), "command line"));
  // The matrix keys and the command-line facts, as recorded.
  for (const auto& key : {"matrix.networks", "matrix.engines", "matrix.precisions", "matrix.batches", "matrix.phases"})
    options.settings[key] = value(key)->first;
  options.settings["matrix.gpus"] = value("matrix.gpus") ? value("matrix.gpus")->first : "1";
  options.settings["--job"] = options.job_file.string();
  options.settings["--device-tag"] = options.device_tag;
  options.settings["--replicas"] = std::to_string(options.replicas);
  options.settings["--filter"] = options.cell_filter;
  options.settings["--resume"] = options.resume ? "true" : "false";
  options.settings["--bind-near-gpu"] = options.bind_near_gpu ? "true" : "false";
  return options;
}

std::optional<Options> command_options_or_help(const std::string& command, const CommandContext& context) {
  Options options = parse_command_options(command, context.arguments, context.default_job, context.command_line);
  if (!options.help) return options;
  std::cout << command_help(command);
  return std::nullopt;
}

void check_output_is_free(const Options& options) {
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
