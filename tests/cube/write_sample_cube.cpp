// Writes the sample cube of sample_cube.hpp (every status, two device keys,
// two replicas) to the path given as the first argument. Used by
// tests/python/test_cube_xarray.py to check that xarray, h5py and netCDF4 read
// what crossbench writes.
#include <exception>
#include <iostream>

#include "crossbench/cube.hpp"
#include "sample_cube.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " CUBE.h5\n";
    return 2;
  }
  try {
    crossbench::write_cube(argv[1], crossbench::testing::sample_cube());
  } catch (const std::exception& error) {
    std::cerr << "write_sample_cube: " << error.what() << "\n";
    return 1;
  }
  return 0;
}
