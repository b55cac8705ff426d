# Call 90 (thirty-first session, the budget's last ~500 s on the warm machine): issue 29 item 4, max-autotune's
# harness pairs on VGG-11 inference (tf32, bf16; about 2 minutes of compile each), then alexnet bf16 training.
O=$OUT; W=$O/w; mkdir -p $W/ma; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
OUT=$W/ma TLIMIT=330 FW_VARIANTS=max-autotune FW_NETWORKS=vgg11 FW_PHASES=inference \
  bash bench/gpu_session.sh frameworks > $W/ma/stage_vgg11.log 2>&1
mv $W/ma/frameworks.json $W/ma/frameworks_vgg11.json 2>/dev/null
echo "max-autotune vgg11 inference done at $((SECONDS - T0)) s" >> $W/stage.log
left=$((440 - (SECONDS - T0)))
if [ $left -ge 60 ]; then
  OUT=$W/ma TLIMIT=$left FW_VARIANTS=max-autotune FW_NETWORKS=alexnet FW_PRECISIONS=bf16 FW_PHASES=training \
    bash bench/gpu_session.sh frameworks > $W/ma/stage_alexnet.log 2>&1
  mv $W/ma/frameworks.json $W/ma/frameworks_alexnet_bf16_training.json 2>/dev/null
fi
echo "max-autotune alexnet bf16 training done at $((SECONDS - T0)) s" >> $W/stage.log
rm -f $W/*.lock
cd $O && tar czf call90.tgz w && rm -rf w
