# shellcheck shell=bash
# Sourced by the bench scripts: a fresh etcd cluster of MEMBERS members (default 3) on free
# 127.0.0.1 ports, stopped and removed on exit. `start_cluster TOKEN EXTRA` sets `work` (a
# temp dir), `pids`, `ports` (MEMBERS client ports, MEMBERS peer ports, then EXTRA more free
# ports for the caller: `extra_port K` is the K-th), `endpoints` (the client URLs,
# comma-separated) and `members` (leaderwatch's --endpoint options, m0=URL ...); it returns
# once every member answers /health. Needs ETCD (the etcd binary). `prometheus_config FILE`
# writes a Prometheus config that scrapes the members every second.
MEMBERS=${MEMBERS:-3}

extra_port() { echo "${ports[$((2 * MEMBERS + $1))]}"; }

# require BIN...: every one executable, or one line naming it and exit 2 (make bench
# installs them all: make deps, make build, Debian's time and prometheus).
require() {
  local b
  for b in "$@"; do
    [ -x "$b" ] || { echo "bench: $b missing (make deps / make build / apt-get install time prometheus)" >&2; exit 2; }
  done
}

start_cluster() {
  local token=$1 extra=${2:-0}
  work=$(mktemp -d)
  pids=()
  trap stop_cluster EXIT
  # A signal ends the script through its EXIT trap, so the members stop with it.
  trap "exit 129" HUP; trap "exit 130" INT; trap "exit 143" TERM
  # Free loopback ports for the clients, the peers and the caller's extra ones.
  mapfile -t ports < <(python3 - "$((2 * MEMBERS + extra))" <<'PY'
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
for s in ss: print(s.getsockname()[1])
PY
)
  local cluster="" i c p n=$MEMBERS
  for ((i = 0; i < n; i++)); do cluster+="m$i=http://127.0.0.1:${ports[$((n + i))]},"; done
  cluster=${cluster%,}
  for ((i = 0; i < n; i++)); do
    c=${ports[$i]}; p=${ports[$((n + i))]}
    "$ETCD" --name "m$i" --data-dir "$work/m$i" --listen-client-urls "http://127.0.0.1:$c" \
      --advertise-client-urls "http://127.0.0.1:$c" --listen-peer-urls "http://127.0.0.1:$p" \
      --initial-advertise-peer-urls "http://127.0.0.1:$p" --initial-cluster "$cluster" \
      --initial-cluster-state new --initial-cluster-token "$token" >"$work/m$i.log" 2>&1 &
    pids+=($!)
  done
  # shellcheck disable=SC2034 # for the caller
  endpoints="" members=""
  for ((i = 0; i < n; i++)); do
    endpoints+="http://127.0.0.1:${ports[$i]},"
    members+="--endpoint m$i=http://127.0.0.1:${ports[$i]} "
  done
  endpoints=${endpoints%,}
  local ok
  for _ in $(seq 1 150); do
    ok=0
    for ((i = 0; i < n; i++)); do curl -sf --max-time 2 "http://127.0.0.1:${ports[$i]}/health" >/dev/null && ok=$((ok + 1)); done
    [ "$ok" -eq "$n" ] && return 0
    sleep 0.2
  done
  echo "bench: the cluster did not become healthy:" >&2
  tail -n 5 "$work"/m*.log >&2
  return 1
}

stop_cluster() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}

prometheus_config() {
  local targets="" i
  for ((i = 0; i < MEMBERS; i++)); do targets+="\"127.0.0.1:${ports[$i]}\", "; done
  cat >"$1" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: etcd
    static_configs:
      - targets: [${targets%, }]
YML
}
