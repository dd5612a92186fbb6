#!/bin/sh
# Slurm Epilog: stop the Prolog's `amdahl run` for this job (SIGTERM) and wait until it has
# written its final record, at most 30 s. See prolog.sh.
set -eu
DIR="${AMDAHL_JOB_DIR:-/var/lib/amdahl/jobs}"
HOST="$(hostname -s)"
PIDFILE="$DIR/$SLURM_JOB_ID-$HOST.pid"
[ -f "$PIDFILE" ] || exit 0
PID="$(cat "$PIDFILE")"
kill -TERM "$PID" 2>/dev/null || true
i=0
while kill -0 "$PID" 2>/dev/null && [ "$i" -lt 300 ]; do
  sleep 0.1
  i=$((i + 1))
done
rm -f "$PIDFILE"
exit 0
