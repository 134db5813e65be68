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
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
kver=$(sed -n 's|^\tk8s.io/kubernetes \(v[^ ]*\).*|\1|p' lab/go/kube/go.mod)
cver=$(sed -n 's|^\tgithub.com/containerd/containerd/v2 v\([^ ]*\).*|\1|p' lab/go/node/containerd/go.mod)
export KUBECTL=$repo/.tools/kube-$kver/bin/kubectl KUBECONFIG=$repo/.tools/lab/kubeconfig
# shellcheck source=/dev/null # written by make image
. target/image/image.env
ref=$(sed -n 's|^ *image: \(.*\)|\1|p' deploy/k8s/leaderwatch/job-measure.yaml | sed 's|/PROJECT/|/lw-lab/|')
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
target/release/leaderwatch sitting --kubeconfig "$KUBECONFIG" --image "$ref" \
  --environment "$env" --label kube-in-cluster "$@" || status=$?
# The fetched run belongs to whoever owns the checkout, not to root.
chown -R --reference=data data
exit "$status"
