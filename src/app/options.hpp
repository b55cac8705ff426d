// Parsing the options of `crossbench run|plan|check` (include/crossbench/options.hpp:
// RunOptions, PlanOptions, CheckOptions) from the job file and the command
// line, and of `merge`, `list`, `describe` and `export-network` (MergeOptions,
// ListOptions, DescribeOptions, ExportNetworkOptions) from the command line, by
// the options schema, whose rows name the fields they fill.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/commands.hpp"
#include "crossbench/options.hpp"

namespace crossbench {

// Parses the arguments of `crossbench run|plan|check` (after the subcommand;
// Command is RunOptions, PlanOptions or CheckOptions) by the options schema.
// Throws UsageError naming the offending file, key, flag or value and the
// valid choices: an unknown flag, a word that is not a flag's value (`run
// myjob.ini`), a flag or --set key given twice. `default_job` is used when
// --job is absent. nullopt when --help asked for the command's help.
template <typename Command>
[[nodiscard]] std::optional<Command> parse_command_options(const std::vector<std::string>& arguments,
                                                           const std::filesystem::path& default_job,
                                                           const std::string& command_line);

// The options of a command parsed from its context (Command: RunOptions,
// PlanOptions, CheckOptions, MergeOptions, ListOptions, DescribeOptions or
// ExportNetworkOptions; the positional words fill MergeOptions::inputs,
// ListOptions::topic and the network of describe and export-network); nullopt
// when --help asked for the command's help, which it has printed.
template <typename Command>
[[nodiscard]] std::optional<Command> command_options_or_help(const CommandContext& context);

// `run` only: refuses (UsageError) to touch an earlier run's cube or journal
// unless --resume or --overwrite says what to do with it.
void check_output_is_free(const RunOptions& options);

// The --help of `crossbench run|plan|check|merge|list|describe|export-network`: usage, every flag (and,
// for the commands that read a job, every job-file key) with its default, the
// exit codes and examples (generated from the schema).
[[nodiscard]] std::string command_help(const std::string& command);
// A command's synopsis: "crossbench list networks|engines|devices|options|precisions [--json]".
[[nodiscard]] std::string command_usage(const std::string& command);

}  // namespace crossbench
