# Call 63: the GPU suite on dd99e18 (src/engines/worker changed since call 56's suite), then the sweep's
# pytorch-compile cells, compiled ahead by 3 prewarm processes; the new cells' decisions split their preparation.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
OUT=$W TLIMIT=200 bash bench/gpu_session.sh tests > $W/tests_stage.log 2>&1
left=$((530 - (SECONDS - T0)))
echo "tests done at $((SECONDS - T0)) s, left $left s" >> $W/tests_stage.log
if [ $left -gt 120 ]; then
  S=bench/results/2026-12-06/sweep-pytorch-compile
  OUT=$W/s STUDY_DIR=$S STUDY_ENGINES=pytorch-compile STUDY_GRACE=15 STUDY_PREWARM_S=$(( (left - 20) * 2 / 5 )) \
    STUDY_PREWARM_PROCS=3 STUDY_CACHE_MAX_MB=15 TLIMIT=$((left - 20)) bash bench/gpu_session.sh studysweep > $W/sweep_stage.log 2>&1
  mkdir -p $W/s; cp -p $S/sweep.h5 $S/sweep.h5.journal $S/sweep.log $W/s/ 2>/dev/null
  rm -f $W/s/compile-cache.tar.xz
fi
echo "call done at $((SECONDS - T0)) s" >> $W/tests_stage.log
kill $SMI
cd $O && tar czf call63.tgz w && rm -rf w
