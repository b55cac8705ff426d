# Call 72 (twenty-seventh session): engine.graph_from_cache A/B. The tf32 and bf16 seed cells (28) with issue
# 24's protocol (three sessions a cell, 3 warm-up and 12 timed steps) searched once into one plan file, then
# replayed by fresh processes in three arms, interleaved twice: off (today's replay: every graph created whole),
# cfg (graph_from_cache: only the chosen configurations), cfgreuse (graph_from_cache + graph_plan_reuse).
# What it answers: the cells' wall and the Graph API set-up per arm (repro_cubes' "Graph API set-up" and wall
# lines), and whether every median and plan agrees across the arms (repro_cubes on off1 and cfg1, cfg1 and
# cfgreuse1: plans "same", max/min within the process-to-process spread). Files: $OUT/call72.tgz.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
PROTOCOL="--repetitions 3 --set measure.warmup=3 --algo-cache $W/plans.json"
OUT=$W REPRO_RUNS=1 REPRO_NAME=seed REPRO_PRECISIONS=tf32,bf16 STEPS=12 TLIMIT=150 REPRO_ARGS="$PROTOCOL" \
  bash bench/gpu_session.sh repro > $W/ab_stage.log 2>&1
echo "seed done at $((SECONDS - T0)) s" >> $W/ab_stage.log
for i in 1 2; do
  for arm in off cfg cfgreuse; do
    extra=""
    [ $arm = cfg ] && extra="--set engine.graph_from_cache=true"
    [ $arm = cfgreuse ] && extra="--set engine.graph_from_cache=true --set engine.graph_plan_reuse=true"
    [ $((SECONDS - T0)) -gt 480 ] && break 2
    OUT=$W REPRO_RUNS=1 REPRO_NAME=$arm$i REPRO_PRECISIONS=tf32,bf16 STEPS=12 TLIMIT=100 \
      REPRO_ARGS="$PROTOCOL $extra" bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
    echo "$arm$i done at $((SECONDS - T0)) s" >> $W/ab_stage.log
  done
done
for arm in off cfg cfgreuse; do
  python3 bench/repro_cubes.py $W/${arm}[0-9]_1.h5 --logs $W/${arm}[0-9]_1.log > $W/$arm.md 2>&1
done
python3 bench/repro_cubes.py $W/off1_1.h5 $W/cfg1_1.h5 --logs $W/off1_1.log $W/cfg1_1.log > $W/off_vs_cfg.md 2>&1
python3 bench/repro_cubes.py $W/cfg1_1.h5 $W/cfgreuse1_1.h5 --logs $W/cfg1_1.log $W/cfgreuse1_1.log > $W/cfg_vs_cfgreuse.md 2>&1
rm -f $W/*.lock
cd $O && tar czf call72.tgz w && rm -rf w
