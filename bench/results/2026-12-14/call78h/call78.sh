# Call 78 (twenty-ninth session; written, not run): engine.conv_statistics where cuDNN runs it on Hopper, fp16
# (call 74h's forms probe: bf16 and fp32 are refused in every form). ResNet-50 fp16 training at batch 256
# (update none), each arm searching once into its own plan file, then replaying it in fresh processes,
# interleaved; then one process each with layer times. The same as ../../2026-12-11/next/call73.sh's A/B with
# fp16 for bf16. Then the cold walls of the old defaults beside the new (seed2017 x fp32, tf32, bf16, one
# session a cell) if time is left. About 560 s. Copy to the repository root,
# bash bench/device_tree.sh stash, carry .bundle. Files: $OUT/call78.tgz.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
CB=".bundle/run .bundle/bin/crossbench"
cell() {  # name, plan file, extra settings
  [ $((SECONDS - T0)) -gt 330 ] && { echo "$1 not run" >> $W/stage.log; return; }
  timeout 120 $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive --set engine.cuda_graphs=true \
    --set matrix.networks=resnet50 --set matrix.precisions=fp16 --set matrix.phases=training --set matrix.batches=256 \
    --set measure.update=none --set measure.min_steps=50 --set measure.target_ci=0.02 --algo-cache $2 $3 \
    --output $W/$1.h5 > $W/$1.log 2>&1
  echo "$1 exit $? at $((SECONDS - T0)) s: $(grep -E ' ok | oom | failed ' $W/$1.log | head -1)" >> $W/stage.log
}
ON="--set engine.conv_statistics=true"
cell off0 $W/plans_off.json ""
cell on0 $W/plans_on.json "$ON"
for i in 1 2; do
  cell off$i $W/plans_off.json ""
  cell on$i $W/plans_on.json "$ON"
done
cell offlayers $W/plans_off.json "--layer-times all"
cell onlayers $W/plans_on.json "$ON --layer-times all"
python3 bench/repro_cubes.py $W/off1.h5 $W/on1.h5 --limit 1.0 > $W/off1_vs_on1.md 2>&1
python3 bench/repro_cubes.py $W/off2.h5 $W/on2.h5 --limit 1.0 > $W/off2_vs_on2.md 2>&1
left=$((560 - (SECONDS - T0)))
if [ $left -gt 140 ]; then
  OUT=$W REPRO_RUNS=1 REPRO_NAME=coldolddefaults REPRO_PRECISIONS=fp32,tf32,bf16 TLIMIT=$((left - 10)) \
    REPRO_ARGS="--algo-cache $W/plans_old.json --set engine.graph_plan_reuse=false --set engine.graph_from_cache=false" \
    bash bench/gpu_session.sh repro >> $W/stage.log 2>&1
fi
rm -f $W/*.lock
cd $O && tar czf call78.tgz w && rm -rf w
