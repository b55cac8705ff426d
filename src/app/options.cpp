// Parsing of job files (INI, Boost.ProgramOptions config files) and the
// command line of `crossbench run` / `crossbench plan`.
#include "crossbench/options.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <type_traits>
#include <sstream>

#include "crossbench/error.hpp"
#include "crossbench/network.hpp"
#include "crossbench/text_file.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/worker/worker_engine.hpp"

namespace po = boost::program_options;

namespace crossbench {
namespace {

constexpr std::int64_t kLargestBatch = 1 << 20;  // a batch beyond this is a typo, not a benchmark

// Every job-file key, declared once: as the source of the valid keys and their help.
const std::vector<std::tuple<std::string, std::string, std::string>>& key_table() {
  static const std::vector<std::tuple<std::string, std::string, std::string>> table{
      {"matrix", "networks", "networks to run, comma-separated (crossbench list networks)"},
      {"matrix", "engines", "engines, comma-separated; auto = each device's native engine"},
      {"matrix", "precisions", "fp32, tf32, fp16, bf16, amp-fp16, amp-bf16 (DESIGN.md: one meaning per precision)"},
      {"matrix", "batches", "batch sizes (images per step), comma-separated integers"},
      {"matrix", "phases", "inference, training"},
      {"matrix", "gpus", "devices of one key training together, data parallel, comma-separated (default 1; batch is per device)"},
      {"measure", "warmup", "untimed warm-up steps (default 10)"},
      {"measure", "min_steps", "timed steps before the stopping rule applies (default 100)"},
      {"measure", "max_steps", "timed steps at most (default 10000)"},
      {"measure", "target_ci", "stop when the 95% CI half-width of the median is below this fraction (default 0.01)"},
      {"measure", "cell_time_limit_s", "wall-clock limit per cell in seconds (default 600)"},
      {"measure", "seed", "seed of the synthetic weights, inputs and labels (default 42)"},
      {"measure", "update", "training weight update: none or sgd (default none)"},
      {"measure", "learning_rate", "learning rate of --update sgd (default 0.01)"},
      {"measure", "layer_times", "true: after an ok cell's timed steps, a separate pass times each layer's forward and backward; never changes the headline (default false); --layer-times"},
      {"measure", "layer_time_repetitions", "profiled steps of --layer-times; each layer's time is their median (default 10)"},
      {"engine", "algo", "GPU convolution algorithms: heuristic (the library's first choice) or exhaustive (measured search, untimed) (default heuristic)"},
      {"engine", "algo_cache", "exhaustive: a JSON file of measured algorithm choices, keyed by device, library versions and layer signature; a warm cache replays them with no search, misses are searched and appended (default: none, choices kept in memory for the run); --algo-cache"},
      {"engine", "workspace_limit_mb", "GPU convolution workspace limit per convolution [MiB] (default 1024)"},
      {"engine", "layout", "auto (NCHW for fp32/tf32, NHWC for fp16/bf16), nchw or nhwc (default auto)"},
      {"engine", "cuda_graphs", "true: capture each step as a CUDA graph and replay it (default false)"},
      {"engine", "compile_mode", "pytorch-compile: torch.compile mode, reduce-overhead (CUDA graphs) or max-autotune (default reduce-overhead)"},
      {"engine", "bucket_mb", "data-parallel gradient all-reduce bucket size [MiB] (default 25)"},
      {"output", "path", "the results cube (default results/<job name>.h5)"},
  };
  return table;
}

std::string join(const std::vector<std::string>& values, const char* separator = ", ") {
  std::string text;
  for (const auto& value : values) text += (text.empty() ? "" : separator) + value;
  return text;
}

std::string section_list() {
  std::vector<std::string> sections;
  for (const auto& [section, key, help] : key_table())
    if (std::find(sections.begin(), sections.end(), "[" + section + "]") == sections.end()) sections.push_back("[" + section + "]");
  return join(sections);
}

std::vector<std::string> keys_of(const std::string& section) {
  std::vector<std::string> keys;
  for (const auto& [table_section, key, help] : key_table())
    if (table_section == section) keys.push_back(key);
  return keys;
}

po::options_description job_description() {
  po::options_description description("job file");
  for (const auto& [section, key, help] : key_table())
    description.add_options()((section + "." + key).c_str(), po::value<std::string>(), help.c_str());
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

std::int64_t parse_integer(const std::string& origin, const std::string& what, const std::string& text) {
  std::size_t used = 0;
  long long value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw UsageError(origin + ": " + what + " must be an integer, not '" + text + "'");
  return value;
}

double parse_number(const std::string& origin, const std::string& what, const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw UsageError(origin + ": " + what + " must be a number, not '" + text + "'");
  return value;
}

// Values of the job file with the --set overrides applied: "section.key" → (value, origin).
using Settings = std::map<std::string, std::pair<std::string, std::string>>;

Settings read_job_file(const std::filesystem::path& path, const std::string& text) {
  Settings settings;
  std::istringstream stream(text);
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

void apply_override(Settings& settings, const std::string& assignment) {
  const auto equals = assignment.find('=');
  const std::string origin = "--set " + assignment;
  if (equals == std::string::npos)
    throw UsageError(origin + ": expected section.key=value, e.g. --set matrix.batches=1,2");
  const std::string dotted = assignment.substr(0, equals);
  const auto& table = key_table();
  const bool known = std::any_of(table.begin(), table.end(), [&](const auto& row) {
    return std::get<0>(row) + "." + std::get<1>(row) == dotted;
  });
  if (!known && dotted.rfind("workers.", 0) != 0) throw_unknown_key(origin, dotted);
  settings[dotted] = {assignment.substr(equals + 1), origin};
}

}  // namespace

const std::map<std::string, std::map<std::string, std::string>>& job_file_keys() {
  static const auto keys = [] {
    std::map<std::string, std::map<std::string, std::string>> result;
    for (const auto& [section, key, help] : key_table()) result[section][key] = help;
    return result;
  }();
  return keys;
}

std::string run_options_help() {
  std::ostringstream text;
  text << "usage: crossbench run|plan [--job FILE] [--set section.key=value ...] [--output PATH]\n"
          "                           [--device-tag TAG] [--replicas R] [--layer-times] [--quiet]\n"
          "                           [--resume [--allow-new-devices] | --overwrite] [--checkpoint-s S] [--stop-grace-s S]\n\n"
          "Job file keys (INI sections):\n";
  for (const auto& [section, keys] : job_file_keys()) {
    text << "  [" << section << "]\n";
    for (const auto& [key, help] : keys) text << "    " << key << ": " << help << "\n";
  }
  return text.str();
}

Options parse_run_options(const std::vector<std::string>& arguments, const std::filesystem::path& default_job,
                          const std::string& command_line) {
  po::options_description command("crossbench run");
  command.add_options()("job", po::value<std::string>(), "job file (INI)")(
      "set", po::value<std::vector<std::string>>()->composing(), "override: section.key=value")(
      "output", po::value<std::string>(), "the results cube")(
      "device-tag", po::value<std::string>(), "extends the device key")(
      "replicas", po::value<int>(), "measure each cell on R devices of a key")(
      "quiet", po::bool_switch(), "no per-cell lines")(
      "resume", po::bool_switch(), "continue the journal of an interrupted run")(
      "overwrite", po::bool_switch(), "replace an existing cube and journal")(
      "allow-new-devices", po::bool_switch(), "--resume may add device keys the journal does not have")(
      "checkpoint-s", po::value<double>(), "rewrite the cube this often [s]")(
      "stop-grace-s", po::value<double>(), "after a stop signal, the running cell may finish this long [s] (default 120)")(
      "algo", po::value<std::string>(), "= --set engine.algo=...")(
      "algo-cache", po::value<std::string>(), "= --set engine.algo_cache=FILE")(
      "layout", po::value<std::string>(), "= --set engine.layout=...")(
      "update", po::value<std::string>(), "= --set measure.update=...")(
      "gpus", po::value<std::string>(), "= --set matrix.gpus=...")(
      "cuda-graphs", po::bool_switch(), "= --set engine.cuda_graphs=true")(

      "layer-times", po::bool_switch(), "= --set measure.layer_times=true");
  po::variables_map given;
  try {
    po::store(po::command_line_parser(arguments).options(command).run(), given);
  } catch (const po::error& error) {
    throw UsageError(std::string("command line: ") + error.what() + "\n" + run_options_help());
  }

  Options options;
  options.command_line = command_line;
  options.quiet = given["quiet"].as<bool>();
  options.resume = given["resume"].as<bool>();
  options.overwrite = given["overwrite"].as<bool>();
  if (options.resume && options.overwrite) throw UsageError("--resume and --overwrite exclude each other");
  options.allow_new_devices = given["allow-new-devices"].as<bool>();
  if (options.allow_new_devices && !options.resume) throw UsageError("--allow-new-devices applies to --resume only");
  if (given.count("checkpoint-s")) {
    options.checkpoint_s = given["checkpoint-s"].as<double>();
    if (!(options.checkpoint_s > 0))
      throw UsageError("--checkpoint-s " + std::to_string(options.checkpoint_s) + " must be a positive number of seconds");
  }
  if (given.count("stop-grace-s")) {
    options.stop_grace_s = given["stop-grace-s"].as<double>();
    if (!(options.stop_grace_s >= 0 && options.stop_grace_s <= 1e6))
      throw UsageError("--stop-grace-s " + std::to_string(options.stop_grace_s) + " must be 0 to 1000000 seconds");
  }
  options.job_file = given.count("job") ? std::filesystem::path(given["job"].as<std::string>()) : default_job;
  options.job_text = read_regular_text_file(options.job_file, "job file");
  options.job_file = std::filesystem::absolute(options.job_file);
  options.job_name = options.job_file.stem().string();
  Settings settings = read_job_file(options.job_file, options.job_text);
  if (given.count("set"))
    for (const auto& assignment : given["set"].as<std::vector<std::string>>()) apply_override(settings, assignment);
  // Flags that are shorthands for job-file keys, validated the same way.
  if (given.count("algo")) apply_override(settings, "engine.algo=" + given["algo"].as<std::string>());
  if (given.count("algo-cache")) apply_override(settings, "engine.algo_cache=" + given["algo-cache"].as<std::string>());
  if (given.count("layout")) apply_override(settings, "engine.layout=" + given["layout"].as<std::string>());
  if (given.count("update")) apply_override(settings, "measure.update=" + given["update"].as<std::string>());
  if (given.count("gpus")) apply_override(settings, "matrix.gpus=" + given["gpus"].as<std::string>());
  if (given["cuda-graphs"].as<bool>()) apply_override(settings, "engine.cuda_graphs=true");
  if (given["layer-times"].as<bool>()) apply_override(settings, "measure.layer_times=true");

  const auto value = [&](const std::string& dotted) -> const std::pair<std::string, std::string>* {
    const auto found = settings.find(dotted);
    return found == settings.end() ? nullptr : &found->second;
  };
  const auto require = [&](const std::string& dotted) {
    const auto* setting = value(dotted);
    if (!setting)
      throw UsageError("job file '" + options.job_file.string() + "': the matrix is empty: [matrix] " +
                       dotted.substr(dotted.find('.') + 1) + " is missing");
    return *setting;
  };

  // [matrix]
  {
    const auto [text, origin] = require("matrix.networks");
    options.matrix.networks = parse_names(origin, "networks", text, network_names(),
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
      if (native || engine == "auto" || engine.empty())
        throw UsageError(setting.second + ": [workers] " + engine + ": '" + engine + "' is a native engine name, not a worker");
      if (split_worker_command(setting.first).empty())
        throw UsageError(setting.second + ": [workers] " + engine + " has an empty command");
      worker_commands[engine] = setting.first;
    }
  {
    std::vector<std::string> valid{"auto"};
    for (const auto& info : engine_catalog()) valid.push_back(info.name);
    for (const auto& [engine, command] : worker_commands) valid.push_back(engine);
    const auto [text, origin] = require("matrix.engines");
    options.matrix.engines = parse_names(origin, "engines", text, valid,
                                         [&](const std::string& name) -> std::optional<std::string> {
                                           if (std::find(valid.begin(), valid.end(), name) == valid.end()) return std::nullopt;
                                           return name;
                                         });
  }
  {
    const auto [text, origin] = require("matrix.precisions");
    options.matrix.precisions = parse_names(origin, "precisions", text, precision_names(), precision_from_string);
  }
  {
    const auto [text, origin] = require("matrix.phases");
    options.matrix.phases = parse_names(origin, "phases", text, phase_names(), phase_from_string);
  }
  {
    const auto [text, origin] = require("matrix.batches");
    options.matrix.batches = parse_names(origin, "batches", text, {"integers from 1 to 1048576"},
                                         [&](const std::string& item) -> std::optional<std::int64_t> {
                                           const auto batch = parse_integer(origin, "batch '" + item + "' in [matrix] batches", item);
                                           if (batch < 1 || batch > kLargestBatch)
                                             throw UsageError(origin + ": batch " + item +
                                                              " in [matrix] batches is out of range; valid: 1 to 1048576");
                                           return batch;
                                         });
  }

  if (const auto* gpus = value("matrix.gpus")) {
    const std::string origin = gpus->second;
    options.matrix.gpus = parse_names(origin, "gpus", gpus->first, {"integers from 1 to 4096"},
                                      [&](const std::string& item) -> std::optional<int> {
                                        const auto count = parse_integer(origin, "gpus '" + item + "' in [matrix] gpus", item);
                                        if (count < 1 || count > 4096)
                                          throw UsageError(origin + ": gpus " + item +
                                                           " in [matrix] gpus is out of range; valid: 1 to 4096");
                                        return static_cast<int>(count);
                                      });
  }

  // [measure]
  const auto integer_setting = [&](const std::string& dotted, std::int64_t fallback, std::int64_t low, std::int64_t high) {
    const auto* setting = value(dotted);
    if (!setting) return fallback;
    const auto number = parse_integer(setting->second, "[" + dotted.substr(0, dotted.find('.')) + "] " +
                                      dotted.substr(dotted.find('.') + 1), setting->first);
    if (number < low || number > high)
      throw UsageError(setting->second + ": " + dotted + " = " + setting->first + " is out of range; valid: " +
                       std::to_string(low) + " to " + std::to_string(high));
    return number;
  };
  const auto number_setting = [&](const std::string& dotted, double fallback, double low, double high) {
    const auto* setting = value(dotted);
    if (!setting) return fallback;
    const auto number = parse_number(setting->second, dotted, setting->first);
    if (!(number > low && number <= high))
      throw UsageError(setting->second + ": " + dotted + " = " + setting->first + " is out of range; valid: above " +
                       std::to_string(low) + " up to " + std::to_string(high));
    return number;
  };
  options.measure.warmup_steps = static_cast<int>(integer_setting("measure.warmup", 10, 0, 1000000));
  options.measure.min_steps = static_cast<int>(integer_setting("measure.min_steps", 100, 1, 10000000));
  options.measure.max_steps = static_cast<int>(integer_setting("measure.max_steps", 10000, 1, 10000000));
  if (options.measure.max_steps < options.measure.min_steps)
    throw UsageError("job file '" + options.job_file.string() + "': [measure] max_steps (" +
                     std::to_string(options.measure.max_steps) + ") is below min_steps (" +
                     std::to_string(options.measure.min_steps) + ")");
  options.measure.target_ci = number_setting("measure.target_ci", 0.01, 0.0, 1.0);
  options.measure.cell_time_limit_s = number_setting("measure.cell_time_limit_s", 600, 0.0, 1e7);
  options.engine.worker_timeout_s = options.measure.cell_time_limit_s;
  options.engine.seed = static_cast<std::uint64_t>(integer_setting("measure.seed", 42, 0, INT64_MAX));
  options.engine.learning_rate = number_setting("measure.learning_rate", 0.01, 0.0, 1e3);
  if (const auto* update = value("measure.update")) {
    if (update->first == "none") options.engine.update = Update::none;
    else if (update->first == "sgd") options.engine.update = Update::sgd;
    else throw UsageError(update->second + ": unknown [measure] update '" + update->first + "'; valid: none, sgd");
  }

  if (const auto* layer_times = value("measure.layer_times")) {
    if (layer_times->first == "true") options.measure.layer_times = true;
    else if (layer_times->first == "false") options.measure.layer_times = false;
    else throw UsageError(layer_times->second + ": [measure] layer_times must be true or false, not '" + layer_times->first + "'");
  }
  options.measure.layer_time_repetitions = static_cast<int>(integer_setting("measure.layer_time_repetitions", 10, 1, 10000));

  for (const auto& engine : options.matrix.engines)
    if (worker_commands.count(engine)) options.engine.worker_commands[engine] = split_worker_command(worker_commands[engine]);

  // [engine]
  if (const auto* algo = value("engine.algo")) {
    if (algo->first == "heuristic") options.engine.algorithm = AlgorithmPolicy::heuristic;
    else if (algo->first == "exhaustive") options.engine.algorithm = AlgorithmPolicy::exhaustive;
    else throw UsageError(algo->second + ": unknown [engine] algo '" + algo->first + "'; valid: heuristic, exhaustive");
  }
  if (const auto* cache = value("engine.algo_cache")) {
    if (cache->first.empty()) throw UsageError(cache->second + ": [engine] algo_cache needs a file name");
    if (options.engine.algorithm != AlgorithmPolicy::exhaustive)
      throw UsageError(cache->second + ": [engine] algo_cache applies to algo = exhaustive (the measured search) only");
    options.engine.algorithm_cache_path = std::filesystem::absolute(cache->first).string();
    // Read once here, before MPI starts, so that a corrupt file is refused (exit 2) before any output exists.
    cudnn::AlgorithmCache(options.engine.algorithm_cache_path, {});
  }
  options.engine.workspace_limit_bytes = integer_setting("engine.workspace_limit_mb", 1024, 0, 1 << 24) << 20;
  if (const auto* layout = value("engine.layout")) {
    if (layout->first == "auto") options.engine.layout = Layout::automatic;
    else if (layout->first == "nchw") options.engine.layout = Layout::nchw;
    else if (layout->first == "nhwc") options.engine.layout = Layout::nhwc;
    else throw UsageError(layout->second + ": unknown [engine] layout '" + layout->first + "'; valid: auto, nchw, nhwc");
  }
  options.engine.bucket_bytes = integer_setting("engine.bucket_mb", 25, 1, 1 << 16) << 20;
  if (const auto* graphs = value("engine.cuda_graphs")) {
    if (graphs->first == "true") options.engine.cuda_graphs = true;
    else if (graphs->first == "false") options.engine.cuda_graphs = false;
    else throw UsageError(graphs->second + ": [engine] cuda_graphs must be true or false, not '" + graphs->first + "'");
  }

  if (const auto* mode = value("engine.compile_mode")) {
    if (mode->first != "reduce-overhead" && mode->first != "max-autotune")
      throw UsageError(mode->second + ": unknown [engine] compile_mode '" + mode->first +
                       "'; valid: reduce-overhead, max-autotune");
    options.engine.compile_mode = mode->first;
  }

  // [output] and the command line.
  options.output_from_command_line = given.count("output") > 0;
  options.output = options.output_from_command_line ? std::filesystem::path(given["output"].as<std::string>())
                   : value("output.path") ? std::filesystem::path(value("output.path")->first)
                                          : std::filesystem::path("results") / (options.job_name + ".h5");

  if (given.count("device-tag")) options.device_tag = given["device-tag"].as<std::string>();
  else if (const char* tag = std::getenv("CROSSBENCH_DEVICE_TAG")) options.device_tag = tag;
  if (given.count("replicas")) {
    options.replicas = given["replicas"].as<int>();
    if (options.replicas < 1 || options.replicas > 4096)
      throw UsageError("--replicas " + std::to_string(options.replicas) + " is out of range; valid: 1 to 4096");
  }
  return options;
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
