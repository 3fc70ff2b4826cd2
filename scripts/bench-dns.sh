#!/usr/bin/env bash
# Benchmark (not a test): the agent's node-local cluster DNS beside
# dnsmasq serving the same names, in the same run, with dnsperf on this
# machine; and the agent's memory with and without its DNS server.
#
#   scripts/bench-dns.sh [SECONDS] [ROUNDS]   (default 10 s of load, 5 rounds)
#
# Environment: MEMORY_ROUNDS=how many memory rounds (default ROUNDS; 0
# for the throughput alone); BIN=dir with bosun-control and bosun-agent (default: a
# release build made here); OLD_AGENT=another bosun-agent binary whose
# memory is measured in the same rounds (e.g. one built from main);
# PIN=0 to leave the CPUs unpinned.
#
# Names: 1000 ClusterIP services (<svc>.default.svc.cluster.local) and
# 100 headless services whose hand-written EndpointSlices hold 50 endpoints
# each with hostnames (5000 pod records, <host>.<svc>.default.svc...).
# Queries are drawn half from each. The node DNS listens on the node
# bridge's gateway (an address of this host), dnsmasq on 127.0.0.1; all
# traffic stays on this machine. Cleans up every process, network and
# file it makes, also on failure.
#
# Memory, ROUNDS rounds: the agent's RSS with DNS and the names created
# while it runs (one request per object, four at a time), started on the full cluster with DNS (names
# from the first list), and started on it without DNS; what DNS with these
# names costs is the RSS with DNS minus the RSS without DNS with the same
# objects in the cluster, each read after the agent has settled. Medians
# and the spread. Beside it, dnsmasq's RSS holding the same names.
#
# Throughput, ROUNDS rounds alternating which server goes first: each
# server at saturation (dnsperf, 4 sockets, 200 queries in flight:
# queries/s, average latency), then at a fixed 20k queries/s (dnsperf -Q
# with -v, every answer's latency: p50, p99). Both servers are pinned to
# CPU 0 and dnsperf to CPU 1 (other work on the machine then disturbs
# both servers alike). Medians and the spread (min-max) of every figure,
# and the ratio bosun/dnsmasq of each round.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_OF_LOAD="${1:-10}"
ROUNDS="${2:-5}"
MEMORY_ROUNDS="${MEMORY_ROUNDS:-$ROUNDS}"
SERVICES="${SERVICES:-1000}"
HEADLESS="${HEADLESS:-100}"
PER_SLICE="${PER_SLICE:-50}"
PIN="${PIN:-1}"
[ "$(nproc)" -ge 2 ] || PIN=0

need=()
command -v dnsperf >/dev/null || need+=(dnsperf)
command -v dnsmasq >/dev/null || need+=(dnsmasq-base)
command -v dig >/dev/null || need+=(dnsutils)
command -v kubectl >/dev/null || need+=(kubectl)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet -p bosun-control -p bosun-agent
  BIN=target/release
fi

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
  remove_forward_chain_if_new
  rm -rf "$WORK"
}
trap cleanup EXIT
echo "load before: $(uptime)"

start_control

start_agent() {
  BOSUN_LOG=warn "${AGENT:-$BIN/bosun-agent}" --kubeconfig "$KC" --node-name "$NODE" \
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
last="p$((PER_SLICE - 1)).hl-$((HEADLESS - 1)).default.svc.cluster.local"
# Waits until the last name answers (want: an address) or is gone (want: none).
wait_for_names() {
  for _ in $(seq 300); do
    got=$(dig +short +time=1 +tries=1 @"$GW" "$last" 2>/dev/null || true)
    if [ "${1:-}" = none ]; then [ -z "$got" ] && return; else [ -n "$got" ] && return; fi
    sleep 0.2
  done
  echo "the names did not follow the cluster (last: $last)" >&2
  exit 1
}

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
for p in range(4):
    open(f"{work}/part-{p}.yaml", "w").write("\n---\n".join(docs[p::4]) + "\n")
open(f"{work}/pod-hosts", "w").write("\n".join(hosts) + "\n")
open(f"{work}/pod-names", "w").write("\n".join(names) + "\n")
PY

# median and spread of the numbers on stdin: "median (min-max)".
stats() {
  sort -g | awk -v f="${1:-%.1f}" '{v[NR] = $1} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf f " (" f "-" f ")", m, v[1], v[NR] }'
}
kib_mib() { awk -v k="$1" 'BEGIN { printf "%.2f", k / 1024 }'; }

start_agent --no-dns
settle --no-dns
RSS_NODNS_EMPTY=$(rss_kib)
stop "$AGENT_PID"

# Makes the objects, one request each, four requests at a time (as
# controllers and parallel applies make them); or deletes them all and
# waits until they are gone.
create_objects() {
  local pids=()
  for part in "$WORK"/part-*; do
    kubectl --kubeconfig "$KC" create -f "$part" >/dev/null &
    pids+=($!)
  done
  wait "${pids[@]}" || true
}
delete_objects() {
  # (The services' own slices go with them, by garbage collection.)
  kubectl --kubeconfig "$KC" delete -f "$WORK/objects.yaml" --wait=false --ignore-not-found >/dev/null || true
  for _ in $(seq 600); do
    [ "$(kubectl --kubeconfig "$KC" get svc,endpointslices -o name | wc -l)" -le 2 ] && break
    sleep 0.5
  done
}
# One agent binary's memory: DNS with the names created while it runs,
# then (objects in the cluster) started without DNS and with it.
# Adds "dns_empty applied nodns_full listed" (KiB) to the file $2 and
# prints it; leaves the cluster empty.
memory_round() {
  local agent=$1 empty applied nodns listed
  AGENT="$agent" start_agent; settle; empty=$(rss_kib)
  create_objects; wait_for_names; sleep 5; applied=$(rss_kib)
  stop "$AGENT_PID"
  AGENT="$agent" start_agent --no-dns; settle --no-dns; nodns=$(rss_kib); stop "$AGENT_PID"
  AGENT="$agent" start_agent; settle; wait_for_names; sleep 5; listed=$(rss_kib); stop "$AGENT_PID"
  delete_objects
  echo "$empty $applied $nodns $listed" | tee -a "$2"
}
: >"$WORK/mem"; : >"$WORK/mem-old"
echo "memory rounds (RSS KiB: DNS no names, DNS names created while running, no DNS full cluster, DNS started on it):"
for round in $(seq "$MEMORY_ROUNDS"); do
  echo -n "round $round, $BIN/bosun-agent: "
  memory_round "$BIN/bosun-agent" "$WORK/mem"
  if [ -n "${OLD_AGENT:-}" ]; then
    echo -n "round $round, $OLD_AGENT: "
    memory_round "$OLD_AGENT" "$WORK/mem-old"
  fi
done
create_objects
AGENT="$BIN/bosun-agent" start_agent
settle
wait_for_names
# The agent started on the full cluster stays up for the load.

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

dnsmasq --keep-in-foreground --port 5354 --listen-address 127.0.0.1 --bind-interfaces \
  --no-resolv --no-hosts --addn-hosts="$WORK/hosts" --local=/cluster.local/ \
  --cache-size=10000 --pid-file="$WORK/dnsmasq.pid" 2>"$WORK/dnsmasq.log" &
DNSMASQ_PID=$!
for _ in $(seq 100); do
  dig +short +time=1 +tries=1 -p 5354 @127.0.0.1 "$last" 2>/dev/null | grep -q . && break
  sleep 0.1
done
RSS_DNSMASQ=$(rss_kib "$DNSMASQ_PID")

echo "--- memory (RSS), $MEMORY_ROUNDS rounds: median (min-max)"
if [ "$MEMORY_ROUNDS" -gt 0 ]; then
echo "bosun-agent without DNS, empty cluster: $(kib_mib "$RSS_NODNS_EMPTY") MiB"
echo "bosun-agent with DNS, no names: $(awk '{print $1 / 1024}' "$WORK/mem" | stats) MiB"
echo "bosun-agent without DNS, the objects in the cluster: $(awk '{print $3 / 1024}' "$WORK/mem" | stats) MiB"
added() {
  echo "$(awk '{print ($2 - $3) / 1024}' "$1" | stats '%.2f') MiB with the names created while it ran," \
    "$(awk '{print ($4 - $3) / 1024}' "$1" | stats '%.2f') MiB started on them"
}
echo "DNS with these names adds: $(added "$WORK/mem")"
[ -s "$WORK/mem-old" ] && echo "  $OLD_AGENT, same rounds: $(added "$WORK/mem-old")"
fi
echo "dnsmasq $(dnsmasq --version | head -1 | awk '{print $3}') holding the same names: $(kib_mib "$RSS_DNSMASQ") MiB"

PERF=()
if [ "$PIN" = 1 ]; then
  taskset -a -cp 0 "$AGENT_PID" >/dev/null
  taskset -a -cp 0 "$DNSMASQ_PID" >/dev/null
  PERF=(taskset -c 1)
  echo "pinned: both servers to CPU 0, dnsperf to CPU 1"
fi
# One server, one round: "qps avg_ms p50_ms p99_ms lost".
load() {
  local out qps avg lost lat
  out=$("${PERF[@]}" dnsperf -s "$1" -p "$2" -d "$WORK/queries" -l "$SECONDS_OF_LOAD" -c 4 -q 200 2>&1)
  qps=$(awk '/Queries per second/ {print $4}' <<<"$out")
  avg=$(awk '/Average Latency/ {print $4 * 1000}' <<<"$out")
  lost=$(awk '/Queries lost/ {print $3}' <<<"$out")
  lat=$("${PERF[@]}" dnsperf -s "$1" -p "$2" -d "$WORK/queries" -l 5 -c 4 -q 200 -Q 20000 -v 2>/dev/null \
    | awk '/^> / {print $NF}' | sort -g \
    | awk '{l[NR] = $1} END { if (NR == 0) print "nan nan"; else
        printf "%.3f %.3f", l[int(NR * 0.50) + 1] * 1000, l[int(NR * 0.99) + 1] * 1000 }')
  echo "$qps $avg $lat $lost"
}
# Warm both (the first answers of each name go through the general path).
"${PERF[@]}" dnsperf -s "$GW" -d "$WORK/queries" -l 2 -c 4 -q 200 >/dev/null 2>&1
"${PERF[@]}" dnsperf -s 127.0.0.1 -p 5354 -d "$WORK/queries" -l 2 -c 4 -q 200 >/dev/null 2>&1
: >"$WORK/bosun" ; : >"$WORK/dnsmasq"
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) = 1 ]; then
    b=$(load "$GW" 53); d=$(load 127.0.0.1 5354)
  else
    d=$(load 127.0.0.1 5354); b=$(load "$GW" 53)
  fi
  echo "$b" >>"$WORK/bosun"; echo "$d" >>"$WORK/dnsmasq"
  echo "load round $round ($([ $((round % 2)) = 1 ] && echo bosun first || echo dnsmasq first)):" \
    "bosun $(cut -d' ' -f1 <<<"$b") q/s, p99 $(cut -d' ' -f4 <<<"$b") ms;" \
    "dnsmasq $(cut -d' ' -f1 <<<"$d") q/s, p99 $(cut -d' ' -f4 <<<"$d") ms;" \
    "ratio $(awk -v b="${b%% *}" -v d="${d%% *}" 'BEGIN { printf "%.2f", b / d }')"
done
paste -d' ' "$WORK/bosun" "$WORK/dnsmasq" | awk '{printf "%.2f\n", $1 / $6}' >"$WORK/ratios"
summary() {
  echo "  queries/s at saturation: $(awk '{print $1}' "$1" | stats '%.0f'), average latency $(awk '{print $2}' "$1" | stats '%.2f') ms, lost $(awk '{s += $5} END {print s}' "$1")"
  echo "  at a fixed 20k queries/s: p50 $(awk '{print $3}' "$1" | stats '%.3f') ms, p99 $(awk '{print $4}' "$1" | stats '%.3f') ms"
}
echo "--- throughput, $ROUNDS rounds of $SECONDS_OF_LOAD s each: median (min-max)"
echo "node DNS (bosun-agent on $GW):"
summary "$WORK/bosun"
echo "dnsmasq (127.0.0.1, same names):"
summary "$WORK/dnsmasq"
echo "bosun/dnsmasq queries/s, per round: $(tr '\n' ' ' <"$WORK/ratios")-> median $(stats '%.2f' <"$WORK/ratios")"
echo "RSS after the load: bosun-agent $(kib_mib "$(rss_kib)") MiB, dnsmasq $(kib_mib "$(rss_kib "$DNSMASQ_PID")") MiB"
echo "load after: $(uptime)"
