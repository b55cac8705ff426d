# Call 79 (thirtieth session): the search's agreement checks with their inputs put back
# (Convolution::refill_check_inputs). Call 78 found every fp16 Graph API check of ResNet-50 b256 NaN (the
# arena overflowed: plans taken unchecked, every statistics plan refused as "nan"). About 480 s:
# 1. engine.conv_statistics A/B on ResNet-50 fp16 training b256 (call 78's, now that the checks hold);
# 2. the new SearchAgreement tests and ConvolutionStatistics fp16 and bf16;
# 3. the whole GPU suite (kernels, search, engine) with what time is left.
# Copy to the repository root; bench/gpu_bundle.sh build; bash bench/device_tree.sh stash; carry .bundle.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
git rev-parse HEAD > $W/revision.txt 2>/dev/null
CB=".bundle/run .bundle/bin/crossbench"
cell() {  # name, plan file, extra settings
  [ $((SECONDS - T0)) -gt 150 ] && { echo "$1 not run" >> $W/stage.log; return; }
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
cell onlayers $W/plans_on.json "$ON --layer-times all"
python3 bench/repro_cubes.py $W/off1.h5 $W/on1.h5 --limit 1.0 > $W/off1_vs_on1.md 2>&1
python3 bench/repro_cubes.py $W/off2.h5 $W/on2.h5 --limit 1.0 > $W/off2_vs_on2.md 2>&1
timeout 120 env GTEST_FILTER='*SearchAgreement*' .bundle/run .bundle/bin/cudnn_search_test > $W/agreement_test.log 2>&1
echo "agreement tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
timeout 60 env GTEST_FILTER='*ConvolutionStatistics*bf16*:*ConvolutionStatistics*fp16*' \
  .bundle/run .bundle/bin/cudnn_engine_test > $W/statistics_test.log 2>&1
echo "statistics tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
left=$((470 - (SECONDS - T0)))
GTEST_FILTER='-*ConvolutionStatistics*' OUT=$W TLIMIT=$left bash bench/gpu_session.sh tests > $W/tests_stage.log 2>&1
echo "tests done at $((SECONDS - T0)) s" >> $W/stage.log
rm -f $W/*.lock
cd $O && tar czf call79.tgz w && rm -rf w
