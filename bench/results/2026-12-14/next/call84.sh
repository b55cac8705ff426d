# Call 84 (thirtieth session; the first question of call83.sh, cut to the budget left): does a shared CUDA JIT
# cache carry cuDNN's runtime compilation from one cold process to the next? seed2017 x tf32 (14 cells, the
# ResNets' inference residual graphs compiled at runtime): two runs sharing one CUDA_CACHE_PATH that starts
# empty, then one run with its own fresh one. About 120 s.
O=$OUT; W=$O/w; mkdir -p $W; T0=$SECONDS
python3 -c "import tarfile; tarfile.open('.bundle/payload.tar.xz').extractall('.bundle')"
nvidia-smi -L > $W/gpu.txt
mkdir -p /tmp/jc_shared
OUT=$W REPRO_RUNS=2 REPRO_NAME=jitshared REPRO_JIT_CACHE=shared CUDA_CACHE_PATH=/tmp/jc_shared TLIMIT=70 \
  REPRO_PRECISIONS=tf32 bash bench/gpu_session.sh repro >> $W/stage.log 2>&1
du -sh /tmp/jc_shared >> $W/stage.log 2>&1
OUT=$W REPRO_RUNS=1 REPRO_NAME=jitfresh TLIMIT=70 REPRO_PRECISIONS=tf32 bash bench/gpu_session.sh repro >> $W/stage.log 2>&1
python3 bench/repro_cubes.py $W/jitshared_1.h5 $W/jitshared_2.h5 $W/jitfresh_1.h5 --limit 1.02 > $W/three.md 2>&1
rm -f $W/*.lock
cd $O && tar czf call84.tgz w && rm -rf w
