# Shared by scripts/run and scripts/test: install what is missing, build.
# Sourced, not run.

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${CROSSBENCH_BUILD_DIR:-$repo_root/build}
# Debian's python: the python3 first on PATH may be a separate build that cannot see Debian's packages.
python=/usr/bin/python3

# The Debian packages crossbench builds, runs and tests with (README "Dependencies" says why each).
build_packages=(build-essential cmake git pkg-config libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools
                libboost-program-options-dev libdnnl-dev ocl-icd-opencl-dev libgtest-dev nlohmann-json3-dev zlib1g-dev)
# The tests start a real Slurm cluster on this machine (tests/slurm/cluster.sh).
slurm_packages=(slurmctld slurmd slurm-client munge)
python_packages=(python3 python3-numpy python3-h5py python3-xarray python3-netcdf4 python3-matplotlib
                 python3-pandas python3-pytest python3-torch)

install_missing() {
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "crossbench: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

configure_and_build() {
  local jobs
  jobs=$(nproc)
  cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@"
  cmake --build "$build_dir" -j "$jobs"
}

# Open MPI refuses to run as root unless told; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
