# Call 61: issue 24's max-autotune beside cudnn, ResNet-50 tf32 and bf16 training (the closest cells:
# reduce-overhead 1.026 and 1.103 of cudnn), compiled ahead by 2 prewarm processes, then timed, then
# cudnn beside them on this GPU.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
D=bench/results/2026-12-08/autotune
OUT=$W STUDY_NAME=autotune STUDY_DIR=$D STUDY_ENGINES=pytorch-compile STUDY_NETWORKS=resnet50 \
  STUDY_PRECISIONS=tf32,bf16 STUDY_PHASES=training STUDY_ARGS="--set engine.compile_mode=max-autotune" \
  STUDY_PREWARM_S=340 STUDY_PREWARM_PROCS=2 STUDY_BESIDE_S=70 STUDY_GRACE=15 STUDY_CACHE_MAX_MB=15 TLIMIT=540 \
  bash bench/gpu_session.sh study > $W/autotune_stage.log 2>&1
echo "stage done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
kill $SMI
[ -f $W/autotune/compile-cache.tar.xz ] && mv $W/autotune/compile-cache.tar.xz $O/
cd $O && tar czf call61.tgz w && rm -rf w
