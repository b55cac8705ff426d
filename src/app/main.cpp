#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "app/cli.hpp"

// run_cli returns only once everything crossbench owns is closed: the cube
// written, the journal synced, the output lock released, MPI finalised. The
// process then ends with std::_Exit, skipping the libraries' static teardown,
// so that nothing after run_cli can change the exit status the run decided.
// (oneDNN 2.6's teardown used to abort after a stopped run: a stop signal's
// frame had corrupted a JIT kernel's stack data. Stop signals are now taken
// by a thread of their own, src/cluster/stop_request.hpp.)
int main(int argc, char** argv) {
  const int status = crossbench::run_cli(argc, argv);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}
