// `crossbench merge A.h5 B.h5 ... -o ALL.h5`: one cube from cubes of separate runs.
#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>

#include "app/commands.hpp"
#include "app/console.hpp"
#include "app/options.hpp"
#include "crossbench/build_info.hpp"
#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"
#include "core/utc_time.hpp"
#include "cube/cube_merge.hpp"

namespace crossbench {

// Its flags and input cubes are parsed by the options schema (MergeOptions, src/app/options.cpp).
int merge_command(const CommandContext& context) {
  const std::optional<MergeOptions> options = command_options_or_help<MergeOptions>(context);
  if (!options) return 0;  // --help
  const std::vector<std::filesystem::path>& paths = options->inputs;
  const std::filesystem::path& output = options->output;
  const bool strict = options->strict;
  MergePreference preference;
  if (options->prefer == "first") preference.rule = MergePreference::Rule::first;
  else if (options->prefer == "last") preference.rule = MergePreference::Rule::last;
  else if (!options->prefer.empty()) preference = {MergePreference::Rule::file, options->prefer};
  if (output.empty()) throw UsageError("merge: no output: give -o ALL.h5\n" + command_help("merge"));
  if (paths.empty()) throw UsageError("merge: no input cubes\n" + command_help("merge"));
  std::error_code error;
  const auto directory = output.has_parent_path() ? output.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(directory, error))
    throw UsageError("merge: -o '" + output.string() + "': directory '" + directory.string() + "' does not exist");
  if (std::filesystem::exists(output, error) && !options->overwrite)
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
