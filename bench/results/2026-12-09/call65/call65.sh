# Call 65: issue 24's max-autotune beside cudnn on the two bf16 inference cells never measured with it,
# one after the other, each compiled cold inside its cell, alone on the GPU (call 64's four side-by-side
# prewarms did not finish GoogLeNet's compile in 230 s, and the timed run took GoogLeNet first):
# OverFeat bf16 inference (reduce-overhead 1.012 of cudnn), then GoogLeNet bf16 inference (1.091);
# each stage then measures cudnn beside its cell on this GPU.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
D=bench/results/2026-12-09/autotune
OUT=$W STUDY_NAME=autotune_overfeat_bf16 STUDY_DIR=$D STUDY_ENGINES=pytorch-compile STUDY_NETWORKS=overfeat \
  STUDY_PRECISIONS=bf16 STUDY_PHASES=inference STUDY_ARGS="--set engine.compile_mode=max-autotune" \
  STUDY_BESIDE_S=45 STUDY_GRACE=10 STUDY_CACHE_MAX_MB=15 TLIMIT=200 \
  bash bench/gpu_session.sh study > $W/autotune_stage.log 2>&1
echo "stage 1 done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
left=$((515 - (SECONDS - T0)))
OUT=$W STUDY_NAME=autotune_googlenet_bf16 STUDY_DIR=$D STUDY_ENGINES=pytorch-compile STUDY_NETWORKS=googlenet \
  STUDY_PRECISIONS=bf16 STUDY_PHASES=inference STUDY_ARGS="--set engine.compile_mode=max-autotune" \
  STUDY_BESIDE_S=60 STUDY_GRACE=10 STUDY_CACHE_MAX_MB=15 TLIMIT=$left \
  bash bench/gpu_session.sh study > $W/autotune_stage2.log 2>&1
echo "stage 2 done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
kill $SMI
rm -f $W/autotune_*/compile-cache.tar.xz
mkdir -p $W/d; cp -rp $D/. $W/d/; rm -rf $W/d/compile-cache $W/d/compile-cache.tar.xz
cd $O && tar czf call65.tgz w && rm -rf w
