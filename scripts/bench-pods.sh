#!/usr/bin/env bash
# Benchmark (not a test): pod create-to-Ready time on bosun for 1 and for
# 20 pods, side by side with the same containers started by plain
# `docker run` (a pause container plus the app joined to it with
# --network/--ipc container:), and the agent's memory with 20 pods.
#
#   scripts/bench-pods.sh [ROUNDS] [BIN_DIR...]   (default 3 rounds; medians reported)
#
# With BIN_DIRs (each holding bosun-control and bosun-agent, e.g. a release
# build of main before a change and one after) the same run measures each
# in turn; without, a release build of this checkout (in
# $CARGO_TARGET_DIR, else target/). The agent logs its per-pod start
# timeline (agent/src/pod/timeline.rs) where it has one; the script prints
# each step's median over the 20-pod rounds' pods.
#
# Uses a throwaway control plane and agent in a temp dir, and cleans up
# every container, network and process it starts, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
shift $(( $# > 0 ? 1 : 0 ))
BINS=("$@")
IMAGE=bosun.local/busybox:1.35

if [ ${#BINS[@]} = 0 ]; then
  cargo build --release -p bosun-control -p bosun-agent --bins --quiet
  BINS=("$PWD/${CARGO_TARGET_DIR:-target}/release")
fi
bash scripts/build-images.sh >/dev/null

# Two /24s no Docker network uses yet (other clusters on this host).
used=$(docker network inspect $(docker network ls -q) \
  --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}' 2>/dev/null || true)
free=()
for third in $(seq 160 2 250); do
  case " $used " in *" 10.244.$third.0/"*) continue ;; esac
  free+=("10.244.$third.0/24")
done
[ "${#free[@]}" -ge 2 ] || { echo "no free 10.244.x.0/24 subnets" >&2; exit 1; }
POD_CIDR=${free[0]}
PLAIN_CIDR=${free[1]}

WORK=$(mktemp -d)
NODE="bench-$$"
PAUSE=""
NET="bosun-$NODE"
PLAIN_NET="bench-plain-$$"
CONTROL_PID=""
AGENT_PID=""
cleanup() {
  stop_all
  ids=$(docker ps -aq --filter "label=bench.plain=$$")
  [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1 || true
  docker network rm "$PLAIN_NET" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

start() {
  local bin=$1
  "$bin/bosun-control" --data-dir "$WORK/control" --port 0 2>"$WORK/control.log" &
  CONTROL_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/control/address" ] && break; sleep 0.1; done
  export KUBECONFIG="$WORK/control/admin.kubeconfig"
  BOSUN_LOG=info,bosun_agent::pod::timeline=debug "$bin/bosun-agent" --kubeconfig "$KUBECONFIG" \
    --node-name "$NODE" --node-ip 127.0.0.1 --pod-cidr "$POD_CIDR" --data-dir "$WORK/agent" \
    2>"$WORK/agent.log" &
  AGENT_PID=$!
  for _ in $(seq 100); do kubectl get node "$NODE" >/dev/null 2>&1 && break; sleep 0.1; done
}
stop_all() {
  [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null || true
  [ -n "$CONTROL_PID" ] && kill "$CONTROL_PID" 2>/dev/null && wait "$CONTROL_PID" 2>/dev/null || true
  AGENT_PID=""; CONTROL_PID=""
  ids=$(docker ps -aq --filter "label=io.bosun.node=$NODE")
  [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1 || true
  for _ in 1 2 3 4 5; do
    docker network inspect "$NET" >/dev/null 2>&1 || break
    docker network rm "$NET" >/dev/null 2>&1 && break
    sleep 1
  done
  # The pods' tmpfs volumes (projected tokens) under the agent's data dir.
  awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount "$m" || true; done
  rm -rf "$WORK/control" "$WORK/agent"
}
docker network create --subnet "$PLAIN_CIDR" "$PLAIN_NET" >/dev/null

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
# Also leaves when the round began and when `kubectl create` returned in
# $WORK/round (Unix seconds), for the timeline's offsets.
bosun_round() {
  local n=$1
  pods_yaml "$n" >"$WORK/pods.yaml"
  local t0; t0=$(now)
  kubectl create -f "$WORK/pods.yaml" >/dev/null
  local tc; tc=$(now)
  kubectl wait --for=condition=Ready pod -l bench=yes --timeout=180s >/dev/null
  local t1; t1=$(now)
  echo "$t0 $tc $t1" >"$WORK/round"
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
  # The agent carries the pause image and imports it with its first pod
  # (a bosun round runs first); plain docker uses the same image.
  if [ -z "$PAUSE" ]; then
    PAUSE=$(docker images --format '{{.Repository}}:{{.Tag}}' bosun.local/pause | head -1)
    [ -n "$PAUSE" ] || { echo "no bosun.local/pause image after the agent's first pod" >&2; exit 1; }
  fi
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

# Each step's median and maximum (ms after the agent saw the pod) over the
# timeline lines in file $1.
timeline_medians() {
  sed -e 's/.*steps="\{0,1\}//' -e 's/"$//' "$1" | tr ' ' '\n' | grep '=' |
    awk -F= '{ v[$1] = v[$1] " " $2; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
      END { for (i = 1; i <= n; i++) {
        k = order[i]; m = split(substr(v[k], 2), a, " ")
        for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] + 0 < a[x] + 0) { t = a[x]; a[x] = a[y]; a[y] = t }
        printf "%s=%s/%s ", k, a[int((m + 1) / 2)], a[m] }
        print "" }'
}

# Where a round's time went on the wall clock, ms after `kubectl create`
# began: when it returned, when the agent saw each pod (timeline's
# seen_at; median/max), when the agent wrote each Ready (median/max), when
# `kubectl wait` returned. Reads the round's timeline lines on stdin.
round_offsets() {
  read -r t0 tc t1 <"$WORK/round"
  awk -v t0="$t0" -v tc="$tc" -v t1="$t1" '
    function med(a, m,   x, y, t) {
      for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t }
      return a[int((m + 1) / 2)] "/" a[m] }
    match($0, /seen_at=[0-9]+/) {
      seen = substr($0, RSTART + 8, RLENGTH - 8) - t0 * 1000
      r = 0; if (match($0, /ready=[0-9]+/)) r = substr($0, RSTART + 6, RLENGTH - 6)
      n++; s[n] = int(seen); d[n] = int(seen + r) }
    END { if (n) printf "create_returned=%d seen=%s ready_written=%s wait_returned=%d\n",
      (tc - t0) * 1000, med(s, n), med(d, n), (t1 - t0) * 1000 }'
}

measure() {
  local bin=$1
  start "$bin"
  declare -A results
  local timeline="" offsets=""
  for n in 1 20; do
    b=(); s=(); p=()
    for _ in $(seq "$ROUNDS"); do
      local from; from=$(( $(wc -l <"$WORK/agent.log") + 1 ))
      b+=("$(bosun_round "$n")")
      [ "$n" = 20 ] && agent_rss=$(rss_kb "$AGENT_PID")
      bosun_clear
      if [ "$n" = 20 ]; then
        local lines; lines=$(tail -n +"$from" "$WORK/agent.log" | grep 'pod start timeline' || true)
        timeline+="$lines"$'\n'
        offsets+="$(printf '%s\n' "$lines" | round_offsets)"$'\n'
      fi
      s+=("$(plain_round "$n" serial)"); plain_clear
      p+=("$(plain_round "$n" parallel)"); plain_clear
    done
    results[$n,bosun]=$(printf '%s\n' "${b[@]}" | median)
    results[$n,serial]=$(printf '%s\n' "${s[@]}" | median)
    results[$n,parallel]=$(printf '%s\n' "${p[@]}" | median)
  done
  local agent_hwm control_hwm agent_after
  agent_hwm=$(hwm_kb "$AGENT_PID"); control_hwm=$(hwm_kb "$CONTROL_PID")
  # The last bosun round's pods were deleted before the plain docker
  # rounds ran: what the agent keeps of the bursts once they are over.
  agent_after=$(rss_kb "$AGENT_PID")

  echo
  echo "== $bin"
  echo "pod create-to-Ready (median of $ROUNDS rounds, seconds; $(nproc) cores, Docker $(docker version -f '{{.Server.Version}}'))"
  printf '%-6s %-22s %-26s %-26s\n' pods "bosun (create->Ready)" "docker run, one by one" "docker run, all at once"
  for n in 1 20; do
    printf '%-6s %-22s %-26s %-26s\n' "$n" "${results[$n,bosun]}" "${results[$n,serial]}" "${results[$n,parallel]}"
  done
  echo "20 pods: bosun / docker run all at once: $(awk -v a="${results[20,bosun]}" -v b="${results[20,parallel]}" 'BEGIN { printf "%.2f", a / b }')x"
  echo
  echo "bosun-agent memory: VmRSS with 20 pods running $((agent_rss / 1024)) MiB; peak (VmHWM) $((agent_hwm / 1024)) MiB; after the rounds, no pods $((agent_after / 1024)) MiB"
  echo "bosun-control memory: peak (VmHWM) $((control_hwm / 1024)) MiB"
  if [ -n "$(printf '%s' "$timeline" | tr -d '\n')" ]; then
    printf '%s' "$timeline" >"$WORK/timeline.log"
    echo "agent start timeline, 20-pod rounds, ms after the agent saw each pod (median/max):"
    echo "  $(timeline_medians "$WORK/timeline.log")"
  fi
  if [ -n "$(printf '%s' "$offsets" | tr -d '\n')" ]; then
    echo "20-pod rounds on the wall clock, ms after kubectl create began (pods: median/max):"
    printf '%s' "$offsets" | sed '/^$/d; s/^/  /'
  fi
  stop_all
}

for bin in "${BINS[@]}"; do measure "$bin"; done
