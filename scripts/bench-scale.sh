#!/usr/bin/env bash
# Benchmark (not a test): the control plane with many nodes on one machine,
# as kubemark and clusterloader2 measure it. NODES hollow nodes (one
# `bosun-agent hollow` process: the real agent over a fake runtime, each
# node with its own certificate from a bootstrap token) register; then
# Deployments totalling NODES x PODS_PER_NODE pods are applied and waited
# for, rolled to a new image, and scaled to zero.
#
#   scripts/bench-scale.sh NODES PODS_PER_NODE
#
# Environment:
#   CONTROL_BINS="DIR..."  bosun-control binaries to measure, one run each
#                          (default: this tree's release build); e.g.
#                          CONTROL_BINS="/work/base/target-rel/release target-rel/release"
#                          The hollow agent and the CLI always come from this tree.
#   DEPLOYMENTS=10         how many Deployments share the pods
#   PHASE_TIMEOUT=900      seconds each phase may take
#   CARGO_TARGET_DIR       where this tree's release build goes (default target-rel)
#   NEW_BIN=DIR            take bosun-agent and bosun from DIR instead of building
#   SCALE_DOWN=0           stop after the rollout (no scale to zero); the
#                          line's figures then cover the apply and rollout
#   CONTROL_WRAP="WORDS"   put before the control plane's command, e.g. a
#                          heap profiler's preload (see scripts/bench-lib.sh)
#   BENCH_KEEP=DIR         copy each run's control.log and /metrics there
#                          (N-control.log, N-metrics.txt, N counting runs;
#                          the log also when a phase times out)
#
# Prints, per control binary whose phases all finished, one line on stdout
# (progress on stderr; a binary whose phase timed out gets none, and the
# script goes on to the next and exits 1 at the end):
#   scale: N nodes, M pods Running in S s; created Q pods/s; scheduler P pods/s; startup p50/p99 A/B ms; API mutating p99 C ms; control RSS peak R MiB; CPU T s
# - S: from applying the Deployments until every replica is ready (their
#   status.readyReplicas); M: pods with phase Running then;
# - created: pods / (last - first creationTimestamp), the rate the
#   ReplicaSet controller made them at (the scheduler cannot bind faster);
# - scheduler: pods / (last - first PodScheduled transition), the time they
#   were bound;
# - startup: pod creationTimestamp -> Ready condition's lastTransitionTime
#   (clusterloader2's pod startup latency; both have 1 s resolution);
# - API mutating p99: apiserver_request_duration_seconds from the control
#   plane's /metrics, verbs POST, PUT, PATCH, APPLY, DELETE, over the whole
#   run, interpolated within the histogram's bucket;
# - RSS peak: VmHWM of the control plane; CPU: its utime + stime.
#
# Every process it starts is stopped by pid and every directory removed by
# its exact path, also on failure. Hollow nodes touch neither Docker nor
# the host's network; the control plane listens on a free port of 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
NODES="${1:?usage: scripts/bench-scale.sh NODES PODS_PER_NODE}"
PER_NODE="${2:?usage: scripts/bench-scale.sh NODES PODS_PER_NODE}"
DEPLOYMENTS="${DEPLOYMENTS:-10}"
PHASE_TIMEOUT="${PHASE_TIMEOUT:-900}"
TOTAL=$((NODES * PER_NODE))
command -v kubectl >/dev/null || { apt-get update -qq && apt-get install -y -qq kubectl >/dev/null; }

if [ -n "${NEW_BIN:-}" ]; then
  NEW=$NEW_BIN
else
  export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target-rel}"
  scripts/build-release.sh
  NEW="$CARGO_TARGET_DIR/release"
fi
CONTROL_BINS="${CONTROL_BINS:-$NEW}"

WORK="" CONTROL_PID="" HOLLOW_PID=""
. scripts/bench-lib.sh
cleanup() {
  stop "$HOLLOW_PID"; HOLLOW_PID=""
  stop "$CONTROL_PID"; CONTROL_PID=""
  if [ -n "$WORK" ] && [ -n "${BENCH_KEEP:-}" ]; then
    RUN_NO=$((${RUN_NO:-0} + 1))
    cp "$WORK/control.log" "$BENCH_KEEP/$RUN_NO-control.log" 2>/dev/null || true
    cp "$WORK/metrics.txt" "$BENCH_KEEP/$RUN_NO-metrics.txt" 2>/dev/null || true
  fi
  [ -n "$WORK" ] && rm -rf "$WORK"
  WORK=""
}
trap cleanup EXIT

say() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
now() { date +%s.%N; }
k() { kubectl --kubeconfig "$KC" --request-timeout=120s "$@"; }

# Polls `$2...` (a command printing "DONE" when the phase is over, or a
# progress note) every 2 s; fails after PHASE_TIMEOUT.
wait_phase() {
  local what=$1; shift
  local start; start=$(date +%s)
  local out=""
  while :; do
    out=$("$@" 2>/dev/null || true)
    [ "$out" = DONE ] && return 0
    if [ $(( $(date +%s) - start )) -ge "$PHASE_TIMEOUT" ]; then
      say "timed out after ${PHASE_TIMEOUT}s waiting for $what (last: $out)"
      say "control RSS peak so far: $(awk '/^VmHWM/ { printf "%.0f MiB", $2 / 1024 }' "/proc/$CONTROL_PID/status")"
      tail -20 "$WORK/control.log" >&2 || true
      tail -20 "$WORK/hollow.log" >&2 || true
      return 1
    fi
    sleep 2
  done
}

nodes_ready() {
  k get nodes -o json | python3 -c '
import json, sys
want = int(sys.argv[1])
items = json.load(sys.stdin)["items"]
ready = sum(1 for n in items if any(c["type"] == "Ready" and c["status"] == "True"
            for c in n.get("status", {}).get("conditions", [])))
print("DONE" if ready >= want else f"{ready}/{want} nodes Ready")' "$NODES"
}

# Every Deployment's rollout is complete: observed, all replicas updated,
# ready and no old ones left (what `kubectl rollout status` waits for).
rollouts_done() {
  k get deployments -l bench=scale -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
want = int(sys.argv[1])
ready = 0
done = len(items) == want
for d in items:
    s, spec = d.get("status", {}), d["spec"]
    r = spec.get("replicas", 1)
    ready += s.get("readyReplicas", 0)
    done = done and s.get("observedGeneration", 0) >= d["metadata"]["generation"] \
        and s.get("updatedReplicas", 0) == r and s.get("readyReplicas", 0) == r \
        and s.get("replicas", 0) == r
print("DONE" if done else f"{ready} replicas ready")' "$DEPLOYMENTS"
}

pods_gone() {
  local n; n=$(k get pods -l bench=scale -o name | wc -l)
  [ "$n" = 0 ] && echo DONE || echo "$n pods left"
}

deployments_yaml() { # image
  local each=$((TOTAL / DEPLOYMENTS)) extra=$((TOTAL % DEPLOYMENTS))
  for i in $(seq 0 $((DEPLOYMENTS - 1))); do
    local r=$each; [ "$i" -lt "$extra" ] && r=$((each + 1))
    cat <<EOF
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: scale-$i, labels: {bench: scale}}
spec:
  replicas: $r
  selector: {matchLabels: {app: scale-$i}}
  template:
    metadata: {labels: {app: scale-$i, bench: scale}}
    spec:
      terminationGracePeriodSeconds: 0
      containers: [{name: app, image: $1}]
EOF
  done
}

run_one() { # control binary dir
  local bin=$1
  WORK=$(mktemp -d /tmp/bench-scale.XXXXXX)
  BIN=$bin
  # Room for a /24 per node whatever NODES is (hollow nodes make no
  # networks or routes, so the range touches nothing on the host).
  start_control --cluster-cidr 10.128.0.0/12
  [ -s "$WORK/control/address" ] || { say "control plane did not start"; tail -20 "$WORK/control.log" >&2; return 1; }
  say "control $bin/bosun-control (pid $CONTROL_PID) at $(cat "$WORK/control/address")"
  local token; token=$("$NEW/bosun" --kubeconfig "$KC" token create --ttl 4h --description bench-scale)
  local max_pods=$((PER_NODE * 2 > 110 ? PER_NODE * 2 : 110))
  BOSUN_LOG=warn "$NEW/bosun-agent" hollow --nodes "$NODES" --kubeconfig "$KC" --token "$token" \
    --data-dir "$WORK/hollow" --max-pods "$max_pods" 2>"$WORK/hollow.log" &
  HOLLOW_PID=$!
  local t0; t0=$(now)
  wait_phase "$NODES nodes Ready" nodes_ready || return 1
  say "$NODES nodes Ready in $(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"

  deployments_yaml bosun.local/busybox:1.35 >"$WORK/deploy.yaml"
  local t1; t1=$(now)
  k apply -f "$WORK/deploy.yaml" >/dev/null || return 1
  wait_phase "$TOTAL pods ready" rollouts_done || return 1
  local t2; t2=$(now)
  local created; created=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')
  say "$TOTAL replicas ready in $created s"
  k get pods -l bench=scale -o json >"$WORK/pods.json" || return 1

  t1=$(now)
  deployments_yaml bosun.local/busybox:1.36 >"$WORK/deploy2.yaml"
  k apply -f "$WORK/deploy2.yaml" >/dev/null || return 1
  wait_phase "the rollout to a new image" rollouts_done || return 1
  say "rolled to a new image in $(awk -v a="$t1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"

  if [ "${SCALE_DOWN:-1}" != 0 ]; then
    t1=$(now)
    k scale deployments -l bench=scale --replicas=0 >/dev/null || return 1
    wait_phase "every pod gone after scaling to zero" pods_gone || return 1
    say "scaled to zero in $(awk -v a="$t1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s"
  fi

  k get --raw /metrics >"$WORK/metrics.txt" || : >"$WORK/metrics.txt"
  local hwm ticks clk
  hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$CONTROL_PID/status")
  ticks=$(awk '{ print $14 + $15 }' "/proc/$CONTROL_PID/stat")
  clk=$(getconf CLK_TCK)
  say "hollow process: $(awk '/^VmHWM/ { printf "RSS peak %.0f MiB", $2 / 1024 }' "/proc/$HOLLOW_PID/status"), CPU $(awk -v c="$clk" '{ printf "%.1f s", ($14 + $15) / c }' "/proc/$HOLLOW_PID/stat")"
  python3 - "$WORK/pods.json" "$WORK/metrics.txt" "$NODES" "$created" "$hwm" "$ticks" "$clk" <<'EOF'
import json, re, sys
from datetime import datetime
pods_file, metrics_file, nodes, created, hwm, ticks, clk = sys.argv[1:]
def t(s): return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").timestamp()
def cond(p, type_):
    for c in p.get("status", {}).get("conditions", []):
        if c["type"] == type_ and c["status"] == "True":
            return t(c["lastTransitionTime"])
pods = json.load(open(pods_file))["items"]
running = sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")
startup = sorted(cond(p, "Ready") - t(p["metadata"]["creationTimestamp"])
                 for p in pods if cond(p, "Ready") is not None)
def pct(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
made = sorted(t(p["metadata"]["creationTimestamp"]) for p in pods)
made_rate = len(made) / max(made[-1] - made[0], 1.0) if made else float("nan")
bound = sorted(b for b in (cond(p, "PodScheduled") for p in pods) if b is not None)
span = max(bound[-1] - bound[0], 1.0) if bound else float("nan")
rate = len(bound) / span if bound else float("nan")
# Mutating requests' latency: bucket counts summed over every label set.
buckets = {}
line = re.compile(r'^apiserver_request_duration_seconds_bucket\{(.*)\} (\S+)')
for l in open(metrics_file):
    m = line.match(l)
    if not m: continue
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
    if labels.get("verb") not in ("POST", "PUT", "PATCH", "APPLY", "DELETE"): continue
    le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
    buckets[le] = buckets.get(le, 0) + float(m.group(2))
p99 = "n/a"
if buckets and buckets[max(buckets)] > 0:
    les = sorted(buckets)
    total = buckets[les[-1]]
    target, prev_le, prev_n = 0.99 * total, 0.0, 0.0
    for le in les:
        n = buckets[le]
        if n >= target:
            if le == float("inf"):
                v = prev_le
            else:
                v = prev_le + (le - prev_le) * (target - prev_n) / max(n - prev_n, 1e-9)
            p99 = f"{v * 1000:.0f}"
            break
        prev_le, prev_n = le, n
print(f"scale: {nodes} nodes, {running} pods Running in {created} s; "
      f"created {made_rate:.0f} pods/s; scheduler {rate:.0f} pods/s; startup p50/p99 {pct(startup, .5) * 1000:.0f}/{pct(startup, .99) * 1000:.0f} ms; "
      f"API mutating p99 {p99} ms; control RSS peak {int(hwm) / 1024:.0f} MiB; CPU {int(ticks) / int(clk):.1f} s")
EOF
  cleanup
}

# A run whose phase timed out prints no line; the next binary still runs
# (run_one's steps return on failure themselves: errexit does not apply
# inside a function called before `||`). The exit status says if any failed.
failed=0
for bin in $CONTROL_BINS; do
  if ! run_one "$bin"; then
    say "no scale line for $bin: a phase failed"
    cleanup
    failed=1
  fi
done
exit "$failed"
