#!/bin/bash
# gpu_bundle.sh BUILD_DIR: packs the GPU binaries of a CUDA build for the GPU
# machine into .bundle/ (git-excluded), small enough to travel: the bundled
# libraries (oneDNN alone is 40 MB) go into one xz tarball that
# gpu_unbundle.sh (or the line below) unpacks there before use:
#   python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
set -euo pipefail
build=${1:-build-cuda}
/work/shared/tools/device-bundle .bundle "$build/crossbench" "$build/tests/cudnn_engine_test" "$build/tests/cudnn_kernels_test" "$build/tests/cudnn_search_test" "$build/gpu_cudnn_cells" "$build/tests/cudnn_data_parallel_test" "$build/tests/telemetry_test"
# The genstats and batch-norm backward probes (bench/gpu_genstats_probe.cpp, bench/gpu_genstats_forms.cpp,
# bench/gpu_bnbackward_forms.cpp), where they were built
# (cmake --build BUILD --target gpu_genstats_probe gpu_genstats_forms gpu_bnbackward_forms).
for probe in gpu_genstats_probe gpu_genstats_forms gpu_bnbackward_forms; do
  if [ -f "$build/$probe" ]; then
    cp -L "$build/$probe" .bundle/bin/
  fi
done
# The JAX worker's step events (CUDA events on XLA's stream, engine.jax_timing = events): next to the
# bundle's crossbench, which tells its workers its folder (CROSSBENCH_BINARY_DIR); cudart is linked in.
if [ -f "$build/libcrossbench_jax_events.so" ]; then
  cp -L "$build/libcrossbench_jax_events.so" .bundle/bin/
else
  echo "gpu_bundle: $build/libcrossbench_jax_events.so not built: the JAX worker will time device-paced" >&2
fi
strip .bundle/bin/* 2>/dev/null || true
# NVRTC (105 MB, linked for cudnn-frontend's experimental engines, never called by crossbench) comes from
# the GPU machine's CUDA toolkit, like cudart: the carried tree must stay under 64 MiB.
rm -f .bundle/lib-all/libnvrtc.so*
(cd .bundle && XZ_OPT=-2T2 tar -cJf payload.tar.xz bin lib-all && rm -rf bin lib-all)
du -sh .bundle
