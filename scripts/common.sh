# Shared by scripts/run and scripts/test: install what is missing, build.
# Sourced, not run.

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${CROSSBENCH_BUILD_DIR:-$repo_root/build}
# Debian's python: the python3 first on PATH may be a separate build that cannot see Debian's packages.
python=/usr/bin/python3

# The Debian packages crossbench builds, runs and tests with (README "Dependencies" says why each).
build_packages=(build-essential cmake git pkg-config libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools
                libboost-program-options-dev libdnnl-dev ocl-icd-opencl-dev libgtest-dev nlohmann-json3-dev zlib1g-dev
                libhwloc-dev)
# scripts/check-cuda-toolkits compiles kernels.cu for CUDA 12 and 11.8 with clang (the toolkits' PyPI
# wheels have no nvcc).
old_cuda_packages=(clang-19)
# The tests start a real Slurm cluster on this machine (tests/slurm/cluster.sh).
slurm_packages=(slurmctld slurmd slurm-client munge)
python_packages=(python3 python3-numpy python3-h5py python3-xarray python3-netcdf4 python3-matplotlib
                 python3-pandas python3-pytest python3-torch python3-scipy python3-venv)

# JAX for the jax worker's tests. Debian has no jax package, so a venv that sees Debian's packages
# (numpy, scipy: --system-site-packages) takes jax from PyPI. Pinned: jax 0.4.38 is the newest whose
# wheels work with Debian 12's python 3.11, numpy 1.24 and scipy 1.10 (jax 0.5 needs numpy 1.25);
# numpy is pinned to Debian's own, so pip never puts a second numpy into the venv.
jax_version=0.4.38
jax_requirements=("jax[cpu]==$jax_version" "jaxlib==$jax_version" "ml_dtypes==0.5.4" "opt_einsum==3.4.0")
jax_venv=$build_dir/venv

install_missing() {
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "crossbench: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  local sudo="" log
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  # apt and dpkg progress only when they fail: the log is shown then.
  log=$(mktemp)
  if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "crossbench: installing ${missing[*]} failed (the apt output is above)" >&2
    return 1
  fi
  rm -f "$log"
}

# cudnn-frontend, the header-only C++ layer of the cuDNN Graph API (the cuDNN engine's Graph API
# convolutions, src/engines/cudnn/graph_api_convolution.cpp), pinned; its headers ship in the PyPI
# wheel under include/. Fetched once into $build_dir/_deps/cudnn_frontend, where CMake finds it. Where
# PyPI is out of reach the engine is built with the legacy cuDNN API alone and CMake's summary says so.
cudnn_frontend_version=1.32.0
fetch_cudnn_frontend() {
  local target=$build_dir/_deps/cudnn_frontend
  [ -f "$target/include/cudnn_frontend.h" ] && [ "$(cat "$target/VERSION" 2>/dev/null)" = "$cudnn_frontend_version" ] && return 0
  local download; download=$(mktemp -d)
  local pip=("$python" -m pip)
  if ! "$python" -m pip --version >/dev/null 2>&1; then  # no python3-pip: a venv's own pip
    "$python" -m venv "$build_dir/_deps/pip-venv" >/dev/null 2>&1 && pip=("$build_dir/_deps/pip-venv/bin/pip")
  fi
  if "${pip[@]}" download -q --disable-pip-version-check --timeout 20 --retries 1 --no-deps --only-binary=:all: \
       --python-version 3.11 --platform manylinux_2_28_x86_64 -d "$download" \
       "nvidia-cudnn-frontend==$cudnn_frontend_version" >"$download/log" 2>&1; then
    rm -rf "$target" && mkdir -p "$target"
    "$python" - "$target" "$download"/*.whl <<'PY'
import sys, zipfile
target, wheel = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    for name in archive.namelist():
        if name.startswith("include/"):
            archive.extract(name, target)
PY
    echo "$cudnn_frontend_version" >"$target/VERSION"
  else
    echo "crossbench: cudnn-frontend $cudnn_frontend_version could not be fetched from PyPI ($(tail -1 "$download/log" | cut -c1-120)); the cuDNN engine keeps the legacy API" >&2
  fi
  rm -rf "$download"
}

# configure_and_build [-DVAR=VALUE ...] [TARGET ...]: a Release build of the targets named (all
# without any), configured with the -D settings given; the output of CMake and the compiler only
# when they fail.
configure_and_build() {
  local jobs log targets=() settings=()
  jobs=$(nproc)
  for argument in "$@"; do
    case $argument in
      -D*) settings+=("$argument") ;;
      *) targets+=(--target "$argument") ;;
    esac
  done
  fetch_cudnn_frontend
  log=$(mktemp)
  if ! { cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${settings[@]}" &&
         cmake --build "$build_dir" -j "$jobs" "${targets[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "crossbench: the build in $build_dir failed (the output is above)" >&2
    return 1
  fi
  rm -f "$log"
}

# Makes $jax_venv with jax (once; later runs find it and need no network) and exports
# CROSSBENCH_JAX_PYTHON, the python the jax worker tests run the jax worker with. Where jax cannot
# be had (no network to PyPI, pip failing) it says why, exports the reason as
# CROSSBENCH_JAX_UNAVAILABLE and returns 0: the jax tests then skip with that reason.
setup_jax_venv() {
  local venv_python=$jax_venv/bin/python
  local check="import jax, jax.numpy; assert jax.__version__ == '$jax_version', jax.__version__"
  local why=""
  if ! "$venv_python" -c "$check" >/dev/null 2>&1; then
    echo "crossbench: installing ${jax_requirements[*]} into $jax_venv"
    local numpy_version
    numpy_version=$("$python" -c 'import numpy; print(numpy.__version__)')
    if [ ! -x "$venv_python" ] && ! "$python" -m venv --system-site-packages "$jax_venv"; then
      why="$python -m venv failed (is python3-venv installed?)"
    elif ! "$venv_python" -m pip install -q --disable-pip-version-check --timeout 15 --retries 1 \
           "${jax_requirements[@]}" "numpy==$numpy_version"; then
      why="pip could not install ${jax_requirements[*]} into $jax_venv (no network to PyPI?)"
    elif ! "$venv_python" -c "$check"; then
      why="jax $jax_version does not import in $jax_venv after installing it"
    fi
  fi
  if [ -n "$why" ]; then
    echo "crossbench: $why: the jax worker tests will skip" >&2
    export CROSSBENCH_JAX_UNAVAILABLE=$why
    unset CROSSBENCH_JAX_PYTHON
  else
    export CROSSBENCH_JAX_PYTHON=$venv_python
    echo "crossbench: the jax worker tests run jax $jax_version with $CROSSBENCH_JAX_PYTHON"
  fi
}

# Open MPI refuses to run as root unless told; CI and containers run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
