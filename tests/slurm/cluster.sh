#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for the tests:
#   cluster.sh start DIR   → munged, slurmctld and two slurmd; prints the slurm.conf path
#   cluster.sh stop DIR    → stops what `start` started
# Two node names (node1, node2) live on this host, each its own slurmd with
# 4 CPUs declared (config_overrides, so 4-task jobs start on 2 cores): a
# heterogeneous job's components then get a node each, as on a real cluster
# (the backfill scheduler, the only one that starts heterogeneous jobs,
# reserves whole nodes, so two components never share one node). Each slurmd
# has its own TmpFS, where PMIx puts its per-step directories. Open MPI must
# then use TCP between "nodes" (OMPI_MCA_btl=self,tcp): its shared-memory
# transport would see two nodes that are one host.
set -euo pipefail
action=${1:?start|stop}
dir=${2:?state directory}
conf=$dir/slurm.conf

stop_pidfile() {
  local file=$1
  [ -f "$file" ] || return 0
  local pid
  pid=$(cat "$file")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$file"
}

case $action in
start)
  mkdir -p "$dir/state" "$dir/log" "$dir/spool-node1" "$dir/spool-node2" "$dir/tmp-node1" "$dir/tmp-node2"
  host=$(hostname -s)
  # munge: a key, its socket directory, and the daemon running as user munge.
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
  fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge
  chmod 0400 /etc/munge/munge.key
  if ! pgrep -x munged >/dev/null; then
    # Daemons get /dev/null for stdio: an inherited pipe would keep the caller waiting.
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid </dev/null >/dev/null 2>&1
    echo started > "$dir/munged.started"
  fi
  memory_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.4)}' /proc/meminfo)  # per node
  cat > "$conf" <<CONF
ClusterName=crossbench-test
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
MpiDefault=pmix
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
# Heterogeneous jobs are started by the backfill scheduler only: run it often.
SchedulerParameters=bf_interval=1
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
TmpFS=$dir/tmp-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
SlurmctldPort=16817
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=30
NodeName=node1 NodeHostname=$host Port=16818 CPUs=4 RealMemory=$memory_mb State=UNKNOWN
NodeName=node2 NodeHostname=$host Port=16819 CPUs=4 RealMemory=$memory_mb State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
  slurmctld -f "$conf" </dev/null >/dev/null 2>&1
  slurmd -f "$conf" -N node1 </dev/null >/dev/null 2>&1
  slurmd -f "$conf" -N node2 </dev/null >/dev/null 2>&1
  export SLURM_CONF=$conf
  for _ in $(seq 100); do
    if [ "$(sinfo -h -N -o %t 2>/dev/null | grep -cE '^(idle|mix|alloc)')" -eq 2 ]; then
      echo "$conf"
      exit 0
    fi
    sleep 0.3
  done
  echo "cluster.sh: the node did not become idle; logs in $dir/log" >&2
  sinfo >&2 || true
  tail -20 "$dir"/log/*.log >&2 || true
  exit 1
  ;;
stop)
  stop_pidfile "$dir/slurmd-node1.pid"
  stop_pidfile "$dir/slurmd-node2.pid"
  stop_pidfile "$dir/slurmctld.pid"
  if [ -f "$dir/munged.started" ]; then
    stop_pidfile /run/munge/munged.pid
    rm -f "$dir/munged.started"
  fi
  ;;
*)
  echo "usage: cluster.sh start|stop DIR" >&2
  exit 2
  ;;
esac
