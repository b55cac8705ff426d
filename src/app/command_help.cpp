// The --help of `crossbench run|plan|check|merge|list|describe|export-network` (src/app/options.hpp),
// generated from the options schema: every flag the command takes and, for the
// commands that read a job, every job-file key, with its default, range and
// help; around them each command's synopsis, what it does, its exit codes and
// examples.
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
  if (spec.flag == "--output" && spec.for_command("export-network")) return "FILE";  // a JSON file, not a cube
  static const std::map<std::string, std::string> names{
      {"--job", "FILE"},  {"--set", "KEY=VALUE"}, {"--output", "PATH"},    {"--device-tag", "TAG"},
      {"--replicas", "R"}, {"--filter", "REGEX"},  {"--jsonl", "FILE"},     {"--ranks", "N"},
      {"--device-json", "FILE"}, {"--checkpoint-s", "SECONDS"}, {"--heartbeat-s", "SECONDS"}, {"--stop-grace-s", "SECONDS"}, {"--calibrate", "CUBE.h5[,CUBE.h5...]"},
      {"--repetitions", "N"}, {"--prefer", "first|last|FILE"}};
  const auto found = names.find(spec.flag);
  if (found != names.end()) return found->second;
  return spec.type == OptionType::choice ? alternatives(spec) : "LIST";
}

bool reads_a_job(const std::string& command) { return command == "run" || command == "plan" || command == "check"; }

// What the command does, after its synopsis.
std::string about(const std::string& command) {
  if (command == "run")
    return "Runs the job's matrix on every rank (mpirun/srun for more than one) and writes the results cube.\n";
  if (command == "plan")
    return "Prints the cells each rank would run, with their estimated cost (the cost model, or with --calibrate\n"
           "the wall times earlier runs recorded) and where each estimate comes from; runs nothing.\n";
  if (command == "check")
    return "Runs each cell's output check (loss, gradient norms) and prints JSON lines; no timing, no cube.\n";
  if (command == "merge")
    return "One cube from the cubes of separate runs (e.g. each loaner system tested on its own, with its own\n"
           "--device-tag): the union of their axes, every input's cells, the inputs' /ranks one after another,\n"
           "and each input's root attributes and ranks in the group /sources. The root keeps the attributes\n"
           "all inputs agree on. Each cell records its input (`source`) and the run segment that measured it;\n"
           "the inputs' run segments are kept in /segments. A warning names each input that is incomplete and\n"
           "each setting that changes the numbers on which the inputs differ. Inputs of schema\n"
           "crossbench-cube/2, /3 and /4 are read; the result is /4.\n";
  if (command == "describe")
    return "Per layer of the network: kind, output shape (channels x height x width), forward MFLOP per image,\n"
           "parameters and activation KiB per image (fp32); then the totals (the literature's GFLOP/image:\n"
           "2 x the multiply-adds of convolutions and fully-connected layers).\n"
           "NETWORK: one of crossbench list networks.\n";
  if (command == "export-network")
    return "The network's layer graph as JSON (format crossbench-network/1): what framework workers build their\n"
           "model from, so that every engine runs the identical network. Written to stdout, or to FILE.\n"
           "NETWORK: one of crossbench list networks.\n";
  return "The networks (with FLOPs and parameters), the engines (built or not, and the framework workers), the\n"
         "devices this process sees, the options, or the precisions with the recipe each names; --json for scripts.\n";
}

std::string exit_codes(const std::string& command) {
  if (command == "run")
    return "0 done; 1 a failure (library error, I/O); 2 bad input (nothing written); 3 stopped by a signal (cube "
           "written, continue with --resume)";
  if (command == "plan" || command == "check") return "0 done; 1 a failure (library error, I/O); 2 bad input (nothing written)";
  if (command == "merge") return "0 done; 1 a failure (I/O); 2 bad input (nothing written)";
  if (command == "describe") return "0 done; 2 bad input (an unknown network)";
  if (command == "export-network") return "0 done; 1 a failure (I/O); 2 bad input (an unknown network, FILE exists)";
  return "0 done; 2 bad input";
}

std::string examples(const std::string& command) {
  if (command == "run")
    return "  crossbench run --job jobs/seed2017.ini --output results/h200.h5\n"
           "  mpirun -n 8 crossbench run --job jobs/seed2017.ini --filter 'resnet50/.*/training'\n"
           "  crossbench run --job jobs/quick.ini --set measure.warmup=5 --device-tag power=300W --jsonl cells.jsonl\n";
  if (command == "plan")
    return "  crossbench plan --job jobs/seed2017.ini --ranks 8\n"
           "  crossbench list devices --json > devices.json\n"
           "  crossbench plan --job jobs/seed2017.ini --ranks 4 --device-json devices.json --json\n"
           "  crossbench plan --job jobs/seed2017.ini --ranks 8 --calibrate results/h200.h5\n";
  if (command == "check") return "  crossbench check --job jobs/quick.ini --filter alexnet\n";
  if (command == "merge")
    return "  crossbench merge results/h100.h5 results/h200.h5 -o results/all.h5\n"
           "  crossbench merge old.h5 rerun.h5 -o fixed.h5 --prefer last\n"
           "  scripts/report report results/all.h5 -o report\n";
  if (command == "describe")
    return "  crossbench describe resnet50\n"
           "  crossbench describe googlenet\n";
  if (command == "export-network")
    return "  crossbench export-network googlenet --output googlenet.json\n"
           "  crossbench export-network alexnet\n";
  return "  crossbench list networks\n"
         "  crossbench list devices --json > device.json\n";
}

}  // namespace

std::string command_usage(const std::string& command) {
  if (command == "merge") return "crossbench merge A.h5 B.h5 ... -o ALL.h5 [--prefer first|last|FILE] [--strict] [--overwrite]";
  if (command == "list") return "crossbench list networks|engines|devices|options|precisions [--json]";
  if (command == "describe") return "crossbench describe NETWORK";
  if (command == "export-network") return "crossbench export-network NETWORK [--output FILE [--force]]";
  return "crossbench " + command + " [--job FILE] [--set section.key=value ...] [flags]";
}

std::string command_help(const std::string& command) {
  std::ostringstream text;
  const bool measures = command == "run" || command == "plan";
  text << "usage: " << command_usage(command) << "\n\n" << about(command);
  text << "\nFlags (default in brackets):\n";
  for (const auto& spec : options_schema()) {
    if (spec.flag.empty() || !spec.for_command(command)) continue;
    std::string name = spec.short_flag.empty() ? spec.flag : spec.short_flag + ", " + spec.flag;
    if (spec.type != OptionType::flag && !spec.is_switch()) name += " " + value_name(spec);
    else if (spec.type == OptionType::choice) name += "[=" + alternatives(spec) + "]";
    text << "  " << name << "\n      " << spec.help << (spec.key.empty() ? "" : " (= --set " + spec.key + "=...)")
         << " [" << spec.default_value << "]\n";
  }
  text << "  --help\n      this text\n";
  if (reads_a_job(command)) {
    text << "\nJob-file keys ([section] key = value; --set section.key=value):\n";
    std::string section;
    for (const auto& spec : options_schema()) {
      if (spec.key.empty() || !(spec.for_command(command) || measures)) continue;
      if (spec.section() != section) text << "  [" << (section = spec.section()) << "]\n";
      text << "    " << spec.name() << " = " << spec.default_value;
      if (!spec.range_text().empty()) text << "   (valid: " << spec.range_text() << ")";
      text << (spec.changes_numbers ? "   changes the numbers" : "") << "\n        " << spec.help << "\n";
    }
    text << "  [workers]\n    ENGINE = COMMAND   a framework worker (src/workers/README protocol)\n";
  }
  text << "\nExit codes: " << exit_codes(command) << "\n\nExamples:\n" << examples(command);
  return text.str();
}

}  // namespace crossbench
