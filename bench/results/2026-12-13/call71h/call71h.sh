# Call 71 (prepared in the twenty-sixth session, not yet run): the genstats probe, then issue 29 item 4, the harness check's eager cells
# not yet measured by the current harness (`../harness_table.md`: 12 of 16 eager cells), on the worker's values
# (FW_DATA=synthetic, the default), one pair each: about 40 s a pair. Copy to the repository root, carry .bundle.
# Files: $OUT/call71.tgz; then `python3 bench/harness_table.py bench/results` with the folder committed.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -l 2 > $W/smi.csv 2>&1 &
SMI=$!
# First (about 60-120 s): whether a convolution's per-channel sums (cuDNN's genstats) pay for the training
# batch-norm (bench/gpu_genstats_probe.cpp; the bundle must hold it: build --target gpu_genstats_probe).
mkdir -p $W/genstats
OUT=$W/genstats TLIMIT=120 bash bench/gpu_session.sh genstats > $W/genstats/stage.log 2>&1
echo "genstats done at $((SECONDS - T0)) s" >> $W/stage.log
run_part() {  # name networks precisions phases
  local left=$((560 - (SECONDS - T0)))
  [ $left -lt 60 ] && { echo "$1 not run: $left s left" >> $W/stage.log; return; }
  mkdir -p $W/$1
  OUT=$W/$1 FW_VARIANTS=eager FW_NETWORKS=$2 FW_PRECISIONS=$3 FW_PHASES=$4 FW_REPEATS=1 TLIMIT=$left \
    bash bench/gpu_session.sh frameworks > $W/$1/stage.log 2>&1
  echo "$1 done at $((SECONDS - T0)) s" >> $W/stage.log
}
run_part vgg11 vgg11 tf32,bf16 inference,training
run_part inference resnet50,alexnet,googlenet tf32,bf16 inference
run_part training resnet50,alexnet tf32 training
kill $SMI
python3 bench/harness_table.py $W > $W/harness_table.md 2>&1
cd $O && tar czf call71.tgz w && rm -rf w
