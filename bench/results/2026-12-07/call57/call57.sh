#!/bin/bash
# Call 57 (twentieth session): issue 24's cool-down A/B, then the sweep's pytorch-compile cells (issue 29).
set -u
O=$OUT; W=$O/w; mkdir -p $W
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
# The GPU's temperature, power and SM clock every 250 ms beside the A/B (the cube records clocks, not temperature).
nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw,clocks.sm --format=csv,nounits -lms 250 > $W/smi.csv 2>&1 &
SMI=$!
export STEPS=50 WARMUP=10
A="--set matrix.networks=alexnet,overfeat,vgg11,googlenet --algo-cache $W/plans.json"
OUT=$W REPRO_RUNS=1 REPRO_NAME=p0 TLIMIT=90 REPRO_ARGS="$A" bash bench/gpu_session.sh repro > $W/ab.out 2>&1
for r in 1 2 3; do
  arms="0 2000"; [ $r = 2 ] && arms="2000 0"
  for a in $arms; do
    OUT=$W REPRO_RUNS=1 REPRO_NAME=c${a}_r$r TLIMIT=100 REPRO_ARGS="$A --set measure.cooldown_ms=$a" \
      bash bench/gpu_session.sh repro >> $W/ab.out 2>&1
  done
done
kill $SMI
echo "A/B done at ${SECONDS} s" >> $W/ab.out
N=${CALL_S:-550}
left=$((N - SECONDS))
OUT=$W/s STUDY_DIR=bench/results/2026-12-06/sweep-pytorch-compile STUDY_ENGINES=pytorch-compile \
  STUDY_PREWARM_S=$((left / 3)) STUDY_PREWARM_PROCS=8 STUDY_GRACE=15 TLIMIT=$((left - 25)) \
  bash bench/gpu_session.sh studysweep > $W/sweep.out 2>&1
cd $O && tar czf call57.tgz w && rm -rf w
