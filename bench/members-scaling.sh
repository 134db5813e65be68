#!/usr/bin/env bash
# How the sampler's cost grows with the cluster: `leaderwatch sample --interval 50ms` for
# DURATION seconds (default 30) against fresh local clusters of 3, 5 and 7 members (etcd's
# usual sizes), full rounds (/metrics, /health when due, Status) and fast rounds (Status,
# /health when due, no /metrics). CPU per round is user + system time (GNU time) over the
# rounds written, start-up and CSV included; peak RSS is the process's. It should grow
# linearly with a small constant. Prints one table; appends it to $BENCH_SUMMARY when set.
set -euo pipefail

DURATION=${DURATION:-30}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
LW=${LW:-target/release/leaderwatch}
SIZES=${SIZES:-3 5 7}

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$LW" /usr/bin/time
field() { awk -F': ' -v k="$2" '$1 ~ k {print $2}' "$1" | head -n1; }
echo "members scaling: local loopback, etcd $("$ETCD" --version | awk 'NR == 1 {print $3}'), $(nproc) vCPU, ${DURATION} s per run at 50 ms, $(date -u +%FT%TZ)"
table="| members | full round: CPU | per member | fast round: CPU | per member | peak RSS, full / fast |"$'\n'"|---|---|---|---|---|---|"$'\n'
for n in $SIZES; do
  MEMBERS=$n
  start_cluster "scale$n"
  sleep 3 # the first election is over
  row="| $n |"
  rss=""
  for mode in full fast; do
    opts=()
    [ "$mode" = fast ] && opts=(--metrics-interval 1h)
    # shellcheck disable=SC2086 # $members is a list of options
    /usr/bin/time -v -o "$work/$mode.time" "$LW" sample --interval 50ms --duration "${DURATION}s" \
      --out "$work/$mode" $members "${opts[@]}" 2>"$work/$mode.log" \
      || { echo "bench: leaderwatch failed:" >&2; tail -n 5 "$work/$mode.log" >&2; exit 1; }
    rounds=$(( ($(wc -l <"$work/$mode/samples.csv") - 1) / n ))
    cpu=$(awk "BEGIN { print $(field "$work/$mode.time" 'User time') + $(field "$work/$mode.time" 'System time') }")
    per=$(awk "BEGIN { printf \"%.3f\", 1000 * $cpu / $rounds }")
    row+=" $per ms | $(awk "BEGIN { printf \"%.3f\", $per / $n }") ms |"
    rss+="$(awk "BEGIN { printf \"%.1f\", $(field "$work/$mode.time" 'Maximum resident') / 1024 }")"
    [ "$mode" = full ] && rss+=" / "
  done
  table+="$row $rss MiB |"$'\n'
  stop_cluster
  trap - EXIT
done
echo
printf '%s' "$table"
if [ -n "${BENCH_SUMMARY:-}" ]; then
  {
    echo
    echo "Cost by cluster size (\`sample --interval 50ms\`, ${DURATION} s each, bench/members-scaling.sh):"
    echo
    printf '%s' "$table"
    echo
    echo "| figure | measured | goal | |"
    echo "|---|---|---|---|"
  } >>"$BENCH_SUMMARY"
fi
