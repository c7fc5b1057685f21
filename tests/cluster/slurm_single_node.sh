#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for testing workflow/profiles/slurm for real.
#
#   tests/cluster/slurm_single_node.sh start   # install (Debian packages), configure, start, wait idle
#   tests/cluster/slurm_single_node.sh stop    # stop the daemons this script started (munged too)
#
# Everything lives in $MAXCODE_SLURM_DIR (default /tmp/maxcode-slurm): slurm.conf, state, logs,
# pid files. /etc/slurm/slurm.conf is made a link to that slurm.conf, because the srun inside
# each Snakemake job runs with SLURM_* variables removed (SLURM_CONF too) and so reads the
# default path; an existing /etc/slurm/slurm.conf that is not this link is never replaced
# (the script refuses to start). cgroup-free (proctrack/linuxproc, task/none) so it runs
# in containers and sandboxes without a cgroup hierarchy; no accounting daemon.
# Needs root (munged and slurmd run as root here) and apt-get when SLURM is not installed.
# Exit status: 0 started (or stopped), 2 cannot start here (reason on stderr), 1 failed.
set -euo pipefail

DIR="${MAXCODE_SLURM_DIR:-/tmp/maxcode-slurm}"
CONF="$DIR/slurm.conf"
PARTITION="${MAXCODE_SLURM_PARTITION:-debug}"   # the slurm profile's default partition
NODE="$(hostname -s)"

cannot() { echo "slurm_single_node: cannot start a cluster here: $*" >&2; exit 2; }

install() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && return
  command -v apt-get >/dev/null || cannot "SLURM is not installed and there is no apt-get"
  echo "slurm_single_node: installing slurm-wlm and munge from Debian packages" >&2
  apt-get update -qq || cannot "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null \
    || cannot "apt-get install slurm-wlm munge failed"
}

write_conf() {
  local cpus mem_mb
  cpus="$(nproc)"
  # Leave 1 GiB to the daemons and the driving Snakemake; SLURM schedules memory (CR_Core_Memory).
  mem_mb="$(awk '/MemTotal/ {printf "%d", $2 / 1024 - 1024}' /proc/meminfo)"
  mkdir -p "$DIR/state/ctld" "$DIR/state/d" "$DIR/log"
  cat >"$CONF" <<CONF
# Written by tests/cluster/slurm_single_node.sh: one node, no cgroups, no accounting.
ClusterName=maxcode-test
SlurmctldHost=$NODE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/state/ctld
SlurmdSpoolDir=$DIR/state/d
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldPort=${MAXCODE_SLURMCTLD_PORT:-6817}
SlurmdPort=${MAXCODE_SLURMD_PORT:-6818}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to squeue for 10 minutes: Snakemake's SLURM executor reads their
# final state from squeue when there is no accounting database.
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$NODE CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
CONF
  local etc=/etc/slurm/slurm.conf
  if [ -e "$etc" ] && [ "$(readlink "$etc")" != "$CONF" ]; then
    cannot "$etc exists and is not this test cluster's; not replacing a real cluster's config"
  fi
  mkdir -p /etc/slurm && ln -sfn "$CONF" "$etc"
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then return; fi
  [ -s /etc/munge/munge.key ] || cannot "no /etc/munge/munge.key (reinstall munge)"
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
  if id munge >/dev/null 2>&1; then
    runuser -u munge -- munged || cannot "munged did not start"
  else
    munged --force || cannot "munged did not start"
  fi
  touch "$DIR/munged.ours"   # started here, so `stop` ends it; a running munged is left alone
  for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return; sleep 0.1; done
  cannot "munge does not answer"
}

wait_idle() {
  for _ in $(seq 120); do
    state="$(SLURM_CONF="$CONF" sinfo -h -n "$NODE" -o %t 2>/dev/null || true)"
    case "$state" in idle*) return ;; esac
    sleep 0.5
  done
  echo "slurm_single_node: node $NODE is '${state:-unreachable}', not idle; logs:" >&2
  tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
  exit 1
}

running() {
  [ -s "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null \
    && [ -s "$DIR/slurmd.pid" ] && kill -0 "$(cat "$DIR/slurmd.pid")" 2>/dev/null
}

start() {
  [ "$(id -u)" = 0 ] || cannot "not root (munged, slurmctld and slurmd need root)"
  if running; then
    wait_idle
    echo "slurm_single_node: already running; export SLURM_CONF=$CONF"
    return
  fi
  install
  write_conf
  start_munge
  slurmctld -f "$CONF" || { tail -n 20 "$DIR/log/slurmctld.log" >&2; exit 1; }
  slurmd -f "$CONF" -N "$NODE" || { tail -n 20 "$DIR/log/slurmd.log" >&2; exit 1; }
  wait_idle
  echo "slurm_single_node: node $NODE idle in partition $PARTITION; export SLURM_CONF=$CONF"
}

stop() {
  for daemon in slurmd slurmctld; do
    pidfile="$DIR/$daemon.pid"
    if [ -s "$pidfile" ]; then
      pid="$(cat "$pidfile")"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      rm -f "$pidfile"
    fi
  done
  if [ "$(readlink /etc/slurm/slurm.conf)" = "$CONF" ]; then rm -f /etc/slurm/slurm.conf; fi
  if [ -e "$DIR/munged.ours" ] && [ -s /run/munge/munged.pid ]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
    rm -f "$DIR/munged.ours"
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 64 ;;
esac
