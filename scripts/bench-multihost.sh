#!/usr/bin/env bash
# Benchmark (not a test): pod-to-pod traffic across two hosts (host-gw
# routes, scripts/hosts.sh's network namespaces, each with its own Docker
# Engine and bosun agent) beside two plain Docker containers on one bridge
# of this machine's engine, in the same run, with the same tools (the
# busybox image's ping, nc and dd):
#
#   scripts/bench-multihost.sh [MIB]     (default 128 MiB per transfer)
#
# Round trip: `ping -c 200 -i 0.02` from client to server (min/avg/max).
# Throughput: MIB MiB of zeros through `nc` to a server whose `dd` reads
# exactly that much and closes, timed in the client (busybox `time`), three
# times; the best is reported. busybox nc copies in small reads, so the
# absolute figures are nc's, not the network's; the comparison is the point.
# All traffic stays on this machine. Run as root; cleans up everything it
# makes (hosts, control plane, containers, network), also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
MIB="${1:-128}"
BIN="${BIN:-$PWD/target/debug}"
WORK=$(mktemp -d)
source scripts/bench-lib.sh
IMG=bosun.local/busybox:1.35
NET=bench-mh-$$
COUNT=$((MIB * 16)) # 64 KiB blocks
SINK="printf '#!/bin/sh\nexec dd bs=65536 count=$COUNT iflag=fullblock of=/dev/null 2>/dev/null\n' >/sink; chmod +x /sink; while true; do nc -l -p 5001 -e /sink; done"

CONTROL_PID="" A1="" A2=""
cleanup() {
  stop "$A1"; stop "$A2"; stop "$CONTROL_PID"
  docker rm -f "$NET-s" "$NET-c" >/dev/null 2>&1 || true
  docker network rm "$NET" >/dev/null 2>&1 || true
  bash scripts/hosts.sh down
  rm -rf "$WORK"
}
trap cleanup EXIT

for b in bosun-control bosun-agent; do
  [ -x "$BIN/$b" ] || cargo build -q -p "$b"
done
bash scripts/build-images.sh >/dev/null

# $1: how to run a command in the client; $2: the server's IP.
measure() {
  local run=$1 ip=$2 best="" t
  local rtt
  rtt=$($run ping -q -c 200 -i 0.02 "$ip" | sed -n 's|.*min/avg/max = ||p')
  for _ in 1 2 3; do
    t=$($run sh -c "time sh -c 'dd if=/dev/zero bs=65536 count=$COUNT 2>/dev/null | nc $ip 5001'" 2>&1 |
      sed -n 's/^real[^0-9]*\([0-9]*\)m \([0-9.]*\)s/\1 \2/p' | awk '{print $1 * 60 + $2}')
    if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN {exit !(a < b)}'; then best=$t; fi
  done
  awk -v r="$rtt" -v t="$best" -v m="$MIB" 'BEGIN {printf "  rtt min/avg/max %s   throughput %.1f MiB/s (%d MiB in %.2f s)\n", r, m / t, m, t}'
}

echo "== two hosts (network namespaces, host-gw routes), bosun pods"
bash scripts/hosts.sh up 2
"$BIN/bosun-control" --data-dir "$WORK/control" --bind 172.31.250.1 --port 0 2>"$WORK/control.log" &
CONTROL_PID=$!
KC="$WORK/control/admin.kubeconfig"
for _ in $(seq 200); do [ -s "$KC" ] && break; sleep 0.1; done
agent() { # host
  bash scripts/hosts.sh exec "$1" "$BIN/bosun-agent" --kubeconfig "$KC" --node-name "bench-h$1" \
    --node-ip "172.31.250.1$1" --data-dir "/tmp/bosun-hosts/h$1/agent" --port 0 \
    --metrics-interval 0 2>"$WORK/agent-$1.log"
}
agent 1 & A1=$!
agent 2 & A2=$!
kubectl --kubeconfig "$KC" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: server}
spec:
  nodeName: bench-h1
  containers:
  - name: s
    image: $IMG
    command: [sh, -c, "$SINK"]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  nodeName: bench-h2
  containers:
  - {name: c, image: $IMG, command: [sleep, "3600"]}
EOF
kubectl --kubeconfig "$KC" wait --for=condition=Ready pod/server pod/client --timeout=120s >/dev/null
SERVER_IP=$(kubectl --kubeconfig "$KC" get pod server -o jsonpath='{.status.podIP}')
CLIENT_IP=$(kubectl --kubeconfig "$KC" get pod client -o jsonpath='{.status.podIP}')
echo "  client $CLIENT_IP on bench-h2 -> server $SERVER_IP on bench-h1"
measure "kubectl --kubeconfig $KC exec client --" "$SERVER_IP"

echo "== one bridge of this machine's engine, plain docker containers"
docker network create "$NET" >/dev/null
docker run -d --name "$NET-s" --network "$NET" "$IMG" sh -c "$SINK" >/dev/null
docker run -d --name "$NET-c" --network "$NET" "$IMG" sleep 3600 >/dev/null
IP=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$NET-s")
sleep 1
measure "docker exec $NET-c" "$IP"
