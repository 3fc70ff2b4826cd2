#!/usr/bin/env bash
# Benchmark (not a test): connections through a Service's cluster IP (the
# agent's nftables DNAT) beside connections straight to the pod's IP, in
# the same run, against the same pod.
#
#   scripts/bench-service.sh [REQUESTS] [CONCURRENCY] [ROUNDS]
#                            (default 5000 requests, 8 at a time, 5 rounds)
#
# One `bosun.local/web:1` pod (busybox httpd) behind a ClusterIP service,
# on a control plane and agent of their own. From this host, ApacheBench
# (`ab`, no keep-alive: every request is a new TCP connection) loads the
# pod's IP and the service's cluster IP in turn, ROUNDS times each (after
# a warm-up run of each, not counted); the
# table shows each run's connection rate and latency (mean, p50, p99) and
# the cluster IP's figures against the pod IP's. All traffic stays on this
# machine; nothing is sent to the cluster IP before the agent's rules for
# it are installed. The data path is the kernel's, so debug builds serve.
# Cleans up every process, container, network, table and file it makes,
# also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-5000}"
CONCURRENCY="${2:-8}"
ROUNDS="${3:-5}"

need=()
command -v ab >/dev/null || need+=(apache2-utils)
command -v nft >/dev/null || need+=(nftables)
command -v kubectl >/dev/null || need+=(kubectl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash scripts/build-images.sh >/dev/null
cargo build --quiet -p bosun-control -p bosun-agent
BIN=target/debug

WORK=$(mktemp -d)
chmod 755 "$WORK"
NODE="bench-svc-$$"
CIDR=10.244.202.0/24
CONTROL_PID="" AGENT_PID=""
. scripts/bench-lib.sh
cleanup() {
  stop "$AGENT_PID"; stop "$CONTROL_PID"
  docker ps -aq --filter "label=io.bosun.node=$NODE" | xargs -r docker rm -f -v >/dev/null
  docker network rm "bosun-$NODE" >/dev/null 2>&1 || true
  nft delete table ip "bosun-$NODE" 2>/dev/null || true
  # The pod's token volume is a tmpfs under the agent's data dir.
  awk -v w="$WORK" 'index($2, w) == 1 {print $2}' /proc/mounts | xargs -r umount
  rm -rf "$WORK"
}
trap cleanup EXIT

start_control
BOSUN_LOG=warn "$BIN/bosun-agent" --kubeconfig "$KC" --node-name "$NODE" \
  --node-ip 127.0.0.1 --pod-cidr "$CIDR" --data-dir "$WORK/agent" --port 0 \
  2>>"$WORK/agent.log" &
AGENT_PID=$!
k() { kubectl --kubeconfig "$KC" "$@"; }

for _ in $(seq 300); do k get node "$NODE" >/dev/null 2>&1 && break; sleep 0.2; done
k apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: bosun.local/web:1
    ports: [{name: http, containerPort: 80}]
    readinessProbe: {httpGet: {path: /, port: http}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
EOF
k wait --for=condition=Ready pod/web --timeout=120s >/dev/null
POD_IP=$(k get pod web -o jsonpath='{.status.podIP}')
VIP=$(k get svc web -o jsonpath='{.spec.clusterIP}')
# The rules for the service are in before the first connection to it.
for _ in $(seq 100); do
  nft list table ip "bosun-$NODE" 2>/dev/null | grep -q "ep-default/web/http/tcp/$POD_IP/80" && break
  sleep 0.1
done
nft list table ip "bosun-$NODE" | grep -q "ep-default/web/http/tcp/$POD_IP/80" ||
  { echo "the agent never installed the rules for $VIP"; tail "$WORK/agent.log"; exit 1; }

# ab's figures: requests/s, mean ms, p50 ms, p99 ms, failed.
run_ab() {
  ab -q -n "$REQUESTS" -c "$CONCURRENCY" "http://$1/" 2>&1 | awk '
    /^Requests per second:/ {rps=$4}
    /^Time per request:/ && /\(mean\)/ {mean=$4}
    /^Failed requests:/ {failed=$3}
    /^  50%/ {p50=$2}
    /^  99%/ {p99=$2}
    END {printf "%s %s %s %s %s\n", rps, mean, p50, p99, failed}'
}

run_ab "$POD_IP" >/dev/null
run_ab "$VIP" >/dev/null
echo "pod IP $POD_IP, cluster IP $VIP; $REQUESTS requests, $CONCURRENCY at a time, new connection each"
printf '%-11s %-6s %10s %9s %8s %8s %7s\n' target round "conn/s" "mean ms" "p50 ms" "p99 ms" failed
: >"$WORK/results"
for round in $(seq "$ROUNDS"); do
  for target in pod-ip cluster-ip; do
    if [ "$target" = pod-ip ]; then addr=$POD_IP; else addr=$VIP; fi
    read -r rps mean p50 p99 failed < <(run_ab "$addr")
    printf '%-11s %-6s %10s %9s %8s %8s %7s\n' "$target" "$round" "$rps" "$mean" "$p50" "$p99" "$failed"
    echo "$target $rps $mean $p50 $p99" >>"$WORK/results"
  done
done
awk '
  {n[$1]++; rps[$1]+=$2; mean[$1]+=$3; p99[$1]+=$5}
  END {
    printf "\naverage     %10s %9s %8s\n", "conn/s", "mean ms", "p99 ms"
    for (t in n) printf "%-11s %10.0f %9.3f %8.1f\n", t, rps[t]/n[t], mean[t]/n[t], p99[t]/n[t]
    printf "cluster IP vs pod IP: connection rate %+.1f%%, mean latency %+.1f%%\n",
      (rps["cluster-ip"]/n["cluster-ip"]) / (rps["pod-ip"]/n["pod-ip"]) * 100 - 100,
      (mean["cluster-ip"]/n["cluster-ip"]) / (mean["pod-ip"]/n["pod-ip"]) * 100 - 100
  }' "$WORK/results"
