# Call 91 (written in the thirty-first session, not run): about 560 s on one machine.
# A. Where OverFeat's spread between processes lives. Calls 87 and 89 put OverFeat alone over issue 24's 1.02
#    (tf32 training 1.033 and 1.046, bf16 inference 1.023 and 1.038, tf32 inference 1.029). DESIGN.md
#    ("Power management is not all of it") already shows that identical plans spread as much between processes
#    and that it is where the pool lies (up to 9% on bf16 inference); its next step is the layer times of a
#    slow process. Six cold processes replaying one plan file (REPRO_SAME_PLANS=1), one session each (one
#    placement each), OverFeat tf32 and bf16, with every layer's time (--layer-times=all, a separate pass after
#    the timed steps in the same session and pool): the layers whose times move with the process's median are
#    the ones that feel where their memory lies.
# B. Eager bf16 training, the two harness cells off by more than 3% (call 88: resnet50 0.933, alexnet 0.885;
#    crossbench the faster both times): three repeats each, every side a fresh process. Each standalone row
#    now says the host's time to issue one step onto an idle device (standalone_host_issue_ms): near or above
#    the step's device time, the host paces the loop.
# C. What call 88 and call 90 did not reach: reduce-overhead vgg11 bf16 and googlenet training, max-autotune
#    vgg11 bf16 inference (call 90 measured it, 2.801 against 2.863 ms, but the stage's limit cut the JSON).
# Copy to the repository root; bench/gpu_bundle.sh build; bash bench/device_tree.sh stash; carry .bundle.
O=$OUT; W=$O/w; mkdir -p $W/eager $W/ro $W/ma; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
OUT=$W REPRO_RUNS=6 REPRO_NAME=oflayers REPRO_SAME_PLANS=1 REPRO_PRECISIONS=tf32,bf16 STEPS=12 TLIMIT=60 \
  REPRO_ARGS="--set matrix.networks=overfeat --set measure.warmup=3 --layer-times=all" \
  bash bench/gpu_session.sh repro >> $W/stage.log 2>&1
python3 bench/layer_spread.py $W/oflayers_[0-9]*.h5 --top 12 > $W/oflayers_layers.txt 2>&1
echo "overfeat layer times done at $((SECONDS - T0)) s" >> $W/stage.log
OUT=$W/eager TLIMIT=150 FW_VARIANTS=eager FW_NETWORKS=resnet50,alexnet FW_PRECISIONS=bf16 FW_PHASES=training \
  FW_REPEATS=3 bash bench/gpu_session.sh frameworks > $W/eager/stage_bf16_training.log 2>&1
mv $W/eager/frameworks.json $W/eager/frameworks_bf16_training.json 2>/dev/null
echo "eager bf16 training done at $((SECONDS - T0)) s" >> $W/stage.log
left=$((400 - (SECONDS - T0)))
[ $left -ge 60 ] && OUT=$W/ma TLIMIT=$left FW_VARIANTS=max-autotune FW_NETWORKS=vgg11 FW_PRECISIONS=bf16 \
  FW_PHASES=inference bash bench/gpu_session.sh frameworks > $W/ma/stage_vgg11_bf16.log 2>&1
mv $W/ma/frameworks.json $W/ma/frameworks_vgg11_bf16.json 2>/dev/null
echo "max-autotune vgg11 bf16 inference done at $((SECONDS - T0)) s" >> $W/stage.log
left=$((560 - (SECONDS - T0)))
[ $left -ge 60 ] && OUT=$W/ro TLIMIT=$left FW_VARIANTS=reduce-overhead FW_NETWORKS=vgg11 FW_PRECISIONS=bf16 \
  bash bench/gpu_session.sh frameworks > $W/ro/stage_vgg11_bf16.log 2>&1
mv $W/ro/frameworks.json $W/ro/frameworks_vgg11_bf16.json 2>/dev/null
echo "reduce-overhead vgg11 bf16 done at $((SECONDS - T0)) s" >> $W/stage.log
ls -la $W/*.plans >> $W/stage.log 2>&1
rm -f $W/*.lock $W/*.plans $W/*/frameworks/*.lock
cd $O && tar czf call91.tgz w && rm -rf w
