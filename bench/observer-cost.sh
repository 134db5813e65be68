#!/usr/bin/env bash
# The observer effect: the CPU each etcd member spends because it is being watched. On one
# fresh local 3-member cluster, back to back, PHASE seconds each (default 60):
#   idle       nothing watches the members
#   prometheus Prometheus scrapes /metrics of every member every 1 s (the reference)
#   fast       leaderwatch as in a sitting's fast phase: Status every 100 ms, /health when
#              its last answer may no longer hold (a stable member's once a second),
#              /metrics only from a member whose Status changed
#              (`sample --interval 100ms --metrics-interval on-change`)
#   probes     the same with /metrics never read (`--metrics-interval 1h`)
#   canary     the fast phase plus the canary (one write and one read every 100 ms)
#   lock       the same plus the lock canary (`--lock-canary`: 3 holders taking turns on
#              one lock, 100 ms each, leases of 10 s kept alive), counted apart from the
#              canary: this phase minus the canary phase
#   idle       again, so drift across the run shows
# Each member's CPU (utime + stime from /proc/<pid>/stat) is read before and after each
# phase; "added" is a phase's CPU minus the mean of the two idle phases. Goal: what leaderwatch
# adds to each member is no more than what Prometheus adds. A benchmark, not a test.
# Appends its figures to $BENCH_SUMMARY when set (see the Makefile's bench target).
set -euo pipefail

PHASE=${PHASE:-60}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
LW=${LW:-target/release/leaderwatch}
PROM=${PROM:-/usr/bin/prometheus}

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$LW" "$PROM"
start_cluster observer 1 # the extra port is Prometheus's
echo "observer cost: local loopback, etcd $("$ETCD" --version | awk 'NR == 1 {print $3}'), 3 members, $(nproc) vCPU, ${PHASE} s per phase, $(date -u +%FT%TZ)"
sleep 5 # the first election and member publishes are over

hz=$(getconf CLK_TCK)
member_cpu() { # the three members' CPU seconds, one per line
  local i
  for i in 0 1 2; do
    [ -r "/proc/${pids[$i]}/stat" ] || { echo "bench: etcd m$i (pid ${pids[$i]}) is gone" >&2; exit 1; }
    # Fields counted after the ")" that ends comm: utime and stime are the 12th and 13th.
    sed 's/.*) //' "/proc/${pids[$i]}/stat" | awk -v hz="$hz" '{ printf "%.3f\n", ($12 + $13) / hz }'
  done
}
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }

prometheus_config "$work/prometheus.yml"

# run NAME COMMAND...: member CPU over PHASE seconds while COMMAND runs (nothing for idle).
run() {
  local name=$1; shift
  echo "bench: phase $name" >&2
  member_cpu >"$work/$name.before"
  if [ $# -gt 0 ]; then
    "$@" >"$work/$name.log" 2>&1 &
    local p=$!
    sleep "$PHASE"
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  else
    sleep "$PHASE"
  fi
  member_cpu >"$work/$name.after"
  paste "$work/$name.before" "$work/$name.after" | awk '{ printf "%.3f\n", $2 - $1 }' >"$work/$name.cpu"
}

run idle1
# shellcheck disable=SC2086 # $members is a list of options
run prometheus "$PROM" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$(extra_port 0)"
# shellcheck disable=SC2086
run fast "$LW" sample --interval 100ms --metrics-interval on-change --out "$work/fast" $members
# shellcheck disable=SC2086
run probes "$LW" sample --interval 100ms --metrics-interval 1h --out "$work/probes" $members
# shellcheck disable=SC2086
run canary "$LW" sample --interval 100ms --metrics-interval on-change --canary --out "$work/canary" $members
# shellcheck disable=SC2086
run lock "$LW" sample --interval 100ms --metrics-interval on-change --canary --lock-canary --out "$work/lock" $members
run idle2
[ -s "$work/canary/canary.csv" ] || { echo "bench: the canary phase wrote no canary.csv" >&2; exit 1; }
[ -s "$work/lock/locks.csv" ] || { echo "bench: the lock phase wrote no locks.csv" >&2; exit 1; }

mapfile -t i1 <"$work/idle1.cpu"; mapfile -t i2 <"$work/idle2.cpu"
mapfile -t pr <"$work/prometheus.cpu"; mapfile -t fa <"$work/fast.cpu"; mapfile -t po <"$work/probes.cpu"
mapfile -t ca <"$work/canary.cpu"; mapfile -t lo <"$work/lock.cpu"
pct() { calc "100 * $1 / $PHASE"; }
echo
echo "| member | idle (mean of 2), CPU s | added by Prometheus, 1 s scrape | added by the fast phase | the same without /metrics | by the fast phase + canary | by the lock canary alone (lock phase - canary phase) |"
echo "|---|---|---|---|---|---|---|"
max_p=-1; max_f=-1; max_c=-1; max_l=-1; sum_f=0; sum_c=0; sum_l=0
for i in 0 1 2; do
  idle=$(calc "(${i1[$i]} + ${i2[$i]}) / 2")
  p=$(calc "${pr[$i]} - $idle"); f=$(calc "${fa[$i]} - $idle"); o=$(calc "${po[$i]} - $idle"); c=$(calc "${ca[$i]} - $idle")
  l=$(calc "${lo[$i]} - ${ca[$i]}")
  echo "| m$i | $idle (${i1[$i]}, ${i2[$i]}) | $p s ($(pct "$p") % of a core) | $f s ($(pct "$f") %) | $o s ($(pct "$o") %) | $c s ($(pct "$c") %) | $l s ($(pct "$l") %) |"
  max_p=$(calc "($p > $max_p) ? $p : $max_p"); max_f=$(calc "($f > $max_f) ? $f : $max_f"); max_c=$(calc "($c > $max_c) ? $c : $max_c")
  max_l=$(calc "($l > $max_l) ? $l : $max_l")
  sum_f=$(calc "$sum_f + ${fa[$i]}"); sum_c=$(calc "$sum_c + ${ca[$i]}"); sum_l=$(calc "$sum_l + ${lo[$i]} - ${ca[$i]}")
done
grants=$(grep -c ',granted,' "$work/lock/locks.csv" || true)
lock_ops=$(($(wc -l <"$work/lock/locks.csv") - 1))
echo
echo "lock canary: $grants grants in ${PHASE} s ($lock_ops locks.csv rows); all three members' CPU per grant $(calc "1000 * $sum_l / ($grants > 0 ? $grants : 1)") ms"
ops=$(($(wc -l <"$work/canary/canary.csv") - 1))
requests=$(( 3 * PHASE * 10 ))
echo
echo "per request, all three members' CPU: /metrics page $(calc "1000 * ($(calc "${pr[0]} + ${pr[1]} + ${pr[2]}") - $(calc "${i1[0]} + ${i1[1]} + ${i1[2]} + ${i2[0]} + ${i2[1]} + ${i2[2]}") / 2) / (3 * $PHASE)") ms;" \
  "a fast probe (Status, /health when due) $(calc "1000 * ($(calc "${po[0]} + ${po[1]} + ${po[2]}") - $(calc "${i1[0]} + ${i1[1]} + ${i1[2]} + ${i2[0]} + ${i2[1]} + ${i2[2]}") / 2) / $requests") ms;" \
  "canary op $(calc "1000 * ($sum_c - $sum_f) / $ops") ms ($ops ops)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
verdict() { awk "BEGIN { print ($1 <= $2) ? \"met\" : \"NOT met\" }"; }
if [ -n "${BENCH_SUMMARY:-}" ]; then
  {
    echo "| CPU added to the busiest member by the fast phase, ${PHASE} s | $max_f s | <= Prometheus at 1 s: $max_p s | $(verdict "$max_f" "$max_p") |"
    echo "| CPU added to the busiest member by the fast phase + canary, ${PHASE} s | $max_c s | <= Prometheus at 1 s: $max_p s | $(verdict "$max_c" "$max_p") |"
    echo "| CPU added to the busiest member by the lock canary alone (a client's load, by design), ${PHASE} s | $max_l s ($grants grants) | none: measured, not a goal | — |"
  } >>"$BENCH_SUMMARY"
fi
