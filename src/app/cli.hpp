// The `crossbench` command line: subcommand dispatch and the exit-status policy.
#pragma once

namespace crossbench {

// Exit statuses: 0 done; 1 a failure (library error, I/O); 2 bad input (nothing written).
int run_cli(int argc, char** argv);

}  // namespace crossbench
