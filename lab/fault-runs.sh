#!/usr/bin/env bash
# Faults below etcd on a fresh local cluster (every volume on lw-slowfs), each watched by a
# `leaderwatch sample` of its own with the write canary (the load that makes etcd fsync),
# told nothing: the runs behind docs/results.md's confusion matrix and fsync sweep.
#
#   lab/fault-runs.sh sweep [OUT]    added fsync latency (DELAYS, ms) on the leader of the
#                                    moment, then on all three members, MINUTES each
#   lab/fault-runs.sh repeat [OUT]   each fault on the leader of the moment, REPEATS times
#                                    in one sample: a slow disk (DISK ms), CPU at CPU % of
#                                    a core (CPU_HOLD s: a backlog takes seconds to build), a
#                                    cut both ways and one way, a freeze 4 s; HOLD s each,
#                                    QUIET s between
#
# One run directory per sweep point or fault under OUT (default data/fault-<mode>-<UTC>/), the
# harness's own log beside them (faults.csv: the ground truth, never read by leaderwatch)
# and points.csv (run directory, lw-lab fault's arguments, from, to: one row per injection).
# Root; make kube-tools and make build first (LEADERWATCH: another leaderwatch binary).
# Tears the cluster down on exit.
set -euo pipefail

mode=${1:?usage: lab/fault-runs.sh sweep|repeat [OUT]}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
out=${2:-data/fault-$mode-$(date -u +%Y%m%dT%H%M%SZ)}
MINUTES=${MINUTES:-3}
DELAYS=${DELAYS:-"0 5 20 50 100 200 500 1000 2000"}
REPEATS=${REPEATS:-5}
DISK=${DISK:-2000}
CPU=${CPU:-0.5}
HOLD=${HOLD:-15}
CPU_HOLD=${CPU_HOLD:-20}
QUIET=${QUIET:-25}

kver=$(sed -n 's|^\tk8s.io/kubernetes \(v[^ ]*\).*|\1|p' lab/go/kube/go.mod)
cver=$(sed -n 's|^\tgithub.com/containerd/containerd/v2 v\([^ ]*\).*|\1|p' lab/go/node/containerd/go.mod)
dir=$repo/.tools/lab-faults
export KUBECTL=$repo/.tools/kube-$kver/bin/kubectl KUBECONFIG=$dir/kubeconfig
lab=(lab/target/debug/lw-lab --dir "$dir" --tools "$repo/.tools")
lw=${LEADERWATCH:-$repo/target/release/leaderwatch}
[ -x "$lw" ] || { echo "fault-runs: $lw missing: make build first (or LEADERWATCH=path)" >&2; exit 3; }
mkdir -p "$out"
sample_pid=
finish() {
  [ -z "$sample_pid" ] || kill -TERM "$sample_pid" 2>/dev/null || true
  [ -f "$dir/faults.csv" ] && cp "$dir/faults.csv" "$out/faults.csv"
  "${lab[@]}" down >/dev/null || true
  chown -R --reference=data "$out" 2>/dev/null || true
}
trap finish EXIT
"${lab[@]}" --disk-faults up --detach
"$KUBECTL" apply -f deploy/k8s/namespace.yaml >/dev/null
deploy/k8s/apply.sh >/dev/null
echo "run,fault,from,to" >"$out/points.csv"
env="local cluster, real nodes, injected fault (lw-lab, Kubernetes $kver, kubelet + containerd $cver, etcd 3.6.14, volumes on lw-slowfs)"

# `leaderwatch sample` of the members by pod address into $1, in the background.
start_sample() {
  local eps=() name ip
  while read -r name ip; do eps+=(--endpoint "$name=http://$ip:2379"); done < <(
    "$KUBECTL" -n dlock get pods -l app.kubernetes.io/name=dlock-etcd \
      -o jsonpath='{range .items[*]}{.metadata.name} {.status.podIP}{"\n"}{end}')
  "$lw" sample --interval 100ms --metrics-interval 1s --canary --out "$1" "${eps[@]}" \
    >"$1.log" 2>&1 &
  sample_pid=$!
  sleep 5
}

stop_sample() {
  kill -TERM "$sample_pid"
  wait "$sample_pid" || true
  sample_pid=
  mv "$1.log" "$1/sample.log"
  # The residual rate with its exact Poisson interval, as `leaderwatch rate` gives it.
  "$lw" rate "$1" -o json >"$1/rate.json"
}

# A series in a sample of its own ($1: the run directory's name): $3 times the fault of
# lw-lab fault's arguments (the rest; `none`: nothing), held $2 seconds, then cleared and
# $QUIET seconds of quiet (10 s after the last).
series() {
  local name=$1 hold=$2 n=$3 run from i
  shift 3
  run=$out/$name
  start_sample "$run"
  for i in $(seq 1 "$n"); do
    from=$(date -u +%FT%T.%3NZ)
    if [ "$1" != none ]; then "${lab[@]}" fault "$@"; fi
    sleep "$hold"
    "${lab[@]}" fault clear >/dev/null
    echo "$name,$*,$from,$(date -u +%FT%T.%3NZ)" >>"$out/points.csv"
    if [ "$i" -lt "$n" ]; then sleep "$QUIET"; else sleep 10; fi
  done
  stop_sample "$run"
}

case $mode in
  sweep)
    for on in leader all; do
      for d in $DELAYS; do
        if [ "$d" = 0 ]; then
          [ "$on" = leader ] && series "fsync-0ms" $((MINUTES * 60)) 1 none
          continue
        fi
        series "fsync-${d}ms-$on" $((MINUTES * 60)) 1 disk --pod "$on" --fsync "${d}ms"
      done
    done
    ;;
  repeat)
    series disk "$HOLD" "$REPEATS" disk --pod leader --fsync "${DISK}ms"
    series cpu "$CPU_HOLD" "$REPEATS" cpu --pod leader --percent "$CPU"
    series partition "$HOLD" "$REPEATS" partition --pod leader
    series partition-one-way "$HOLD" "$REPEATS" partition --pod leader --one-way
    series freeze 4 "$REPEATS" freeze --pod leader
    ;;
  *) echo "fault-runs: mode $mode: sweep or repeat" >&2; exit 2 ;;
esac
echo "$env" >"$out/ENVIRONMENT"
echo "fault-runs: $out"
