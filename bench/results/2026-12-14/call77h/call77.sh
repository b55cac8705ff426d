# Call 77 (twenty-ninth session; written, not run: the session's device time went to calls 74h, 70h and 71h):
# the first call of the next session, about 540 s. What the defaults of a0b2642 (engine.graph_plan_reuse and
# engine.graph_from_cache on) need before anyone re-measures with them on an H200:
# 1. the genstats forms and the probe's timings in fp16 and bf16 at batch 256 (does the statistics graph pay
#    where it runs: fp16 on Hopper, call 74h);
# 2. the whole GPU suite with the new defaults, then ConvolutionStatistics' bf16 (its count fixed) and fp16
#    (new) cases;
# 3. seed2017 x fp32, tf32, bf16 cold with the defaults, one session a cell (issue 24's 120 s wall).
# Copy to the repository root; build with --target gpu_cudnn_cells gpu_genstats_probe gpu_genstats_forms,
# bench/gpu_bundle.sh, then bash bench/device_tree.sh stash, carry .bundle (restore after). Files: $OUT/call77.tgz.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
mkdir -p $W/genstats
OUT=$W/genstats TLIMIT=60 GENSTATS_ARGS="--precisions fp16,bf16 --batch 256" \
  bash bench/gpu_session.sh genstats > $W/genstats/stage.log 2>&1
echo "genstats done at $((SECONDS - T0)) s" >> $W/stage.log
GTEST_FILTER='-*ConvolutionStatistics*' OUT=$W TLIMIT=300 bash bench/gpu_session.sh tests > $W/tests_stage.log 2>&1
echo "tests done at $((SECONDS - T0)) s" >> $W/stage.log
timeout 90 env GTEST_FILTER='*ConvolutionStatistics*bf16*:*ConvolutionStatistics*fp16*' \
  .bundle/run .bundle/bin/cudnn_engine_test > $W/statistics_test.log 2>&1
echo "statistics tests exit $? at $((SECONDS - T0)) s" >> $W/stage.log
OUT=$W REPRO_RUNS=1 REPRO_NAME=colddefaults REPRO_PRECISIONS=fp32,tf32,bf16 TLIMIT=$((560 - (SECONDS - T0))) \
  REPRO_ARGS="--algo-cache $W/plans.json" bash bench/gpu_session.sh repro >> $W/stage.log 2>&1
echo "cold seed done at $((SECONDS - T0)) s" >> $W/stage.log
kill $SMI
rm -f $W/*.lock
cd $O && tar czf call77.tgz w && rm -rf w
