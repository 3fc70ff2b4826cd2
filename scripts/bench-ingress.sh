#!/usr/bin/env bash
# Benchmark (not a test): requests through the agent's built-in ingress
# controller beside requests straight to the pod's IP, in the same run.
#
#   scripts/bench-ingress.sh [REQUESTS] [CONCURRENCY] [ROUNDS]
#                            (default 5000 requests, 8 at a time, 3 rounds)
#
# One `bosun.local/web:1` pod (busybox httpd) behind a Service and an
# Ingress for host bench.test, on a control plane and agent of their own;
# the ingress listens on free ports of this host (never 80/443). From this
# host, ApacheBench loads the pod's IP and the ingress (Host: bench.test)
# in turn, ROUNDS times each after a warm-up, once with keep-alive (`-k`,
# what browsers and load balancers do; the ingress keeps its own
# connections to the pod) and once with a new connection per request.
# The ingress is userspace code: PROFILE=release (default debug) builds
# the agent optimized, which the figures depend on.
# Cleans up every process, container, network, table and file it makes,
# also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-5000}"
CONCURRENCY="${2:-8}"
ROUNDS="${3:-3}"
PROFILE="${PROFILE:-debug}"

need=()
command -v ab >/dev/null || need+=(apache2-utils)
command -v kubectl >/dev/null || need+=(kubectl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
bash scripts/build-images.sh >/dev/null
if [ "$PROFILE" = release ]; then
  cargo build --quiet --release -p bosun-control -p bosun-agent
  BIN=target/release
else
  cargo build --quiet -p bosun-control -p bosun-agent
  BIN=target/debug
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("0.0.0.0", 0)); print(s.getsockname()[1])'; }
HTTP_PORT=$(free_port)
WORK=$(mktemp -d)
chmod 755 "$WORK"
NODE="bench-ing-$$"
CIDR=10.244.204.0/24
CONTROL_PID="" AGENT_PID=""
. scripts/bench-lib.sh
cleanup() {
  stop "$AGENT_PID"; stop "$CONTROL_PID"
  docker ps -aq --filter "label=io.bosun.node=$NODE" | xargs -r docker rm -f -v >/dev/null
  docker network rm "bosun-$NODE" >/dev/null 2>&1 || true
  nft delete table ip "bosun-$NODE" 2>/dev/null || true
  remove_forward_chain_if_new
  awk -v w="$WORK" 'index($2, w) == 1 {print $2}' /proc/mounts | xargs -r umount
  rm -rf "$WORK"
}
trap cleanup EXIT

start_control
BOSUN_LOG=warn "$BIN/bosun-agent" --kubeconfig "$KC" --node-name "$NODE" \
  --node-ip 127.0.0.1 --pod-cidr "$CIDR" --data-dir "$WORK/agent" --port 0 \
  --ingress-http-port "$HTTP_PORT" --ingress-https-port 0 2>>"$WORK/agent.log" &
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
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - host: bench.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
EOF
k wait --for=condition=Ready pod/web --timeout=120s >/dev/null
POD_IP=$(k get pod web -o jsonpath='{.status.podIP}')
ING="127.0.0.1:$HTTP_PORT"
for _ in $(seq 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: bench.test' "http://$ING/")" = 200 ] && break
  sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: bench.test' "http://$ING/")" = 200 ] ||
  { echo "the ingress never routed bench.test"; tail "$WORK/agent.log"; exit 1; }

# ab's figures: requests/s, mean ms, p50 ms, p99 ms, failed.
run_ab() {
  # $1 address, $2 "-k" or "".
  ab -q $2 -n "$REQUESTS" -c "$CONCURRENCY" -H 'Host: bench.test' "http://$1/" 2>&1 | awk '
    /^Requests per second:/ {rps=$4}
    /^Time per request:/ && /\(mean\)/ {mean=$4}
    /^Failed requests:/ {failed=$3}
    /^  50%/ {p50=$2}
    /^  99%/ {p99=$2}
    END {printf "%s %s %s %s %s\n", rps, mean, p50, p99, failed}'
}

echo "pod IP $POD_IP, ingress $ING ($PROFILE build); $REQUESTS requests, $CONCURRENCY at a time"
printf '%-9s %-11s %-6s %10s %9s %8s %8s %7s\n' target connections round "req/s" "mean ms" "p50 ms" "p99 ms" failed
: >"$WORK/results"
for ka in -k ""; do
  conn=$([ -n "$ka" ] && echo keep-alive || echo new)
  run_ab "$POD_IP" "$ka" >/dev/null
  run_ab "$ING" "$ka" >/dev/null
  for round in $(seq "$ROUNDS"); do
    for target in pod-ip ingress; do
      addr=$([ "$target" = pod-ip ] && echo "$POD_IP" || echo "$ING")
      read -r rps mean p50 p99 failed < <(run_ab "$addr" "$ka")
      printf '%-9s %-11s %-6s %10s %9s %8s %8s %7s\n' "$target" "$conn" "$round" "$rps" "$mean" "$p50" "$p99" "$failed"
      echo "$target/$conn $rps $mean $p50 $p99" >>"$WORK/results"
    done
  done
done
awk '
  {n[$1]++; rps[$1]+=$2; mean[$1]+=$3; p99[$1]+=$5}
  END {
    printf "\naverage              %10s %9s %8s\n", "req/s", "mean ms", "p99 ms"
    for (t in n) printf "%-20s %10.0f %9.3f %8.1f\n", t, rps[t]/n[t], mean[t]/n[t], p99[t]/n[t]
    for (c in n) if (c ~ /^ingress/) {
      split(c, p, "/"); base = "pod-ip/" p[2]
      printf "ingress vs pod IP (%s): requests/s %+.1f%%, mean latency %+.1f%%\n", p[2],
        (rps[c]/n[c]) / (rps[base]/n[base]) * 100 - 100,
        (mean[c]/n[c]) / (mean[base]/n[base]) * 100 - 100
    }
  }' "$WORK/results"
