#!/usr/bin/env bash
# Benchmark (not a test): a 30-replica Deployment from apply to all Ready,
# then a rolling update of it to a new image, on bosun, side by side in the
# same run with
#   - plain `docker run` of the same containers (a pause container plus the
#     app joined to it, all started at once; the "update" starts 30 new
#     pods, then removes the 30 old ones: the floor any orchestrator pays);
#   - Docker Swarm on the same engine (`docker service create --replicas 30`,
#     `docker service update --image`), with the same parallelism as the
#     Deployment's rolling update (maxSurge 25% = 8, start-first).
#
#   scripts/bench-deploy.sh [ROUNDS]     (default 3; medians reported)
#
# Uses release builds and a throwaway control plane and agent in a temp
# dir. Swarm mode is switched on only if the engine is not in a swarm
# already, and switched off again. Everything it starts is removed, also
# on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-3}"
REPLICAS=30
V1=bosun.local/web:1
V2=bosun.local/web:2

# BIN_DIR=dir (holding bosun, bosun-control and bosun-agent, e.g. a release
# build of main before a change) measures those instead of a release
# build of this checkout.
if [ -z "${BIN_DIR:-}" ]; then
  cargo build --release -p bosun -p bosun-control -p bosun-agent --bins --quiet
  BIN_DIR="${CARGO_TARGET_DIR:-target}/release"
fi
bash scripts/build-images.sh >/dev/null
PAUSE=$(docker images --format '{{.Repository}}:{{.Tag}}' bosun.local/pause | head -1)
if [ -z "$PAUSE" ]; then
  # The agent imports its pause image on start; the plain runs need it too.
  PAUSE=""
fi

WORK=$(mktemp -d)
NODE="benchd-$$"
NET="bosun-$NODE"
PLAIN_NET="benchd-plain-$$"
SERVICE="benchd-$$"
CONTROL_PID=""
AGENT_PID=""
SWARM_STARTED=""
GWBRIDGE_BEFORE=$(docker network ls -q --filter name=^docker_gwbridge$)
cleanup() {
  docker service rm "$SERVICE" >/dev/null 2>&1 || true
  if [ -n "$SWARM_STARTED" ]; then docker swarm leave --force >/dev/null 2>&1 || true; fi
  [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null && wait "$AGENT_PID" 2>/dev/null || true
  [ -n "$CONTROL_PID" ] && kill "$CONTROL_PID" 2>/dev/null && wait "$CONTROL_PID" 2>/dev/null || true
  ids=$(docker ps -aq --filter "label=io.bosun.node=$NODE"; docker ps -aq --filter "label=bench.plain=$$")
  [ -n "$ids" ] && docker rm -f $ids >/dev/null 2>&1 || true
  for net in "$NET" "$PLAIN_NET"; do
    for _ in $(seq 20); do
      docker network inspect "$net" >/dev/null 2>&1 || break
      docker network rm "$net" >/dev/null 2>&1 || sleep 0.5
    done
  done
  # swarm init made docker_gwbridge; leave the engine as it was.
  if [ -n "$SWARM_STARTED" ] && [ -z "$GWBRIDGE_BEFORE" ]; then
    docker network rm docker_gwbridge >/dev/null 2>&1 || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# Two /22s no Docker network uses yet (a leftover network must not stop
# the run).
used=$(docker network inspect $(docker network ls -q) \
  --format '{{range .IPAM.Config}}{{.Subnet}} {{end}}' 2>/dev/null || true)
free=()
for third in $(seq 200 4 252); do
  case " $used " in *" 10.244.$third.0/"*) continue ;; esac
  free+=("10.244.$third.0/22")
done
[ "${#free[@]}" -ge 2 ] || { echo "no free 10.244.x.0/22 subnets" >&2; exit 1; }
POD_CIDR=${free[0]}
PLAIN_CIDR=${free[1]}

"$BIN_DIR/bosun-control" --data-dir "$WORK/control" --port 0 2>"$WORK/control.log" &
CONTROL_PID=$!
for _ in $(seq 100); do [ -s "$WORK/control/address" ] && break; sleep 0.1; done
export KUBECONFIG="$WORK/control/admin.kubeconfig"
BOSUN="$BIN_DIR/bosun"
"$BIN_DIR/bosun-agent" --kubeconfig "$KUBECONFIG" --node-name "$NODE" --node-ip 127.0.0.1 \
  --pod-cidr "$POD_CIDR" --data-dir "$WORK/agent" 2>"$WORK/agent.log" &
AGENT_PID=$!
for _ in $(seq 100); do $BOSUN get node "$NODE" >/dev/null 2>&1 && break; sleep 0.1; done
[ -z "$PAUSE" ] && PAUSE=$(docker images --format '{{.Repository}}:{{.Tag}}' bosun.local/pause | head -1)
docker network create --subnet "$PLAIN_CIDR" "$PLAIN_NET" >/dev/null

cat >"$WORK/deploy.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench}
spec:
  replicas: $REPLICAS
  selector: {matchLabels: {app: bench}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}}
  template:
    metadata: {labels: {app: bench}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
      - {name: web, image: $V1}
EOF

bosun_round() {
  local t0 t1 t2
  t0=$(now)
  $BOSUN apply -f "$WORK/deploy.yaml" >/dev/null
  $BOSUN rollout status deployment/bench --timeout=300s >/dev/null
  t1=$(now)
  $BOSUN set image deployment/bench web=$V2 >/dev/null
  $BOSUN rollout status deployment/bench --timeout=300s >/dev/null
  t2=$(now)
  echo "$(elapsed "$t0" "$t1") $(elapsed "$t1" "$t2")"
  $BOSUN delete deployment bench --wait=true >/dev/null
  for _ in $(seq 600); do
    [ -z "$(docker ps -aq --filter "label=io.bosun.node=$NODE")" ] && break
    sleep 0.1
  done
}

plain_pod() {
  local tag=$1 i=$2 image=$3
  docker run -d --name "plain-$$-$tag-$i-pause" --label "bench.plain=$$" --label "bench.tag=$tag" \
    --ipc shareable --network "$PLAIN_NET" "$PAUSE" >/dev/null
  docker run -d --name "plain-$$-$tag-$i-app" --label "bench.plain=$$" --label "bench.tag=$tag" \
    --network "container:plain-$$-$tag-$i-pause" --ipc "container:plain-$$-$tag-$i-pause" \
    "$image" >/dev/null
}
plain_round() {
  local t0 t1 t2
  t0=$(now)
  for i in $(seq "$REPLICAS"); do plain_pod v1 "$i" "$V1" & done
  wait
  t1=$(now)
  for i in $(seq "$REPLICAS"); do plain_pod v2 "$i" "$V2" & done
  wait
  old=$(docker ps -aq --filter "label=bench.tag=v1" --filter "label=bench.plain=$$")
  docker rm -f $old >/dev/null
  t2=$(now)
  echo "$(elapsed "$t0" "$t1") $(elapsed "$t1" "$t2")"
  ids=$(docker ps -aq --filter "label=bench.plain=$$")
  [ -n "$ids" ] && docker rm -f $ids >/dev/null
}

swarm_round() {
  local t0 t1 t2
  t0=$(now)
  docker service create --quiet --detach=false --no-resolve-image --name "$SERVICE" \
    --replicas "$REPLICAS" --update-parallelism 8 --update-order start-first \
    --update-delay 0s "$V1" >/dev/null 2>&1
  t1=$(now)
  docker service update --quiet --detach=false --no-resolve-image --image "$V2" "$SERVICE" >/dev/null 2>&1
  t2=$(now)
  echo "$(elapsed "$t0" "$t1") $(elapsed "$t1" "$t2")"
  docker service rm "$SERVICE" >/dev/null
  for _ in $(seq 600); do
    [ -z "$(docker ps -aq --filter "label=com.docker.swarm.service.name=$SERVICE")" ] && break
    sleep 0.1
  done
}

swarm_state=$(docker info --format '{{.Swarm.LocalNodeState}}')
if [ "$swarm_state" = inactive ]; then
  docker swarm init --advertise-addr 127.0.0.1 >/dev/null
  SWARM_STARTED=yes
elif [ "$swarm_state" != active ]; then
  echo "the engine's swarm state is $swarm_state; skipping Swarm" >&2
fi

bc=(); bu=(); pc=(); pu=(); sc=(); su=()
for _ in $(seq "$ROUNDS"); do
  read -r c u <<<"$(bosun_round)"; bc+=("$c"); bu+=("$u")
  read -r c u <<<"$(plain_round)"; pc+=("$c"); pu+=("$u")
  if [ "$(docker info --format '{{.Swarm.LocalNodeState}}')" = active ]; then
    read -r c u <<<"$(swarm_round)"; sc+=("$c"); su+=("$u")
  fi
done

m() { printf '%s\n' "$@" | median; }
B1=$(m "${bc[@]}"); B2=$(m "${bu[@]}"); P1=$(m "${pc[@]}"); P2=$(m "${pu[@]}")
echo
echo "$REPLICAS replicas (median of $ROUNDS rounds, seconds; $(nproc) cores, Docker $(docker version -f '{{.Server.Version}}'))"
printf '%-34s %-16s %-16s\n' "" "create->Ready" "rolling update"
printf '%-34s %-16s %-16s\n' "bosun Deployment" "$B1" "$B2"
printf '%-34s %-16s %-16s\n' "docker run, all at once" "$P1" "$P2"
if [ "${#sc[@]}" -gt 0 ]; then
  S1=$(m "${sc[@]}"); S2=$(m "${su[@]}")
  printf '%-34s %-16s %-16s\n' "Docker Swarm service" "$S1" "$S2"
fi
echo
echo "bosun / docker run: create $(ratio "$B1" "$P1")x, update $(ratio "$B2" "$P2")x"
if [ -n "${S1:-}" ]; then
  echo "bosun / Swarm:      create $(ratio "$B1" "$S1")x, update $(ratio "$B2" "$S2")x"
fi
echo "bosun-control peak RSS $(( $(awk '/^VmHWM/ { print $2 }' "/proc/$CONTROL_PID/status") / 1024 )) MiB;" \
  "bosun-agent peak RSS $(( $(awk '/^VmHWM/ { print $2 }' "/proc/$AGENT_PID/status") / 1024 )) MiB"
