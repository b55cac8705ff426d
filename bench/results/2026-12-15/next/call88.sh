# Call 88 (call 86 of the thirtieth session, renumbered): issue 29 item 4, the harness check of the cells not yet
# measured (../../2026-12-13/harness_table.md) and the three repeats, about 560 s, on an H200 if one comes.
# Part 1 (about 200 s): eager, worker's values, 3 repeats of alexnet tf32 inference (0.924 in its one pair),
#   alexnet tf32 training (never measured), and resnet50 / alexnet bf16 training (only random values so far).
# Part 2 (what is left): reduce-overhead's 10 cells, ResNet-50 first, then VGG-11, then GoogLeNet training:
#   each pair compiles once (crossbench first, the standalone loop from its cache) and lands in frameworks.json
#   as it finishes, so a cut stage keeps what it measured. max-autotune's 13 are the call after.
# Then python3 bench/harness_table.py bench/results --markdown bench/results/<date>/harness_table.md.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
mkdir -p $W/eager $W/ro
OUT=$W/eager TLIMIT=110 FW_VARIANTS=eager FW_NETWORKS=alexnet FW_PRECISIONS=tf32 FW_REPEATS=3 \
  bash bench/gpu_session.sh frameworks > $W/eager/stage_alexnet_tf32.log 2>&1
mv $W/eager/frameworks.json $W/eager/frameworks_alexnet_tf32.json 2>/dev/null
echo "eager alexnet tf32 done at $((SECONDS - T0)) s" >> $W/stage.log
OUT=$W/eager TLIMIT=110 FW_VARIANTS=eager FW_NETWORKS=resnet50,alexnet FW_PRECISIONS=bf16 FW_PHASES=training \
  bash bench/gpu_session.sh frameworks > $W/eager/stage_bf16_training.log 2>&1
mv $W/eager/frameworks.json $W/eager/frameworks_bf16_training.json 2>/dev/null
echo "eager bf16 training done at $((SECONDS - T0)) s" >> $W/stage.log
for net in resnet50 vgg11 googlenet; do
  left=$((545 - (SECONDS - T0)))
  [ $left -lt 60 ] && { echo "reduce-overhead $net not run" >> $W/stage.log; continue; }
  phases=inference,training
  [ $net = googlenet ] && phases=training  # its inference cells are measured
  OUT=$W/ro TLIMIT=$left FW_VARIANTS=reduce-overhead FW_NETWORKS=$net FW_PHASES=$phases \
    bash bench/gpu_session.sh frameworks > $W/ro/stage_$net.log 2>&1
  mv $W/ro/frameworks.json $W/ro/frameworks_$net.json 2>/dev/null
  echo "reduce-overhead $net done at $((SECONDS - T0)) s" >> $W/stage.log
done
rm -f $W/*.lock
cd $O && tar czf call88.tgz w && rm -rf w
