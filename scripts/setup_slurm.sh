#!/usr/bin/env bash
# A one-machine SLURM cluster on 127.0.0.1 for the cluster tier (tests/test_slurm.py): Debian's
# slurm-wlm and munge, one controller (slurmctld) and one node daemon (slurmd), CPUs only.
# Idempotent: a second run finds the daemons answering and only prints the SLURM_CONF line.
# Needs root (or sudo) for apt-get and the munge key. On failure the exact error is written to
# $SLURM_DIR/error, which the tests show when they skip; on success that file is removed.
#
# Usage: bash scripts/setup_slurm.sh        then: export SLURM_CONF=$SLURM_DIR/slurm.conf
# Env:   SLURM_DIR (default /tmp/councilzoo-slurm): configuration, state, spool, logs
set -euo pipefail

DIR="${SLURM_DIR:-/tmp/councilzoo-slurm}"
CONF="$DIR/slurm.conf"
mkdir -p "$DIR"
rm -f "$DIR/error"
SUDO="" AS_MUNGE=(runuser -u munge --)
if [[ $(id -u) != 0 ]]; then SUDO="sudo" AS_MUNGE=(sudo -u munge); fi

fail() {
    echo "$1" | tee "$DIR/error" >&2
    exit 1
}

if SLURM_CONF="$CONF" timeout 10 sinfo -h -o %T 2>/dev/null | grep -q idle; then
    echo "SLURM is running: export SLURM_CONF=$CONF"
    exit 0
fi
if ! command -v slurmctld > /dev/null || ! command -v munged > /dev/null; then
    { $SUDO apt-get update -q && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge; } \
        > "$DIR/apt.log" 2>&1 || fail "apt-get install slurm-wlm munge failed: $(tail -n 3 "$DIR/apt.log" | tr '\n' ' ')"
fi

# munge: the key and the daemon that signs the controller's and the daemon's messages
if ! munge -n 2>/dev/null | unmunge > /dev/null 2>&1; then
    $SUDO mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        $SUDO dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    $SUDO chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
    $SUDO chmod 400 /etc/munge/munge.key
    "${AS_MUNGE[@]}" munged --force 2> "$DIR/munged.err" || fail "munged: $(tr '\n' ' ' < "$DIR/munged.err")"
    munge -n | unmunge > /dev/null 2>&1 || fail "munge -n | unmunge: $(munge -n 2>&1 | unmunge 2>&1 | tail -n 1)"
fi

HOST="$(hostname -s)"
CPUS="$(nproc --all)"  # --all: nproc alone honours OMP_NUM_THREADS (1 under the test tiers)
mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
cat > "$CONF" <<CONF
ClusterName=councilzoo
SlurmctldHost=$HOST(127.0.0.1)
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF

export SLURM_CONF="$CONF"
for daemon in slurmctld slurmd; do
    if [[ -f "$DIR/$daemon.pid" ]] && kill -0 "$(cat "$DIR/$daemon.pid")" 2>/dev/null; then
        continue
    fi
    $SUDO env SLURM_CONF="$CONF" "$daemon" -f "$CONF" 2> "$DIR/$daemon.err" \
        || fail "$daemon: $(tr '\n' ' ' < "$DIR/$daemon.err") $(tail -n 3 "$DIR/log/$daemon.log" 2>/dev/null | tr '\n' ' ')"
done
for _ in $(seq 30); do
    if timeout 10 sinfo -h -o %T 2>/dev/null | grep -q idle; then
        echo "SLURM is running: export SLURM_CONF=$CONF"
        exit 0
    fi
    sleep 1
done
fail "the node never became idle: sinfo says '$(sinfo -h -o %T 2>&1)'; slurmd log: $(tail -n 3 "$DIR/log/slurmd.log" 2>/dev/null | tr '\n' ' ')"
