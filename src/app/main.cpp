#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "app/cli.hpp"

// run_cli returns only once everything crossbench owns is closed: the cube
// written, the journal synced, the output lock released, MPI finalised. The
// process then ends with std::_Exit, skipping the static teardown of the
// libraries: oneDNN 2.6's (libdnnl.so.2) has aborted at exit with "double
// free or corruption" after a stopped run on a 2-core CI machine
// (tests/python/test_distribution.py's SIGTERM case, test_slurm.py's requeue
// cap), which turned the run's exit status 3 into an abort. The root cause is
// not found yet; this keeps the exit status the run decided.
int main(int argc, char** argv) {
  const int status = crossbench::run_cli(argc, argv);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}
