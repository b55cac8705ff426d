#!/bin/bash
# conv_bn_add_relu on oneDNN: main before it (ccb29f5, built to $BEFORE/crossbench) against this build, resnet50
# and resnet101 inference, batch 1 and 16, fp32, 2 threads; the two alternate which runs first, cell by cell.
set -u
cd "$(dirname "$0")/../../../.."
name=${1:-sum-a}
echo "# $(date -u +%FT%TZ) start; load: $(cat /proc/loadavg); after: $(build/crossbench --version); before: $(${BEFORE:-/work/baseline}/crossbench --version)"
/usr/bin/python3 bench/cpu_onednn_vs_pytorch.py --threads 2 --networks resnet50,resnet101 --batches 1,16 \
  --phases inference --warmup 3 --min-steps 15 --max-steps 60 --cell-time-limit 150 \
  --baseline-build-dir ${BEFORE:-/work/baseline} --blas ${BLAS:-/work/openblas/root/usr/lib/x86_64-linux-gnu/openblas-pthread} \
  --keep /tmp/cpu-fusion-$name 2>&1
echo "# $(date -u +%FT%TZ) end; load: $(cat /proc/loadavg)"
