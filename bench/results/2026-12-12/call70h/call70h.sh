# Call 70h (twenty-eighth session, on an H100: no H200 came): the whole GPU suite (correctness, not timings),
# then ConvolutionStatistics.* in what time is left. Files: $OUT/call70h.tgz.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt; nvidia-smi >> $W/gpu.txt
GTEST_FILTER='-*ConvolutionStatistics*' OUT=$W TLIMIT=300 bash bench/gpu_session.sh tests > $W/tests_stage.log 2>&1
echo "tests done at $((SECONDS - T0)) s" >> $W/stage.log
left=$((560 - (SECONDS - T0)))
[ $left -gt 30 ] && timeout $left env GTEST_FILTER='ConvolutionStatistics*' .bundle/run .bundle/bin/cudnn_engine_test > $W/statistics_test.log 2>&1
echo "statistics test exit $? at $((SECONDS - T0)) s" >> $W/stage.log
rm -f $W/*.lock
cd $O && tar czf call70h.tgz w && rm -rf w
