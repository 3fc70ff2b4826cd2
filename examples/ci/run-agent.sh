#!/usr/bin/env bash
# Runs bosun's agent as a container on a Docker Engine that is not this
# host's (Docker-in-Docker, a CI service, a harness host), as kind runs the
# kubelet inside its node container:
#
#   examples/ci/run-agent.sh --kubeconfig FILE --node-name NAME --node-ip IP \
#       [--engine-socket PATH] [--data-root DIR] [--image TAG] [-- AGENT_ARGS...]
#
# DOCKER_HOST names the engine (e.g. tcp://localhost:2375). The container
# (`bosun-agent-NAME`) runs in the engine's network and PID namespaces
# with the capabilities it uses (NET_ADMIN and NET_RAW for iptables and
# nftables, SYS_ADMIN to mount tmpfs volumes; not --privileged, which some
# hosts cannot grant), so probes, port-forward, the node-local DNS server, the
# service proxy and iptables act where the pods are. It talks to the engine
# through the engine's own socket (PATH, default /var/run/docker.sock, a
# path on the engine), keeps pod volumes in DIR/agent-NAME (default
# /var/lib/bosun), which is the same path on the engine and shared with it
# (tmpfs volumes propagate; DIR must be a shared mount there, as
# docker:dind makes / shared), and sees the engine's / at /host, where
# hostPath volumes are checked (--host-root). The kubeconfig is copied in.
# Remove it with `docker rm -f bosun-agent-NAME`.
set -euo pipefail

die() { echo "run-agent.sh: $*" >&2; exit 1; }
kubeconfig= node= ip= socket=/var/run/docker.sock data=/var/lib/bosun image=bosun.local/agent:dev
while [ $# -gt 0 ]; do
  case "$1" in
    --kubeconfig) kubeconfig=${2:?}; shift 2 ;;
    --node-name) node=${2:?}; shift 2 ;;
    --node-ip) ip=${2:?}; shift 2 ;;
    --engine-socket) socket=${2:?}; shift 2 ;;
    --data-root) data=${2:?}; shift 2 ;;
    --image) image=${2:?}; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[ -n "$kubeconfig" ] || die "--kubeconfig is required"
[ -r "$kubeconfig" ] || die "--kubeconfig $kubeconfig: not readable"
[ -n "$node" ] || die "--node-name is required"
[ -n "$ip" ] || die "--node-ip is required: the engine's address the control plane reaches the agent at"

name=bosun-agent-$node
docker rm -f "$name" >/dev/null 2>&1 || true
docker create --name "$name" --label "io.bosun.agent-container=$node" \
  --cap-add NET_ADMIN --cap-add NET_RAW --cap-add SYS_ADMIN \
  --security-opt apparmor=unconfined --security-opt seccomp=unconfined \
  --network host --pid host --restart on-failure \
  -v "$socket:/var/run/docker.sock" \
  -v "$data:$data:rshared" \
  -v /:/host \
  -e BOSUN_HOST_ROOT=/host \
  -e DOCKER_HOST=unix:///var/run/docker.sock \
  "$image" \
  --kubeconfig /etc/bosun/kubeconfig --node-name "$node" --node-ip "$ip" \
  --data-dir "$data/agent-$node" "$@" >/dev/null
docker cp "$kubeconfig" "$name:/etc/bosun/kubeconfig"
docker start "$name" >/dev/null
echo "run-agent.sh: agent $name started on ${DOCKER_HOST:-the local engine}" >&2
