# Call 74 (twenty-eighth session; written, not run: no device machine came after call 70h): the genstats
# forms probe (bench/gpu_genstats_forms.cpp: which forms of a convolution with its output's sums cuDNN runs
# here), the graph_from_cache tests after their fix (12abf78), ConvolutionStatistics.* (call 70h's filter
# matched none), then call 72's cold and warm A/B of engine.graph_from_cache + engine.graph_plan_reuse on
# issue 24's protocol (three sessions a cell, 3 warm-up and 12 timed steps). Copy to the repository root,
# build with --target gpu_cudnn_cells gpu_genstats_probe gpu_genstats_forms, bench/gpu_bundle.sh, carry
# .bundle, about 560 s. Files: $OUT/call74.tgz.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
timeout 30 .bundle/run .bundle/bin/gpu_genstats_forms > $W/genstats_forms.log 2>&1
echo "forms exit $? at $((SECONDS - T0)) s" >> $W/stage.log
timeout 60 env GTEST_FILTER='*GraphFromCache*' .bundle/run .bundle/bin/cudnn_engine_test > $W/graph_from_cache_test.log 2>&1
echo "graph_from_cache tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
timeout 100 env GTEST_FILTER='*ConvolutionStatistics*' .bundle/run .bundle/bin/cudnn_engine_test > $W/statistics_test.log 2>&1
echo "statistics tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
ON="--set engine.graph_from_cache=true --set engine.graph_plan_reuse=true"
PROTOCOL="--repetitions 3 --set measure.warmup=3"
cold() {  # name, plan file, extra settings
  OUT=$W REPRO_RUNS=1 REPRO_NAME=$1 REPRO_PRECISIONS=fp32,tf32,bf16 STEPS=12 TLIMIT=150 \
    REPRO_ARGS="$PROTOCOL --algo-cache $2 $3" bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
  echo "$1 done at $((SECONDS - T0)) s" >> $W/stage.log
}
cold coldoff1 $W/plans_off.json ""
cold coldon1 $W/plans_on.json "$ON"
for arm in off cfgreuse cfg; do
  extra=""
  [ $arm = cfg ] && extra="--set engine.graph_from_cache=true"
  [ $arm = cfgreuse ] && extra="$ON"
  [ $((SECONDS - T0)) -gt 480 ] && break
  OUT=$W REPRO_RUNS=1 REPRO_NAME=warm$arm REPRO_PRECISIONS=fp32,tf32,bf16 STEPS=12 TLIMIT=70 \
    REPRO_ARGS="$PROTOCOL --algo-cache $W/plans_off.json $extra" bash bench/gpu_session.sh repro >> $W/ab_stage.log 2>&1
  echo "warm$arm done at $((SECONDS - T0)) s" >> $W/stage.log
done
python3 bench/repro_cubes.py $W/coldoff1_1.h5 $W/coldon1_1.h5 --logs $W/coldoff1_1.log $W/coldon1_1.log > $W/cold1.md 2>&1
python3 bench/repro_cubes.py $W/warm*_1.h5 --logs $W/warm*_1.log > $W/warm.md 2>&1
rm -f $W/*.lock
cd $O && tar czf call74.tgz w && rm -rf w
