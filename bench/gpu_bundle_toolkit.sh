#!/bin/bash
# gpu_bundle_toolkit.sh BUILD_DIR [MAX_MIB]: packs a CUDA 12 or CUDA 11.8 build (see README "Which
# toolkit for which GPU") for the GPU machine, like gpu_bundle.sh, plus the libraries of that
# toolkit which the GPU machine (CUDA 13 only) lacks, as long as everything stays within MAX_MIB
# (default 64, what can travel):
#   always   libcudart.so.12 / .so.11 (under 1 MiB)
#   if room  libcublas + libcublasLt of the toolkit (cuBLAS 12: ~100 + ~500 MB; cuBLAS 11: ~150 + ~330 MB)
#   never    cuDNN and NCCL: the GPU machine's PyTorch ships cuDNN 9.19 and NCCL 2 built for CUDA 13
#            with the same sonames (libcudnn.so.9, libnccl.so.2) and no CUDA runtime dependency
#            (both carry their own), which a CUDA 12 build loads; cuDNN 8.9 (libcudnn.so.8, ~1 GB,
#            for the CUDA 11.8 build) has no such stand-in.
# cuBLAS's symbols are versioned by soname (libcublas.so.12 / .so.13), so cuBLAS 13 cannot stand in.
# Prints what was packed, what was left out and why, and the bundle's size; exits 2 when a library
# that the GPU machine lacks does not fit (the bundle is still written, the session stage `oldtk`
# then says what is missing instead of failing mid-run).
set -euo pipefail
build=${1:?usage: gpu_bundle_toolkit.sh BUILD_DIR [MAX_MIB]}
max_mib=${2:-64}
exes=("$build/crossbench" "$build/tests/cudnn_engine_test" "$build/tests/cudnn_kernels_test")
for exe in "${exes[@]}"; do [ -x "$exe" ] || { echo "gpu_bundle_toolkit: $exe is not built" >&2; exit 2; }; done
toolkit=$(sed -n 's/^CUDAToolkit_ROOT:[A-Z]*=//p' "$build/CMakeCache.txt" | head -1)
version=$(grep -h 'set(CMAKE_CUDA_COMPILER_VERSION' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake | grep -o '[0-9][0-9.]*' | head -1)
echo "gpu_bundle_toolkit: $build, CUDA ${version:-unknown} from ${toolkit:-the default toolkit}"
/work/shared/tools/device-bundle .bundle "${exes[@]}" >/dev/null
strip .bundle/bin/* 2>/dev/null || true
missing=0
# The CUDA libraries the binaries need, resolved on this machine (ldd follows the build's RPATH).
while read -r name path; do
  case $name in
    libcudnn*|libnccl*) echo "  left out $name: the GPU machine's PyTorch has it (cuDNN 9 / NCCL 2 of CUDA 13)";
                         [[ $name == libcudnn.so.8 ]] && { echo "  MISSING there: $name (cuDNN 8.9, ~1 GB)"; missing=1; } ;;
    libcudart*|libcublas*)
      cp -Ln "$path" .bundle/lib-all/ && strip --strip-unneeded ".bundle/lib-all/$name" 2>/dev/null || true
      size=$(du -sm .bundle/lib-all | cut -f1)
      if [ "$size" -gt "$max_mib" ] && [[ $name != libcudart* ]]; then
        rm ".bundle/lib-all/$name"
        echo "  MISSING there: $name ($(du -m "$path" | cut -f1) MiB does not fit in $max_mib MiB)"; missing=1
      else
        echo "  packed $name"
      fi ;;
  esac
done < <(ldd "${exes[@]}" | awk '/=> \//{print $1, $3}' | sort -u)
(cd .bundle && XZ_OPT=-6T2 tar -cJf payload.tar.xz bin lib-all && rm -rf bin lib-all)
echo "gpu_bundle_toolkit: $(du -sh .bundle | cut -f1) in .bundle (limit $max_mib MiB)"
exit $((missing * 2))
