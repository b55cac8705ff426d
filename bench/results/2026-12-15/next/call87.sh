# Call 87 (the thirty-first session's first call; call 85 of the thirtieth session, renumbered)
# (about 520 s). Issue 24's reproducibility and cold wall with no cache shared (fresh CUDA JIT cache and plan
# file per process, the protocol --repetitions 3, 3 warm-up and 12 timed steps), the batch-norm backward's
# fusion forms, and the two ResNet-50 batch-256 cells.
# Copy to the repository root; build --target gpu_cudnn_cells gpu_genstats_probe gpu_genstats_forms
# gpu_bnbackward_forms; bench/gpu_bundle.sh build; bash bench/device_tree.sh stash; carry .bundle.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
[ -x .bundle/bin/gpu_bnbackward_forms ] && timeout 60 .bundle/run .bundle/bin/gpu_bnbackward_forms --batch 32 \
  > $W/bnbackward_forms.log 2>&1
echo "bnbackward forms exit $? at $((SECONDS - T0)) s" >> $W/stage.log
# The plan file beside the algorithm cache (first GPU run) and the plan reuse and graph_from_cache tests it touches.
timeout 90 env GTEST_FILTER='*GraphPlanReuse*:*GraphFromCache*' .bundle/run .bundle/bin/cudnn_engine_test \
  > $W/plan_file_test.log 2>&1
echo "plan file tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
CB=".bundle/run .bundle/bin/crossbench"
cell() {  # name, plan file, extra settings
  timeout 90 $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive --set engine.cuda_graphs=true \
    --set matrix.networks=resnet50 --set matrix.phases=training --set matrix.batches=256 \
    --set measure.min_steps=50 --set measure.target_ci=0.02 --algo-cache $2 $3 --output $W/$1.h5 > $W/$1.log 2>&1
  echo "$1 exit $? at $((SECONDS - T0)) s: $(grep -E ' ok | oom | failed ' $W/$1.log | head -1)" >> $W/stage.log
}
cell bf16none $W/plans_bf16.json "--set matrix.precisions=bf16 --set measure.update=none"
cell bf16sgd $W/plans_bf16.json "--set matrix.precisions=bf16 --set measure.update=sgd"
cell fp16off $W/plans_fp16off.json "--set matrix.precisions=fp16 --set measure.update=none"
cell fp16on $W/plans_fp16on.json "--set matrix.precisions=fp16 --set measure.update=none --set engine.conv_statistics=true"
OUT=$W REPRO_RUNS=3 REPRO_NAME=cold REPRO_PRECISIONS=fp32,tf32,bf16 STEPS=12 TLIMIT=140 \
  REPRO_ARGS="--repetitions 3 --set measure.warmup=3" timeout $((565 - (SECONDS - T0))) bash bench/gpu_session.sh repro >> $W/stage.log 2>&1
echo "cold seed done at $((SECONDS - T0)) s" >> $W/stage.log
ls -la $W/*.plans >> $W/stage.log 2>&1  # the compiled plans beside each plan file: their sizes, not their bytes
rm -f $W/*.lock $W/*.plans
cd $O && tar czf call87.tgz w && rm -rf w
