# Call 62: issue 24's max-autotune beside cudnn on cells whose compile fits a call: OverFeat and VGG-11
# tf32 and bf16 inference (4 prewarm processes), then OverFeat tf32 and bf16 training (2), each stage
# compiled ahead, then timed, then cudnn beside its cells on this GPU.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
D=bench/results/2026-12-08/autotune
OUT=$W STUDY_NAME=autotune STUDY_DIR=$D STUDY_ENGINES=pytorch-compile STUDY_NETWORKS=overfeat,vgg11 \
  STUDY_PRECISIONS=tf32,bf16 STUDY_PHASES=inference STUDY_ARGS="--set engine.compile_mode=max-autotune" \
  STUDY_PREWARM_S=130 STUDY_PREWARM_PROCS=4 STUDY_BESIDE_S=60 STUDY_GRACE=15 STUDY_CACHE_MAX_MB=15 TLIMIT=290 \
  bash bench/gpu_session.sh study > $W/autotune_stage.log 2>&1
echo "stage 1 done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
left=$((525 - (SECONDS - T0)))
if [ $left -gt 150 ]; then
  OUT=$W STUDY_NAME=autotune_training STUDY_DIR=$D STUDY_ENGINES=pytorch-compile STUDY_NETWORKS=overfeat \
    STUDY_PRECISIONS=tf32,bf16 STUDY_PHASES=training STUDY_ARGS="--set engine.compile_mode=max-autotune" \
    STUDY_PREWARM_S=$((left - 100)) STUDY_PREWARM_PROCS=2 STUDY_BESIDE_S=45 STUDY_GRACE=10 STUDY_CACHE_MAX_MB=15 TLIMIT=$left \
    bash bench/gpu_session.sh study > $W/autotune_training_stage.log 2>&1
fi
echo "stage 2 done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
kill $SMI
[ -f $W/autotune_training/compile-cache.tar.xz ] && mv $W/autotune_training/compile-cache.tar.xz $O/
rm -f $W/autotune/compile-cache.tar.xz
cd $O && tar czf call62.tgz w && rm -rf w
