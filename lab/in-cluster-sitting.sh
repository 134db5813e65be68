#!/usr/bin/env bash
# The in-cluster sitting at full length on a fresh local cluster, as a user runs it on GKE:
# deploy/k8s/apply.sh, rbac.yaml, then job-measure.yaml from the image `make image` built,
# unchanged but for the README's `sed s/PROJECT/lw-lab/` and LEADERWATCH_ENVIRONMENT (so
# the baseline says where it ran). Waits for the Job (20 min at rest, the eviction, 5 min
# settle), checks that baseline-from-log.sh gives the PVC's baseline.json, and copies the
# run directory to data/kube-in-cluster-<UTC time>/. Tears the cluster down on exit.
#   lab/in-cluster-sitting.sh            (root; make kube-tools image first)
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
kver=$(sed -n 's|^\tk8s.io/kubernetes \(v[^ ]*\).*|\1|p' lab/go/kube/go.mod)
export KUBECTL=$repo/.tools/kube-$kver/bin/kubectl KUBECONFIG=$repo/.tools/lab/kubeconfig
# shellcheck source=/dev/null # written by make image
. target/image/image.env
ref=$(sed -n 's|^ *image: \(.*\)|\1|p' deploy/k8s/leaderwatch/job-measure.yaml | sed 's|/PROJECT/|/lw-lab/|')
lab=(lab/target/debug/lw-lab --dir "$repo/.tools/lab" --tools "$repo/.tools")
trap '"${lab[@]}" down' EXIT
"${lab[@]}" --image "$ref=$IMAGE_LAYOUT:$IMAGE_TAG" up --detach
"$KUBECTL" apply -f deploy/k8s/namespace.yaml
deploy/k8s/apply.sh
env="local control plane (lw-lab), Kubernetes $kver, etcd 3.6.14, in-cluster Job, image $IMAGE_DIGEST"
work=$(mktemp -d)
sed 's|/PROJECT/|/lw-lab/|' deploy/k8s/leaderwatch/job-measure.yaml |
  awk -v env="$env" '{print} /^ *value: info$/ {i = substr($0, 1, index($0, "value:") - 3); print i "- name: LEADERWATCH_ENVIRONMENT"; print i "  value: \"" env "\""}' >"$work/job-measure.yaml"
diff deploy/k8s/leaderwatch/job-measure.yaml "$work/job-measure.yaml" || true
"$KUBECTL" apply -f deploy/k8s/leaderwatch/rbac.yaml -f "$work/job-measure.yaml"
echo "in-cluster-sitting: $(date -u +%FT%TZ) Job applied; waiting (about 27 minutes)"
"$KUBECTL" -n dlock wait --for=condition=Complete job/leaderwatch-measure --timeout=45m
deploy/k8s/leaderwatch/baseline-from-log.sh >"$work/from-log.json"
pod=$("$KUBECTL" -n dlock get pods -l job-name=leaderwatch-measure -o jsonpath='{.items[0].metadata.name}')
pv=$("$KUBECTL" -n dlock get pvc leaderwatch-data -o jsonpath='{.spec.volumeName}')
dir=$("$KUBECTL" get pv "$pv" -o jsonpath='{.spec.hostPath.path}')/$pod
python3 -c 'import json,sys; a,b=(json.load(open(p)) for p in sys.argv[1:]); sys.exit(0 if a == b else "the log and the PVC disagree")' "$work/from-log.json" "$dir/baseline.json"
out=data/kube-in-cluster-follower-eviction-$(date -u +%Y%m%dT%H%M%SZ)
cp -r "$dir" "$out"
chown -R --reference=data "$out"
echo "in-cluster-sitting: $out (baseline-from-log.sh gives the same baseline.json)"
target/release/leaderwatch report "$out/baseline.json"
