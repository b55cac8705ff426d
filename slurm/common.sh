# Sourced by every sbatch script of slurm/ (from $CROSSBENCH_SLURM_DIR, default
# $SLURM_SUBMIT_DIR/slurm): the power cap and the requeue cap, in one place.

# crossbench_power_cap: when the job asks for a power cap (CROSSBENCH_POWER_CAP_W),
# set it on every GPU of every node of the allocation with `nvidia-smi -pl`
# (needs root or a site that allows it), put it in the device tag of every
# rank (CROSSBENCH_DEVICE_TAG gains "power=<W>W"), and restore each GPU's
# previous limit when the job ends. A cap that cannot be applied refuses the
# job (exit 2, the reason in the log): a cube must never claim a cap that was
# not there. Without CROSSBENCH_POWER_CAP_W it does nothing.
crossbench_power_cap() {
  local watts=${CROSSBENCH_POWER_CAP_W:-}
  [ -n "$watts" ] || return 0
  if ! [[ "$watts" =~ ^[0-9]+$ ]] || [ "$watts" -le 0 ]; then
    echo "crossbench: refused: CROSSBENCH_POWER_CAP_W=$watts is not a whole number of watts" >&2
    exit 2
  fi
  if [ -n "${SLURM_HET_SIZE:-}" ]; then   # a heterogeneous job: every node of every component
    local group
    for ((group = 0; group < SLURM_HET_SIZE; group++)); do
      local nodes_var="SLURM_JOB_NUM_NODES_HET_GROUP_$group"
      crossbench_power_cap_step "$watts" --het-group="$group" --ntasks-per-node=1 --ntasks="${!nodes_var:-1}"
    done
  else
    crossbench_power_cap_step "$watts" --ntasks-per-node=1 --ntasks="${SLURM_JOB_NUM_NODES:-1}"
  fi
  trap crossbench_restore_power EXIT
  CROSSBENCH_POWER_TAG="power=${watts}W"
  export CROSSBENCH_DEVICE_TAG="${CROSSBENCH_DEVICE_TAG:+$CROSSBENCH_DEVICE_TAG, }$CROSSBENCH_POWER_TAG"
}

# crossbench_power_cap_step WATTS SRUN_OPTIONS...: one task per node of those
# srun options records the old limits, sets the new one and reads it back.
CROSSBENCH_POWER_STEPS=()
crossbench_power_cap_step() {
  local watts=$1 out
  shift
  CROSSBENCH_POWER_STEPS+=("$*")
  if ! out=$(srun --overlap "$@" bash -c '
      host=$(hostname)
      command -v nvidia-smi >/dev/null || { echo "REFUSED $host: nvidia-smi not found, so no power cap can be set"; exit 1; }
      nvidia-smi --query-gpu=index,power.limit --format=csv,noheader,nounits > "$0.$host.before" 2>&1 ||
        { echo "REFUSED $host: nvidia-smi cannot read the power limits: $(head -1 "$0.$host.before")"; exit 1; }
      if ! message=$(nvidia-smi -pl "$1" 2>&1); then
        echo "REFUSED $host: nvidia-smi -pl $1 failed (the site may not allow it: root or nvidia-smi -pm 1 needed): $message"
        exit 1
      fi
      echo "APPLIED $host: $(nvidia-smi --query-gpu=index,power.limit --format=csv,noheader | paste -sd";")"
    ' "${CROSSBENCH_OUTPUT}.power" "$watts" 2>&1); then
    echo "$out" | sed 's/^/crossbench: /' >&2
    echo "crossbench: refused: the job asked for a power cap of ${watts} W and it could not be applied" >&2
    crossbench_restore_power
    exit 2
  fi
  echo "$out" | sed 's/^/crossbench: power cap /'
}

# Each GPU back to the limit it had before the job.
crossbench_restore_power() {
  local step
  for step in "${CROSSBENCH_POWER_STEPS[@]}"; do
    # shellcheck disable=SC2086  # the step's srun options, split as recorded
    srun --overlap $step bash -c '
      before="$0.$(hostname).before"
      [ -f "$before" ] || exit 0
      while IFS=", " read -r index limit; do nvidia-smi -i "$index" -pl "${limit%.*}" >/dev/null; done < "$before"
      rm -f "$before"' "${CROSSBENCH_OUTPUT}.power" || echo "crossbench: could not restore the power limits" >&2
  done
}

# crossbench_requeue_or_stop STATUS: after a run that stopped early (exit 3),
# requeue the job to resume, at most CROSSBENCH_MAX_REQUEUES times (default 5)
# over the job's life (SLURM_RESTART_COUNT counts the starts so far), so a
# cell that never fits the time limit cannot requeue forever.
crossbench_requeue_or_stop() {
  local status=$1 restarts=${SLURM_RESTART_COUNT:-0} cap=${CROSSBENCH_MAX_REQUEUES:-5}
  [ "$status" -eq 3 ] || return 0
  if [ "$restarts" -ge "$cap" ]; then
    echo "crossbench: stopped before the time limit, but not requeueing: job $SLURM_JOB_ID was already requeued" \
         "$restarts time(s) (CROSSBENCH_MAX_REQUEUES=$cap); resume by hand with --resume"
    return 0
  fi
  echo "crossbench: stopped before the time limit; requeueing job $SLURM_JOB_ID to resume" \
       "(requeue $((restarts + 1)) of at most $cap)"
  scontrol requeue "$SLURM_JOB_ID"
}
