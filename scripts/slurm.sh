#!/usr/bin/env bash
# A one-node Slurm on this machine, for the `slurm`-marked tests.
#   bash scripts/slurm.sh start    # install (Debian) if missing, configure, start munged/slurmctld/slurmd, wait idle
#   bash scripts/slurm.sh stop     # stop the daemons this script started
#   bash scripts/slurm.sh status   # sinfo
# Needs root. Files: /etc/slurm/slurm.conf, /etc/munge/munge.key (made if absent), state under $STATE.
set -euo pipefail
STATE=${EZPZ_SLURM_STATE:-/var/lib/ezpz-slurm}
CONF=/etc/slurm/slurm.conf
WAIT_S=${EZPZ_SLURM_WAIT_S:-60}
say() { echo "slurm.sh: $*" >&2; }

install_packages() {
  local need=()
  command -v slurmctld >/dev/null || need+=(slurmctld)
  command -v slurmd >/dev/null || need+=(slurmd)
  command -v sinfo >/dev/null || need+=(slurm-client)
  command -v munged >/dev/null || need+=(munge)
  [ ${#need[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || { say "need root to install ${need[*]}"; return 1; }
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  timeout 300 apt-get update -qq
  timeout 600 apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

munge_key() {
  install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
  install -d -o munge -g munge -m 0755 /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  chown munge:munge /etc/munge/munge.key
  chmod 0400 /etc/munge/munge.key
}

write_conf() {
  local host cpus
  host=$(hostname -s)
  cpus=$(nproc --all)  # the machine's real CPU count
  mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d" "$STATE/log"
  cat >"$CONF" <<EOF
# Written by ezpz scripts/slurm.sh: a one-node test Slurm.
ClusterName=ezpz
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
  say "wrote $CONF: node $host with $cpus CPU(s)"
}

munge_ok() { timeout 10 munge -n </dev/null 2>/dev/null | timeout 10 unmunge >/dev/null 2>&1; }

running() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  install_packages
  munge_key
  write_conf
  if ! munge_ok; then
    runuser -u munge -- /usr/sbin/munged --force
    for _ in $(seq 50); do munge_ok && break; sleep 0.2; done
  fi
  munge_ok || { say "munge does not answer (see /var/log/munge/munged.log)"; return 1; }
  running "$STATE/slurmctld.pid" || slurmctld
  running "$STATE/slurmd.pid" || slurmd
  local host deadline state
  host=$(hostname -s)
  deadline=$((SECONDS + WAIT_S))
  while :; do
    state=$(timeout 10 sinfo -h -n "$host" -o %t 2>/dev/null || true)
    case "$state" in
      idle*|mix*|alloc*) break ;;
      down*|drain*) timeout 10 scontrol update NodeName="$host" State=RESUME 2>/dev/null || true ;;
    esac
    if [ $SECONDS -ge $deadline ]; then
      say "node $host not idle after ${WAIT_S}s (state '${state}'); logs in $STATE/log"
      tail -n 20 "$STATE/log/slurmctld.log" "$STATE/log/slurmd.log" >&2 || true
      return 1
    fi
    sleep 1
  done
  say "up: $(sinfo -h -o '%P %D %c %t' | head -n 1) (partition nodes cpus state)"
}

stop() {
  local pidfile pid
  for pidfile in "$STATE/slurmd.pid" "$STATE/slurmctld.pid"; do
    if running "$pidfile"; then
      pid=$(cat "$pidfile")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
  if [ -s /run/munge/munged.pid ]; then kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true; fi
  say "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) sinfo ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
