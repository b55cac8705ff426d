# Call 72 (twenty-seventh session): engine.graph_from_cache (with and without engine.graph_plan_reuse), cold and
# warm, on issue 24's protocol (three sessions a cell, 3 warm-up and 12 timed steps).
# 1. Cold: seed2017 x fp32, tf32, bf16 (42 cells) in a fresh process with an empty plan file, once with both
#    settings off (today's default) and once with both on. Under the protocol a cell's sessions 2 and 3 replay
#    the process's own records, so both settings apply within a cold process. Issue 24: <= 120 s (105-117 s in
#    call 60). repro_cubes on the pair: the walls, the Graph API set-up, and whether plans and medians agree.
# 2. Warm: the off arm's plan file replayed by fresh processes in three arms: off, cfg (graph_from_cache),
#    cfgreuse (both): each arm's wall and set-up, plans "same" across arms.
# 3. If time is left, a second cold pair (the order reversed). Files: $OUT/call72.tgz.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
ON="--set engine.graph_from_cache=true --set engine.graph_plan_reuse=true"
PROTOCOL="--repetitions 3 --set measure.warmup=3"
cold() {  # name, plan file, extra settings
  OUT=$W REPRO_RUNS=1 REPRO_NAME=$1 REPRO_PRECISIONS=fp32,tf32,bf16 STEPS=12 TLIMIT=170 \
    REPRO_ARGS="$PROTOCOL --algo-cache $2 $3" bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
  echo "$1 done at $((SECONDS - T0)) s" >> $W/ab_stage.log
}
cold coldoff1 $W/plans_off.json ""
cold coldon1 $W/plans_on.json "$ON"
for arm in off cfg cfgreuse; do
  extra=""
  [ $arm = cfg ] && extra="--set engine.graph_from_cache=true"
  [ $arm = cfgreuse ] && extra="$ON"
  [ $((SECONDS - T0)) -gt 440 ] && break
  OUT=$W REPRO_RUNS=1 REPRO_NAME=warm$arm REPRO_PRECISIONS=fp32,tf32,bf16 STEPS=12 TLIMIT=90 \
    REPRO_ARGS="$PROTOCOL --algo-cache $W/plans_off.json $extra" bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
  echo "warm$arm done at $((SECONDS - T0)) s" >> $W/ab_stage.log
done
if [ $((SECONDS - T0)) -lt 330 ]; then
  cold coldon2 $W/plans_on2.json "$ON"
  [ $((SECONDS - T0)) -lt 460 ] && cold coldoff2 $W/plans_off2.json ""
fi
python3 bench/repro_cubes.py $W/coldoff1_1.h5 $W/coldon1_1.h5 --logs $W/coldoff1_1.log $W/coldon1_1.log > $W/cold1.md 2>&1
[ -f $W/coldoff2_1.h5 ] && python3 bench/repro_cubes.py $W/coldoff2_1.h5 $W/coldon2_1.h5 --logs $W/coldoff2_1.log \
  $W/coldon2_1.log > $W/cold2.md 2>&1
python3 bench/repro_cubes.py $W/warm*_1.h5 --logs $W/warm*_1.log > $W/warm.md 2>&1
rm -f $W/*.lock
cd $O && tar czf call72.tgz w && rm -rf w
