#!/bin/bash
# bf16 (this CPU has avx512_core_bf16): the oneDNN engine fused against the same binary unfused
# (--set engine.fuse=false), one cell per run, in the order fused unfused unfused fused (ABBA) twice
# per cell (ORDER: another sequence); 2 threads. Prints each run's median [ms] and, per cell, the ratio of the medians of the
# four runs per side (fused / unfused). PyTorch is left out: its bf16 CPU path is oneDNN itself.
set -u
cd "$(dirname "$0")/../../../.."
work=${WORK:-/tmp/cpu-fusion-bf16}
mkdir -p "$work"
export OMP_NUM_THREADS=2 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "# $(date -u +%FT%TZ) start; load: $(cat /proc/loadavg); $(build/crossbench --version)"
for network in ${NETWORKS:-resnet50 vgg11 alexnet googlenet}; do
  for batch in ${BATCHES:-1 16}; do
    for phase in inference training; do
      cell=${network}_${batch}_${phase}
      cat > "$work/$cell.ini" <<JOB
[matrix]
networks = $network
engines = onednn
precisions = bf16
batches = $batch
phases = $phase
[measure]
warmup = 3
min_steps = 15
max_steps = 60
cell_time_limit_s = 150
JOB
      run=0
      for fuse in ${ORDER:-true false false true true false false true}; do
        cube="$work/${cell}_${fuse}_$run.h5"
        rm -f "$cube" "$cube.journal"
        build/crossbench run --job "$work/$cell.ini" --output "$cube" --quiet --set engine.fuse=$fuse > /dev/null 2>&1 ||
          echo "$cell fuse=$fuse run $run: crossbench failed (exit $?)"
        echo "$cell fuse=$fuse $(/usr/bin/python3 -c "import h5py,numpy as n; f=h5py.File('$cube'); print(float(n.asarray(f['median_ms'][()]).ravel()[0]), f['message'].asstr()[()].ravel()[0])")"
        run=$((run + 1))
      done
    done
  done
done | tee "$work/runs.txt"
/usr/bin/python3 - "$work/runs.txt" <<'PY'
import statistics, sys, collections
medians = collections.defaultdict(lambda: {"true": [], "false": []})
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) >= 3 and parts[1].startswith("fuse="):
        medians[parts[0]][parts[1][5:]].append(float(parts[2]))
print(f"\n{'cell':<26} {'unfused':>9} {'fused':>9} {'fused/unfused':>13}  (medians of the runs' medians [ms])")
ratios = []
for cell, sides in medians.items():
    u, f = statistics.median(sides["false"]), statistics.median(sides["true"])
    ratios.append(f / u)
    print(f"{cell:<26} {u:9.2f} {f:9.2f} {f / u:13.3f}")
geo = statistics.geometric_mean(ratios)
print(f"{'geometric mean':<26} {'':9} {'':9} {geo:13.3f}  ({len(ratios)} cells)")
PY
echo "# $(date -u +%FT%TZ) end; load: $(cat /proc/loadavg)"
