#!/usr/bin/env bash
# Benchmark (not a test): new connections per second from one pod to
# another through the agent's network-policy table (`ip bosun-np-<node>`),
# with 100 NetworkPolicies selecting the server against none, in the same
# run.
#
#   scripts/bench-netpol.sh [REQUESTS] [CONCURRENCY] [ROUNDS]
#                           (default 5000 requests, 8 at a time, 5 rounds)
#
# One `bosun.local/web:1` pod (busybox httpd) and one client pod on a
# control plane and agent of their own. ApacheBench (`ab`, no keep-alive:
# every request is a new TCP connection) runs in the client pod's network
# namespace (nsenter), so its connections are forwarded over the node's
# bridge and pass the `forward` hook as pod traffic does (from the host
# they would not: the host's own traffic to its pods is never filtered).
# Each round measures twice: with no policy (the pod is in no map, one
# lookup), and with 100 policies selecting the server, 99 allowing port 80
# from ranges the client is not in and one from the node's pod range:
# every new connection walks the server's ~100 rules before the one that
# lets it in (replies are `ct state established`). Between the two the
# policies are applied or deleted with kubectl and the run waits for the
# table to show it. The data path is the kernel's, so debug builds serve.
# Cleans up every process, container, network, table and file it makes,
# also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-5000}"
CONCURRENCY="${2:-8}"
ROUNDS="${3:-5}"
POLICIES=100

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
NODE="bench-np-$$"
CIDR=${POD_CIDR:-10.244.204.0/24}
CONTROL_PID="" AGENT_PID=""
. scripts/bench-lib.sh
cleanup() {
  stop "$AGENT_PID"; stop "$CONTROL_PID"
  docker ps -aq --filter "label=io.bosun.node=$NODE" | xargs -r docker rm -f -v >/dev/null
  docker network rm "bosun-$NODE" >/dev/null 2>&1 || true
  nft delete table ip "bosun-$NODE" 2>/dev/null || true
  nft delete table ip "bosun-np-$NODE" 2>/dev/null || true
  remove_forward_chain_if_new
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
kind: Pod
metadata: {name: client, labels: {app: client}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: bosun.local/busybox:1.35
    command: [sleep, "3600"]
EOF
k wait --for=condition=Ready pod/web pod/client --timeout=120s >/dev/null
POD_IP=$(k get pod web -o jsonpath='{.status.podIP}')
CLIENT_ID=$(docker ps -q --filter "label=io.bosun.node=$NODE" \
  --filter label=io.bosun.pod.name=client --filter label=io.bosun.container=main)
CLIENT_PID=$(docker inspect -f '{{.State.Pid}}' "$CLIENT_ID")

# The policies: 99 letting in ranges the client is not in, one its own.
{
  for i in $(seq $((POLICIES - 1))); do
    cat <<EOF
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bench-$i}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{from: [{ipBlock: {cidr: 10.99.$i.0/24}}], ports: [{port: 80}]}]
EOF
  done
  cat <<EOF
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bench-$POLICIES}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{from: [{ipBlock: {cidr: $CIDR}}], ports: [{port: 80}]}]
EOF
} >"$WORK/policies.yaml"

# The number of rules in the server's chain (0: not isolated).
web_rules() {
  nft list chain ip "bosun-np-$NODE" ing-default/web 2>/dev/null | grep -c "return\|drop" || true
}
wait_rules() {
  for _ in $(seq 300); do [ "$(web_rules)" = "$1" ] && return 0; sleep 0.1; done
  echo "the agent's table never had $1 rules for web (has $(web_rules))"; tail "$WORK/agent.log"; exit 1
}
set_policies() {
  if [ "$1" = 0 ]; then
    k delete networkpolicy --all >/dev/null
    wait_rules 0
  else
    k apply -f "$WORK/policies.yaml" >/dev/null
    wait_rules $((POLICIES + 1))
  fi
}

# ab's figures from the client pod's network: requests/s, mean ms, p50 ms, p99 ms, failed.
run_ab() {
  nsenter -t "$CLIENT_PID" -n ab -q -n "$REQUESTS" -c "$CONCURRENCY" "http://$POD_IP/" 2>&1 | awk '
    /^Requests per second:/ {rps=$4}
    /^Time per request:/ && /\(mean\)/ {mean=$4}
    /^Failed requests:/ {failed=$3}
    /^  50%/ {p50=$2}
    /^  99%/ {p99=$2}
    END {printf "%s %s %s %s %s\n", rps, mean, p50, p99, failed}'
}

set_policies 0
run_ab >/dev/null
echo "client pod -> web pod $POD_IP:80 on node $NODE; $REQUESTS requests, $CONCURRENCY at a time, new connection each"
printf '%-12s %-6s %10s %9s %8s %8s %7s\n' policies round "conn/s" "mean ms" "p50 ms" "p99 ms" failed
: >"$WORK/results"
for round in $(seq "$ROUNDS"); do
  for n in 0 "$POLICIES"; do
    set_policies "$n"
    read -r rps mean p50 p99 failed < <(run_ab)
    printf '%-12s %-6s %10s %9s %8s %8s %7s\n' "$n" "$round" "$rps" "$mean" "$p50" "$p99" "$failed"
    echo "$n $rps $mean $p50 $p99" >>"$WORK/results"
  done
done
awk -v many="$POLICIES" '
  {n[$1]++; rps[$1]+=$2; mean[$1]+=$3; p99[$1]+=$5}
  END {
    printf "\naverage      %10s %9s %8s\n", "conn/s", "mean ms", "p99 ms"
    for (t in n) printf "%-12s %10.0f %9.3f %8.1f\n", t " policies", rps[t]/n[t], mean[t]/n[t], p99[t]/n[t]
    printf "%d policies vs none: connection rate %+.1f%%, mean latency %+.1f%%\n", many,
      (rps[many]/n[many]) / (rps[0]/n[0]) * 100 - 100,
      (mean[many]/n[many]) / (mean[0]/n[0]) * 100 - 100
  }' "$WORK/results"
