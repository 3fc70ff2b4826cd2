#!/usr/bin/env bash
# Benchmark (not a test): the agent's node-local cluster DNS beside
# dnsmasq serving the same names, in the same run, with dnsperf on this
# machine; and the agent's memory with and without its DNS server.
#
#   scripts/bench-dns.sh [SECONDS]     (default 10 s of load per server)
#
# Names: 1000 ClusterIP services (<svc>.default.svc.cluster.local) and
# 100 headless services whose hand-written EndpointSlices hold 50 endpoints
# each with hostnames (5000 pod records, <host>.<svc>.default.svc...).
# Queries are drawn half from each. The node DNS listens on the node
# bridge's gateway (an address of this host), dnsmasq on 127.0.0.1; all
# traffic stays on this machine. Uses release builds and cleans up every
# process, network and file it makes, also on failure.
#
# For each server: throughput at saturation (dnsperf, 4 sockets, 200
# queries in flight: queries/s and average latency), then latency at a
# fixed 20k queries/s (dnsperf -Q with -v, every answer's latency: p50,
# p99). And memory: the agent's RSS without its DNS server and with it,
# before and after the names are applied (one by one, while it runs),
# and with it started on the full cluster (names from the first list);
# what DNS with these names costs is the RSS with DNS and the names minus
# the RSS without DNS with the same objects in the cluster, each read
# after the agent has settled. Beside it, dnsmasq's RSS holding the same
# names.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_OF_LOAD="${1:-10}"
SERVICES=1000
HEADLESS=100
PER_SLICE=50

need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v dnsmasq >/dev/null || need+=(dnsmasq-base)
command -v dig >/dev/null || need+=(dnsutils)
command -v kubectl >/dev/null || need+=(kubectl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
cargo build --release --quiet -p bosun-control -p bosun-agent
BIN=target/release

WORK=$(mktemp -d)
chmod 755 "$WORK"
NODE="bench-dns-$$"
CIDR=10.244.201.0/24
GW=10.244.201.1
CONTROL_PID="" AGENT_PID="" DNSMASQ_PID=""
. scripts/bench-lib.sh
cleanup() {
  stop "$DNSMASQ_PID"; stop "$AGENT_PID"; stop "$CONTROL_PID"
  docker network rm "bosun-$NODE" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

start_control

start_agent() {
  BOSUN_LOG=warn "$BIN/bosun-agent" --kubeconfig "$KC" --node-name "$NODE" \
    --node-ip 127.0.0.1 --pod-cidr "$CIDR" --data-dir "$WORK/agent" --port 0 \
    --dns-upstream 127.0.0.1:9 "$@" 2>>"$WORK/agent.log" &
  AGENT_PID=$!
}
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/${1:-$AGENT_PID}/status"; }
# Waits until the agent's DNS serves (the apex answers), or the agent
# without DNS is up; then lets it settle.
settle() {
  for _ in $(seq 200); do
    if [ "${1:-}" = --no-dns ]; then
      grep -q VmRSS "/proc/$AGENT_PID/status" 2>/dev/null && break
    else
      dig +time=1 +tries=1 @"$GW" cluster.local SOA 2>/dev/null | grep -q 'status: NOERROR' && break
    fi
    sleep 0.2
  done
  sleep 5
}
wait_for_names() {
  for _ in $(seq 200); do
    dig +short +time=1 +tries=1 @"$GW" "$last" 2>/dev/null | grep -q . && break
    sleep 0.2
  done
}
last="p$((PER_SLICE - 1)).hl-$((HEADLESS - 1)).default.svc.cluster.local"

python3 - "$SERVICES" "$HEADLESS" "$PER_SLICE" "$WORK" <<'PY'
import sys, random
services, headless, per, work = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
docs, hosts, names = [], [], []
for i in range(services):
    docs.append(f"apiVersion: v1\nkind: Service\nmetadata: {{name: svc-{i}}}\n"
                f"spec: {{selector: {{app: a{i}}}, ports: [{{name: http, port: 80}}]}}")
for h in range(headless):
    docs.append(f"apiVersion: v1\nkind: Service\nmetadata: {{name: hl-{h}}}\n"
                f"spec: {{clusterIP: None, ports: [{{name: http, port: 80}}]}}")
    eps = []
    for e in range(per):
        ip = f"10.245.{h}.{e + 2}"
        eps.append(f"{{addresses: [\"{ip}\"], hostname: p{e}, conditions: {{ready: true}}}}")
        hosts.append(f"{ip} p{e}.hl-{h}.default.svc.cluster.local")
        names.append(f"p{e}.hl-{h}.default.svc.cluster.local")
    docs.append(f"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                f"metadata: {{name: hl-{h}-1, labels: {{kubernetes.io/service-name: hl-{h}}}}}\n"
                f"addressType: IPv4\nports: [{{name: http, port: 80, protocol: TCP}}]\n"
                f"endpoints: [{', '.join(eps)}]")
open(f"{work}/objects.yaml", "w").write("\n---\n".join(docs) + "\n")
open(f"{work}/pod-hosts", "w").write("\n".join(hosts) + "\n")
open(f"{work}/pod-names", "w").write("\n".join(names) + "\n")
PY
start_agent --no-dns
settle --no-dns
RSS_NODNS_EMPTY=$(rss_kib)
stop "$AGENT_PID"

# DNS up with an empty zone (the apex answers once it serves).
start_agent
settle
RSS_DNS_EMPTY=$(rss_kib)

kubectl --kubeconfig "$KC" apply -f "$WORK/objects.yaml" >/dev/null
kubectl --kubeconfig "$KC" get svc -o jsonpath='{range .items[*]}{.spec.clusterIP} {.metadata.name}.default.svc.cluster.local{"\n"}{end}' \
  | grep -v '^None ' | grep -v '^ ' >"$WORK/hosts"
cat "$WORK/pod-hosts" >>"$WORK/hosts"
chmod 644 "$WORK/hosts"
python3 - "$WORK" "$SERVICES" <<'PY'
import sys, random
work, services = sys.argv[1], int(sys.argv[2])
pods = open(f"{work}/pod-names").read().split()
with open(f"{work}/queries", "w") as q:
    for i in range(40000):
        name = f"svc-{random.randrange(services)}.default.svc.cluster.local" if i % 2 else random.choice(pods)
        q.write(f"{name} A\n")
PY
echo "names: $(wc -l <"$WORK/hosts") ($SERVICES services, $((HEADLESS * PER_SLICE)) pod records)"
wait_for_names
sleep 5
RSS_DNS_APPLIED=$(rss_kib)
stop "$AGENT_PID"

# The same cluster, the agent started on it: without DNS, then with DNS
# (the names come from the first list).
start_agent --no-dns
settle --no-dns
RSS_NODNS_FULL=$(rss_kib)
stop "$AGENT_PID"
start_agent
settle
wait_for_names
sleep 5
RSS_DNS_LISTED=$(rss_kib)
kib_mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }
echo "--- memory (RSS, KiB)"
echo "bosun-agent without DNS: $RSS_NODNS_EMPTY (empty cluster), $RSS_NODNS_FULL (the objects in the cluster)"
echo "bosun-agent with DNS, no names: $RSS_DNS_EMPTY"
echo "bosun-agent with DNS, names applied one by one while it ran: $RSS_DNS_APPLIED"
echo "bosun-agent with DNS, started on the full cluster: $RSS_DNS_LISTED"
echo "DNS with these names adds: $(kib_mib $((RSS_DNS_APPLIED - RSS_NODNS_FULL))) (applied while running)," \
  "$(kib_mib $((RSS_DNS_LISTED - RSS_NODNS_FULL))) (started on them)"

load() {
  dnsperf -s "$1" -p "$2" -d "$WORK/queries" -l "$SECONDS_OF_LOAD" -c 4 -q 200 2>&1 \
    | grep -E "Queries sent|Queries completed|Queries lost|Response codes|Queries per second|Average Latency|Latency StdDev"
  dnsperf -s "$1" -p "$2" -d "$WORK/queries" -l 5 -c 4 -q 200 -Q 20000 -v 2>/dev/null \
    | awk '/^> / {print $NF}' | sort -n \
    | awk '{l[NR] = $1} END {
        if (NR == 0) { print "  Latency at 20k qps: no answers"; exit }
        printf "  Latency at 20k qps (%d answers): p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
          NR, l[int(NR * 0.50) + 1] * 1000, l[int(NR * 0.99) + 1] * 1000, l[NR] * 1000 }'
}
echo "--- node DNS (bosun-agent on $GW)"
load "$GW" 53
echo "bosun-agent RSS after the load: $(rss_kib) KiB"

dnsmasq --keep-in-foreground --port 5354 --listen-address 127.0.0.1 --bind-interfaces \
  --no-resolv --no-hosts --addn-hosts="$WORK/hosts" --local=/cluster.local/ \
  --cache-size=10000 --pid-file="$WORK/dnsmasq.pid" 2>"$WORK/dnsmasq.log" &
DNSMASQ_PID=$!
for _ in $(seq 100); do
  dig +short +time=1 +tries=1 -p 5354 @127.0.0.1 "$last" 2>/dev/null | grep -q . && break
  sleep 0.1
done
echo "--- dnsmasq $(dnsmasq --version | head -1 | awk '{print $3}') (127.0.0.1, same names)"
echo "dnsmasq RSS with the names: $(rss_kib "$DNSMASQ_PID") KiB"
load 127.0.0.1 5354
echo "dnsmasq RSS after the load: $(rss_kib "$DNSMASQ_PID") KiB"
