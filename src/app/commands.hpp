// The subcommands of the `crossbench` program. Each returns the process exit
// status; bad input throws UsageError (exit 2), failures throw Error (exit 1).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace crossbench {

struct CommandContext {
  std::vector<std::string> arguments;   // after the subcommand
  std::string command_line;             // the whole command line, as typed
  std::filesystem::path default_job;    // quick.ini of the binary's jobs (crossbench/data_paths.hpp)
};

int run_command(const CommandContext& context);
int plan_command(const CommandContext& context);
int list_command(const CommandContext& context);
int describe_command(const CommandContext& context);
int export_network_command(const CommandContext& context);
int check_command(const CommandContext& context);
int merge_command(const CommandContext& context);

}  // namespace crossbench
