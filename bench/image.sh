#!/usr/bin/env bash
# The container image's size and start-up time (make image first; root, runc, umoci).
# The bundle is umoci's own (`umoci unpack`: the image's root filesystem and a runc config
# from its entrypoint, user and env), tightened to the pods' securityContext: read-only
# root, no capabilities, no privilege escalation, fsGroup 65532, the host's network (where
# the bench's 3 local members listen), /data a writable bind mount.
#   - start-up: `runc run` of `leaderwatch --version` to its exit, RUNS times (default 20);
#   - to the first row: `runc run` of `sample` to the first member row in samples.csv.
# Appends its figures to $BENCH_SUMMARY when set.
set -euo pipefail

RUNS=${RUNS:-20}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
IMAGE_DIR=${IMAGE_DIR:-target/image}
# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$(command -v runc)" "$(command -v umoci)"
[ -f "$IMAGE_DIR/image.env" ] || { echo "bench: $IMAGE_DIR/image.env missing (make image)" >&2; exit 2; }
# shellcheck source=/dev/null
. "$IMAGE_DIR/image.env"
start_cluster image-bench
echo "image: $IMAGE_DIGEST, local loopback, etcd $("$ETCD" --version | awk 'NR == 1 {print $3}'), runc $(runc --version | awk 'NR == 1 {print $3}'), $(nproc) vCPU, $(date -u +%FT%TZ)"

umoci unpack --image "$IMAGE_LAYOUT:$IMAGE_TAG" "$work/bundle" >/dev/null
mkdir -p "$work/data" "$work/runc"
chgrp 65532 "$work/data" && chmod 2775 "$work/data"
# config ARGS...: the bundle's config.json running the entrypoint with ARGS.
config() {
  python3 - "$work/bundle/config.json" "$work/data" "$@" <<'PY'
import json, sys
path, data, args = sys.argv[1], sys.argv[2], sys.argv[3:]
c = json.load(open(path))
p = c["process"]
p["args"] = ["/usr/local/bin/leaderwatch"] + args
p["user"] = {"uid": 65532, "gid": 65532, "additionalGids": [65532]}
p["capabilities"] = {k: [] for k in ("bounding", "effective", "permitted", "inheritable", "ambient")}
p["noNewPrivileges"] = True
p["terminal"] = False
c["root"]["readonly"] = True
c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] not in ("network", "user")]
c["mounts"] = [m for m in c["mounts"] if m["destination"] != "/data"] + [{"destination": "/data", "type": "bind", "source": data, "options": ["rbind", "rw"]}]
json.dump(c, open(path, "w"))
PY
}
now() { date +%s.%N; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
max() { sort -n | tail -n1; }

config --version
: >"$work/version.txt"
for i in $(seq 1 "$RUNS"); do
  t0=$(now)
  runc --root "$work/runc" run --bundle "$work/bundle" "lw-bench-version-$$-$i" >/dev/null
  t1=$(now)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", 1000 * (b - a) }' >>"$work/version.txt"
done
v_med=$(median <"$work/version.txt"); v_max=$(max <"$work/version.txt")
echo "runc run to exit of leaderwatch --version: median $v_med ms, max $v_max ms ($RUNS runs)"

: >"$work/first.txt"
for i in $(seq 1 5); do
  rm -rf "$work/data/run"
  config sample --interval 100ms --duration 3s --out /data/run \
    --endpoint "m0=http://127.0.0.1:${ports[0]}" --endpoint "m1=http://127.0.0.1:${ports[1]}" --endpoint "m2=http://127.0.0.1:${ports[2]}"
  t0=$(now)
  runc --root "$work/runc" run --bundle "$work/bundle" "lw-bench-sample-$$-$i" >/dev/null 2>&1 &
  pid=$!
  until [ "$(wc -l 2>/dev/null <"$work/data/run/samples.csv" || echo 0)" -ge 2 ]; do sleep 0.005; done
  t1=$(now)
  wait "$pid"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", 1000 * (b - a) }' >>"$work/first.txt"
done
f_med=$(median <"$work/first.txt"); f_max=$(max <"$work/first.txt")
echo "runc run of sample to its first row in samples.csv: median $f_med ms, max $f_max ms (5 runs)"
mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }
echo "image size: $(mb "$IMAGE_COMPRESSED_BYTES") compressed (a pull), $(mb "$IMAGE_UNPACKED_BYTES") unpacked, the binary $(mb "$IMAGE_BINARY_BYTES")"
if [ -n "${BENCH_SUMMARY:-}" ]; then
  {
    echo "| image, compressed (what a node pulls) | $IMAGE_COMPRESSED_BYTES bytes | <= 20,000,000 bytes | $([ "$IMAGE_COMPRESSED_BYTES" -le 20000000 ] && echo met || echo 'NOT met') |"
    echo "| image start-up: runc run to the exit of --version (median of $RUNS) | $v_med ms | <= 500 ms | $(awk "BEGIN { print ($v_med <= 500) ? \"met\" : \"NOT met\" }") |"
    echo "| image start-up: runc run of sample to its first row (median of 5) | $f_med ms | <= 1000 ms | $(awk "BEGIN { print ($f_med <= 1000) ? \"met\" : \"NOT met\" }") |"
  } >>"$BENCH_SUMMARY"
fi
