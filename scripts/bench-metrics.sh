#!/usr/bin/env bash
# Benchmark (not a test): what resource metrics collection costs the agent
# with 50 pods, side by side in one run: the same agent (restarted; it
# adopts the pods) with collection off (`--metrics-interval 0`), at the
# default 10 s interval, and at 1 s. For each, over SECONDS: the agent's
# CPU time (utime+stime from /proc, as a share of one core), its resident
# memory at the end, and dockerd's CPU time (the one-shot stats requests
# are served by it; other work on the host counts there too).
#
#   scripts/bench-metrics.sh [SECONDS] [PODS]   (default 60 s, 50 pods)
#   BENCH_PROFILE=debug scripts/bench-metrics.sh   (debug build: costs overstated)
#   BENCH_AGENT_FLAGS="--relist-period 30" ...     (extra agent flags, every phase:
#                                                  a quieter baseline on a busy host)
#
# The 1 s phase amplifies the cost tenfold, so its difference to the "off"
# phases, divided by the readings it took, is the cost of one reading of
# all pods, which the last line reports per default 10 s interval.
#
# Cleans up every container, network, process and file it makes, also on
# failure. Traffic stays on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
WINDOW="${1:-60}" PODS="${2:-50}" PROFILE="${BENCH_PROFILE:-release}"
IMAGE=bosun.local/busybox:1.35
command -v kubectl >/dev/null || { apt-get update -qq && apt-get install -y -qq kubectl >/dev/null; }
if [ "$PROFILE" = release ]; then
  cargo build --release --quiet -p bosun-control -p bosun-agent
else
  cargo build --quiet -p bosun-control -p bosun-agent
fi
WORK=$(mktemp -d)
# Copies: a build running meanwhile does not change what is measured.
mkdir "$WORK/bin" && cp "target/$PROFILE/bosun-control" "target/$PROFILE/bosun-agent" "$WORK/bin/"
BIN=$WORK/bin
docker image inspect "$IMAGE" >/dev/null 2>&1 || bash scripts/build-images.sh >/dev/null

NODE="bench-metrics-$$"
CIDR=10.244.203.0/24
CONTROL_PID="" AGENT_PID=""
stop() { [ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true; }
cleanup() {
  stop "$AGENT_PID"; stop "$CONTROL_PID"
  ids=$(docker ps -aq --filter "label=io.bosun.node=$NODE")
  [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1 || true
  docker network rm "bosun-$NODE" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

BOSUN_LOG=warn "$BIN/bosun-control" --data-dir "$WORK/control" --port 0 2>"$WORK/control.log" &
CONTROL_PID=$!
for _ in $(seq 200); do [ -s "$WORK/control/address" ] && break; sleep 0.1; done
KC="$WORK/control/admin.kubeconfig"
k() { kubectl --kubeconfig "$KC" "$@"; }

start_agent() { # agent flags...
  BOSUN_LOG=warn "$BIN/bosun-agent" --kubeconfig "$KC" --node-name "$NODE" \
    --node-ip 127.0.0.1 --pod-cidr "$CIDR" --data-dir "$WORK/agent" --port 0 \
    --no-dns ${BENCH_AGENT_FLAGS:-} "$@" 2>>"$WORK/agent.log" &
  AGENT_PID=$!
}

# CPU ticks (utime + stime) of a process.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
DOCKERD=$(pidof dockerd | awk '{ print $1 }')

start_agent --metrics-interval 0
for _ in $(seq 100); do k get node "$NODE" >/dev/null 2>&1 && break; sleep 0.2; done
for i in $(seq "$PODS"); do
  cat <<YAML
---
apiVersion: v1
kind: Pod
metadata: {name: bench-$i, labels: {bench: "yes"}}
spec:
  nodeName: $NODE
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $IMAGE
    command: ["sleep", "3600"]
    resources: {requests: {cpu: 10m, memory: 8Mi}}
YAML
done >"$WORK/pods.yaml"
k apply -f "$WORK/pods.yaml" >/dev/null
for _ in $(seq 600); do
  running=$(k get pods -l bench=yes --no-headers 2>/dev/null | grep -c ' Running ' || true)
  [ "$running" -ge "$PODS" ] && break
  sleep 1
done
[ "$running" -ge "$PODS" ] || { echo "only $running of $PODS pods running" >&2; exit 1; }

measure() { # label, agent flags...
  local label=$1; shift
  stop "$AGENT_PID"; AGENT_PID=""
  start_agent "$@"
  # Settle: the agent adopts its pods and relists; metrics get two readings.
  sleep 20
  local a0 d0 a1 d1 rss
  a0=$(ticks "$AGENT_PID"); d0=$(ticks "$DOCKERD")
  sleep "$WINDOW"
  a1=$(ticks "$AGENT_PID"); d1=$(ticks "$DOCKERD")
  rss=$(awk '/VmRSS/ { print $2 }' "/proc/$AGENT_PID/status")
  # How many pods the metrics API had figures for (the work was real).
  served=$(k get --raw "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')
  echo "$label $((a1 - a0))" >>"$WORK/results"
  awk -v l="$label" -v a=$((a1 - a0)) -v d=$((d1 - d0)) -v hz="$HZ" -v w="$WINDOW" -v rss="$rss" -v s="$served" 'BEGIN {
    printf "%-28s agent %6.2f s CPU = %5.2f%% of a core   RSS %6.1f MiB   dockerd %6.2f s = %5.2f%%   PodMetrics %d\n",
      l, a / hz, 100 * a / hz / w, rss / 1024, d / hz, 100 * d / hz / w, s }'
}

echo "$PODS pods on one agent ($PROFILE build, agent flags: ${BENCH_AGENT_FLAGS:-none}), ${WINDOW} s measured per line:"
measure "metrics off (interval 0)" --metrics-interval 0
measure "metrics every 10 s (default)" --metrics-interval 10
measure "metrics every 1 s" --metrics-interval 1
measure "metrics off" --metrics-interval 0
measure "metrics every 10 s (default)" --metrics-interval 10
awk -v hz="$HZ" -v w="$WINDOW" -v pods="$PODS" '
  /^metrics off/ { off += $NF; n_off++ }
  /every 1 s/ { fast = $NF }
  /every 10 s/ { slow += $NF; n_slow++ }
  END {
    base = off / n_off
    per_round = (fast - base) / hz / w          # CPU s per reading of all pods
    printf "one reading of %d pods: %.1f ms of agent CPU (from the 1 s phase); at the default 10 s interval: %.2f%% of a core\n",
      pods, 1000 * per_round, 100 * per_round / 10
    printf "default-interval phases vs off, directly: %+.2f%% of a core (noise of the baseline included)\n",
      100 * (slow / n_slow - base) / hz / w
  }' "$WORK/results"
