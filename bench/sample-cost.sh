#!/usr/bin/env bash
# What one round costs in `leaderwatch sample` as a user runs it (probes, counting, events,
# health folds and the CSV files included): on a fresh local 3-member cluster, `sample
# --interval 50ms` for DURATION seconds (default 30) twice, full rounds (/metrics + /health
# + Status RPC of every member) and fast rounds (/health + Status; /metrics only in the
# first round). CPU per round is the process's user + system time (GNU time) over the rounds
# it wrote, start-up included. Appends its figures to $BENCH_SUMMARY when set.
set -euo pipefail

DURATION=${DURATION:-30}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
LW=${LW:-target/release/leaderwatch}

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$LW" /usr/bin/time
start_cluster sample-cost
sleep 3 # the first election is over
echo "sample cost: local loopback, etcd $("$ETCD" --version | awk 'NR == 1 {print $3}'), 3 members, $(nproc) vCPU, $(date -u +%FT%TZ)"

field() { awk -F': ' -v k="$2" '$1 ~ k {print $2}' "$1" | head -n1; }
# one NAME GOAL_MS [sample options...]: runs sample, prints and records CPU per round.
one() {
  local name=$1 goal=$2; shift 2
  /usr/bin/time -v -o "$work/$name.time" "$LW" sample --interval 50ms --duration "${DURATION}s" --out "$work/$name" \
    --endpoint "m0=http://127.0.0.1:${ports[0]}" --endpoint "m1=http://127.0.0.1:${ports[1]}" \
    --endpoint "m2=http://127.0.0.1:${ports[2]}" "$@" 2>"$work/$name.log" \
    || { echo "bench: leaderwatch failed:" >&2; tail -n 5 "$work/$name.log" >&2; exit 1; }
  local rounds cpu per
  rounds=$(( ($(wc -l <"$work/$name/samples.csv") - 1) / 3 ))
  cpu=$(awk "BEGIN { print $(field "$work/$name.time" 'User time') + $(field "$work/$name.time" 'System time') }")
  per=$(awk "BEGIN { printf \"%.3f\", 1000 * $cpu / $rounds }")
  echo "$name rounds: $rounds in ${DURATION} s, $cpu s CPU (user $(field "$work/$name.time" "User time"), sys $(field "$work/$name.time" "System time")), $per ms CPU per round (goal <= $goal ms), peak RSS $(field "$work/$name.time" 'Maximum resident') KiB"
  if [ -n "${BENCH_SUMMARY:-}" ]; then
    echo "| \`sample\`, one $name 3-member round, CPU ($rounds rounds at 50 ms, CSV included) | $per ms | <= $goal ms | $(awk "BEGIN { print ($per <= $goal) ? \"met\" : \"NOT met\" }") |" >>"$BENCH_SUMMARY"
  fi
}
one full 1
one fast 0.2 --metrics-interval 1h
