#!/bin/bash
# Call 59 (twentieth session): issue 24's reproducibility protocol, as the issue states it (three independent cold
# processes, no cache shared, seed2017 x fp32, tf32, bf16), each cell measured in 3 fresh sessions of 20 timed steps
# (--repetitions 3: the headline is the median repetition). Call 58 found the spread per session, not per process.
set -u
O=$OUT; W=$O/w; mkdir -p $W
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw,clocks.sm,clocks.mem --format=csv,nounits -lms 500 > $W/smi.csv 2>&1 &
SMI=$!
OUT=$W STEPS=20 WARMUP=10 REPRO_RUNS=3 REPRO_NAME=rep3 TLIMIT=165 REPRO_ARGS="--repetitions 3" \
  bash bench/gpu_session.sh repro > $W/repro.out 2>&1
kill $SMI
N=${CALL_S:-550}
left=$((N - SECONDS))
if [ $left -gt 90 ]; then
  OUT=$W/s STUDY_DIR=bench/results/2026-12-06/sweep-pytorch-compile STUDY_ENGINES=pytorch-compile \
    STUDY_GRACE=15 STUDY_CACHE_MAX_MB=0 TLIMIT=$((left - 25)) bash bench/gpu_session.sh studysweep > $W/sweep.out 2>&1
fi
cd $O && tar czf call59.tgz w && rm -rf w
