# Call 70 (twenty-sixth session; the twenty-seventh made its tests stage the whole GPU suite, about 250 s: the
# engine changed in graph_from_cache, conv_statistics and the graph search's agreement helper; call 73 runs
# ConvolutionStatistics.*, whose searches of statistics graphs are long): the GPU tests, then the placement A/B on the tf32 and bf16 seed cells
# (28 cells, issue 24's protocol: three sessions a cell, 3 warm-up and 12 timed steps), the arms interleaved,
# three cold processes each, every process replaying one searched plan file; then OverFeat bf16 layer by layer
# in three processes if time is left. Files: $OUT/call70.tgz.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
GTEST_FILTER='-*ConvolutionStatistics*' OUT=$W TLIMIT=320 \
  bash bench/gpu_session.sh tests > $W/tests_stage.log 2>&1
echo "tests done at $((SECONDS - T0)) s" >> $W/ab_stage.log
PROTOCOL="--repetitions 3 --set measure.warmup=3 --algo-cache $W/plans.json"
# The search, once (its wall is the cold wall of these 28 cells with the protocol); every later process replays it.
OUT=$W REPRO_RUNS=1 REPRO_NAME=seed REPRO_PRECISIONS=tf32,bf16 STEPS=12 TLIMIT=150 REPRO_ARGS="$PROTOCOL" \
  bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
echo "seed done at $((SECONDS - T0)) s" >> $W/ab_stage.log
for i in 1 2 3; do
  for arm in nospacer spacer; do
    extra=""; [ $arm = spacer ] && extra="--set engine.pool_spacer_mb=1024"
    [ $((SECONDS - T0)) -gt 500 ] && break 2
    OUT=$W REPRO_RUNS=1 REPRO_NAME=$arm$i REPRO_PRECISIONS=tf32,bf16 STEPS=12 TLIMIT=90 \
      REPRO_ARGS="$PROTOCOL $extra" bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
    echo "$arm$i done at $((SECONDS - T0)) s" >> $W/ab_stage.log
  done
done
for arm in nospacer spacer; do
  python3 bench/repro_cubes.py $W/${arm}[0-9]_1.h5 --logs $W/${arm}[0-9]_1.log > $W/$arm.md 2>&1
done
# OverFeat bf16 layer by layer, three processes with the same plans, no spacer: the layer that moves between
# processes names the mechanism.
for i in 1 2 3; do
  [ $((SECONDS - T0)) -gt 520 ] && break
  OUT=$W REPRO_RUNS=1 REPRO_NAME=oflayers$i REPRO_PRECISIONS=bf16 STEPS=50 TLIMIT=45 \
    REPRO_ARGS="--filter overfeat --layer-times all --algo-cache $W/plans.json" bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
  echo "oflayers$i done at $((SECONDS - T0)) s" >> $W/ab_stage.log
done
kill $SMI
rm -f $W/*.lock
cd $O && tar czf call70.tgz w && rm -rf w
