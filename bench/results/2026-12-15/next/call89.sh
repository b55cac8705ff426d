# Call 89 (call 83 of the thirtieth session, renumbered): two questions of the cold wall, about 480 s on one machine.
# 1. Does the CUDA JIT cache carry cuDNN's runtime compilation from one process to the next? Calls 77 and 78
#    (one H100, one after the other) compiled their first-seen graphs in 0.6 s and 0.3 s each. Arm "shared":
#    two cold seed runs (fp32, tf32, bf16) sharing one CUDA_CACHE_PATH that starts empty: run 2 reads what run 1
#    wrote. Compare each cube's "runtime-compiled N in X s" (repro_cubes' Graph API set-up line) and the wall.
# 2. What engine.conv_statistics=true costs where Hopper refuses it (the seed's precisions): one cold run with
#    it, its own fresh JIT cache, against run 1 of arm 1 (fresh too).
# Copy to the repository root; bench/gpu_bundle.sh build; bash bench/device_tree.sh stash; carry .bundle.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
mkdir -p /tmp/jc_shared
OUT=$W REPRO_RUNS=2 REPRO_NAME=jitshared REPRO_JIT_CACHE=shared CUDA_CACHE_PATH=/tmp/jc_shared TLIMIT=150 \
  REPRO_ARGS="" bash bench/gpu_session.sh repro >> $W/stage.log 2>&1
du -sh /tmp/jc_shared >> $W/stage.log
echo "arm 1 done at $((SECONDS - T0)) s" >> $W/stage.log
OUT=$W REPRO_RUNS=1 REPRO_NAME=statson TLIMIT=$((540 - (SECONDS - T0))) \
  REPRO_ARGS="--set engine.conv_statistics=true" bash bench/gpu_session.sh repro >> $W/stage.log 2>&1
echo "arm 2 done at $((SECONDS - T0)) s" >> $W/stage.log
python3 bench/repro_cubes.py $W/jitshared_1.h5 $W/statson_1.h5 --limit 1.02 > $W/jit1_vs_statson.md 2>&1
ls -la $W/*.plans >> $W/stage.log 2>&1  # the compiled plans beside each plan file: their sizes, not their bytes
rm -f $W/*.lock $W/*.plans
cd $O && tar czf call89.tgz w && rm -rf w
