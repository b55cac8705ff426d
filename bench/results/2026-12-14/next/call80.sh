# Call 80 (thirtieth session): call 79 left one ResNet-50 fp16 check unchecked (a backward-filter graph plan
# whose legacy reference did not run or overflowed). graph_plan_difference now falls back to the reference
# algorithm (ALGO_1), and decisions mark a plan taken unchecked. About 150 s:
# 1. the SearchAgreement tests; ConvolutionStatistics fp16 and bf16;
# 2. the conv_statistics A/B on ResNet-50 fp16 b256 once more (off, on, fresh plan files), with layer times.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
timeout 120 env GTEST_FILTER='*SearchAgreement*' .bundle/run .bundle/bin/cudnn_search_test > $W/agreement_test.log 2>&1
echo "agreement tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
timeout 60 env GTEST_FILTER='*ConvolutionStatistics*bf16*:*ConvolutionStatistics*fp16*' \
  .bundle/run .bundle/bin/cudnn_engine_test > $W/statistics_test.log 2>&1
echo "statistics tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
CB=".bundle/run .bundle/bin/crossbench"
cell() {  # name, plan file, extra settings
  [ $((SECONDS - T0)) -gt 200 ] && { echo "$1 not run" >> $W/stage.log; return; }
  timeout 90 $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive --set engine.cuda_graphs=true \
    --set matrix.networks=resnet50 --set matrix.precisions=fp16 --set matrix.phases=training --set matrix.batches=256 \
    --set measure.update=none --set measure.min_steps=50 --set measure.target_ci=0.02 --algo-cache $2 $3 \
    --output $W/$1.h5 > $W/$1.log 2>&1
  echo "$1 exit $? at $((SECONDS - T0)) s: $(grep -E ' ok | oom | failed ' $W/$1.log | head -1)" >> $W/stage.log
}
cell off0 $W/plans_off.json ""
cell on0 $W/plans_on.json "--set engine.conv_statistics=true --layer-times all"
cell off1 $W/plans_off.json "--layer-times all"
rm -f $W/*.lock
cd $O && tar czf call80.tgz w && rm -rf w
