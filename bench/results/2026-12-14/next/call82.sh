# Call 82 (thirtieth session): ConvolutionStatistics with ResNet-50 fp16 at batch 64 (where statistics plans
# are taken), the SearchAgreement tests, and the whole engine test's fp16 and statistics cases. About 120 s.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
timeout 150 env GTEST_FILTER='*ConvolutionStatistics*' .bundle/run .bundle/bin/cudnn_engine_test > $W/statistics_test.log 2>&1
echo "statistics tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
rm -f $W/*.lock
cd $O && tar czf call82.tgz w && rm -rf w
