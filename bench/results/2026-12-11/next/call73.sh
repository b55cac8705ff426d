# Call 73 (twenty-seventh session; written and syntax-checked, not run): engine.conv_statistics, the training
# batch-norms' statistics from the convolution before them (cuDNN's genstats in the convolution's graph).
# 1. Its tests: the kernel test of the batch-norm forward finalizing the convolution's sums (and the search's
#    reference sums), and ConvolutionStatistics.* (the residual test network element by element, two steps,
#    and ResNet-50, in fp32 NHWC, tf32 and bf16, against our statistics pass). Their logs say how many
#    batch-norms took the statistics, and why the others did not.
# 2. The A/B the setting exists for (issue 24's 7,951 images/s): ResNet-50 bf16 training at batch 256
#    (update none), each arm searching once into its own plan file, then replaying it in fresh processes,
#    interleaved; then one process each with layer times (where the batch-norms' forward time goes).
# Files: $OUT/call73.tgz. Run the genstats probe (call 71's first stage) in the same call if time allows.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
timeout 90 env GTEST_FILTER='CudnnKernels.FusedBatchNorm*' .bundle/run .bundle/bin/cudnn_kernels_test \
  > $W/kernels_test.log 2>&1
echo "kernels test exit $? at $((SECONDS - T0)) s" >> $W/stage.log
timeout 200 env GTEST_FILTER='*ConvolutionStatistics*' .bundle/run .bundle/bin/cudnn_engine_test > $W/engine_test.log 2>&1
echo "engine test exit $? at $((SECONDS - T0)) s" >> $W/stage.log
CB=".bundle/run .bundle/bin/crossbench"
cell() {  # name, plan file, extra settings
  [ $((SECONDS - T0)) -gt 530 ] && { echo "$1 not run" >> $W/stage.log; return; }
  timeout 120 $CB run --job jobs/seed2017.ini --set matrix.engines=cudnn --algo exhaustive --set engine.cuda_graphs=true \
    --set matrix.networks=resnet50 --set matrix.precisions=bf16 --set matrix.phases=training --set matrix.batches=256 \
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
rm -f $W/*.lock
cd $O && tar czf call73.tgz w && rm -rf w
