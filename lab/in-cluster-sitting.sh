#!/usr/bin/env bash
# The GKE sitting rehearsed on a fresh local cluster by the command a user runs on GKE:
# the cluster up with the image `make image` built (served under the name the manifests
# give it, with PROJECT=lw-lab), deploy/k8s/namespace.yaml and deploy/k8s/apply.sh, the
# admin's leaderwatch namespace and RBAC, then
# `leaderwatch sitting` with that image: 20 min at rest, a follower evicted, 5 min settle
# by default, the run brought back into data/kube-in-cluster-<target>-<method>-<UTC>/ and
# the etcd README's table rendered. Tears the cluster down on exit.
#   lab/in-cluster-sitting.sh [leaderwatch sitting flags]   (root; make kube-tools image first)
#   make rehearse-kube ARGS="--target leader"
# With LW_AS=operator (make rehearse-kube AS=operator) the day as docs/gke-sitting.md has
# it: the admin also applies operator-rbac.yaml and binds it (only it) to a ServiceAccount
# standing in for the operator, whose token is the only credential the sitting gets; the
# sitting runs from a directory outside the clone, and its whole hand-off goes into
# data/lab-day-<UTC>/ (its own --out-dir): the run directory with its report.csv,
# baselines.csv, and copies of the etcd README and of the ledger, rewritten as the sitting
# rewrites them (a rehearsal's, never GKE's: src/ops/sitting/handoff.rs).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
kver=$(sed -n 's|^\tk8s.io/kubernetes \(v[^ ]*\).*|\1|p' lab/go/kube/go.mod)
cver=$(sed -n 's|^\tgithub.com/containerd/containerd/v2 v\([^ ]*\).*|\1|p' lab/go/node/containerd/go.mod)
export KUBECTL=$repo/.tools/kube-$kver/bin/kubectl KUBECONFIG=$repo/.tools/lab/kubeconfig
# shellcheck source=/dev/null # written by make image
. target/image/image.env
ref=$(sed -n 's|^ *image: \(.*\)|\1|p' deploy/k8s/leaderwatch/job-measure.yaml | sed 's|/PROJECT/|/lw-lab/|')
# The sitting takes the digest, as docs/gke-sitting.md has it (lw-lab names the image by it
# too): a tag is pulled on every start, and the lab has no registry to pull from.
pinned=${ref%:*}@$IMAGE_DIGEST
lab=(lab/target/debug/lw-lab --dir "$repo/.tools/lab" --tools "$repo/.tools")
trap '"${lab[@]}" down' EXIT
"${lab[@]}" --image "$ref=$IMAGE_LAYOUT:$IMAGE_TAG" up --detach
"$KUBECTL" apply -f deploy/k8s/namespace.yaml
deploy/k8s/apply.sh
# The cluster admin's part (docs/gke-sitting.md, "The operator's rights"): the sitting's
# namespace and the Job's rights, every method's on this throwaway cluster.
"$KUBECTL" apply -f deploy/k8s/leaderwatch/namespace.yaml
"$KUBECTL" apply -f deploy/k8s/leaderwatch/rbac.yaml -f deploy/k8s/leaderwatch/rbac-maintenance.yaml \
  -f deploy/k8s/leaderwatch/rbac-drain.yaml
env="local control plane (lw-lab), Kubernetes $kver, real kubelet + containerd $cver, etcd 3.6.14, in-cluster Job, image $IMAGE_DIGEST"
status=0
if [ "${LW_AS:-admin}" = operator ]; then
  "$KUBECTL" apply -f deploy/k8s/leaderwatch/operator-rbac.yaml
  "$KUBECTL" -n default create serviceaccount lw-operator
  sa=--serviceaccount=default:lw-operator
  "$KUBECTL" -n leaderwatch create rolebinding leaderwatch-operator --role=leaderwatch-operator "$sa"
  "$KUBECTL" -n dlock create rolebinding leaderwatch-operator --role=leaderwatch-operator-read "$sa"
  "$KUBECTL" create clusterrolebinding leaderwatch-operator --clusterrole=leaderwatch-operator "$sa"
  away=$(mktemp -d)
  trap '"${lab[@]}" down; rm -rf "$away"' EXIT
  # The operator's kubeconfig: the cluster's address and CA, the ServiceAccount's token.
  server=$("$KUBECTL" config view --raw --minify -o jsonpath='{.clusters[0].cluster.server}')
  "$KUBECTL" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' |
    base64 -d >"$away/ca.crt"
  token=$("$KUBECTL" -n default create token lw-operator --duration 3h)
  op="$away/operator.kubeconfig"
  KUBECONFIG=$op "$KUBECTL" config set-cluster lab --server "$server" --certificate-authority "$away/ca.crt" --embed-certs >/dev/null
  KUBECONFIG=$op "$KUBECTL" config set-credentials lw-operator --token "$token" >/dev/null
  KUBECONFIG=$op "$KUBECTL" config set-context lab --cluster lab --user lw-operator >/dev/null
  KUBECONFIG=$op "$KUBECTL" config use-context lab >/dev/null
  day="$repo/data/lab-day-$(date -u +%Y%m%dT%H%M%SZ)"
  mkdir -p "$day"
  cp deploy/k8s/etcd/README.md "$day/README.md"
  cp tasks/README.md "$day/ledger.md"
  install -m 0755 target/release/leaderwatch "$away/leaderwatch"
  (cd "$away" && ./leaderwatch sitting --kubeconfig "$op" --image "$pinned" \
    --environment "$env, as the operator role" --label lab \
    --out-dir "$day" --readme "$day/README.md" --ledger "$day/ledger.md" "$@" 2>&1 | tee "$day/sitting.log") ||
    status=$?
else
  target/release/leaderwatch sitting --kubeconfig "$KUBECONFIG" --image "$pinned" \
    --environment "$env" --label kube-in-cluster "$@" || status=$?
fi
# The fetched run belongs to whoever owns the checkout, not to root.
chown -R --reference=data data
exit "$status"
