#!/bin/sh
# Slurm Prolog: meter this node for the whole job with `amdahl run`, writing an amdahl.run/1
# record per job and node (docs/usage/exporter.md, "On a Slurm cluster"). slurm.conf:
#   Prolog=/usr/local/lib/amdahl/prolog.sh
#   Epilog=/usr/local/lib/amdahl/epilog.sh
#   PrologFlags=Alloc        # run it at allocation, before the first step
# It meters the whole node, so it suits exclusive-node jobs (--exclusive); on shared nodes use
# `amdahl exporter` and its job series instead. Runs as root; the record is written by the
# Epilog's SIGTERM (`partial: true`, `interrupted_by: "SIGTERM"`: the metering command, not the
# job, was stopped). Settings: AMDAHL (binary), AMDAHL_JOB_DIR (records), AMDAHL_RUN_FLAGS
# (e.g. `--region FR --pue 1.2`), and amdahl's own
# variables (AMDAHL_POWERCAP_ROOT, ...), set in slurmd's environment or a wrapper.
set -eu
AMDAHL="${AMDAHL:-amdahl}"
DIR="${AMDAHL_JOB_DIR:-/var/lib/amdahl/jobs}"
HOST="$(hostname -s)"
mkdir -p "$DIR"
# Detached (setsid, no inherited descriptors) so slurmd does not wait for it; the pid file is
# what the Epilog stops.
# shellcheck disable=SC2086 # AMDAHL_RUN_FLAGS is a list of flags
setsid "$AMDAHL" run --quiet ${AMDAHL_RUN_FLAGS:-} -o "$DIR/$SLURM_JOB_ID-$HOST.json" -- sleep infinity \
  </dev/null >/dev/null 2>>"$DIR/$SLURM_JOB_ID-$HOST.log" &
echo $! >"$DIR/$SLURM_JOB_ID-$HOST.pid"
# Return once the meter runs (its first sample writes the record), at most 10 s: with
# PrologFlags=Alloc the job starts after the Prolog, so none of its energy is missed.
i=0
while [ ! -s "$DIR/$SLURM_JOB_ID-$HOST.json" ] && [ "$i" -lt 100 ]; do
  sleep 0.1
  i=$((i + 1))
done
exit 0
