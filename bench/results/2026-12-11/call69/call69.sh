# Prepared in the twenty-fifth session, not yet run: the next session's first call (copy it to the repository
# root; carry .bundle). The GPU suite with this session's two new tests, then the placement A/B
# (engine.pool_spacer_mb) and the runtime-compiled plan reuse A/B (engine.graph_plan_reuse), each arm in its own
# cold processes on this GPU. Files: $OUT/call69.tgz.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
OUT=$W TLIMIT=200 bash bench/gpu_session.sh tests > $W/tests_stage.log 2>&1
echo "tests done at $((SECONDS - T0)) s" >> $W/ab_stage.log
# Placement: OverFeat and VGG-11 in bf16 and tf32 (the cells whose processes spread with identical plans),
# three sessions a cell, three cold processes an arm; the spacer arm's sessions hold 0, 1, 2 GiB before the pool.
for arm in nospacer spacer; do
  extra=""; [ $arm = spacer ] && extra="--set engine.pool_spacer_mb=1024"
  OUT=$W REPRO_SAME_PLANS=1 REPRO_RUNS=3 REPRO_NAME=$arm REPRO_PRECISIONS=bf16,tf32 STEPS=12 TLIMIT=60 \
    REPRO_ARGS="--filter overfeat|vgg11 --repetitions 3 --set measure.warmup=3 $extra" \
    bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
  echo "$arm done at $((SECONDS - T0)) s" >> $W/ab_stage.log
done
# Plan reuse: the inference ResNets (the runtime-compiled residual graphs), run 1 searching cold, run 2
# replaying; each cell's graph_api_setup says what was built and restored.
for arm in noreuse reuse; do
  extra=""; [ $arm = reuse ] && extra="--set engine.graph_plan_reuse=true"
  [ $((SECONDS - T0)) -gt 440 ] && break
  OUT=$W REPRO_SAME_PLANS=1 REPRO_RUNS=2 REPRO_NAME=$arm REPRO_PRECISIONS=tf32,bf16 STEPS=12 TLIMIT=60 \
    REPRO_ARGS="--filter resnet.*inference --repetitions 3 --set measure.warmup=3 $extra" \
    bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
  echo "$arm done at $((SECONDS - T0)) s" >> $W/ab_stage.log
done
kill $SMI
rm -f $W/*_algorithms.json.lock
cd $O && tar czf call69.tgz w && rm -rf w
