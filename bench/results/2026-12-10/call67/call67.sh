# Call 67: ResNet-50 tf32 training with max-autotune, second half: the compile cache call 66 brought back
# (lean: Inductor's autotuning timings, no triton/) is joined from its parts in $D and the cell compiles on where
# call 66 stopped; then cudnn's same cell beside it on this GPU (STUDY_BESIDE_S). Every pack part back in $OUT.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
D=bench/results/2026-12-10/autotune
ls -la $D > $W/autotune_stage.log
OUT=$W STUDY_NAME=autotune_r50tf32 STUDY_DIR=$D STUDY_ENGINES=pytorch-compile STUDY_NETWORKS=resnet50 \
  STUDY_PRECISIONS=tf32 STUDY_PHASES=training STUDY_ARGS="--set engine.compile_mode=max-autotune" \
  STUDY_BESIDE_S=75 STUDY_GRACE=15 STUDY_CACHE_MAX_MB=30 TLIMIT=480 \
  bash bench/gpu_session.sh study >> $W/autotune_stage.log 2>&1
echo "stage done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
du -sm $D/compile-cache $D/compile-cache/* >> $W/autotune_stage.log 2>&1
mv $W/autotune_r50tf32/compile-cache.tar.xz* $O/ 2>/dev/null
ls -la $O >> $W/autotune_stage.log
echo "call done at $((SECONDS - T0)) s" >> $W/autotune_stage.log
kill $SMI
cd $O && tar czf call67.tgz w && rm -rf w
