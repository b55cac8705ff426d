// `crossbench merge A.h5 B.h5 ... -o ALL.h5`: one cube from cubes of separate runs.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "app/commands.hpp"
#include "app/console.hpp"
#include "crossbench/build_info.hpp"
#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "core/utc_time.hpp"
#include "cube/cube_merge.hpp"

namespace crossbench {
namespace {

constexpr const char* kMergeHelp =
    "usage: crossbench merge A.h5 B.h5 ... -o ALL.h5 [--prefer first|last|FILE] [--strict] [--overwrite]\n\n"
    "One cube from the cubes of separate runs (e.g. each loaner system tested on its own, with its own\n"
    "--device-tag): the union of their axes, every input's cells, the inputs' /ranks one after another,\n"
    "and each input's root attributes and ranks in the group /sources. The root keeps the attributes\n"
    "all inputs agree on. Each cell records its input (`source`) and the run segment that measured it;\n"
    "the inputs' run segments are kept in /segments. A warning names each input that is incomplete and\n"
    "each setting that changes the numbers on which the inputs differ. Inputs of schema\n"
    "crossbench-cube/2, /3 and /4 are read; the result is /4.\n\n"
    "Flags (default in brackets):\n"
    "  -o, --output PATH\n      the merged cube; its directory must exist [required]\n"
    "  --prefer first|last|FILE\n"
    "      which input wins a cell that several inputs hold: the first or last on the command line, or\n"
    "      the input FILE [none: such a cell is refused]\n"
    "  --strict\n      refuse (exit 2, nothing written) what would only be warned about: an incomplete input,\n"
    "      inputs measured with different settings [off]\n"
    "  --overwrite\n      replace an existing output [off]\n"
    "  --help\n      this text\n\n"
    "Exit codes: 0 done; 1 a failure (I/O); 2 bad input (nothing written)\n\n"
    "Examples:\n"
    "  crossbench merge results/h100.h5 results/h200.h5 -o results/all.h5\n"
    "  crossbench merge old.h5 rerun.h5 -o fixed.h5 --prefer last\n"
    "  scripts/report report results/all.h5 -o report\n";

}  // namespace

int merge_command(const CommandContext& context) {
  std::vector<std::filesystem::path> paths;
  std::filesystem::path output;
  MergePreference preference;
  bool overwrite = false;
  bool strict = false;
  const auto& arguments = context.arguments;
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const std::string& argument = arguments[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= arguments.size()) throw UsageError("merge: " + argument + " needs a value\n" + kMergeHelp);
      return arguments[++i];
    };
    if (argument == "--help" || argument == "-h") {
      std::cout << kMergeHelp;
      return 0;
    } else if (argument == "-o" || argument == "--output") {
      if (!output.empty()) throw UsageError("merge: " + argument + " is given twice");
      output = value();
    } else if (argument == "--prefer") {
      if (preference.rule != MergePreference::Rule::refuse) throw UsageError("merge: --prefer is given twice");
      const std::string choice = value();
      if (choice == "first") preference.rule = MergePreference::Rule::first;
      else if (choice == "last") preference.rule = MergePreference::Rule::last;
      else preference = {MergePreference::Rule::file, choice};
    } else if (argument == "--overwrite") {
      overwrite = true;
    } else if (argument == "--strict") {
      strict = true;
    } else if (argument.rfind("-", 0) == 0) {
      throw UsageError("merge: unknown flag '" + argument + "'; valid: -o/--output, --prefer, --strict, --overwrite, --help");
    } else {
      paths.emplace_back(argument);
    }
  }
  if (output.empty()) throw UsageError("merge: no output: give -o ALL.h5\n" + std::string(kMergeHelp));
  if (paths.empty()) throw UsageError("merge: no input cubes\n" + std::string(kMergeHelp));
  std::error_code error;
  const auto directory = output.has_parent_path() ? output.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(directory, error))
    throw UsageError("merge: -o '" + output.string() + "': directory '" + directory.string() + "' does not exist");
  if (std::filesystem::exists(output, error) && !overwrite)
    throw UsageError("merge: '" + output.string() + "' exists; replace it with --overwrite or choose another -o");
  for (const auto& path : paths)
    if (std::filesystem::exists(output, error) && std::filesystem::equivalent(path, output, error))
      throw UsageError("merge: the output '" + output.string() + "' is also an input");
  if (preference.rule == MergePreference::Rule::file &&
      std::none_of(paths.begin(), paths.end(), [&](const auto& path) {
        return std::filesystem::weakly_canonical(path) == std::filesystem::weakly_canonical(preference.preferred_path);
      }))
    throw UsageError("merge: --prefer '" + preference.preferred_path.string() + "' is not an input; valid: first, last, or one of the inputs");

  std::vector<MergeInput> inputs;
  for (const auto& path : paths) {
    try {
      inputs.push_back({path, read_cube(path)});
    } catch (const Error& failure) {
      throw UsageError(std::string("merge: ") + failure.what());  // a bad input: nothing written
    }
  }
  const std::vector<std::string> warnings = merge_warnings(inputs);
  if (strict && !warnings.empty()) {
    std::string text;
    for (const auto& warning : warnings) text += "\n  " + warning;
    throw UsageError("merge --strict: refused:" + text);
  }
  for (const auto& warning : warnings) std::cerr << "crossbench: warning: merge: " << warning << "\n";
  CubeContents merged = merge_cubes(inputs, preference);
  std::string sources;
  for (const auto& path : paths) sources += (sources.empty() ? "" : ", ") + path.string();
  merged.attributes["created"] = utc_now();
  merged.attributes["command_line"] = context.command_line;
  merged.attributes["merged_from"] = sources;
  merged.attributes["merge_crossbench_version"] = build_info::version;
  merged.attributes["merge_git_revision"] = build_info::git_revision;
  write_cube(output, merged);
  std::ostringstream text;  // one write: see run's closing lines
  text << "crossbench: merged " << paths.size() << " cubes (" << merged.cells.size() << " cells, "
       << merged.axes.devices.size() << " devices) into " << output.string() << "\n"
       << "next: " << report_command() << " report " << output.string() << " -o "
       << (output.parent_path() / (output.stem().string() + "-report")).string() << "\n";
  std::cerr << text.str() << std::flush;
  return 0;
}

}  // namespace crossbench
