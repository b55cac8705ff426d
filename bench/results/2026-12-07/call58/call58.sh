#!/bin/bash
# Call 58 (twentieth session): does one process's cell spread across fresh sessions as processes do
# (issue 24's reproducibility: OverFeat bf16 training 2.47-2.49 ms in three processes, 2.59-2.60 in three,
# every step at 1980 MHz, plans identical)? Then the sweep's pytorch-compile cells (issue 29).
set -u
O=$OUT; W=$O/w; mkdir -p $W
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw,clocks.sm,clocks.mem --format=csv,nounits -lms 250 > $W/smi.csv 2>&1 &
SMI=$!
export STEPS=50 WARMUP=10
cp diag/plans.json $W/plans.json  # diag/plans.json was a copy of ../call57/plans.json
for r in 1 2 3; do
  OUT=$W REPRO_RUNS=1 REPRO_NAME=rep_r$r TLIMIT=75 REPRO_PRECISIONS=tf32,bf16 \
    REPRO_ARGS="--set matrix.networks=overfeat,vgg11 --algo-cache $W/plans.json --repetitions 4" \
    bash bench/gpu_session.sh repro >> $W/rep.out 2>&1
done
kill $SMI
echo "repetitions done at ${SECONDS} s" >> $W/rep.out
N=${CALL_S:-550}
left=$((N - SECONDS))
OUT=$W/s STUDY_DIR=bench/results/2026-12-06/sweep-pytorch-compile STUDY_ENGINES=pytorch-compile \
  STUDY_GRACE=15 TLIMIT=$((left - 25)) bash bench/gpu_session.sh studysweep > $W/sweep.out 2>&1
cd $O && tar czf call58.tgz w && rm -rf w
