#!/usr/bin/env bash
# Makes this host a bosun node of a running cluster: checks what a node
# needs, builds the project's images on its engine if they are missing, and
# runs `bosun join`. The one provisioning step every joining host runs:
# `scripts/hosts.sh join` (the namespace hosts the multi-host tests use)
# and the Vagrant workers (examples/vagrant/) both call it, so what the
# tests exercise is what the VMs run. Run as root:
#
#   scripts/node-join.sh --join-command FILE [bosun join flags...]
#   scripts/node-join.sh https://HOST:PORT --token T --ca-cert-hash H [flags...]
#
# FILE holds the line `bosun join https://HOST:PORT --token T --ca-cert-hash
# H` as `bosun up` and `bosun token create --print-join-command` print it;
# the script waits up to BOSUN_JOIN_WAIT seconds (default 600) for it to
# appear (the Vagrant workers read it from the shared folder the first VM
# writes it to). Flags after it go to `bosun join` as given: --node-name,
# --node-ip or --node-interface (say which address other hosts reach this
# one at; Vagrant's NAT address is never right), --data-dir, --port, ...
#
# The bosun binaries come from BOSUN_BIN (a directory), else PATH, else this
# checkout's target/release or target/debug. Docker is the engine DOCKER_HOST
# names (default: the local one).
set -euo pipefail
CALLER_PWD=$PWD
cd "$(dirname "$0")/.."

die() { echo "node-join.sh: $*" >&2; exit 1; }
log() { echo "node-join.sh: $*" >&2; }

find_bosun() {
  local d
  for d in ${BOSUN_BIN:+"$BOSUN_BIN"} $(tr ':' ' ' <<<"${PATH:-}") "$PWD/target/release" "$PWD/target/debug"; do
    if [ -x "$d/bosun" ] && [ -x "$d/bosun-agent" ]; then
      echo "$d/bosun"
      return
    fi
  done
  die "no bosun and bosun-agent found in \$BOSUN_BIN, PATH or target/{release,debug} (cargo build --workspace)"
}

join_args=()
if [ "${1:-}" = --join-command ]; then
  file=${2:?--join-command FILE}
  shift 2
  [[ $file == /* ]] || file=$CALLER_PWD/$file
  wait_s=${BOSUN_JOIN_WAIT:-600}
  for ((t = 0; t < wait_s; t++)); do
    [ -s "$file" ] && break
    [ "$t" = 0 ] && log "waiting up to ${wait_s}s for $file"
    sleep 1
  done
  [ -s "$file" ] || die "--join-command: $file did not appear within ${wait_s}s"
  words=()
  read -r -a words < <(grep -m1 '^ *bosun join ' "$file") || true
  if [ "${#words[@]}" -lt 3 ] || [[ ${words[2]} != https://* ]]; then
    die "--join-command: $file holds no line \`bosun join https://HOST:PORT --token ... --ca-cert-hash ...\`"
  fi
  join_args=("${words[@]:2}")
elif [[ ${1:-} != https://* ]]; then
  sed -n '2,22p' "$0" >&2
  exit 2
fi

[ "$(id -u)" = 0 ] || die "run as root (the agent manages routes, iptables and Docker)"
for tool in ip iptables nft docker; do
  command -v "$tool" >/dev/null || die "$tool is needed and not installed"
done
bosun=$(find_bosun)
docker version >/dev/null 2>&1 ||
  die "cannot reach Docker at ${DOCKER_HOST:-the local socket} (is dockerd running?)"
# host-gw: this host forwards between its pod bridge and the other hosts.
if [ "$(cat /proc/sys/net/ipv4/ip_forward)" != 1 ]; then
  sysctl -qw net.ipv4.ip_forward=1
fi
# The images pods of the examples and tests run; build-images.sh keeps
# those already there.
bash scripts/build-images.sh >&2

exec "$bosun" join "${join_args[@]}" "$@"
