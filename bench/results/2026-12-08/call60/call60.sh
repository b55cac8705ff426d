# Call 60: issue 24's protocol with --repetitions 3 at 45 steps a cell (3 cold processes, no cache shared),
# then the sweep's pytorch-compile cells in what remains.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
OUT=$W STEPS=12 REPRO_RUNS=3 REPRO_NAME=rep3w TLIMIT=150 REPRO_ARGS="--repetitions 3 --set measure.warmup=3" \
  bash bench/gpu_session.sh repro > $W/repro_stage.log 2>&1
left=$((550 - (SECONDS - T0)))
echo "repro done at $((SECONDS - T0)) s, left $left s" >> $W/repro_stage.log
if [ $left -gt 90 ]; then
  OUT=$W/s STUDY_DIR=bench/results/2026-12-06/sweep-pytorch-compile STUDY_ENGINES=pytorch-compile STUDY_GRACE=15 \
    TLIMIT=$((left - 30)) bash bench/gpu_session.sh studysweep > $W/sweep_stage.log 2>&1
  cp -p bench/results/2026-12-06/sweep-pytorch-compile/sweep.h5 bench/results/2026-12-06/sweep-pytorch-compile/sweep.h5.journal bench/results/2026-12-06/sweep-pytorch-compile/sweep.log $W/s/ 2>/dev/null
fi
kill $SMI
cd $O && tar czf call60.tgz w && rm -rf w
