# Call 64: issue 24's max-autotune beside cudnn on the inference cells whose margin over reduce-overhead is
# smallest and whose max-autotune was never measured: OverFeat bf16 (1.012), GoogLeNet tf32 (1.098) and bf16
# (1.091), with OverFeat tf32 again (4 prewarm processes, then timed, then cudnn beside them on this GPU);
# then the sweep's pytorch-compile cells in what remains (no prewarm: this bundle's plan orders by the
# cache-aware estimate).
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
D=bench/results/2026-12-09/autotune
OUT=$W STUDY_NAME=autotune_inference STUDY_DIR=$D STUDY_ENGINES=pytorch-compile STUDY_NETWORKS=overfeat,googlenet \
  STUDY_PRECISIONS=tf32,bf16 STUDY_PHASES=inference STUDY_ARGS="--set engine.compile_mode=max-autotune" \
  STUDY_PREWARM_S=230 STUDY_PREWARM_PROCS=4 STUDY_BESIDE_S=60 STUDY_GRACE=15 STUDY_CACHE_MAX_MB=15 TLIMIT=370 \
  bash bench/gpu_session.sh study > $W/autotune_stage.log 2>&1
echo "stage 1 done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
rm -f $W/autotune_inference/compile-cache.tar.xz
mkdir -p $W/d; cp -rp $D/. $W/d/
left=$((530 - (SECONDS - T0)))
if [ $left -gt 90 ]; then
  S=bench/results/2026-12-06/sweep-pytorch-compile
  OUT=$W/s STUDY_DIR=$S STUDY_ENGINES=pytorch-compile STUDY_GRACE=15 STUDY_CACHE_MAX_MB=15 TLIMIT=$((left - 20)) \
    bash bench/gpu_session.sh studysweep > $W/sweep_stage.log 2>&1
  mkdir -p $W/s; cp -p $S/sweep.h5 $S/sweep.h5.journal $S/sweep.log $W/s/ 2>/dev/null
  [ -f $W/s/sweep/compile-cache.tar.xz ] && mv $W/s/sweep/compile-cache.tar.xz $O/
fi
echo "call done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
kill $SMI
rm -rf $W/d/compile-cache
cd $O && tar czf call64.tgz w && rm -rf w
