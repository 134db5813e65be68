#!/usr/bin/env bash
# Instructions per sampler round: no scheduler or cache noise, unlike CPU time (this VM has no
# hardware counters for `perf stat`, so valgrind's callgrind counts them, user space only).
# How a page's pieces arrive still changes how many reads it takes: run it on a quiet machine.
# `leaderwatch sample --interval INTERVAL` (default 150ms) runs under callgrind against a fresh
# local 3-member cluster for SHORT and LONG seconds (default 10 and 30); instructions per
# round are the difference of the two runs' totals over the difference of their rounds, so
# start-up and exit cancel out. Not 50 ms: under callgrind a full round itself takes about
# 50 ms on a 2-vCPU VM, so rounds would overlap, members go silent and pages go unread,
# which lowers the count (a 30 s run at 50 ms gave 0.73 M where 150 ms gives 1.03 M). Rows
# of silent members are counted and printed: a few at start-up, the same in both runs,
# cancel out; more in one run than the other mean rounds overlapped (raise INTERVAL). Full rounds (/metrics, /health when due, Status) and fast ones (no
# /metrics). Appends its figures to $BENCH_SUMMARY when set.
set -euo pipefail

SHORT=${SHORT:-10}
LONG=${LONG:-30}
INTERVAL=${INTERVAL:-150ms}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
LW=${LW:-target/release/leaderwatch}

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$LW" /usr/bin/valgrind
start_cluster instructions
sleep 3
echo "instructions per round: callgrind, local loopback, etcd $("$ETCD" --version | awk 'NR == 1 {print $3}'), 3 members, $(date -u +%FT%TZ)"

# run NAME SECONDS [options]: prints "<instructions> <rounds> <silent rows>".
run() {
  local name=$1 secs=$2; shift 2
  # shellcheck disable=SC2086 # $members is a list of options
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.cg" "$LW" sample --interval "$INTERVAL" \
    --duration "${secs}s" --out "$work/$name" $members "$@" >"$work/$name.log" 2>&1 \
    || { echo "bench: leaderwatch under callgrind failed:" >&2; tail -n 5 "$work/$name.log" >&2; exit 1; }
  local ir rounds silent
  ir=$(awk '/^summary:/ {print $2}' "$work/$name.cg")
  rounds=$(( ($(wc -l <"$work/$name/samples.csv") - 1) / 3 ))
  silent=$(grep -c ',silent: ' "$work/$name/samples.csv" || true)
  echo "$ir $rounds $silent"
}
for mode in full fast; do
  opts=()
  [ "$mode" = fast ] && opts=(--metrics-interval 1h)
  read -r i1 r1 s1 < <(run "$mode-short" "$SHORT" "${opts[@]}")
  read -r i2 r2 s2 < <(run "$mode-long" "$LONG" "${opts[@]}")
  per=$(awk "BEGIN { printf \"%.0f\", ($i2 - $i1) / ($r2 - $r1) }")
  echo "$mode round: $per instructions ($i1 over $r1 rounds, $i2 over $r2; rows of silent members: $s1, $s2)"
  if [ -n "${BENCH_SUMMARY:-}" ]; then
    echo "| instructions per $mode 3-member round (callgrind, $((r2 - r1)) rounds at $INTERVAL, $((s1 + s2)) silent rows) | $per | reported, no goal | |" >>"$BENCH_SUMMARY"
  fi
done
