#!/usr/bin/env bash
# Benchmark (not a test): pod create-to-Ready time on bosun for 1 and for
# 20 pods, side by side with the same containers started by plain
# `docker run` (a pause container plus the app joined to it with
# --network/--ipc container:), and the agent's memory with 20 pods.
#
#   scripts/bench-pods.sh [ROUNDS]     (default 3 rounds; medians reported)
#
# Uses release builds, a throwaway control plane and agent in a temp dir,
# and cleans up every container, network and process it starts, also on
# failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
IMAGE=bosun.local/busybox:1.35

cargo build --release --workspace --quiet
bash scripts/build-images.sh >/dev/null
PAUSE=$(docker images --format '{{.Repository}}:{{.Tag}}' bosun.local/pause | head -1)

WORK=$(mktemp -d)
NODE="bench-$$"
NET="bosun-$NODE"
PLAIN_NET="bench-plain-$$"
CONTROL_PID=""
AGENT_PID=""
cleanup() {
  [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null || true
  [ -n "$CONTROL_PID" ] && kill "$CONTROL_PID" 2>/dev/null && wait "$CONTROL_PID" 2>/dev/null || true
  ids=$(docker ps -aq --filter "label=io.bosun.node=$NODE"; docker ps -aq --filter "label=bench.plain=$$")
  [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1 || true
  docker network rm "$NET" "$PLAIN_NET" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

target/release/bosun-control --data-dir "$WORK/control" --port 0 2>"$WORK/control.log" &
CONTROL_PID=$!
for _ in $(seq 100); do [ -s "$WORK/control/address" ] && break; sleep 0.1; done
export KUBECONFIG="$WORK/control/admin.kubeconfig"
target/release/bosun-agent --kubeconfig "$KUBECONFIG" --node-name "$NODE" --node-ip 127.0.0.1 \
  --pod-cidr 10.244.250.0/24 --data-dir "$WORK/agent" 2>"$WORK/agent.log" &
AGENT_PID=$!
for _ in $(seq 100); do kubectl get node "$NODE" >/dev/null 2>&1 && break; sleep 0.1; done
docker network create --subnet 10.244.251.0/24 "$PLAIN_NET" >/dev/null

pods_yaml() {
  local n=$1
  for i in $(seq "$n"); do
    cat <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: bench-$i, labels: {bench: "yes"}}
spec:
  nodeName: $NODE
  terminationGracePeriodSeconds: 0
  containers:
  - {name: app, image: $IMAGE, command: [sleep, "3600"]}
EOF
  done
}

# bosun: create N pods, wait until every one is Ready.
bosun_round() {
  local n=$1
  pods_yaml "$n" >"$WORK/pods.yaml"
  local t0; t0=$(now)
  kubectl create -f "$WORK/pods.yaml" >/dev/null
  kubectl wait --for=condition=Ready pod -l bench=yes --timeout=180s >/dev/null
  local t1; t1=$(now)
  elapsed "$t0" "$t1"
}

bosun_clear() {
  kubectl delete pod -l bench=yes --wait=true --timeout=180s >/dev/null
}

# plain docker: pause + app per pod, one after another or all at once.
plain_pod() {
  local i=$1
  docker run -d --name "plain-$$-$i-pause" --label "bench.plain=$$" --ipc shareable \
    --network "$PLAIN_NET" "$PAUSE" >/dev/null
  docker run -d --name "plain-$$-$i-app" --label "bench.plain=$$" \
    --network "container:plain-$$-$i-pause" --ipc "container:plain-$$-$i-pause" \
    "$IMAGE" sleep 3600 >/dev/null
}
plain_round() {
  local n=$1 mode=$2
  local t0; t0=$(now)
  if [ "$mode" = serial ]; then
    for i in $(seq "$n"); do plain_pod "$i"; done
  else
    for i in $(seq "$n"); do plain_pod "$i" & done
    wait
  fi
  local t1; t1=$(now)
  elapsed "$t0" "$t1"
}
plain_clear() {
  ids=$(docker ps -aq --filter "label=bench.plain=$$")
  [ -n "$ids" ] && docker rm -f $ids >/dev/null
}

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status"; }

declare -A results
for n in 1 20; do
  b=(); s=(); p=()
  for _ in $(seq "$ROUNDS"); do
    b+=("$(bosun_round "$n")")
    [ "$n" = 20 ] && agent_rss=$(rss_kb "$AGENT_PID")
    bosun_clear
    s+=("$(plain_round "$n" serial)"); plain_clear
    p+=("$(plain_round "$n" parallel)"); plain_clear
  done
  results[$n,bosun]=$(printf '%s\n' "${b[@]}" | median)
  results[$n,serial]=$(printf '%s\n' "${s[@]}" | median)
  results[$n,parallel]=$(printf '%s\n' "${p[@]}" | median)
done

echo
echo "pod create-to-Ready (median of $ROUNDS rounds, seconds; $(nproc) cores, Docker $(docker version -f '{{.Server.Version}}'))"
printf '%-6s %-22s %-26s %-26s\n' pods "bosun (create->Ready)" "docker run, one by one" "docker run, all at once"
for n in 1 20; do
  printf '%-6s %-22s %-26s %-26s\n' "$n" "${results[$n,bosun]}" "${results[$n,serial]}" "${results[$n,parallel]}"
done
echo
echo "bosun-agent memory: VmRSS with 20 pods running $((agent_rss / 1024)) MiB; peak (VmHWM) $(( $(hwm_kb "$AGENT_PID") / 1024 )) MiB"
echo "bosun-control memory: peak (VmHWM) $(( $(hwm_kb "$CONTROL_PID") / 1024 )) MiB"
