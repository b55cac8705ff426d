# Call 68: the GPU suite (not yet run on the split cuDNN convolution layer), issue 24's warm wall (run 1 searches
# cold and saves the algorithm cache, run 2 replays it: each run's wall beside its timed steps), then the sweep's
# pytorch-compile cells with the prewarm in what remains.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
OUT=$W TLIMIT=200 bash bench/gpu_session.sh tests > $W/tests_stage.log 2>&1
echo "tests done at $((SECONDS - T0)) s" >> $W/tests_stage.log
OUT=$W REPRO_SAME_PLANS=1 REPRO_RUNS=2 REPRO_NAME=warm STEPS=12 TLIMIT=150 \
  REPRO_ARGS="--repetitions 3 --set measure.warmup=3" bash bench/gpu_session.sh repro > $W/repro_stage.log 2>&1
left=$((490 - (SECONDS - T0)))
echo "repro done at $((SECONDS - T0)) s, left $left s" >> $W/repro_stage.log
if [ $left -gt 100 ]; then
  S=bench/results/2026-12-06/sweep-pytorch-compile
  OUT=$W/s STUDY_DIR=$S STUDY_ENGINES=pytorch-compile STUDY_GRACE=15 STUDY_PREWARM_S=$(( (left - 20) * 2 / 5 )) \
    STUDY_PREWARM_PROCS=3 STUDY_CACHE_MAX_MB=15 TLIMIT=$((left - 20)) bash bench/gpu_session.sh studysweep > $W/sweep_stage.log 2>&1
  mkdir -p $W/s; cp -p $S/sweep.h5 $S/sweep.h5.journal $S/sweep.log $W/s/ 2>/dev/null
  [ -f $W/s/sweep/compile-cache.tar.xz ] && mv $W/s/sweep/compile-cache.tar.xz $O/
fi
echo "call done at $((SECONDS - T0)) s" >> $W/repro_stage.log
kill $SMI
cd $O && tar czf call68.tgz w && rm -rf w
