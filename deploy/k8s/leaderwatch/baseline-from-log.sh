#!/usr/bin/env bash
# Prints the baseline.json that `leaderwatch measure` wrote to its log, between the lines
# "--- baseline.json begin ---" and "--- baseline.json end ---": `kubectl logs` alone
# retrieves the result of an in-cluster sitting when its PVC cannot be read (`leaderwatch
# sitting` brings back the whole run directory otherwise).
#   mkdir -p data/gke-RUN && deploy/k8s/leaderwatch/baseline-from-log.sh [JOB] > data/gke-RUN/baseline.json
# Environment: KUBECTL (default kubectl), NAMESPACE (default leaderwatch, the Job's).
set -euo pipefail

job=${1:-leaderwatch-measure}
KUBECTL=${KUBECTL:-kubectl}
NAMESPACE=${NAMESPACE:-leaderwatch}

log=$("$KUBECTL" -n "$NAMESPACE" logs "job/$job") || {
  echo "baseline-from-log.sh: cannot read the log of job/$job in $NAMESPACE" >&2
  exit 1
}
block=$(sed -n '/^--- baseline.json begin ---$/,/^--- baseline.json end ---$/p' <<<"$log" | sed '1d;$d')
if [ -z "$block" ]; then
  echo "baseline-from-log.sh: no baseline.json in the log of job/$job (still running, or it failed: see kubectl -n $NAMESPACE logs job/$job)" >&2
  exit 1
fi
printf '%s\n' "$block"
