#!/bin/bash
# gpu_session.sh STAGE...: what one call of the GPU machine runs, in order,
# each stage under its own time limit, logs under $OUT (see bench/README.md).
#   tests     the gpu-labelled tests of the cuDNN engine (its kernels, the L2-cold search, then the engine)
#   faults    tests/faults/test_gpu_faults.py (pytest): a sticky CUDA error, a workspace OOM and a killed
#             worker injected and survived, and GPU memory flat over seed2017's cudnn row; log $OUT/gpu_faults.log
#   cells     gpu_cudnn_cells: seed2017's cells, 4 precisions, telemetry, layer times
#   genstats  bench/gpu_genstats_forms.cpp (which forms of a convolution with its output's sums cuDNN runs
#             here), then bench/gpu_genstats_probe.cpp: ResNet-50's convolutions with and without their
#             output's per-channel sums (cuDNN's genstats) against our batch-norm forward ($GENSTATS_ARGS)
#   pytorch   bench/gpu_pytorch_vs_crossbench.py against the cells' JSON
#   seed      crossbench run --job jobs/seed2017.ini (cudnn, 4 precisions, batch 64)
#   sweep     crossbench run --job jobs/batch-sweep.ini for resnet50 and alexnet in tf32
#   dptest    the gpu data-parallel test: cuDNN + NCCL on 2 ranks, one GPU each
#   dp        mpirun -np $GPUS crossbench run --job jobs/data-parallel.ini (gpus = 1 .. $GPUS)
#   seedmpi   mpirun -np $GPUS: seed2017 (cudnn, 4 precisions) split over every GPU, one cube
#   workers   seed2017 with cudnn, pytorch, pytorch-compile, jax ($WORKER_NETWORKS), one cube
#   kitcompare seed2017 (cudnn; fp32, tf32, bf16; exhaustive search, CUDA graphs) with the BEFORE
#             build ($CB_BEFORE, e.g. ".bundle-before/run .bundle-before/bin/crossbench") and with this
#             bundle, interleaved per precision, then bench/compare_cubes.py (flags >2% or memory growth)
#   graphab   seed2017 (cudnn; $AB_PRECISIONS, default fp32,tf32,bf16; exhaustive search, CUDA graphs) with
#             engine.graph_api=false (the legacy API's algorithms) and true (Graph API engine configurations
#             as candidates too), one binary, interleaved per precision, each cold; then bench/compare_cubes.py
#   fuseab    the ResNets' training (cudnn; $FUSE_PRECISIONS, default tf32 bf16; $FUSE_NETWORKS, default
#             resnet50; exhaustive search, CUDA graphs) with engine.fuse=false (every layer its own ops) and
#             true (the kit's fused groups: training batch-norm + add + relu in our kernels), one binary,
#             interleaved per precision ($FUSE_PHASES, default training), one algorithm cache per precision (the unfused side searches, the
#             fused side replays the same convolution algorithms); then bench/compare_cubes.py
#   fwcmp     the cudnn rows beside pytorch-compile (torch.compile reduce-overhead) rows in one cube per
#             precision ($FWCMP_PRECISIONS, default tf32 bf16; $FWCMP_NETWORKS; $FWCMP_PHASES, default training),
#             the cudnn cells replaying $FWCMP_CACHE_DIR/algo_graph_<precision>.json (a graphab stage's cache);
#             cubes $OUT/fwcmp$FWCMP_TAG_<precision>.h5; $FWCMP_ARGS are more run options (e.g. "--set
#             engine.compile_mode=max-autotune" for the max-autotune rows beside cudnn)
#   oldtk     a CUDA 12 or 11.8 build packed by bench/gpu_bundle_toolkit.sh: its gpu tests, then seed2017
#             in fp32 and tf32 (cube $OUT/${SEED_OUT:-seed-oldtk}.h5), on the bundle's cudart and cuBLAS and
#             PyTorch's cuDNN 9 and NCCL; says which library is missing instead of running without it
#   provenance one cudnn cell; then /ranks and the cell's wall times checked against nvidia-smi
#             (full UUID, enforced power limit, driver, application clocks, ECC) by bench/check_provenance.py
#   agreement crossbench check of cudnn, jax, pytorch at batch 2 in $CHECK_PRECISIONS (default fp32; e.g.
#             fp32,tf32,bf16) ($CHECK_NETWORKS, default all nine), then the analysis package's `agreement`
#             against cudnn, each precision under its own bounds
#   nvtx      nsys profile of a small cudnn run (alexnet, bf16, layer times): the NVTX ranges per cell
#             and stage, summed by `nsys stats`; says so when the image has no nsys
#   frameworks bench/gpu_framework_overhead.py: each framework in a standalone loop next to the same
#             cells through crossbench ($FW_VARIANTS of eager,reduce-overhead,max-autotune,jax;
#             $FW_NETWORKS, default resnet50; $FW_PRECISIONS tf32,bf16; $FW_STEPS 100; $FW_REPEATS 1: each
#             pair again, fresh processes, and the median ratio; $FW_DATA synthetic: the standalone loops
#             read the worker's values, random: their own); the table with ratios
#   jaxclock  bench/gpu_jax_clock.py (issue 26 item 4, one clock for all engines): the JAX worker's own step
#             (alexnet, resnet50 x tf32, bf16 x training, inference, batch 64; $JAXCLOCK_NETWORKS,
#             $JAXCLOCK_PRECISIONS, $JAXCLOCK_PHASES) timed (a) host, (b) by the GPU's own kernel timestamps
#             (jax.profiler's xplane, --reference trace), (c) device-paced, (e) CUDA events on XLA's stream
#             (engine.jax_timing's default, .bundle/bin/libcrossbench_jax_events.so), (d) an untraced device
#             loop, interleaved; the medians, a/d, c/d, e/d, c/e and the 1% verdicts; logs $OUT/jaxclock.log,
#             JSON $OUT/jaxclock.json; no new cell after $JAXCLOCK_BUDGET_S (150) s
#   jaxevents tests/python/test_jax_step_events.py (pytest) with the bundle's library and binary: the
#             worker's events timing on alexnet tf32 training against device-paced; $OUT/jaxevents.log
#   cube20    issue 20's cube: seed2017 with cudnn, pytorch, pytorch-compile, jax x fp32, tf32, bf16,
#             amp-bf16, both phases ($CUBE20_NETWORKS, default all seven; $CUBE20_ENGINES); one cube in
#             $CUBE20_DIR (default bench/results/2026-12-01/cube20, carried by the working tree), resumed
#             from its journal in the next call; copied to $OUT/cube20/ with the report's headline
#   study     issue 29's cube: seed2017's 7 networks ($STUDY_NETWORKS) with cudnn, pytorch, pytorch-compile,
#             jax ($STUDY_ENGINES) x fp32, tf32, bf16, amp-bf16 ($STUDY_PRECISIONS) x both phases ($STUDY_PHASES),
#             batch 64 ($STUDY_BATCHES); one cube, study.h5, in $STUDY_DIR (default bench/results/2026-12-02/study,
#             carried by the working tree) with its journal and log, continued in the next call with
#             --resume --allow-build-change (each call's run segment names its GPU and build); the workers'
#             compile caches in $STUDY_DIR/compile-cache (git-ignored; packed, back in
#             $OUT/study/compile-cache.tar.xz while the pack is under $STUDY_CACHE_MAX_MB, 15 (else packed again
#             without Triton's compiled kernels, triton/: the autotuning's choices and Inductor's sources), and carried as
#             $STUDY_DIR/compile-cache.tar.xz, unpacked at the next call's start; else the log says the next call
#             compiles cold; STUDY_COMPILE_CACHE=/tmp/... keeps it out of the tree); $STUDY_NP ranks; stops cleanly at $TLIMIT (exit 3: call again);
#             STUDY_PREWARM_S=150 first compiles the next framework cells side by side for that long
#             at most (only those the timed run can reach in the rest of the stage)
#             (bench/study_prewarm.py, $STUDY_PREWARM_PROCS processes) so that the timed run compiles warm;
#             STUDY_WAIT_FILE=F: the timed run waits until F exists (a GPU job beside the prewarm must not
#             share the GPU with a timed cell; it must not need the GPU's memory to itself either: the engine
#             suite's exact-memory test failed beside the prewarm in call 27, so run `tests` alone);
#             STUDY_NAME (study) names the cube and log: e.g. STUDY_NAME=autotune STUDY_ENGINES=pytorch-compile
#             STUDY_ARGS="--set engine.compile_mode=max-autotune" STUDY_PRECISIONS=fp32,tf32,bf16 for issue 24's
#             max-autotune cells (bench/study_beside.py table study.h5 --extra max-autotune=autotune.h5)
#   studysweep issue 29's figure 2 (STUDY_PREWARM_S as for study, at 150 s or more: on the GPU machine's 16
#             cores 8 side-by-side compiles each ran about twice as slow as alone, and an 88 s prewarm stopped
#             5 of 8 unfinished: bench/results/2026-12-07): resnet50, vgg11, alexnet ($SWEEP_NETWORKS) in tf32 and bf16, batch 1 to
#             the OOM boundary ($SWEEP_BATCHES, default 1 .. 8192 in powers of 2), both phases, cudnn and
#             pytorch-compile; cube sweep.h5 in $STUDY_DIR, resumable like `study`
#   layerdiag the cudnn cells where the yardstick trails a framework, with every layer's time
#             (--layer-times all; exhaustive search, CUDA graphs): $DIAG_CELLS, network:precision:phase list
#             (default vgg11:tf32:training,vgg11:bf16:training,googlenet:tf32:inference,googlenet:bf16:inference,
#             resnet50:tf32:inference); one cube and log per cell under $OUT/layerdiag/
#   telemetryab the Runner's telemetry thread on and off: $TAB_ENGINES (cudnn,pytorch-compile) x $TAB_NETWORKS
#             (alexnet,resnet50) x $TAB_PRECISIONS (tf32,bf16) x $TAB_PHASES (inference) with
#             measure.telemetry_interval_ms = 10 and 0 ($TAB_INTERVALS), $TAB_ROUNDS (2) rounds interleaved;
#             cubes $OUT/telemetryab/i<interval>_r<round>.h5, bench/telemetry_ab.py's table $OUT/telemetryab.md
#   torchkernels bench/gpu_torch_kernels.py: the same kind of cells ($TK_CELLS) run by the PyTorch worker
#             ($TK_MODES, default reduce-overhead) under torch.profiler: the kernel classes and top kernels;
#             $TK_DATA (synthetic; synthetic,random: both, the same kernels on other values), $TK_ROUNDS (1)
#             interleaved, $TK_COMPILE_CACHE (none: each session compiles cold)
#   b256      ResNet-50 bf16 training at batch 256 (issue 24's images/s target), update none and sgd,
#             cudnn (exhaustive search, CUDA graphs), one algorithm cache for both; cubes $OUT/b256_*.h5
#   repro     seed2017's cudnn row in $REPRO_PRECISIONS (default fp32,tf32,bf16) in $REPRO_RUNS (3) independent
#             cold processes, no cache shared, one after the other; then bench/repro_cubes.py (max/min of
#             each cell's medians, the cold wall time of each run); $REPRO_ARGS adds settings, $REPRO_NAME
#             (default repro) names the files (<name>_<run>.h5, .log, <name>.md) so that two arms share a call;
#             REPRO_SAME_PLANS=1: every run replays one algorithm cache ($OUT/<name>_algorithms.json), which
#             the first run measures, so that the runs differ in nothing the search chooses (the process's
#             own spread: the later runs' max/min with identical plans); every run has its own empty CUDA
#             JIT cache (CUDA_CACHE_PATH), REPRO_JIT_CACHE=shared keeps the machine's (each log's first line)
# Environment: STEPS (timed steps, default 50), WARMUP (10), TLIMIT (seconds per stage, 240);
# SEED_ALGO, SEED_PRECISIONS (fp32,tf32,fp16,bf16), SEED_CI (0.02), SEED_ARGS and SEED_OUT (the seed
# stage's cube and log name, default seed; a key is --set once: SEED_ARGS must not repeat these;
# e.g. SEED_ARGS="--algo-cache $OUT/algorithms.json" to save and replay the measured choices).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"

# A compile-cache pack as it can come back: a call returns files of 16 MiB at most, so a larger pack is split
# into parts of 15 MiB, PACK.00, PACK.01, ... (the study stage joins them in the next call). Prints what is
# there: the pack, or its parts.
split_pack() {
  local pack=$1
  if [ "$(du -k "$pack" | cut -f1)" -le $((15 * 1024)) ]; then
    echo "$pack"
    return
  fi
  split -b 15M -d -a 2 "$pack" "$pack." && rm -f "$pack"
  local pieces=("$pack".[0-9][0-9])
  echo "${#pieces[@]} parts $pack.00 ... (15 MiB each at most: copy every one back)"
}
STEPS=${STEPS:-50}
WARMUP=${WARMUP:-10}
TLIMIT_DEFAULT=${TLIMIT:-240}
export PYTHONUNBUFFERED=1
# Only where the bundle runs: a caller that names its own binary (CB, the tests on a CPU build) leaves the
# checkout's .bundle packed (unpacked it is over 100 MB, past what a device call carries).
if [ -z "${CB:-}" ] && [ ! -x .bundle/bin/crossbench ] && [ -f .bundle/payload.tar.xz ]; then
  python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
fi
# TORCH_LIBS=1: run crossbench on the cuDNN and cuBLAS that PyTorch ships (its
# pip packages nvidia-cudnn-cu13, nvidia-cublas), so both sides of a
# comparison use the same libraries (the image's own cuDNN is older).
if [ "${TORCH_LIBS:-0}" = 1 ]; then
  libs=$(python3 -c 'import importlib, os
paths = []
for name in ("nvidia.cudnn", "nvidia.cublas"):
    try:
        for p in importlib.import_module(name).__path__:
            if os.path.isdir(os.path.join(p, "lib")): paths.append(os.path.join(p, "lib"))
    except Exception: pass
print(":".join(paths))')
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
fi
CB=${CB:-".bundle/run .bundle/bin/crossbench"}  # tests/python/test_gpu_session.py runs stages on a CPU build
GPUS=${GPUS:-2}
MPI=".bundle/run mpirun --allow-run-as-root --oversubscribe -np $GPUS -x NCCL_NVLS_ENABLE=0"
for stage in "$@"; do
  echo "=== $stage $(date +%T)"
  # TLIMIT_<stage> overrides the limit of one stage [s].
  limit_name="TLIMIT_$stage"
  TLIMIT=${!limit_name:-$TLIMIT_DEFAULT}
  case $stage in
    tests)
      # GTEST_FILTER is for the engine test: gtest reads it from the environment, so the kernel test runs without it.
      timeout "$TLIMIT" env -u GTEST_FILTER .bundle/run .bundle/bin/cudnn_kernels_test >"$OUT/kernels_test.log" 2>&1
      echo "kernels tests exit $?"
      grep -E "^\[  FAILED|^\[  PASSED|Failure|Expected|Which is" "$OUT/kernels_test.log" | head -20
      if [ -x .bundle/bin/cudnn_search_test ]; then  # the search's policies: engine.search_l2 = cold, engine.search_tie
        timeout "$TLIMIT" env -u GTEST_FILTER .bundle/run .bundle/bin/cudnn_search_test >"$OUT/search_test.log" 2>&1
        echo "search tests exit $?"
        grep -E "^\[  FAILED|^\[  PASSED|Failure|Expected|Which is" "$OUT/search_test.log" | head -20
      fi
      timeout "$TLIMIT" .bundle/run .bundle/bin/cudnn_engine_test ${GTEST_FILTER:+--gtest_filter=$GTEST_FILTER} \
        >"$OUT/tests.log" 2>&1
      echo "tests exit $?"
      grep -E "^\[  FAILED|^\[  PASSED|Failure|Expected|Which is|vs oneDNN|decisions:|error|telemetry:|step:|MiB|b8192|b2048" \
        "$OUT/tests.log" | cut -c1-400 | head -120 ;;
    faults)
      # The suite runs $CROSSBENCH_BUILD_DIR/crossbench: here a one-line wrapper that execs the
      # bundle's binary (same pid, so the tests' process checks see the run itself).
      wrapper_dir=$(mktemp -d)
      printf '#!/bin/bash\nexec %q/.bundle/run %q/.bundle/bin/crossbench "$@"\n' "$PWD" "$PWD" >"$wrapper_dir/crossbench"
      chmod +x "$wrapper_dir/crossbench"
      CROSSBENCH_BUILD_DIR=$wrapper_dir PYTHONPATH=analysis PYTHONUNBUFFERED=1 timeout "$TLIMIT" \
        python3 -m pytest -v -p no:cacheprovider tests/faults/test_gpu_faults.py >"$OUT/gpu_faults.log" 2>&1
      echo "gpu faults exit $?"
      grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed|Error" "$OUT/gpu_faults.log" | cut -c1-400 | head -40 ;;
    cells)
      timeout "$TLIMIT" .bundle/run .bundle/bin/gpu_cudnn_cells --steps "$STEPS" --warmup "$WARMUP" \
        ${CELLS_ARGS:-} --json "$OUT/cells.json" 2>&1 | tee "$OUT/cells.log" | cut -c1-300 ;;
    genstats)
      # Whether a convolution's per-channel sums (cuDNN's genstats) pay for the training batch-norm:
      # first which forms of the graph cuDNN runs here (bench/gpu_genstats_forms.cpp), then their time
      # (bench/gpu_genstats_probe.cpp); both built with --target gpu_genstats_forms gpu_genstats_probe before
      # bench/gpu_bundle.sh.
      if [ -x .bundle/bin/gpu_genstats_forms ]; then
        timeout 60 .bundle/run .bundle/bin/gpu_genstats_forms 2>&1 | tee "$OUT/genstats_forms.log"
      fi
      timeout "$TLIMIT" .bundle/run .bundle/bin/gpu_genstats_probe ${GENSTATS_ARGS:-} 2>&1 | tee "$OUT/genstats.log" ;;
    pytorch)
      sources=()
      [ -f "$OUT/seed.h5" ] && sources+=(--cube "$OUT/seed.h5")
      [ -f "$OUT/cells.json" ] && sources+=(--crossbench-json "$OUT/cells.json")
      timeout "$TLIMIT" python3 bench/gpu_pytorch_vs_crossbench.py "${sources[@]}" \
        --steps "${PT_STEPS:-100}" --warmup "$WARMUP" ${PT_ARGS:-} --out "$OUT/pytorch.json" 2>&1 |
        tee "$OUT/pytorch.log" | grep -v Warning ;;
    seed)
      # --algo exhaustive by default: the PyTorch stage compares against cudnn.benchmark = True,
      # which measures its algorithms too (heuristic fp32 picks implicit GEMM where FFT/Winograd win).
      # The log ends with "seed wall_s N" (bench/repro_cubes.py --logs reads it).
      seed_start=$SECONDS
      timeout "$TLIMIT" $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo "${SEED_ALGO:-exhaustive}" \
        --set matrix.precisions="${SEED_PRECISIONS:-fp32,tf32,fp16,bf16}" --set measure.min_steps="$STEPS" \
        --set measure.target_ci="${SEED_CI:-0.02}" ${SEED_ARGS:-} --output "$OUT/${SEED_OUT:-seed}.h5" 2>&1 |
        tee "$OUT/${SEED_OUT:-seed}.log" | tail -70
      echo "seed wall_s $((SECONDS - seed_start))" | tee -a "$OUT/${SEED_OUT:-seed}.log" ;;
    kitcompare)
      for precision in fp32 tf32 bf16; do
        for side in before after; do
          if [ $side = before ]; then cb=${CB_BEFORE:?"kitcompare needs CB_BEFORE"}; else cb=$CB; fi
          timeout "$TLIMIT" $cb run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive \
            --set engine.cuda_graphs=true --set matrix.precisions=$precision --set measure.min_steps="$STEPS" \
            --set measure.target_ci=0.02 --output "$OUT/kit_${side}_$precision.h5" >"$OUT/kit_${side}_$precision.log" 2>&1
          echo "$side $precision exit $?"
        done
        python3 bench/compare_cubes.py "$OUT/kit_before_$precision.h5" "$OUT/kit_after_$precision.h5" \
          --markdown "$OUT/kit_compare_$precision.md" | head -30
      done ;;
    graphab)
      for precision in ${AB_PRECISIONS:-fp32 tf32 bf16}; do
        for side in legacy graph; do
          api=false; [ $side = graph ] && api=true
          timeout "$TLIMIT" $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive \
            --set engine.cuda_graphs=true --set engine.graph_api=$api --set matrix.precisions=$precision \
            --set measure.min_steps="$STEPS" --set measure.target_ci=0.02 \
            --set "matrix.networks=${AB_NETWORKS:-alexnet,overfeat,vgg11,googlenet,resnet50,resnet101,resnet152}" \
            --algo-cache "$OUT/algo_${side}_$precision.json" \
            --output "$OUT/ab_${side}_$precision.h5" >"$OUT/ab_${side}_$precision.log" 2>&1
          echo "$side $precision exit $?"
        done
        python3 bench/compare_cubes.py "$OUT/ab_legacy_$precision.h5" "$OUT/ab_graph_$precision.h5" \
          --markdown "$OUT/ab_compare_$precision.md" | head -30
      done ;;
    fuseab)
      for precision in ${FUSE_PRECISIONS:-tf32 bf16}; do
        for side in unfused fused; do
          fuse=false; [ $side = fused ] && fuse=true
          timeout "$TLIMIT" $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive \
            --set engine.cuda_graphs=true --set engine.fuse=$fuse --set matrix.precisions=$precision \
            --set "matrix.phases=${FUSE_PHASES:-training}" --set "matrix.networks=${FUSE_NETWORKS:-resnet50}" \
            --set measure.min_steps="$STEPS" --set measure.target_ci=0.02 \
            --algo-cache "$OUT/algo_fuse_$precision.json" \
            --output "$OUT/fuse_${side}_$precision.h5" >"$OUT/fuse_${side}_$precision.log" 2>&1
          echo "$side $precision exit $?"
          grep -E " ok | oom | failed | timeout " "$OUT/fuse_${side}_$precision.log" | tail -5
        done
        python3 bench/compare_cubes.py "$OUT/fuse_unfused_$precision.h5" "$OUT/fuse_fused_$precision.h5" \
          --markdown "$OUT/fuse_compare_$precision.md" | head -30
      done ;;
    layerdiag)
      mkdir -p "$OUT/layerdiag"
      for cell in $(echo "${DIAG_CELLS:-vgg11:tf32:training,vgg11:bf16:training,googlenet:tf32:inference,googlenet:bf16:inference,resnet50:tf32:inference}" | tr , ' '); do
        IFS=: read -r network precision phase <<<"$cell"
        name="$network-$precision-$phase"
        timeout "$TLIMIT" $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive \
          --set engine.cuda_graphs=true --set matrix.networks=$network --set matrix.precisions=$precision \
          --set matrix.phases=$phase --set measure.min_steps="$STEPS" --set measure.target_ci=0.02 \
          --layer-times all ${DIAG_ARGS:-} --output "$OUT/layerdiag/$name.h5" >"$OUT/layerdiag/$name.log" 2>&1
        echo "layerdiag $name exit $?"
        grep -E " ok | oom | failed " "$OUT/layerdiag/$name.log" | head -2
      done ;;
    telemetryab)
      # The Runner's NVML sampling thread beside the timed steps, on (measure.telemetry_interval_ms
      # $TAB_INTERVALS' first, the default 10) and off (0), interleaved over $TAB_ROUNDS rounds, each run
      # a process of its own; one algorithm cache and one compile cache, so only the first run searches
      # and compiles (untimed); then bench/telemetry_ab.py.
      mkdir -p "$OUT/telemetryab"
      for round in $(seq 1 "${TAB_ROUNDS:-2}"); do
        for interval in ${TAB_INTERVALS:-10 0}; do
          timeout "$TLIMIT" $CB run --job jobs/seed2017.ini --set "matrix.engines=${TAB_ENGINES:-cudnn,pytorch-compile}" \
            --set "matrix.networks=${TAB_NETWORKS:-alexnet,resnet50}" --set "matrix.precisions=${TAB_PRECISIONS:-tf32,bf16}" \
            --set "matrix.phases=${TAB_PHASES:-inference}" --algo exhaustive --set engine.cuda_graphs=true \
            --set "workers.pytorch-compile=python3 -u {workers}/pytorch/worker.py --compile" \
            --set measure.min_steps="$STEPS" --set measure.target_ci=0.02 --set measure.telemetry_interval_ms=$interval \
            --algo-cache /tmp/telemetryab_algorithms.json --compile-cache /tmp/telemetryab_compile_cache \
            --output "$OUT/telemetryab/i${interval}_r$round.h5" >"$OUT/telemetryab/i${interval}_r$round.log" 2>&1
          echo "telemetryab interval ${interval} ms round $round exit $?"
        done
      done
      python3 bench/telemetry_ab.py "$OUT"/telemetryab/i*_r*.h5 2>&1 | tee "$OUT/telemetryab.md" ;;
    torchkernels)
      timeout "$TLIMIT" python3 -u bench/gpu_torch_kernels.py --crossbench "$CB" \
        --cells "${TK_CELLS:-vgg11:tf32:training,googlenet:bf16:inference}" --modes "${TK_MODES:-reduce-overhead}" \
        --data "${TK_DATA:-synthetic}" --rounds "${TK_ROUNDS:-1}" --compile-cache "${TK_COMPILE_CACHE:-none}" \
        --budget-s "${TK_BUDGET_S:-150}" --out "$OUT/torchkernels.json" 2>&1 | grep -vE "Warning|warn\(" |
        tee "$OUT/torchkernels.log" | head -120 ;;
    b256)
      for update in none sgd; do
        timeout "$TLIMIT" $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive \
          --set engine.cuda_graphs=true --set matrix.networks=resnet50 --set matrix.precisions=bf16 \
          --set matrix.phases=training --set matrix.batches=256 --set measure.update=$update \
          --set measure.min_steps="$STEPS" --set measure.target_ci=0.02 --algo-cache /tmp/b256_algorithms.json \
          --output "$OUT/b256_$update.h5" >"$OUT/b256_$update.log" 2>&1
        echo "b256 update=$update exit $?"
        grep -E " ok | oom | failed " "$OUT/b256_$update.log" | head -2
      done ;;
    repro)
      # REPRO_NAME (default repro) names the arm's files, so that two arms (e.g. REPRO_ARGS="--set
      # engine.search_tie=0.001" beside the default) run in one call without overwriting each other.
      arm=${REPRO_NAME:-repro}
      same_plans=()
      if [ "${REPRO_SAME_PLANS:-0}" = 1 ]; then
        rm -f "$OUT/${arm}_algorithms.json"
        same_plans=(--algo-cache "$OUT/${arm}_algorithms.json")
      fi
      for run in $(seq 1 "${REPRO_RUNS:-3}"); do
        repro_start=$SECONDS
        # Independent cold processes share no cache: each gets its own empty CUDA JIT cache (the driver's
        # on-disk cache of compiled kernels, ~/.nv/ComputeCache by default; cuDNN's runtime-compiled engines
        # may land there), unless REPRO_JIT_CACHE=shared keeps the machine's. The log's first line says which.
        jit_cache=""
        if [ "${REPRO_JIT_CACHE:-fresh}" = fresh ]; then
          jit_cache=$(mktemp -d /tmp/cb_jit_cache.XXXXXX)
          echo "jit_cache fresh CUDA_CACHE_PATH=$jit_cache" >"$OUT/${arm}_$run.log"
        else
          echo "jit_cache shared CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-default}" >"$OUT/${arm}_$run.log"
        fi
        ${jit_cache:+env CUDA_CACHE_PATH=$jit_cache} timeout "$TLIMIT" $CB run --job jobs/seed2017.ini \
          --set matrix.engines=cudnn --algo exhaustive \
          --set engine.cuda_graphs=true --set matrix.precisions="${REPRO_PRECISIONS:-fp32,tf32,bf16}" \
          --set measure.min_steps="$STEPS" --set measure.target_ci=0.02 ${REPRO_ARGS:-} "${same_plans[@]}" \
          --output "$OUT/${arm}_$run.h5" >>"$OUT/${arm}_$run.log" 2>&1
        echo "$arm run $run exit $?"
        echo "seed wall_s $((SECONDS - repro_start))" | tee -a "$OUT/${arm}_$run.log"
        [ -n "$jit_cache" ] && rm -rf "$jit_cache"
      done
      # max/min needs two runs at least: with REPRO_RUNS=1 the stage is one cold wall and 42 medians.
      if [ "${REPRO_RUNS:-3}" -ge 2 ]; then
        python3 bench/repro_cubes.py "$OUT/${arm}"_[0-9]*.h5 --logs "$OUT/${arm}"_[0-9]*.log 2>&1 | tee "$OUT/$arm.md" | tail -60
      fi ;;
    fwcmp)
      for precision in ${FWCMP_PRECISIONS:-tf32 bf16}; do
        cache=/tmp/fwcmp_algo_$precision.json
        [ -f "${FWCMP_CACHE_DIR:-.}/algo_graph_$precision.json" ] && cp "${FWCMP_CACHE_DIR:-.}/algo_graph_$precision.json" "$cache"
        timeout "$TLIMIT" $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn,pytorch-compile --algo exhaustive \
          --set engine.cuda_graphs=true --set matrix.precisions=$precision \
          --set "matrix.networks=${FWCMP_NETWORKS:-overfeat,vgg11,alexnet,resnet50}" \
          --set "matrix.phases=${FWCMP_PHASES:-training}" \
          --set "workers.pytorch-compile=python3 -u {workers}/pytorch/worker.py --compile" \
          --set measure.min_steps="$STEPS" --set measure.warmup=5 --set measure.target_ci=0.02 ${FWCMP_ARGS:-} \
          --algo-cache "$cache" --output "$OUT/fwcmp${FWCMP_TAG:-}_$precision.h5" >"$OUT/fwcmp${FWCMP_TAG:-}_$precision.log" 2>&1
        echo "fwcmp $precision exit $?"
        grep -E "cudnn|pytorch-compile" "$OUT/fwcmp${FWCMP_TAG:-}_$precision.log" | grep -E " ok | oom | failed | timeout " | tail -20
      done ;;
    sweep)
      timeout "$TLIMIT" $CB run --job jobs/batch-sweep.ini --set matrix.engines=cudnn --set matrix.networks=resnet50,alexnet \
        --set matrix.precisions=tf32 --set "matrix.batches=${SWEEP_BATCHES:-64,256,512,1024,2048,4096}" \
        --set measure.min_steps=10 --set measure.warmup=3 --set measure.target_ci=0.05 \
        --output "$OUT/sweep.h5" 2>&1 | tee "$OUT/sweep.log" | tail -40 ;;
    dptest)
      timeout "$TLIMIT" $MPI .bundle/bin/cudnn_data_parallel_test >"$OUT/dptest.log" 2>&1
      echo "dptest exit $?"
      grep -E "^\[  FAILED|^\[  PASSED|SKIPPED|Failure|differs|error" "$OUT/dptest.log" | head -20 ;;
    dp)
      timeout "$TLIMIT" $MPI .bundle/bin/crossbench run --job jobs/data-parallel.ini --set "matrix.gpus=${DP_GPUS:-1,2}" \
        --set measure.min_steps="${DP_STEPS:-30}" --set measure.warmup=5 --set measure.target_ci=0.02 ${DP_ARGS:-} \
        --output "$OUT/dp.h5" 2>&1 | tee "$OUT/dp.log" | tail -45 ;;
    seedmpi)
      timeout "$TLIMIT" $MPI .bundle/bin/crossbench run --job jobs/seed2017.ini --set matrix.engines=cudnn \
        --set matrix.precisions=fp32,tf32,fp16,bf16 --set measure.min_steps="$STEPS" --set measure.target_ci=0.02 \
        ${SEED_ARGS:-} --output "$OUT/seedmpi.h5" 2>&1 | tee "$OUT/seedmpi.log" | tail -64 ;;
    workers)
      # WORKERS_NP=N: N ranks (one GPU each) split the matrix; WORKER_ARGS=--resume continues a cube
      # whose journal was copied into $OUT.
      runner=$CB
      [ "${WORKERS_NP:-1}" -gt 1 ] && runner=".bundle/run mpirun --allow-run-as-root --oversubscribe -np $WORKERS_NP .bundle/bin/crossbench"
      timeout "$TLIMIT" $runner run --job jobs/seed2017.ini --set matrix.engines=cudnn,pytorch,pytorch-compile,jax \
        --set "matrix.networks=${WORKER_NETWORKS:-alexnet,googlenet,resnet50}" --set matrix.precisions=fp32,tf32,bf16 \
        --set "workers.pytorch=python3 -u {workers}/pytorch/worker.py" \
        --set "workers.pytorch-compile=python3 -u {workers}/pytorch/worker.py --compile" \
        --set "workers.jax=python3 -u {workers}/jax/worker.py" \
        --set measure.min_steps="${WORKER_STEPS:-30}" --set measure.warmup=5 --set measure.target_ci=0.05 \
        ${WORKER_ARGS:-} --output "$OUT/workers.h5" 2>&1 | tee "$OUT/workers.log" | tail -80 ;;
    oldtk)
      torch_libs=$(python3 -c 'import importlib, os
for name in ("nvidia.cudnn", "nvidia.nccl", "nvidia.cublas"):  # cuDNN loads cuBLASLt 13
    try:
        for p in importlib.import_module(name).__path__: print(os.path.join(p, "lib"))
    except Exception: pass' | paste -sd:)
      export LD_LIBRARY_PATH="${torch_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      missing=$(.bundle/run ldd .bundle/bin/crossbench | grep "not found")
      if [ -n "$missing" ]; then echo "oldtk: cannot run, missing: $missing"; continue; fi
      .bundle/run ldd .bundle/bin/crossbench | grep -E "cudart|cublas|cudnn|nccl"
      timeout "$TLIMIT" .bundle/run .bundle/bin/cudnn_kernels_test >"$OUT/oldtk_kernels_test.log" 2>&1
      echo "kernels tests exit $?"
      timeout "$TLIMIT" .bundle/run .bundle/bin/cudnn_engine_test >"$OUT/oldtk_tests.log" 2>&1
      echo "tests exit $?"
      grep -E "^\[  FAILED|^\[  PASSED|Failure" "$OUT/oldtk_kernels_test.log" "$OUT/oldtk_tests.log" | head -30
      timeout "$TLIMIT" $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo "${SEED_ALGO:-exhaustive}" \
        --set matrix.precisions=fp32,tf32 --set measure.min_steps="$STEPS" --set measure.target_ci=0.02 \
        ${SEED_ARGS:-} --output "$OUT/${SEED_OUT:-seed-oldtk}.h5" 2>&1 | tee "$OUT/${SEED_OUT:-seed-oldtk}.log" | tail -40 ;;
    provenance)
      timeout "$TLIMIT" $CB run --set matrix.engines=cudnn --set matrix.networks=alexnet --set matrix.precisions=fp32 \
        --set matrix.batches=64 --set matrix.phases=training --set measure.min_steps=20 --set measure.warmup=3 \
        --jsonl "$OUT/provenance.jsonl" --output "$OUT/provenance.h5" >"$OUT/provenance.log" 2>&1
      echo "run exit $?"
      PYTHONPATH=analysis timeout 120 python3 bench/check_provenance.py "$OUT/provenance.h5" 2>&1 | tee "$OUT/provenance.txt" ;;
    agreement)
      timeout "$TLIMIT" $CB check --set "matrix.networks=${CHECK_NETWORKS:-alexnet,overfeat,vgg11,vgg16,vgg19,googlenet,resnet50,resnet101,resnet152}" \
        --set matrix.engines=cudnn,jax,pytorch --set "matrix.precisions=${CHECK_PRECISIONS:-fp32}" --set matrix.batches=2 \
        --set matrix.phases=inference,training --set measure.seed=42 --set measure.cell_time_limit_s=300 \
        --set "workers.pytorch=python3 -u {workers}/pytorch/worker.py" \
        --set "workers.jax=python3 -u {workers}/jax/worker.py" >"$OUT/check.jsonl" 2>"$OUT/check.log"
      echo "check exit $?, $(grep -c . "$OUT/check.jsonl") lines"
      precisions=${CHECK_PRECISIONS:-fp32}
      for precision in ${precisions//,/ }; do  # each precision against cudnn at that precision, its bounds
        PYTHONPATH=analysis python3 -m crossbench_analysis agreement "$OUT/check.jsonl" --reference cudnn \
          --precision "$precision" --markdown "$OUT/agreement-$precision.md"
      done ;;
    nvtx)
      if ! command -v nsys >/dev/null; then
        echo "nvtx: no nsys in this image; NVTX ranges need a profiler (nsys sets NVTX_INJECTION64_PATH)"
      else
        timeout "$TLIMIT" .bundle/run nsys profile -t cuda,nvtx --force-overwrite true -o "$OUT/nvtx" \
          .bundle/bin/crossbench run --job jobs/seed2017.ini --set matrix.engines=cudnn --set matrix.networks=alexnet \
          --set matrix.precisions=bf16 --set measure.min_steps=10 --set measure.warmup=2 \
          --set measure.layer_times=true --output "$OUT/nvtx.h5" >"$OUT/nvtx.log" 2>&1
        echo "nsys exit $?"
        nsys stats --report nvtx_sum --format csv "$OUT/nvtx.nsys-rep" 2>&1 | tee "$OUT/nvtx_sum.csv" | cut -c1-200 | head -30
      fi ;;
    frameworks)
      # Cell by cell (crossbench, then its standalone loop): frameworks.json and each cell's cube (in
      # $OUT/frameworks) hold every pair finished before the limit.
      timeout "$TLIMIT" python3 -u bench/gpu_framework_overhead.py --crossbench "$CB" --work-dir "$OUT/frameworks" \
        --compile-cache "${FW_COMPILE_CACHE:-/tmp/crossbench-frameworks-cache}" \
        --variants "${FW_VARIANTS:-eager,reduce-overhead,jax}" --networks "${FW_NETWORKS:-resnet50}" \
        --precisions "${FW_PRECISIONS:-tf32,bf16}" --phases "${FW_PHASES:-inference,training}" \
        --steps "${FW_STEPS:-100}" --repeats "${FW_REPEATS:-1}" --warmup "$WARMUP" --data "${FW_DATA:-synthetic}" \
        --out "$OUT/frameworks.json" 2>&1 |
        grep --line-buffered -v Warning | tee "$OUT/frameworks.log" | tail -60 ;;
    jaxevents)
      # $CROSSBENCH_BUILD_DIR as the tests read it: the bundle's binary (through .bundle/run) and library.
      wrapper_dir=$(mktemp -d)
      printf '#!/bin/bash\nexec %q/.bundle/run %q/.bundle/bin/crossbench "$@"\n' "$PWD" "$PWD" >"$wrapper_dir/crossbench"
      chmod +x "$wrapper_dir/crossbench"
      ln -s "$PWD/.bundle/bin/libcrossbench_jax_events.so" "$wrapper_dir/"
      CROSSBENCH_BUILD_DIR=$wrapper_dir PYTHONPATH=analysis timeout "$TLIMIT" \
        python3 -m pytest -v -s -p no:cacheprovider tests/python/test_jax_step_events.py >"$OUT/jaxevents.log" 2>&1
      echo "jaxevents exit $?"
      grep -E "PASSED|FAILED|SKIPPED|ERROR|passed|failed|Error|events median" "$OUT/jaxevents.log" | cut -c1-400 | head -40 ;;
    jaxclock)
      timeout "$TLIMIT" python3 -u bench/gpu_jax_clock.py --crossbench "$CB" \
        --networks "${JAXCLOCK_NETWORKS:-alexnet,resnet50}" --precisions "${JAXCLOCK_PRECISIONS:-tf32,bf16}" \
        --phases "${JAXCLOCK_PHASES:-training,inference}" --budget-s "${JAXCLOCK_BUDGET_S:-150}" \
        --out "$OUT/jaxclock.json" >"$OUT/jaxclock.log" 2>&1
      echo "jaxclock exit $?"
      grep -vE "Warning|python_hooks" "$OUT/jaxclock.log" | tail -40 ;;
    cube20)
      # Resumable across device calls of at most 10 minutes (torch.compile compiles per cell, so
      # the full cube takes several): the cube, its journal and the measured algorithm choices live
      # in $CUBE20_DIR, a folder of the working tree that git neither tracks nor ignores, so the
      # next call's copy of the tree carries them; a journal there means --resume. crossbench stops
      # on timeout's SIGTERM with the cube written (exit 3; the running cell, if it does not end
      # within --stop-grace-s, is not_run and runs again next time). The folder is copied to
      # $OUT/cube20/ at the end: copy it back into the tree before the next call (bench/README.md).
      dir=${CUBE20_DIR:-bench/results/2026-12-01/cube20}
      grace=${CUBE20_GRACE:-45}
      mkdir -p "$dir"
      resume=()
      if [ -f "$dir/cube20.h5.journal" ]; then
        resume=(--resume)
        echo "cube20: continuing $dir/cube20.h5 ($(($(wc -l <"$dir/cube20.h5.journal") - 1)) journal entries)"
      fi
      # CUBE20_NP=N: N ranks (one GPU each, e.g. on nvidia-h200-x2) split the remaining cells.
      runner=$CB
      [ "${CUBE20_NP:-1}" -gt 1 ] && runner=".bundle/run mpirun --allow-run-as-root --oversubscribe -np $CUBE20_NP .bundle/bin/crossbench"
      timeout -k $((grace + 30)) "$TLIMIT" $runner run --job jobs/seed2017.ini \
        --set "matrix.engines=${CUBE20_ENGINES:-cudnn,pytorch,pytorch-compile,jax}" \
        --set "matrix.networks=${CUBE20_NETWORKS:-alexnet,overfeat,vgg11,googlenet,resnet50,resnet101,resnet152}" \
        --set matrix.precisions=fp32,tf32,bf16,amp-bf16 --set matrix.phases=inference,training \
        --set "workers.pytorch=python3 -u {workers}/pytorch/worker.py" \
        --set "workers.pytorch-compile=python3 -u {workers}/pytorch/worker.py --compile" \
        --set "workers.jax=python3 -u {workers}/jax/worker.py" \
        --set measure.min_steps="${CUBE20_STEPS:-100}" --set measure.target_ci=0.02 \
        --algo-cache "$dir/algorithms.json" --stop-grace-s "$grace" \
        ${CUBE20_ARGS:-} "${resume[@]}" --output "$dir/cube20.h5" 2>&1 | tee -a "$dir/cube20.log" | tail -60
      rc=${PIPESTATUS[0]}
      case $rc in
        0) echo "cube20: complete" ;;
        3|124) echo "cube20: stopped by the stage limit (exit $rc): copy $OUT/cube20/ back to $dir and call again" ;;
        *) echo "cube20: crossbench exit $rc (see $dir/cube20.log)" ;;
      esac
      mkdir -p "$OUT/cube20"
      cp -p "$dir"/cube20.h5 "$dir"/cube20.h5.journal "$dir"/cube20.log "$dir"/algorithms.json "$OUT/cube20/" 2>/dev/null
      if [ -f "$dir/cube20.h5" ]; then
        PYTHONPATH=analysis python3 -m crossbench_analysis report "$dir/cube20.h5" -o "$OUT/cube20/report" \
          --force >/dev/null 2>&1 && sed -n '/## Headline/,/## Summary/p' "$OUT/cube20/report/report.md" | head -60
      fi ;;
    study|studysweep)
      # Resumable across device calls like cube20 (bench/README.md "The study across device calls"):
      # the cube, journal and log live in $STUDY_DIR, which the working tree carries to the next
      # call; a journal there means --resume, with --allow-build-change, since each call runs
      # the bundle it brings (its run segment records that call's GPU and build). timeout sends
      # SIGTERM at the stage's limit: crossbench lets the running cell finish for $STUDY_GRACE s,
      # then writes the cube and exits 3 (the cell it had to end is not_run and runs again next
      # call); --preserve-status passes that 3 on. Past the grace, -k kills it (137): the journal
      # still holds every finished cell.
      dir=${STUDY_DIR:-bench/results/2026-12-02/study}
      grace=${STUDY_GRACE:-60}
      if [ "$stage" = study ]; then name=${STUDY_NAME:-study}; else name=sweep; fi
      cube="$dir/$name.h5"
      mkdir -p "$dir"
      # The workers' compile caches (engine.compile_cache), shared by both stages: $dir/compile-cache
      # (git-ignored, so it never travels as it is), carried between calls packed as
      # $dir/compile-cache.tar.xz, so that the next call compiles warm: Inductor's generated code
      # and cubins pack to a fraction of their size, and the pack must fit what a call returns (16 MiB a
      # file) and carries beside the bundle (64 MiB in all): $STUDY_CACHE_MAX_MB, 15; a larger pack is made
      # again without Triton's compiled kernels (below), and one still larger comes back no more and
      # the next call compiles cold (STUDY_COMPILE_CACHE=/tmp/... keeps
      # the cache out of the tree and does not pack it). A pack over 15 MiB (a returned file holds 16 MiB at
      # most) comes back split in parts of 15 MiB, compile-cache.tar.xz.00, .01, ..., which the next call joins:
      # STUDY_CACHE_MAX_MB=30 lets a pack of two parts travel, where the bundle leaves the tree room for it.
      cache=${STUDY_COMPILE_CACHE:-$dir/compile-cache}
      packed="$dir/compile-cache.tar.xz"
      # A pack larger than one returned file comes back in parts (below): compile-cache.tar.xz.00, .01, ...
      parts=("$packed".[0-9][0-9])
      if [ "$cache" = "$dir/compile-cache" ] && [ ! -d "$cache" ]; then
        # Both there (an earlier call's pack left beside this call's parts, or the reverse): the newer.
        if [ -f "$packed" ] && { [ ! -f "${parts[0]}" ] || [ "$packed" -nt "${parts[0]}" ]; }; then
          tar -C "$dir" -xJf "$packed" && echo "$name: unpacked $packed ($(du -sm "$cache" | cut -f1) MiB)"
        elif [ -f "${parts[0]}" ]; then
          cat "${parts[@]}" | tar -C "$dir" -xJf - &&
            echo "$name: unpacked $packed from ${#parts[@]} parts ($(du -sm "$cache" | cut -f1) MiB)"
        fi
      fi
      echo "$name: compile cache $cache ($(find "$cache" -type f 2>/dev/null | wc -l) files)"
      runner=$CB
      [ "${STUDY_NP:-1}" -gt 1 ] && runner=".bundle/run mpirun --allow-run-as-root --oversubscribe -np $STUDY_NP .bundle/bin/crossbench"
      resume=()
      if [ -f "$cube.journal" ]; then
        # --allow-setting-change: a default that changed between calls and changes only some engines'
        # numbers (engine.jax_timing's became events) reruns those engines' cells, recorded in the cube.
        resume=(--resume --allow-build-change --allow-setting-change)
        echo "$name: continuing $cube ($(($(wc -l <"$cube.journal") - 1)) journal entries)"
      fi
      if [ "$stage" = study ]; then
        matrix=(--job jobs/seed2017.ini
                --set "matrix.engines=${STUDY_ENGINES:-cudnn,pytorch,pytorch-compile,jax}"
                --set "matrix.networks=${STUDY_NETWORKS:-alexnet,overfeat,vgg11,googlenet,resnet50,resnet101,resnet152}"
                --set "matrix.precisions=${STUDY_PRECISIONS:-fp32,tf32,bf16,amp-bf16}"
                --set "matrix.batches=${STUDY_BATCHES:-64}" --set "matrix.phases=${STUDY_PHASES:-inference,training}"
                --set measure.min_steps="${STUDY_STEPS:-100}" --set measure.target_ci=0.02)
      else
        # Batches past the OOM boundary cost one quick `oom` each (the allocation fails in preparation).
        matrix=(--job jobs/batch-sweep.ini
                --set "matrix.engines=${STUDY_ENGINES:-cudnn,pytorch-compile}"
                --set "matrix.networks=${SWEEP_NETWORKS:-resnet50,vgg11,alexnet}"
                --set "matrix.precisions=${STUDY_PRECISIONS:-tf32,bf16}"
                --set "matrix.batches=${SWEEP_BATCHES:-1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192}"
                --set matrix.phases=inference,training
                --set measure.min_steps="${STUDY_STEPS:-50}" --set measure.target_ci=0.02
                --set engine.algo=exhaustive --set engine.cuda_graphs=true
                --set measure.oom_boundary=stop)  # each series smallest batch first; past its first oom, none runs
      fi
      # The worker commands (a default in ${VAR:-...} would end at the "}" of {workers}).
      default_pytorch='python3 -u {workers}/pytorch/worker.py' default_jax='python3 -u {workers}/jax/worker.py'
      pytorch_worker=${STUDY_PYTORCH_WORKER:-$default_pytorch} jax_worker=${STUDY_JAX_WORKER:-$default_jax}
      stage_start=$SECONDS
      # The study's share of the stage: STUDY_BESIDE_S (90) stay for the cudnn cells beside this call's
      # framework cells (below), where the stage has a minute of study besides; else none are measured.
      beside_s=0
      [ "$stage" = study ] && [ "$TLIMIT" -gt $((${STUDY_BESIDE_S:-90} + 60)) ] && beside_s=${STUDY_BESIDE_S:-90}
      # STUDY_PREWARM_S (default 0: off) > 0: first compile the next framework cells side by side
      # (bench/study_prewarm.py, $STUDY_PREWARM_PROCS processes, 3) into the compile cache for that many
      # seconds of the stage, so that the timed run finds them warm; their cubes in $OUT/$name/prewarm.
      # Both stages: the sweep's pytorch-compile cells compile once per batch size (168 of its 336 cells).
      # The timed run takes first the cells the prewarm compiled whole (--first): one it did not finish, which
      # the run's order may put first, would otherwise keep them waiting while it compiles (call 64).
      first=()
      if [ "${STUDY_PREWARM_S:-0}" -gt 0 ]; then
        # Only the cells the timed run can reach in what the stage leaves it (study_prewarm.py --run-s).
        run_s=$((TLIMIT - beside_s - STUDY_PREWARM_S - (SECONDS - stage_start)))
        reach=()
        [ "$run_s" -gt 0 ] && reach=(--run-s "$run_s")
        ready_file="$OUT/$name/prewarm/ready.filter"
        python3 bench/study_prewarm.py --journal "$cube.journal" --cache "$cache" --out "$OUT/$name/prewarm" \
          --ready-file "$ready_file" \
          --processes "${STUDY_PREWARM_PROCS:-3}" --budget-s "$STUDY_PREWARM_S" "${reach[@]}" -- $CB run "${matrix[@]}" \
          --set "workers.pytorch=$pytorch_worker" --set "workers.pytorch-compile=$pytorch_worker --compile" \
          --set "workers.jax=$jax_worker" ${STUDY_ARGS:-} 2>&1 | tee -a "$dir/$name.log"
        [ -s "$ready_file" ] && first=(--first "$(cat "$ready_file")")
      fi
      # STUDY_WAIT_FILE: a GPU job that is not timed (and needs no exclusive device memory) may run beside the prewarm, whose
      # compiles are not timed either; the timed run starts only once that job has created this file
      # (or the stage's time is up), so nothing shares the GPU with a timed cell.
      if [ -n "${STUDY_WAIT_FILE:-}" ]; then
        while [ ! -e "$STUDY_WAIT_FILE" ] && [ $((SECONDS - stage_start)) -lt $((TLIMIT - beside_s)) ]; do sleep 1; done
        echo "$name: waited $((SECONDS - stage_start)) s of the stage for $STUDY_WAIT_FILE" | tee -a "$dir/$name.log"
      fi
      study_limit=$((TLIMIT - beside_s - (SECONDS - stage_start)))
      [ "$study_limit" -lt 1 ] && study_limit=1  # timeout 0 would mean no limit at all
      timeout --preserve-status -k $((grace + 30)) "$study_limit" $runner run "${matrix[@]}" \
        --set "workers.pytorch=$pytorch_worker" --set "workers.pytorch-compile=$pytorch_worker --compile" \
        --set "workers.jax=$jax_worker" \
        --algo-cache "$dir/algorithms.json" --compile-cache "$cache" --stop-grace-s "$grace" \
        ${STUDY_ARGS:-} "${resume[@]}" "${first[@]}" --output "$cube" >>"$dir/$name.log" 2>&1
      rc=$?
      tail -60 "$dir/$name.log"
      echo "$name wall_s $((SECONDS - stage_start)) exit $rc" | tee -a "$dir/$name.log"
      case $rc in
        0) echo "$name: complete" ;;
        3) echo "$name: stopped cleanly at the stage limit (exit 3): copy $OUT/$name/ back to $dir and call again" ;;
        137|143) echo "$name: killed after the grace (exit $rc): the journal holds every finished cell; copy $OUT/$name/ back to $dir and call again" ;;
        *) echo "$name: crossbench exit $rc (see $dir/$name.log)" ;;
      esac
      # Issue 24: every framework cell against cudnn on the same GPU in the same call. The cudnn cells of the
      # (network, precision, phase) whose framework cells this call's segment finished, again, with the warm
      # algorithm cache: $dir/beside_s<segment>.h5 (bench/study_beside.py pairs them: `table`).
      beside_prefix=beside_s
      [ "$name" != study ] && beside_prefix=${name}_beside_s  # study_beside.py table --extra finds them by it
      if [ "$beside_s" -gt 0 ] && [ -f "$cube.journal" ]; then
        mapfile -t beside < <(python3 bench/study_beside.py filter "$cube.journal")
        if [ "${#beside[@]}" -eq 2 ]; then
          timeout "$beside_s" $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn \
            --set "matrix.networks=${STUDY_NETWORKS:-alexnet,overfeat,vgg11,googlenet,resnet50,resnet101,resnet152}" \
            --set "matrix.precisions=${STUDY_PRECISIONS:-fp32,tf32,bf16,amp-bf16}" \
            --set "matrix.batches=${STUDY_BATCHES:-64}" --set "matrix.phases=${STUDY_PHASES:-inference,training}" \
            --set measure.min_steps="${STUDY_STEPS:-100}" --set measure.target_ci=0.02 ${STUDY_ARGS:-} \
            --algo-cache "$dir/algorithms.json" --filter "${beside[0]}" \
            --output "$dir/$beside_prefix${beside[1]}.h5" >"$dir/$beside_prefix${beside[1]}.log" 2>&1
          echo "$name: cudnn beside segment ${beside[1]}'s framework cells: exit $? ($dir/$beside_prefix${beside[1]}.h5)"
        else
          echo "$name: no framework cell finished in this call: no cudnn cells beside it"
        fi
      fi
      mkdir -p "$OUT/$name"
      # The journal as it was before an allowed setting change (--allow-setting-change: .superseded[.N]) too.
      cp -p "$cube" "$cube.journal" "$cube.journal.superseded"* "$dir/$name.log" "$dir/$beside_prefix"*.h5 \
        "$dir/$beside_prefix"*.log "$OUT/$name/" 2>/dev/null
      [ -f "$dir/algorithms.json" ] && cp -p "$dir/algorithms.json" "$OUT/$name/"
      if [ "$cache" = "$dir/compile-cache" ] && [ -d "$cache" ]; then
        max_kib=$((${STUDY_CACHE_MAX_MB:-15} * 1024))
        pack="$OUT/$name/compile-cache.tar.xz"
        rm -f "$pack" "$pack".[0-9][0-9]
        XZ_OPT=${XZ_OPT:--T0} tar -C "$dir" -cJf "$pack" compile-cache
        cache_mb=$(du -sm "$cache" | cut -f1)
        packed_kib=$(du -sk "$pack" | cut -f1)
        if [ "$packed_kib" -le "$max_kib" ]; then
          echo "$name: compile cache $cache_mb MiB, packed $((packed_kib / 1024)) MiB: back in $(split_pack "$pack")"
        else
          # Lean: without Triton's compiled kernels (triton/: every candidate max-autotune benchmarked, most of
          # the bulk). Inductor's own directory keeps the autotuning's choices, the kernels' sources and the FX
          # graph and AOTAutograd entries, so the next call skips the benchmarks it holds and compiles only the
          # chosen kernels again: a compile longer than a call (ResNet-50 max-autotune training, call 61) goes
          # on where it stopped instead of starting cold.
          XZ_OPT=${XZ_OPT:--T0} tar -C "$dir" --exclude=compile-cache/triton -cJf "$pack" compile-cache
          lean_kib=$(du -sk "$pack" | cut -f1)
          if [ "$lean_kib" -le "$max_kib" ]; then
            echo "$name: compile cache $cache_mb MiB, packed $((packed_kib / 1024)) MiB: too large (STUDY_CACHE_MAX_MB=${STUDY_CACHE_MAX_MB:-15}); without Triton's compiled kernels (triton/) packed $((lean_kib / 1024)) MiB: back in $(split_pack "$pack") (the next call reuses the autotuning and recompiles the kernels it chose)"
          else
            rm -f "$pack"
            echo "$name: compile cache $cache_mb MiB, packed $((packed_kib / 1024)) MiB, $((lean_kib / 1024)) MiB without triton/: too large to come back (STUDY_CACHE_MAX_MB=${STUDY_CACHE_MAX_MB:-15}); the next call compiles cold (each cell's decisions say so)"
          fi
        fi
      fi
      if [ -f "$cube" ]; then
        PYTHONPATH=analysis python3 -m crossbench_analysis report "$cube" -o "$OUT/$name/report" \
          --force >/dev/null 2>&1 && sed -n '/## Headline/,/## Summary/p' "$OUT/$name/report/report.md" | head -60
      fi ;;
  esac
done
# cuDNN's compiled plans beside any --algo-cache file under $OUT (FILE.plans): binary, of this machine's device and
# libraries, and of unknown size, so their sizes are printed and the files left behind, not returned.
find "$OUT" -name '*.json.plans' -type f -printf '%s bytes %p (cuDNN plans beside a plan file: not returned)\n' \
  -delete 2>/dev/null
echo "=== done $(date +%T)"
