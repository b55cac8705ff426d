#include "app/cli.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>

#include "app/commands.hpp"
#include "crossbench/build_info.hpp"
#include "crossbench/data_paths.hpp"
#include "crossbench/error.hpp"

namespace crossbench {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

std::string usage() {
  return "usage: crossbench <command> [options]\n"
         "commands:\n"
         "  run [--job FILE] [--set section.key=value ...] [-o|--output PATH] [--filter REGEX] [--jsonl FILE] [--quiet]\n"
         "                        run the job's matrix (default jobs/quick.ini) and write the results cube\n"
         "  plan [run options] [--ranks N] [--json]\n"
         "                        print the cells each rank would run, with estimated cost\n"
         "  merge A.h5 B.h5 ... -o ALL.h5 [--prefer first|last|FILE]\n"
         "                        one cube from cubes of separate runs (union of the axes, each input's provenance kept)\n"
         "  list networks|engines|devices|options|precisions [--json]\n"
         "  describe NETWORK      per layer: output shape, FLOPs, parameters, activation bytes\n"
         "  export-network NETWORK [--output FILE [--force]]\n"
         "                        the layer graph as JSON (what framework workers build from)\n"
         "  check [run options] [--cpu]\n"
         "                        each cell's output check (loss, gradient norms) as JSON lines; no timing\n"
         "  version\n"
         "Each command's --help lists its flags with their defaults.\n"
         "Exit codes: 0 done; 1 a failure (library error, I/O); 2 bad input (nothing written); 3 stopped (resumable).\n";
}

// Under mpirun every rank parses the same bad input; only one of them should say so.
bool is_first_rank() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(variable)) return std::string(value) == "0";
  return true;
}

std::string quoted_command_line(int argc, char** argv) {
  std::string text;
  for (int i = 0; i < argc; ++i) {
    std::string argument = argv[i];
    if (argument.find_first_of(" \t'\"") != std::string::npos) argument = "'" + argument + "'";
    text += (i ? " " : "") + argument;
  }
  return text;
}

}  // namespace

int run_cli(int argc, char** argv) {
  const std::map<std::string, std::function<int(const CommandContext&)>> commands{
      {"run", run_command},
      {"plan", plan_command},
      {"list", list_command},
      {"describe", describe_command},
      {"export-network", export_network_command},
      {"check", check_command},
      {"merge", merge_command},
  };
  try {
    if (argc < 2) throw UsageError("no command given\n" + usage());
    const std::string command = argv[1];
    if (command == "--help" || command == "-h" || command == "help") {
      std::cout << usage();
      return 0;
    }
    if (command == "version" || command == "--version") {
      std::cout << "crossbench " << build_info::version << " (" << build_info::git_revision << ")\n";
      return 0;
    }
    const auto found = commands.find(command);
    if (found == commands.end())
      throw UsageError("unknown command '" + command + "'; valid: run, plan, check, merge, list, describe, export-network, version");
    CommandContext context{{argv + 2, argv + argc}, quoted_command_line(argc, argv), data_paths().jobs / "quick.ini"};
    return found->second(context);
  } catch (const UsageError& error) {
    if (is_first_rank()) std::cerr << "crossbench: error: " << error.what() << std::endl;
    return kExitUsage;
  } catch (const std::exception& error) {
    std::cerr << "crossbench: fatal: " << error.what() << std::endl;
    return kExitFailure;
  }
}

}  // namespace crossbench
