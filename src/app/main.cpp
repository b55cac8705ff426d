#include "app/cli.hpp"

int main(int argc, char** argv) { return crossbench::run_cli(argc, argv); }
