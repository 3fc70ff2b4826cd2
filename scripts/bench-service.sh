#!/usr/bin/env bash
# Benchmark (not a test): connections through a Service's cluster IP, by
# the agent's nftables DNAT and by its iptables mode's, beside connections
# straight to the pod's IP, in the same run.
#
#   scripts/bench-service.sh [REQUESTS] [CONCURRENCY] [ROUNDS]
#                            (default 5000 requests, 8 at a time, 5 rounds)
#
# One `bosun.local/web:1` pod (busybox httpd) behind a ClusterIP service,
# on a control plane and agent of their own (`--proxy-mode nftables`); a
# second control plane and agent (`--proxy-mode iptables`) have the same
# pod and service. TARGETS (default "pod-ip vip-nftables vip-iptables")
# picks the columns.
# From this host, ApacheBench (`ab`, no keep-alive: every request is a new
# TCP connection) loads the pod's IP and the two cluster IPs in turn,
# ROUNDS times each (after a warm-up run of each, not counted); the
# table shows each run's connection rate and latency (mean, p50, p99) and
# each cluster IP's figures against the pod IP's. All traffic stays on this
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
NODE2="bench-svc-ipt-$$"
CIDR=10.244.202.0/24
CIDR2=10.244.203.0/24
CONTROL_PID="" AGENT_PID="" CONTROL2_PID="" AGENT2_PID=""
. scripts/bench-lib.sh
cleanup() {
  # SIGTERM: each agent removes its rules.
  stop "$AGENT_PID"; stop "$CONTROL_PID"; stop "$AGENT2_PID"; stop "$CONTROL2_PID"
  for n in "$NODE" "$NODE2"; do
    docker ps -aq --filter "label=io.bosun.node=$n" | xargs -r docker rm -f -v >/dev/null
    docker network rm "bosun-$n" >/dev/null 2>&1 || true
    nft delete table ip "bosun-$n" 2>/dev/null || true
  done
  remove_forward_chain_if_new
  # The pod's token volume is a tmpfs under the agent's data dir.
  awk -v w="$WORK" 'index($2, w) == 1 {print $2}' /proc/mounts | xargs -r umount
  rm -rf "$WORK"
}
trap cleanup EXIT

start_control
BOSUN_LOG=warn "$BIN/bosun-agent" --kubeconfig "$KC" --node-name "$NODE" \
  --node-ip 127.0.0.1 --pod-cidr "$CIDR" --data-dir "$WORK/agent" --port 0 \
  --proxy-mode nftables 2>>"$WORK/agent.log" &
AGENT_PID=$!
# The iptables mode's cluster: its control plane's data under $WORK/c2.
KC1=$KC CONTROL1_PID=$CONTROL_PID WORK1=$WORK
WORK=$WORK/c2
mkdir -p "$WORK"
start_control
CONTROL2_PID=$CONTROL_PID KC2=$KC
CONTROL_PID=$CONTROL1_PID KC=$KC1 WORK=$WORK1
BOSUN_LOG=warn "$BIN/bosun-agent" --kubeconfig "$KC2" --node-name "$NODE2" \
  --node-ip 127.0.0.1 --pod-cidr "$CIDR2" --data-dir "$WORK/agent2" --port 0 \
  --proxy-mode iptables 2>>"$WORK/agent2.log" &
AGENT2_PID=$!
k() { kubectl --kubeconfig "$KC" "$@"; }

for _ in $(seq 300); do k get node "$NODE" >/dev/null 2>&1 && break; sleep 0.2; done
WEB=$(cat <<'EOF'
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
)
k apply -f - >/dev/null <<<"$WEB"
k wait --for=condition=Ready pod/web --timeout=120s >/dev/null
POD_IP=$(k get pod web -o jsonpath='{.status.podIP}')
VIP=$(k get svc web -o jsonpath='{.spec.clusterIP}')
# The rules for the service are in before the first connection to it.
for _ in $(seq 100); do
  nft list table ip "bosun-$NODE" 2>/dev/null | grep "ep-default/web/http/tcp/$POD_IP/80" >/dev/null && break
  sleep 0.1
done
nft list table ip "bosun-$NODE" | grep "ep-default/web/http/tcp/$POD_IP/80" >/dev/null ||
  { echo "the agent never installed the rules for $VIP"; tail "$WORK/agent.log"; exit 1; }

# The iptables mode's pod and service: a pod of its own, like the first.
# (Its service pointing at the first pod, as an earlier version had it,
# made the two cluster IPs' connections meet in that pod: both come from
# this host's address, each cluster IP with its own TCP timestamp offset,
# so a port reused within the pod's TIME_WAIT was refused by PAWS and the
# SYN retried after 1 s, worse each round.)
k2() { kubectl --kubeconfig "$KC2" "$@"; }
for _ in $(seq 300); do k2 get node "$NODE2" >/dev/null 2>&1 && break; sleep 0.2; done
k2 apply -f - >/dev/null <<<"$WEB"
k2 wait --for=condition=Ready pod/web --timeout=120s >/dev/null
POD2_IP=$(k2 get pod web -o jsonpath='{.status.podIP}')
VIP2=$(k2 get svc web -o jsonpath='{.spec.clusterIP}')
ipt_ready() { iptables-save -t nat 2>/dev/null | grep -- "--to-destination $POD2_IP:80" >/dev/null; }
for _ in $(seq 100); do ipt_ready && break; sleep 0.1; done
ipt_ready || { echo "the iptables agent never installed the rules for $VIP2"; tail "$WORK/agent2.log"; exit 1; }

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
run_ab "$VIP2" >/dev/null
echo "pod IP $POD_IP, cluster IPs $VIP (nftables, to that pod) and $VIP2 (iptables, to its twin $POD2_IP); $REQUESTS requests, $CONCURRENCY at a time, new connection each"
printf '%-13s %-6s %10s %9s %8s %8s %7s\n' target round "conn/s" "mean ms" "p50 ms" "p99 ms" failed
: >"$WORK/results"
for round in $(seq "$ROUNDS"); do
  for target in ${TARGETS:-pod-ip vip-nftables vip-iptables}; do
    case $target in pod-ip) addr=$POD_IP ;; vip-nftables) addr=$VIP ;; *) addr=$VIP2 ;; esac
    read -r rps mean p50 p99 failed < <(run_ab "$addr")
    printf '%-13s %-6s %10s %9s %8s %8s %7s\n' "$target" "$round" "$rps" "$mean" "$p50" "$p99" "$failed"
    echo "$target $rps $mean $p50 $p99" >>"$WORK/results"
  done
done
awk '
  {n[$1]++; rps[$1]+=$2; mean[$1]+=$3; p99[$1]+=$5}
  END {
    printf "\naverage       %10s %9s %8s\n", "conn/s", "mean ms", "p99 ms"
    for (t in n) printf "%-13s %10.0f %9.3f %8.1f\n", t, rps[t]/n[t], mean[t]/n[t], p99[t]/n[t]
    for (t in n) if (t != "pod-ip")
      printf "%s vs pod IP: connection rate %+.1f%%, mean latency %+.1f%%\n", t,
        (rps[t]/n[t]) / (rps["pod-ip"]/n["pod-ip"]) * 100 - 100,
        (mean[t]/n[t]) / (mean["pod-ip"]/n["pod-ip"]) * 100 - 100
  }' "$WORK/results"
