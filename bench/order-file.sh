#!/usr/bin/env bash
# Writes build/sampler.order, the functions `leaderwatch sample` executes, which build.rs
# hands to the linker so they sit together (docs/benchmarks.md, "Link order"). Run by
# `make order-file` after the code or the dependencies changed much: the release binary is
# run under callgrind for DURATION seconds (default 5) against a fresh local 3-member cluster at
# 50 ms rounds, its executed addresses mapped to sections through the link map, and the
# release binary relinked with the new order.
set -euo pipefail

DURATION=${DURATION:-5}
ETCD=${ETCD_BIN:-.tools/bin/etcd}
LW=target/release/leaderwatch
MAP=target/release/leaderwatch.map

# shellcheck source=bench/local-cluster.sh
. "$(dirname "$0")/local-cluster.sh"
require "$ETCD" "$LW" /usr/bin/valgrind
[ -f "$MAP" ] || { echo "order-file: $MAP missing (cargo build --release writes it)" >&2; exit 2; }
start_cluster order-file
sleep 2
# shellcheck disable=SC2086 # $members is a list of options
valgrind --tool=callgrind --dump-instr=yes --compress-pos=no --compress-strings=no \
  --callgrind-out-file="$work/cg" "$LW" sample --interval 50ms --duration "${DURATION}s" \
  --out "$work/out" $members >"$work/log" 2>&1 \
  || { echo "order-file: leaderwatch under callgrind failed:" >&2; tail -n 5 "$work/log" >&2; exit 1; }
python3 "$(dirname "$0")/order_file.py" "$MAP" "$work/cg" build/sampler.order
cargo build --release --locked
