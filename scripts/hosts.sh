#!/usr/bin/env bash
# Several bosun hosts on one machine, for tests, benchmarks and demos
# (run as root):
#
#   scripts/hosts.sh up N           N hosts bosun-h1..hN: network namespaces
#                                   joined by the bridge br-bosunhosts
#                                   (172.31.250.0/24; this machine is .1,
#                                   host i is .(10+i)), each with its own
#                                   Docker Engine and the project's images
#   scripts/hosts.sh down           removes every namespace, engine, bridge,
#                                   rule and directory `up` made; idempotent,
#                                   also after a crashed run
#   scripts/hosts.sh exec HOST CMD  runs CMD in host HOST's network namespace
#                                   with DOCKER_HOST set to its engine
#                                   (HOST: 2, h2 or bosun-h2)
#   scripts/hosts.sh env HOST       prints HOST's NETNS, IP, DOCKER_HOST,
#                                   AGENT_DIR (a data dir for its agent that
#                                   `down` unmounts and removes) and JOIN_DIR
#   scripts/hosts.sh join HOST FILE [FLAGS...]
#                                   joins HOST to the cluster as node hI
#                                   with the `bosun join` command in FILE,
#                                   through scripts/node-join.sh (what the
#                                   Vagrant workers run), node address its
#                                   eth0's (--node-interface), data dir
#                                   JOIN_DIR; FLAGS go to bosun join
#
# Each engine is a dockerd started with `nsenter --net=` (not `ip netns
# exec`, whose fresh /sys breaks dockerd) with its own data root, exec root,
# pid file, socket and docker0 subnet (172.30.i.0/24), iptables on, under
# BOSUN_HOSTS_DIR (default /tmp/bosun-hosts). The control plane runs on this
# machine, reachable at 172.31.250.1 (`bosun up --no-agent
# --advertise-address 172.31.250.1`); agents run inside the namespaces,
# joined with a bootstrap token (`scripts/hosts.sh join 2 FILE`) or started
# by hand (`scripts/hosts.sh exec 2 bosun-agent --node-ip 172.31.250.12 ...`).
set -euo pipefail
CALLER_PWD=$PWD
cd "$(dirname "$0")/.."

# A host here is a network namespace, not a machine: its bosun processes
# are never units of this machine's systemd.
export BOSUN_SERVICE_MANAGER=bosun
DIR=${BOSUN_HOSTS_DIR:-/tmp/bosun-hosts}
# br-: agents on this machine that pick their node address by themselves
# skip Docker's bridges by that prefix, so the hosts' bridge never makes
# them see two candidates.
BRIDGE=br-bosunhosts
NET=172.31.250
CHAIN=BOSUN-HOSTS
IMAGES=(bosun.local/busybox:1.35 bosun.local/web:1 bosun.local/web:2)

die() { echo "hosts.sh: $*" >&2; exit 1; }
log() { echo "hosts.sh: $*" >&2; }

host_index() { # 2 | h2 | bosun-h2 -> 2
  local h=${1#bosun-}
  h=${h#h}
  [[ $h =~ ^[0-9]+$ ]] && [ "$h" -ge 1 ] || die "no such host ${1:-(none)}; hosts are 1..N, h1.. or bosun-h1.."
  echo "$h"
}
ns_of() { echo "bosun-h$1"; }
ip_of() { echo "$NET.$((10 + $1))"; }
sock_of() { echo "$DIR/h$1/docker.sock"; }

# The engine config: the machine's daemon.json (storage driver, MTU, log
# options) without what must differ per engine.
engine_config() {
  python3 - "$1" <<'EOF'
import json, sys
try:
    conf = json.load(open("/etc/docker/daemon.json"))
except (OSError, ValueError):
    conf = {}
for key in ("data-root", "exec-root", "pidfile", "hosts", "bip", "bridge",
            "fixed-cidr", "default-address-pools", "iptables", "containerd"):
    conf.pop(key, None)
json.dump(conf, open(sys.argv[1], "w"))
EOF
}

down() {
  local ns i pidfile pid
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^bosun-h[0-9]+$/ {print $1}'); do
    i=${ns#bosun-h}
    pidfile=$DIR/h$i/docker.pid
    # The engine first (it stops its containers), then whatever still runs
    # in the namespace (agents, shims).
    if [ -s "$pidfile" ] && pid=$(cat "$pidfile") && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    ip netns del "$ns" 2>/dev/null || true
  done
  # A host's link goes with its namespace, unless something (a socket
  # still open to it) keeps the namespace alive a while: take them now.
  for link in $(ip -o link show 2>/dev/null | sed -n 's/^[0-9]*: \(bosun-h[0-9]*\)@.*/\1/p'); do
    ip link del "$link" 2>/dev/null || true
  done
  if [ -d "$DIR" ]; then
    # Mounts the engines left (overlay layers, netns files), deepest first.
    awk -v d="$DIR/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r |
      while read -r m; do umount -l "$m" 2>/dev/null || true; done
    rm -rf "$DIR"
  fi
  ip link del "$BRIDGE" 2>/dev/null || true
  while iptables -w -D FORWARD -j "$CHAIN" 2>/dev/null; do :; done
  iptables -w -F "$CHAIN" 2>/dev/null || true
  iptables -w -X "$CHAIN" 2>/dev/null || true
}

up() {
  local n=$1 i ns dir ip
  [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 50 ] || die "up N: N is 1..50, not $n"
  for tool in ip iptables nsenter dockerd docker python3; do
    command -v "$tool" >/dev/null || die "$tool is needed and not installed"
  done
  [ "$(id -u)" = 0 ] || die "run as root"
  down
  local avail
  avail=$(df -Pk "$(dirname "$DIR")" | awk 'NR == 2 {print $4}')
  [ "$avail" -gt $((n * 512 * 1024)) ] || die "$(dirname "$DIR") has under $((n / 2)) GiB free"
  for img in "${IMAGES[@]}"; do
    docker image inspect "$img" >/dev/null 2>&1 || { bash scripts/build-images.sh >&2; break; }
  done
  mkdir -p "$DIR"
  docker save "${IMAGES[@]}" -o "$DIR/images.tar"

  ip link add "$BRIDGE" type bridge
  ip addr add "$NET.1/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  # This machine's Docker sets FORWARD's policy to DROP; frames between the
  # hosts cross the bridge through FORWARD (br_netfilter).
  iptables -w -N "$CHAIN"
  iptables -w -A "$CHAIN" -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
  iptables -w -I FORWARD 1 -j "$CHAIN"

  for i in $(seq 1 "$n"); do
    ns=$(ns_of "$i") dir=$DIR/h$i ip=$(ip_of "$i")
    mkdir -p "$dir"
    ip netns add "$ns"
    ip link add "$ns" type veth peer name eth0 netns "$ns"
    ip link set "$ns" master "$BRIDGE" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$ip/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$NET.1"
    engine_config "$dir/daemon.json"
    nsenter --net="/var/run/netns/$ns" setsid dockerd \
      --config-file "$dir/daemon.json" \
      --data-root "$dir/docker" --exec-root "$dir/exec" --pidfile "$dir/docker.pid" \
      -H "unix://$dir/docker.sock" --bip "172.30.$i.1/24" \
      </dev/null >"$dir/dockerd.log" 2>&1 &
  done
  for i in $(seq 1 "$n"); do
    local ok=0
    for _ in $(seq 1 150); do
      if DOCKER_HOST=unix://$(sock_of "$i") docker version >/dev/null 2>&1; then ok=1; break; fi
      sleep 0.2
    done
    [ "$ok" = 1 ] || { tail -20 "$DIR/h$i/dockerd.log" >&2; die "the engine of host $i did not start"; }
    DOCKER_HOST=unix://$(sock_of "$i") docker load -q -i "$DIR/images.tar" >/dev/null
    log "host $i: $(ns_of "$i") at $(ip_of "$i"), DOCKER_HOST=unix://$(sock_of "$i")"
  done
  rm -f "$DIR/images.tar"
}

case "${1:-}" in
  up) up "${2:?up N}" ;;
  down) down ;;
  exec)
    i=$(host_index "${2:-}")
    shift 2
    [ $# -gt 0 ] || die "exec HOST CMD..."
    [ -e "/var/run/netns/$(ns_of "$i")" ] || die "host $i is not up"
    exec nsenter --net="/var/run/netns/$(ns_of "$i")" \
      env DOCKER_HOST="unix://$(sock_of "$i")" "$@"
    ;;
  env)
    i=$(host_index "${2:-}")
    echo "NETNS=/var/run/netns/$(ns_of "$i")"
    echo "IP=$(ip_of "$i")"
    echo "DOCKER_HOST=unix://$(sock_of "$i")"
    echo "AGENT_DIR=$DIR/h$i/agent"
    echo "JOIN_DIR=$DIR/h$i/join"
    ;;
  join)
    i=$(host_index "${2:-}")
    file=${3:-}
    [ -n "$file" ] || die "join HOST FILE [FLAGS...]: FILE holds the \`bosun join\` command"
    shift 3
    [[ $file == /* ]] || file=$CALLER_PWD/$file
    [ -e "/var/run/netns/$(ns_of "$i")" ] || die "host $i is not up"
    # Under the host's directory: `down` unmounts the pods' tmpfs volumes
    # there and removes it. The agent inherits DOCKER_HOST from `exec`; its
    # address is eth0's, the host's only link to the others.
    exec bash scripts/hosts.sh exec "$i" bash scripts/node-join.sh --join-command "$file" \
      --node-name "h$i" --node-interface eth0 --data-dir "$DIR/h$i/join" "$@"
    ;;
  *) sed -n '2,34p' "$0" >&2; exit 2 ;;
esac
