#!/usr/bin/env bash
# Benchmark (not a test): what an idle node costs. One control plane and
# one agent with N sleeping pods (default 50), each pod reading a
# ConfigMap volume and a Secret in its environment as most workloads do;
# once every pod is Ready, for SECONDS (default 60):
#   - the agent's CPU (utime+stime from /proc, as % of one core) and RSS,
#   - the requests the API server served (apiserver_request_total before
#     and after, watches left out), by verb and resource: with nothing
#     else running these are the agent's (its syncs, status writes, lease).
#
#   scripts/bench-agent-idle.sh [PODS] [SECONDS] [BIN_DIR...]
#   (POD_CIDR=10.244.x.0/24 if the default 10.244.249.0/24 is taken here;
#   HEAP_STATS=1 adds glibc's count of the agent's heap, read with gdb)
#
# With several BIN_DIRs (each holding bosun-control and bosun-agent, e.g.
# a release build of main before a change and one after) the same run
# measures each in turn, side by side; without, a release build of this
# checkout. Everything it starts (processes, containers, the node's
# network, its temp dir) is removed by id or exact name, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
PODS="${1:-50}"
SECONDS_IDLE="${2:-60}"
shift $(( $# > 2 ? 2 : $# ))
BINS=("$@")
if [ ${#BINS[@]} = 0 ]; then
  cargo build --release -p bosun-control -p bosun-agent --bins --quiet
  BINS=("$PWD/${CARGO_TARGET_DIR:-target}/release")
fi
bash scripts/build-images.sh >/dev/null
IMAGE=bosun.local/busybox:1.35
source scripts/bench-lib.sh

WORK=$(mktemp -d)
NODE="idle-$$"
CONTROL_PID=""
AGENT_PID=""
cleanup() {
  stop "$AGENT_PID"; AGENT_PID=""
  stop "$CONTROL_PID"; CONTROL_PID=""
  ids=$(docker ps -aq --filter "label=io.bosun.node=$NODE")
  [ -n "$ids" ] && docker rm -f -v $ids >/dev/null 2>&1 || true
  for _ in 1 2 3 4 5; do
    docker network inspect "bosun-$NODE" >/dev/null 2>&1 || break
    docker network rm "bosun-$NODE" >/dev/null 2>&1 && break
    sleep 1
  done
  # The pods' tmpfs volumes (projected tokens) under the agent's data dir:
  # a stopped agent leaves them mounted.
  awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount "$m" || true; done
}
trap 'cleanup; remove_forward_chain_if_new; rm -rf "$WORK"' EXIT

ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
# Requests served so far, watches left out, as "VERB resource count" lines.
requests() {
  kubectl --kubeconfig "$KC" get --raw /metrics |
    awk '/^apiserver_request_total\{/ && !/verb="WATCH"/ {
      verb = $0; sub(/.*verb="/, "", verb); sub(/".*/, "", verb)
      res = $0; sub(/.*[{,]resource="/, "", res); sub(/".*/, "", res)
      sr = ""
      if ($0 ~ /subresource="/) { sr = $0; sub(/.*subresource="/, "", sr); sub(/".*/, "", sr) }
      if (sr != "") res = res "/" sr
      n[verb " " res] += $NF
    } END { for (k in n) print k, n[k] }' | sort
}

pods_yaml() {
  cat <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: idle-config}
data: {greeting: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: idle-secret}
stringData: {token: s3cret}
EOF
  for i in $(seq "$PODS"); do
    cat <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: idle-$i, labels: {bench: idle}}
spec:
  nodeName: $NODE
  terminationGracePeriodSeconds: 0
  containers:
  - name: app
    image: $IMAGE
    command: [sleep, "3600"]
    env:
    - name: TOKEN
      valueFrom: {secretKeyRef: {name: idle-secret, key: token}}
    volumeMounts: [{name: config, mountPath: /etc/config}]
  volumes:
  - name: config
    configMap: {name: idle-config}
EOF
  done
}

measure() {
  BIN=$1
  start_control
  "$BIN/bosun-agent" --kubeconfig "$KC" --node-name "$NODE" --node-ip 127.0.0.1 \
    --pod-cidr "${POD_CIDR:-10.244.249.0/24}" --data-dir "$WORK/agent" 2>"$WORK/agent.log" &
  AGENT_PID=$!
  for _ in $(seq 300); do kubectl --kubeconfig "$KC" get node "$NODE" >/dev/null 2>&1 && break; sleep 0.1; done
  pods_yaml | kubectl --kubeconfig "$KC" create -f - >/dev/null
  kubectl --kubeconfig "$KC" wait --for=condition=Ready pod -l bench=idle --timeout=300s >/dev/null
  # Let the start-up's writes settle before measuring.
  sleep 10
  local t0 t1
  requests >"$WORK/req0"
  t0=$(ticks "$AGENT_PID")
  sleep "$SECONDS_IDLE"
  t1=$(ticks "$AGENT_PID")
  requests >"$WORK/req1"
  local hz; hz=$(getconf CLK_TCK)
  local cpu; cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$SECONDS_IDLE" 'BEGIN { printf "%.1f", 100 * (b - a) / hz / s }')
  local rss; rss=$(( $(rss_kb "$AGENT_PID") / 1024 ))
  # What the RSS is: the heap and stacks (anonymous) or the binary's pages
  # (file), and how many threads hold a stack and a malloc arena.
  local split; split=$(awk '/^(RssAnon|RssFile|Threads):/ { printf "%s %s ", $1, ($1 == "Threads:" ? $2 : int($2 / 1024) " MiB") }' "/proc/$AGENT_PID/status")
  echo
  echo "== $BIN: $PODS pods, idle for ${SECONDS_IDLE}s"
  echo "agent CPU: ${cpu}% of one core; agent RSS: ${rss} MiB ($split)"
  if [ -n "${HEAP_STATS:-}" ]; then
    # glibc's own account of the heap (malloc_stats, printed on the
    # agent's stderr): per arena, what it holds from the system and what
    # of it is in use; the rest is freed memory kept for later.
    local from; from=$(( $(wc -l <"$WORK/agent.log") + 1 ))
    gdb -p "$AGENT_PID" -batch -ex 'call (void) malloc_stats()' >/dev/null 2>&1 || true
    sleep 0.5
    tail -n +"$from" "$WORK/agent.log" | awk '
      /^Arena/ { arenas++ }
      /^Total \(incl. mmap\):/ { total = 1; next }
      total && /system bytes/ { printf "malloc: %d arenas; %.1f MiB from the system, ", arenas, $NF / 1048576 }
      total && /in use bytes/ { printf "%.1f MiB in use\n", $NF / 1048576; total = 0 }'
  fi
  echo "API requests per minute (watches left out), by verb and resource:"
  awk -v s="$SECONDS_IDLE" 'NR == FNR { before[$1 " " $2] = $3; next }
    { d = $3 - before[$1 " " $2]; if (d > 0) { printf "  %-8s %-32s %8.1f\n", $1, $2, d * 60 / s; total += d } }
    END { printf "  %-41s %8.1f\n", "total", total * 60 / s }' "$WORK/req0" "$WORK/req1"
  cleanup
  rm -rf "$WORK/control" "$WORK/agent"
}

echo "$(nproc) cores, Docker $(docker version -f '{{.Server.Version}}'), $(date -u +%FT%TZ)"
for b in "${BINS[@]}"; do measure "$b"; done
