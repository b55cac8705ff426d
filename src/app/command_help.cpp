// The --help of `crossbench run|plan|check` (src/app/options.hpp), generated
// from the options schema: every flag the command takes and every job-file key,
// with its default, range and help.
#include <map>
#include <sstream>
#include <string>

#include "app/options.hpp"
#include "crossbench/options_schema.hpp"

namespace crossbench {
namespace {

// A choice's values as --help writes them: "heuristic|exhaustive".
std::string alternatives(const OptionSpec& spec) {
  std::string text;
  for (const auto& choice : spec.choices) text += (text.empty() ? "" : "|") + choice;
  return text;
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
  return spec.type == OptionType::choice ? alternatives(spec) : "LIST";
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
    if (spec.type != OptionType::flag && !spec.is_switch()) name += " " + value_name(spec);
    else if (spec.type == OptionType::choice) name += "[=" + alternatives(spec) + "]";
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

}  // namespace crossbench
