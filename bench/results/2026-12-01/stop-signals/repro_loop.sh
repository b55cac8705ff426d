#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MALLOC_CHECK_=3 MALLOC_PERTURB_=165
for i in $(seq 1 ${N:-30}); do
  rm -f out$i.h5*
  /work/main/build/crossbench run --job job.ini --output out$i.h5 --quiet --stop-grace-s ${GRACE:-1} > log$i.txt 2>&1 &
  pid=$!
  while [ ! -e out$i.h5.journal ]; do sleep 0.05; done
  sleep $(python3 -c "import random; print(random.uniform(0.0,2.0))")
  kill -USR1 $pid
  wait $pid; rc=$?
  echo "run $i rc=$rc"
  [ $rc -ne 3 ] && cp log$i.txt fail$i.txt
done
