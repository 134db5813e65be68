#!/usr/bin/env bash
# What a leader crash costs Go's concurrency.Mutex (lw-etcd-locker, lab/go/etcd/locker: 3
# sessions, leases of 10 s, each holding 100 ms), on clientv3's defaults (no deadline per
# call, as dlock would get it unless it passes one) and with every call under a 1 s
# deadline, side by side on one fresh local 3-member cluster. KILLS times (default 3): both
# clients take turns on their own lock, the leader is SIGKILLed, restarted 5 s later on its
# data; the longest time between two grants over the kill, less the hold, is each client's
# figure (docs/counting.md, "What an election costs a lock"). A benchmark, not a test.
# Appends its figures to $BENCH_SUMMARY when set.
set -euo pipefail

KILLS=${KILLS:-3}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
CTL=${ETCDCTL:-.tools/bin/etcdctl}
LOCKER=${LW_ETCD_LOCKER:-.tools/bin/lw-etcd-locker}

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$CTL" "$LOCKER"
start_cluster lock-client
sleep 3 # the first election is over
echo "lock client: local loopback, etcd $("$ETCD" --version | awk 'NR == 1 {print $3}'), 3 members, $(nproc) vCPU, $(date -u +%FT%TZ)"

# The longest gap between grants of locker CSV $1 that overlaps the instant $2 (RFC 3339), less the hold.
gap() {
  python3 - "$1" "$2" <<'PY'
import csv, sys, datetime
p = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
kill = p(sys.argv[2])
ts = sorted(p(r["at"]) for r in csv.DictReader(open(sys.argv[1])) if r["event"] == "granted")
gaps = [(b - a).total_seconds() - 0.1 for a, b in zip(ts, ts[1:]) if a <= kill <= b]
print(f"{max(gaps):.2f}" if gaps else "none")
PY
}

defaults=(); deadline=()
for k in $(seq 1 "$KILLS"); do
  "$LOCKER" -endpoints "$endpoints" -op-timeout 0 -prefix "/bench/defaults-$k" -for 25s >"$work/defaults-$k.csv" 2>"$work/defaults-$k.err" &
  l1=$!
  "$LOCKER" -endpoints "$endpoints" -op-timeout 1s -prefix "/bench/deadline-$k" -for 25s >"$work/deadline-$k.csv" 2>"$work/deadline-$k.err" &
  l2=$!
  sleep 5
  leader=$("$CTL" --endpoints "$endpoints" --command-timeout 5s endpoint status -w json | python3 -c '
import json, sys
s = json.load(sys.stdin)
print([i for i, x in enumerate(s) if x["Status"]["header"]["member_id"] == x["Status"]["leader"]][0])')
  at=$(date -u +%FT%T.%NZ)
  kill -KILL "${pids[$leader]}"
  wait "${pids[$leader]}" 2>/dev/null || true
  sleep 5
  c=${ports[$leader]}; p=${ports[$((MEMBERS + leader))]}
  # Restarted on its data directory: the cluster flags are read from it.
  "$ETCD" --name "m$leader" --data-dir "$work/m$leader" --listen-client-urls "http://127.0.0.1:$c" \
    --advertise-client-urls "http://127.0.0.1:$c" --listen-peer-urls "http://127.0.0.1:$p" \
    --initial-advertise-peer-urls "http://127.0.0.1:$p" >>"$work/m$leader.log" 2>&1 &
  pids[leader]=$!
  wait "$l1" "$l2" || { echo "bench: lw-etcd-locker failed:" >&2; tail -n 3 "$work"/*-"$k".err >&2; exit 1; }
  defaults+=("$(gap "$work/defaults-$k.csv" "$at")"); deadline+=("$(gap "$work/deadline-$k.csv" "$at")")
  echo "kill $k (m$leader, the leader, at $at): lock unavailable on clientv3's defaults ${defaults[-1]} s, with a 1 s deadline per call ${deadline[-1]} s"
done
if [ -n "${BENCH_SUMMARY:-}" ]; then
  {
    echo "| leader SIGKILL: lock unavailable to Go's concurrency.Mutex on clientv3's defaults ($KILLS kills) | $(IFS=/; echo "${defaults[*]}") s | none: measured, not a goal (dlock should set deadlines) | — |"
    echo "| the same with a 1 s deadline per call | $(IFS=/; echo "${deadline[*]}") s | none: measured, not a goal | — |"
  } >>"$BENCH_SUMMARY"
fi
