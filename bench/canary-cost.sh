#!/usr/bin/env bash
# The canary's observer effect: the CPU that `leaderwatch sample --canary` adds to each etcd
# member. On a fresh local 3-member cluster, phase A runs `leaderwatch sample --interval 100ms`
# for DURATION seconds (default 60), phase B the same with --canary; each member's CPU seconds
# (utime + stime from /proc/<pid>/stat) are read just before and just after each phase.
# Prints a markdown table: per member A, B, B - A and B - A as % of one core, the total,
# leaderwatch's own CPU (GNU time) and the canary's ops, so a cost per op can be given.
# A benchmark, not a test: single local runs on a shared machine are noisy. Run by `make bench`.
set -euo pipefail

DURATION=${DURATION:-60}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
ETCDCTL=${ETCDCTL:-.tools/bin/etcdctl}
LW=${LW:-target/release/leaderwatch}
for b in "$ETCD" "$ETCDCTL" "$LW" /usr/bin/time; do
  [ -x "$b" ] || { echo "bench: $b missing (make deps / make build / apt-get install time)" >&2; exit 2; }
done

etcd_version=$("$ETCD" --version | awk 'NR == 1 {print $3}')
echo "local loopback, etcd $etcd_version, 3 members, $(nproc) vCPU, $(date -u)"

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
start_cluster canary-cost
healthy=0
for _ in $(seq 1 150); do
  if "$ETCDCTL" --endpoints "$endpoints" --command-timeout 2s endpoint health >/dev/null 2>&1; then
    healthy=1; break
  fi
  sleep 0.2
done
[ "$healthy" -eq 1 ] || { echo "bench: the cluster did not become healthy:" >&2; tail -n 5 "$work"/m*.log >&2; exit 1; }
sleep 5 # settle: the first elections and member publishes are done

hz=$(getconf CLK_TCK)
# CPU seconds (utime + stime) of a process; the fields are counted after the ")" that ends comm.
cpu_s() { sed 's/.*) //' "/proc/$1/stat" | awk -v hz="$hz" '{ printf "%.2f\n", ($12 + $13) / hz }'; }
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
calc3() { awk "BEGIN { printf \"%.3f\", $1 }"; }
metric() { awk -F': ' -v k="$2" '$1 ~ k {print $2}' "$1" | head -n1; }

# phase NAME [leaderwatch options...]: one leaderwatch run; member CPU into before_/after_NAME.
phase() {
  local name=$1; shift
  local i t0 t1
  for i in 0 1 2; do
    [ -r "/proc/${pids[$i]}/stat" ] || { echo "bench: etcd m$i (pid ${pids[$i]}) is gone" >&2; exit 1; }
  done
  echo "bench: phase $name, ${DURATION}s, leaderwatch sample --interval 100ms $*" >&2
  t0=$(date +%s.%N)
  for i in 0 1 2; do cpu_s "${pids[$i]}"; done >"$work/before_$name"
  /usr/bin/time -v -o "$work/lw_$name.time" "$LW" sample --interval 100ms --duration "${DURATION}s" \
    --out "$work/out_$name" --endpoint "m0=http://127.0.0.1:${ports[0]}" \
    --endpoint "m1=http://127.0.0.1:${ports[1]}" --endpoint "m2=http://127.0.0.1:${ports[2]}" "$@" \
    2>"$work/lw_$name.log" || { echo "bench: leaderwatch failed in phase $name:" >&2; tail -n 5 "$work/lw_$name.log" >&2; exit 1; }
  for i in 0 1 2; do cpu_s "${pids[$i]}"; done >"$work/after_$name"
  t1=$(date +%s.%N)
  calc "$t1 - $t0" >"$work/wall_$name"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
phase A
phase B --canary
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

mapfile -t a0 <"$work/before_A"; mapfile -t a1 <"$work/after_A"
mapfile -t b0 <"$work/before_B"; mapfile -t b1 <"$work/after_B"
lw_cpu() { calc "$(metric "$1" 'User time') + $(metric "$1" 'System time')"; }
lwa=$(lw_cpu "$work/lw_A.time"); lwb=$(lw_cpu "$work/lw_B.time")
canary="$work/out_B/canary.csv"
[ -f "$canary" ] || { echo "bench: phase B wrote no canary.csv" >&2; exit 1; }
ops=$(($(wc -l <"$canary") - 1))
writes=$(awk -F, 'NR > 1 && $4 == "write"' "$canary" | wc -l)
reads=$(awk -F, 'NR > 1 && $4 == "read"' "$canary" | wc -l)
failed=$(awk -F, 'NR > 1 && $7 != "true"' "$canary" | wc -l)

echo
echo "| process | CPU s in A (no canary) | CPU s in B (--canary) | B - A | B - A, % of one core over ${DURATION} s |"
echo "|---|---|---|---|---|"
ta=0; tb=0
for i in 0 1 2; do
  a=$(calc "${a1[$i]} - ${a0[$i]}"); b=$(calc "${b1[$i]} - ${b0[$i]}"); d=$(calc "$b - $a")
  ta=$(calc "$ta + $a"); tb=$(calc "$tb + $b")
  echo "| etcd m$i | $a | $b | $d | $(calc "100 * $d / $DURATION") % |"
done
td=$(calc "$tb - $ta")
echo "| etcd, 3 members | $ta | $tb | $td | $(calc "100 * $td / $DURATION") % |"
echo "| leaderwatch | $lwa | $lwb | $(calc "$lwb - $lwa") | $(calc "100 * ($lwb - $lwa) / $DURATION") % |"
echo
if [ "$ops" -gt 0 ]; then per_op=$(calc3 "1000 * $td / $ops"); else per_op="n/a"; fi
echo "canary ops in B: $ops ($writes writes, $reads reads, $failed not ok); added member CPU per op, summed over members: $per_op ms"
echo "wall time between CPU readings: A $(cat "$work/wall_A") s, B $(cat "$work/wall_B") s; load average (1/5/15 min) at start $load_start, at end $load_end"
