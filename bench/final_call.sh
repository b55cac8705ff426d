#!/bin/bash
# final_call.sh: the last device call of 2026-12-01 (bench/results/2026-12-01/final/): the GPU
# tests, seed2017's cudnn cells replayed from the screening run's algorithm cache (the same plans
# as screening/warm1.h5: what changed is the relu kernels), resnet50 and googlenet against
# torch.compile (reduce-overhead) and JAX in one cube, and ResNet-50 bf16 training at batch 256.
set -uo pipefail
OUT=${OUT:-/tmp/out}; export OUT STEPS=100
CB=".bundle/run .bundle/bin/crossbench"
TLIMIT=150 bash bench/gpu_session.sh tests >"$OUT/session_tests.txt" 2>&1
grep -E "PASSED|FAILED" "$OUT/session_tests.txt" | head -8
cp bench/results/2026-12-01/screening/algorithms.json "$OUT/algorithms.json"
SEED_PRECISIONS=fp32,tf32,bf16 SEED_CI=0.01 SEED_OUT=warm_relu TLIMIT=140 \
  SEED_ARGS="--algo-cache $OUT/algorithms.json" bash bench/gpu_session.sh seed 2>&1 | tail -3
timeout 260 $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn,pytorch-compile,jax \
  --set matrix.networks=resnet50,googlenet --set matrix.precisions=tf32,bf16 --set matrix.phases=inference,training \
  --set "workers.pytorch-compile=python3 -u {workers}/pytorch/worker.py --compile" \
  --set "workers.jax=python3 -u {workers}/jax/worker.py" --algo-cache "$OUT/algorithms.json" \
  --set measure.min_steps=100 --set measure.target_ci=0.01 --output "$OUT/frameworks.h5" >"$OUT/frameworks.log" 2>&1
echo "frameworks exit $?"; grep -E "^D0 " "$OUT/frameworks.log" | tail -24
timeout 60 $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --set matrix.networks=resnet50 \
  --set matrix.precisions=bf16 --set matrix.phases=training --set matrix.batches=256 --algo-cache "$OUT/algorithms.json" \
  --set measure.target_ci=0.01 --output "$OUT/resnet50_b256.h5" >"$OUT/resnet50_b256.log" 2>&1
echo "b256 exit $?"; grep -E "^D0 " "$OUT/resnet50_b256.log" | tail -2
