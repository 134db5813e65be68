#!/usr/bin/env bash
# What the continuous sampler writes to its disk: `leaderwatch sample --interval 1s` (the
# sampler Deployment's arguments) on a fresh local 3-member cluster for DURATION seconds
# (default 300). Measures bytes per row of samples.csv and health.csv as written, what gzip
# level 6 (the level rotation uses) makes of them, and the CPU gzip needs per MB; projects
# a member-day and the PVC for --retain 30d. Appends its figures to $BENCH_SUMMARY when set.
set -euo pipefail

DURATION=${DURATION:-300}
RETAIN_DAYS=${RETAIN_DAYS:-30}
PVC_BYTES=${PVC_BYTES:-$((1024 * 1024 * 1024))} # deploy/k8s/leaderwatch/deployment-sample.yaml: 1Gi
ETCD=${ETCD_BIN:-.tools/bin/etcd}
LW=${LW:-target/release/leaderwatch}

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$LW" /usr/bin/time
start_cluster disk-use
sleep 3
echo "disk use: local loopback, etcd $("$ETCD" --version | awk 'NR == 1 {print $3}'), 3 members, ${DURATION} s at 1 s, $(date -u +%FT%TZ)"
"$LW" sample --interval 1s --duration "${DURATION}s" --out "$work/run" --metrics-addr 127.0.0.1:0 \
  --endpoint "m0=http://127.0.0.1:${ports[0]}" --endpoint "m1=http://127.0.0.1:${ports[1]}" \
  --endpoint "m2=http://127.0.0.1:${ports[2]}" 2>"$work/lw.log" \
  || { echo "bench: leaderwatch failed:" >&2; tail -n 5 "$work/lw.log" >&2; exit 1; }

rows() { echo $(($(wc -l <"$1") - 1)); }
size() { stat -c %s "$1"; }
gz() { gzip -6 -c "$1" | wc -c; }
s_rows=$(rows "$work/run/samples.csv"); s_bytes=$(size "$work/run/samples.csv"); s_gz=$(gz "$work/run/samples.csv")
h_rows=$(rows "$work/run/health.csv"); h_bytes=$(size "$work/run/health.csv"); h_gz=$(gz "$work/run/health.csv")
e_bytes=$(size "$work/run/events.csv")
# gzip throughput on the real rows (the file compressed 50 times over).
for _ in $(seq 1 50); do cat "$work/run/samples.csv"; done >"$work/x50.csv"
/usr/bin/time -f '%U %S' -o "$work/gz.time" gzip -6 -c "$work/x50.csv" >/dev/null
gz_cpu=$(awk '{print $1 + $2}' "$work/gz.time")

awk -v sr="$s_rows" -v sb="$s_bytes" -v sg="$s_gz" -v hr="$h_rows" -v hb="$h_bytes" -v hg="$h_gz" -v eb="$e_bytes" \
  -v d="$DURATION" -v cpu="$gz_cpu" -v mb50="$(size "$work/x50.csv")" -v keep="$RETAIN_DAYS" -v pvc="$PVC_BYTES" \
  -v summary="${BENCH_SUMMARY:-}" 'BEGIN {
  members = 3; day = 86400
  srow = sb / sr; sratio = sb / sg
  hrow = hb / hr; hratio = hb / hg
  s_day = srow * day / d * sr / members              # one member, one day, samples.csv
  h_day = hrow * day / d * hr / members
  raw_day = (s_day + h_day) * members; gz_day = (s_day / sratio + h_day / hratio) * members
  mbps = mb50 / 1e6 / (cpu > 0 ? cpu : 0.001)
  disk = keep * gz_day + 2 * raw_day + eb / d * day * (keep + 1)
  printf "| file | rows | bytes per row | gzip -6 ratio | per member-day raw | per member-day gz |\n|---|---|---|---|---|---|\n"
  printf "| samples.csv | %d | %.0f | %.1fx | %.1f MB | %.2f MB |\n", sr, srow, sratio, s_day / 1e6, s_day / sratio / 1e6
  printf "| health.csv | %d | %.0f | %.1fx | %.2f MB | %.3f MB |\n", hr, hrow, hratio, h_day / 1e6, h_day / hratio / 1e6
  printf "events.csv at rest: %d bytes in %d s\n", eb, d
  printf "gzip -6: %.0f MB/s of CPU; a 3-member day (%.0f MB) takes %.1f s of CPU once a day\n", mbps, raw_day / 1e6, raw_day / 1e6 / mbps
  printf "--retain %d d, 3 members: %.0f MB (%d gz days + the live day raw + one closed day before compression + events); PVC %.1f GiB\n", keep, disk / 1e6, keep, pvc / 2^30
  if (summary != "") {
    printf "| sampler disk, 3 members at 1 s, --retain %dd (gz days + live day + events) | %.0f MB | <= half the PVC (%.0f MB) | %s |\n", keep, disk / 1e6, pvc / 2 / 1e6, (disk <= pvc / 2 ? "met" : "NOT met") >>summary
    printf "| closed-day compression, samples.csv (gzip -6) | %.1fx | >= 5x (pays) | %s |\n", sratio, (sratio >= 5 ? "met" : "NOT met") >>summary
  }
}'
