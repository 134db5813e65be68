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
#   lab/fault-runs.sh node [OUT]     the leader's node lost (lw-lab fault node-loss: kubelet
#                                    and containerd stopped, its pods frozen, its link
#                                    down) REPEATS times for NODE_HOLD s (past the node
#                                    controller's grace period), then once for
#                                    TOLERATION_HOLD s (past the pods' 300 s toleration of
#                                    an unreachable node: the taint deletes the member's
#                                    pod); the control plane's view of it every 5 s in each
#                                    run's control-plane.csv, its Events in k8s-events.json
#
# Each run directory also gets the host's load every second while it ran (vmstat.txt:
# a lab on 2 cores can starve its own members) and each member's etcd log for the run
# (etcd-<pod>.log, with timestamps: the members' own account of their elections).
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
NODE_HOLD=${NODE_HOLD:-75}
TOLERATION_HOLD=${TOLERATION_HOLD:-420}

kver=$(sed -n 's|^\tk8s.io/kubernetes \(v[^ ]*\).*|\1|p' lab/go/kube/go.mod)
cver=$(sed -n 's|^\tgithub.com/containerd/containerd/v2 v\([^ ]*\).*|\1|p' lab/go/node/containerd/go.mod)
dir=$repo/.tools/lab-faults
export KUBECTL=$repo/.tools/kube-$kver/bin/kubectl KUBECONFIG=$dir/kubeconfig
lab=(lab/target/debug/lw-lab --dir "$dir" --tools "$repo/.tools")
lw=${LEADERWATCH:-$repo/target/release/leaderwatch}
[ -x "$lw" ] || { echo "fault-runs: $lw missing: make build first (or LEADERWATCH=path)" >&2; exit 3; }
mkdir -p "$out"
sample_pid=
vmstat_pid=
sample_since=
finish() {
  [ -z "$sample_pid" ] || kill -TERM "$sample_pid" 2>/dev/null || true
  [ -z "$vmstat_pid" ] || kill "$vmstat_pid" 2>/dev/null || true
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
  vmstat -t -w 1 >"$1.vmstat" &
  vmstat_pid=$!
  sample_since=$(date -u +%FT%TZ)
  sleep 5
}

# The control plane's view of the members every 5 s into $1/control-plane.csv (ts, pod, its
# node, the node's Ready status, the pod's Ready status and deletionTimestamp, the PDB's
# allowed disruptions), in the background until stop_sample.
watch_pid=
watch_control_plane() {
  local f=$1/control-plane.csv
  echo "ts,pod,node,node_ready,pod_ready,pod_deleting,pdb_allowed" >"$f"
  while :; do
    local now pdb nodes
    now=$(date -u +%FT%T.%3NZ)
    pdb=$("$KUBECTL" -n dlock get pdb dlock-etcd-pdb -o jsonpath='{.status.disruptionsAllowed}' 2>/dev/null || echo "")
    nodes=$("$KUBECTL" get nodes -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{" "}{end}' 2>/dev/null || echo "")
    "$KUBECTL" -n dlock get pods -l app.kubernetes.io/name=dlock-etcd -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}' 2>/dev/null |
      while read -r pod node ready deleting; do
        local nr=${nodes#*"$node="}
        echo "$now,$pod,$node,${nr%% *},$ready,$deleting,$pdb" >>"$f"
      done
    sleep 5
  done
}

stop_sample() {
  [ -z "$watch_pid" ] || { kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null || true; watch_pid=; }
  kill -TERM "$sample_pid"
  wait "$sample_pid" || true
  sample_pid=
  mv "$1.log" "$1/sample.log"
  kill "$vmstat_pid" 2>/dev/null || true
  wait "$vmstat_pid" 2>/dev/null || true
  mv "$1.vmstat" "$1/vmstat.txt"
  local pod
  for pod in $("$KUBECTL" -n dlock get pods -l app.kubernetes.io/name=dlock-etcd -o name); do
    "$KUBECTL" -n dlock logs "$pod" --timestamps --since-time="$sample_since" \
      >"$1/etcd-${pod#pod/}.log" 2>&1 || true
  done
  # The residual rate with its exact Poisson interval, as `leaderwatch rate` gives it.
  "$lw" rate "$1" -o json >"$1/rate.json"
}

# A series in a sample of its own ($1: the run directory's name): $3 times the fault of
# lw-lab fault's arguments (the rest; `none`: nothing), held $2 seconds, then cleared and
# $QUIET seconds of quiet ($TAIL, default 10 s, after the last).
series() {
  local name=$1 hold=$2 n=$3 run from i
  shift 3
  run=$out/$name
  start_sample "$run"
  if [ "$1" = node-loss ]; then watch_control_plane "$run" & watch_pid=$!; fi
  for i in $(seq 1 "$n"); do
    from=$(date -u +%FT%T.%3NZ)
    if [ "$1" != none ]; then "${lab[@]}" fault "$@"; fi
    sleep "$hold"
    "${lab[@]}" fault clear >/dev/null
    echo "$name,$*,$from,$(date -u +%FT%T.%3NZ)" >>"$out/points.csv"
    if [ "$i" -lt "$n" ]; then sleep "$QUIET"; else sleep "${TAIL:-10}"; fi
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
  node)
    series node-loss "$NODE_HOLD" "$REPEATS" node-loss --node leader
    # Cleared, the node's kubelet finds its member's pod deleted and stops it; the
    # StatefulSet then makes it anew on the same node (its volume is pinned to the zone).
    TAIL=90 series node-loss-toleration "$TOLERATION_HOLD" 1 node-loss --node leader
    "$KUBECTL" get events -A -o json >"$out/k8s-events.json"
    ;;
  *) echo "fault-runs: mode $mode: sweep, repeat or node" >&2; exit 2 ;;
esac
echo "$env" >"$out/ENVIRONMENT"
echo "fault-runs: $out"
