#!/usr/bin/env bash
# Side by side, for each of DURATIONS seconds (default "60 300"): `leaderwatch sample` and
# Prometheus (Debian's package) scraping the same 3 local etcd members every second. Prints
# CPU seconds and peak RSS of each (GNU time) and the ratios against their goals (CPU <= 0.25x,
# peak RSS <= 0.15x), and appends them to $BENCH_SUMMARY when set. Run by `make bench`.
set -euo pipefail

DURATIONS=${DURATIONS:-60 300}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
LW=${LW:-target/release/leaderwatch}
PROM=${PROM:-/usr/bin/prometheus}

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$LW" "$PROM" /usr/bin/time
start_cluster bench 1 # the extra port is Prometheus's

prometheus_config "$work/prometheus.yml"

metric() { # file, field -> value
  awk -F': ' -v k="$2" '$1 ~ k {print $2}' "$1" | head -n1
}
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }
cpu() { calc "$(metric "$1" 'User time') + $(metric "$1" 'System time')"; }
rss() { calc "$(metric "$1" 'Maximum resident set size') / 1024"; }
verdict() { awk "BEGIN { print ($1 <= $2) ? \"met\" : \"NOT met\" }"; }

for DURATION in $DURATIONS; do
  echo "bench: ${DURATION}s side by side, 3 members of $("$ETCD" --version | head -n1), 1 s interval"
  /usr/bin/time -v -o "$work/lw.time" "$LW" sample --interval 1s --duration "${DURATION}s" --out "$work/lw$DURATION" \
    --endpoint "m0=http://127.0.0.1:${ports[0]}" --endpoint "m1=http://127.0.0.1:${ports[1]}" \
    --endpoint "m2=http://127.0.0.1:${ports[2]}" 2>"$work/lw.log" &
  lw=$!
  /usr/bin/time -v -o "$work/prom.time" timeout -s TERM "$DURATION" "$PROM" --config.file="$work/prometheus.yml" \
    --storage.tsdb.path="$work/tsdb$DURATION" --web.listen-address="127.0.0.1:$(extra_port 0)" >"$work/prom.log" 2>&1 &
  prom=$!
  wait "$lw" || { echo "bench: leaderwatch failed:" >&2; tail -5 "$work/lw.log" >&2; exit 1; }
  wait "$prom" || true

  lc=$(cpu "$work/lw.time"); pc=$(cpu "$work/prom.time")
  lr=$(rss "$work/lw.time"); pr=$(rss "$work/prom.time")
  rounds=$(($(wc -l <"$work/lw$DURATION/samples.csv") / 3))
  echo
  echo "| process | CPU s over ${DURATION} s | peak RSS MiB |"
  echo "|---|---|---|"
  echo "| leaderwatch sample ($rounds rounds) | $lc | $lr |"
  echo "| prometheus $("$PROM" --version 2>&1 | head -n1 | awk '{print $3}') | $pc | $pr |"
  cr=$(calc "$lc / $pc"); rr=$(calc "$lr / $pr")
  echo "| ratio leaderwatch / prometheus | $cr (goal <= 0.25) | $rr (goal <= 0.15) |"
  if [ -n "${BENCH_SUMMARY:-}" ]; then
    {
      echo "| CPU of \`sample\` at 1 s / Prometheus at 1 s, ${DURATION} s side by side | $cr ($lc s / $pc s) | <= 0.25 | $(verdict "$cr" 0.25) |"
      echo "| peak RSS of \`sample\` / Prometheus, ${DURATION} s side by side | $rr ($lr MiB / $pr MiB) | <= 0.15 | $(verdict "$rr" 0.15) |"
    } >>"$BENCH_SUMMARY"
  fi
done
