# Call 66: issue 24's narrowest max-autotune cell, ResNet-50 tf32 training (reduce-overhead 1.026 of cudnn), first
# half: compiled cold, alone, for the whole call; the compile cache comes back lean (triton/ left out) in parts of
# 15 MiB (STUDY_CACHE_MAX_MB=30), every part moved to $OUT, so that the next call goes on where this one stopped.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
D=bench/results/2026-12-10/autotune
OUT=$W STUDY_NAME=autotune_r50tf32 STUDY_DIR=$D STUDY_ENGINES=pytorch-compile STUDY_NETWORKS=resnet50 \
  STUDY_PRECISIONS=tf32 STUDY_PHASES=training STUDY_ARGS="--set engine.compile_mode=max-autotune" \
  STUDY_BESIDE_S=0 STUDY_GRACE=15 STUDY_CACHE_MAX_MB=30 TLIMIT=420 \
  bash bench/gpu_session.sh study > $W/autotune_stage.log 2>&1
echo "stage done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
du -sm $D/compile-cache $D/compile-cache/* >> $W/autotune_stage.log 2>&1
find $D/compile-cache -maxdepth 3 -type d | head -40 >> $W/autotune_stage.log 2>&1
mv $W/autotune_r50tf32/compile-cache.tar.xz* $O/ 2>/dev/null
ls -la $O >> $W/autotune_stage.log
echo "call done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
kill $SMI
cd $O && tar czf call66.tgz w && rm -rf w
