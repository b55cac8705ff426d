#!/bin/bash
# ABBA ABBA: resnet50 batch 1 training, fp32, 2 threads; before = .before/build (bc67e4f), after = build (1f5cd4e code)
cd /tmp/onednn_ab
echo "# $(date -u +%FT%TZ) start; load: $(cat /proc/loadavg)"
i=0
for side in before after after before before after after before; do
  bin=/work/wt/onednn/build/crossbench; [ $side = before ] && bin=/work/wt/onednn/.before/build/crossbench
  rm -f r$i.h5 r$i.h5.journal
  OMP_NUM_THREADS=2 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 $bin run --job job.ini --output r$i.h5 --quiet >/dev/null 2>&1
  ms=$(/usr/bin/python3 -c "import h5py,numpy as np; f=h5py.File('r$i.h5'); print(float(np.asarray(f['median_ms'][()]).ravel()[0]))")
  echo "$side $ms  load $(cut -d' ' -f1 /proc/loadavg)"
  i=$((i+1))
done
echo "# $(date -u +%FT%TZ) end; load: $(cat /proc/loadavg)"
