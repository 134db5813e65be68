#!/usr/bin/env bash
# Applies the dlock deployment in dependency order:
#   1. namespace.yaml
#   2. etcd/ (recursively)
#   3. wait: `rollout status` of sts/dlock-etcd, then three healthy etcd endpoints
#   4. every other workload under deploy/k8s (not etcd/, not leaderwatch/)
# The lock service must not start before its backend has a quorum, hence the order.
# Any failure names its step and exits non-zero.
#
# Environment (defaults in brackets):
#   KUBECTL           kubectl binary [kubectl]
#   ROLLOUT_TIMEOUT   bound for `rollout status` [11m: the startupProbe allows 10 min]
#   HEALTH_ATTEMPTS   endpoint-health checks before giving up [30]
#   HEALTH_INTERVAL   seconds between those checks [10]
#   EXEC_TIMEOUT      bound for each `kubectl exec` [30s]
set -euo pipefail

readonly NS=dlock
readonly STS=dlock-etcd
readonly MEMBERS=3
KUBECTL=${KUBECTL:-kubectl}
# The members' startupProbe allows 60 x 10 s = 10 min before liveness takes over (a slow
# first start on nodes Autopilot is still provisioning); readiness then needs one 5 s
# period. A shorter wait fails while the pods are still legitimately coming up.
ROLLOUT_TIMEOUT=${ROLLOUT_TIMEOUT:-11m}
HEALTH_ATTEMPTS=${HEALTH_ATTEMPTS:-30}
HEALTH_INTERVAL=${HEALTH_INTERVAL:-10}
EXEC_TIMEOUT=${EXEC_TIMEOUT:-30s}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
step=start

fail() {
  echo "apply.sh: FAILED at step '$step': $*" >&2
  exit 1
}

say() { echo "apply.sh: [$step] $*"; }

step=namespace
say "applying namespace.yaml"
"$KUBECTL" apply -f "$here/namespace.yaml" || fail "kubectl apply -f namespace.yaml"

step=etcd
say "applying etcd/"
"$KUBECTL" apply -R -f "$here/etcd/" || fail "kubectl apply -R -f etcd/"

step=etcd-rollout
say "waiting up to $ROLLOUT_TIMEOUT for statefulset/$STS"
"$KUBECTL" -n "$NS" rollout status "statefulset/$STS" --timeout="$ROLLOUT_TIMEOUT" \
  || fail "statefulset/$STS did not finish rolling out within $ROLLOUT_TIMEOUT (check: $KUBECTL -n $NS get pods,pvc,events)"

# The image is distroless (no shell), so etcdctl is exec'd directly; --cluster asks the
# member list, so all three members must be in it and each must answer.
step=etcd-health
healthy=0
out=""
for ((i = 1; i <= HEALTH_ATTEMPTS; i++)); do
  if out=$("$KUBECTL" -n "$NS" exec "$STS-0" --request-timeout="$EXEC_TIMEOUT" -- \
      /usr/local/bin/etcdctl --dial-timeout=5s --command-timeout=10s endpoint health --cluster -w json 2>&1); then
    healthy=$(grep -o '"health":true' <<<"$out" | wc -l) || true
    total=$(grep -o '"endpoint":' <<<"$out" | wc -l) || true
    if [ "$healthy" -eq "$MEMBERS" ] && [ "$total" -eq "$MEMBERS" ]; then
      say "$healthy/$MEMBERS endpoints healthy"
      break
    fi
  fi
  say "attempt $i/$HEALTH_ATTEMPTS: endpoint list not yet healthy"
  if [ "$i" -eq "$HEALTH_ATTEMPTS" ]; then
    fail "no healthy $MEMBERS-member endpoint list after $HEALTH_ATTEMPTS attempts; last output: ${out//$'\n'/ }"
  fi
  sleep "$HEALTH_INTERVAL"
done

step=workloads
mapfile -t workloads < <(find "$here" \
  \( -path "$here/etcd" -o -path "$here/leaderwatch" \) -prune -o \
  -type f \( -name '*.yaml' -o -name '*.yml' -o -name '*.json' \) ! -path "$here/namespace.yaml" -print | sort)
if [ "${#workloads[@]}" -eq 0 ]; then
  say "no other workloads under deploy/k8s"
else
  args=()
  for f in "${workloads[@]}"; do args+=(-f "$f"); done
  say "applying ${#workloads[@]} file(s)"
  "$KUBECTL" apply "${args[@]}" || fail "kubectl apply of the remaining workloads"
fi

step=finished
say "dlock applied: etcd has $MEMBERS healthy members"
