#!/usr/bin/env bash
# Benchmark (not a test): what an idle node's heartbeat costs the
# cluster, with the agent writing its Node status only when it changes
# (the default: a Lease renewal is the heartbeat) beside the agent writing
# it every heartbeat (`--node-status-report-frequency 0`, as bosun did
# before Leases), in the same run. Counted over SECONDS of idling:
# writes to the store (revisions) and the bytes a watcher of nodes and a
# watcher of leases receive (every controller, scheduler and agent DNS
# cache watches nodes, so each Node write is paid once per watcher).
#
#   scripts/bench-heartbeat.sh [SECONDS]    (default 60; heartbeat 10 s)
#
# Counts, not speed: debug builds do. Cleans up every process, network and file it
# makes, also on failure. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
WINDOW="${1:-60}"
command -v kubectl >/dev/null || { apt-get update -qq && apt-get install -y -qq kubectl >/dev/null; }
cargo build --quiet -p bosun-control -p bosun-agent
BIN=target/debug

WORK=$(mktemp -d)
NODE="bench-hb-$$"
CIDR=10.244.202.0/24
CONTROL_PID="" AGENT_PID="" WATCH_PIDS=()
. scripts/bench-lib.sh
cleanup() {
  for p in "${WATCH_PIDS[@]}"; do stop "$p"; done
  stop "$AGENT_PID"; stop "$CONTROL_PID"
  docker network rm "bosun-$NODE" >/dev/null 2>&1 || true
  remove_forward_chain_if_new
  rm -rf "$WORK"
}
trap cleanup EXIT

start_control
k() { kubectl --kubeconfig "$KC" "$@"; }
revision() { k get --raw '/api/v1/namespaces?limit=1' | python3 -c 'import json,sys; print(json.load(sys.stdin)["metadata"]["resourceVersion"])'; }

measure() { # label, agent flags...
  local label=$1; shift
  BOSUN_LOG=warn "$BIN/bosun-agent" --kubeconfig "$KC" --node-name "$NODE" \
    --node-ip 127.0.0.1 --pod-cidr "$CIDR" --data-dir "$WORK/agent" --port 0 \
    --no-dns "$@" 2>>"$WORK/agent.log" &
  AGENT_PID=$!
  for _ in $(seq 100); do k get lease -n kube-node-lease "$NODE" >/dev/null 2>&1 && break; sleep 0.2; done
  sleep 3
  local rv; rv=$(revision)
  timeout "$WINDOW" kubectl --kubeconfig "$KC" get --raw "/api/v1/nodes?watch=1&resourceVersion=$rv" >"$WORK/nodes.watch" 2>/dev/null &
  WATCH_PIDS+=($!)
  timeout "$WINDOW" kubectl --kubeconfig "$KC" get --raw "/apis/coordination.k8s.io/v1/leases?watch=1&resourceVersion=$rv" >"$WORK/leases.watch" 2>/dev/null &
  WATCH_PIDS+=($!)
  wait "${WATCH_PIDS[@]}" 2>/dev/null || true
  WATCH_PIDS=()
  local writes=$(( $(revision) - rv ))
  printf '%-44s %6d writes  nodes watch %8d B (%d events)  leases watch %6d B (%d events)\n' \
    "$label" "$writes" "$(wc -c <"$WORK/nodes.watch")" "$(wc -l <"$WORK/nodes.watch")" \
    "$(wc -c <"$WORK/leases.watch")" "$(wc -l <"$WORK/leases.watch")"
  stop "$AGENT_PID"; AGENT_PID=""
}

echo "idle node, heartbeat every 10 s, ${WINDOW} s measured:"
measure "status written every heartbeat (before)" --node-status-report-frequency 0
measure "status written on change (Lease heartbeat)"
