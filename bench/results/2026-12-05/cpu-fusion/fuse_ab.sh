#!/bin/bash
# The oneDNN engine fused (engine.fuse=true, the default) against the same binary unfused
# (--baseline-set engine.fuse=false), cell by cell, then PyTorch with OpenBLAS; 2 threads, batch 1, fp32.
# $1: the pass's name (log and keep directory); BLAS: the unpacked libopenblas0-pthread directory.
set -u
cd "$(dirname "$0")/../../../.."
name=${1:-pass1}
out=bench/results/2026-12-05/cpu-fusion
echo "# $(date -u +%FT%TZ) start; load: $(cat /proc/loadavg); $(build/crossbench --version)"
/usr/bin/python3 bench/cpu_onednn_vs_pytorch.py --threads 2 --networks ${NETWORKS:-resnet50,vgg11,alexnet,googlenet} \
  --batches ${BATCHES:-1} --phases inference,training --warmup 3 --min-steps 15 --max-steps 60 --cell-time-limit 150 \
  --baseline-set engine.fuse=false --blas ${BLAS:-/work/openblas/root/usr/lib/x86_64-linux-gnu/openblas-pthread} \
  --keep /tmp/cpu-fusion-$name 2>&1
echo "# $(date -u +%FT%TZ) end; load: $(cat /proc/loadavg)"
