#!/usr/bin/env bash
# Builds the image the agent runs from on an engine that is not this host's
# (Docker-in-Docker), with no registry at all:
#
#   examples/ci/agent-image.sh [AGENT_BINARY] [TAG]
#
# AGENT_BINARY defaults to target/debug/bosun-agent, TAG to
# bosun.local/agent:dev. The image is a `docker import` of a root
# filesystem holding the agent and what it runs (iptables with its
# extensions, nft, ip, mount, umount, sh), each with the shared libraries
# `ldd` names, copied from this host. The entrypoint makes /sys writable
# (Docker mounts it read-only without --privileged; the service proxy
# turns hairpin mode on there) and runs the agent. Honours
# DOCKER_HOST like docker itself, so it builds straight on the other engine.
set -euo pipefail
cd "$(dirname "$0")/../.."

AGENT=${1:-target/debug/bosun-agent}
TAG=${2:-bosun.local/agent:dev}
TOOLS=(iptables nft ip mount umount sh)

die() { echo "agent-image.sh: $*" >&2; exit 1; }
[ -x "$AGENT" ] || die "$AGENT is not built (cargo build -p bosun-agent)"
for tool in "${TOOLS[@]}" ldd docker tar; do
  command -v "$tool" >/dev/null || die "$tool is needed and not installed"
done

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

# A file at the same path in the image (symlinks followed: the image gets
# the file itself under the name asked for).
copy() {
  [ -e "$root$1" ] && return 0
  mkdir -p "$root$(dirname "$1")"
  cp -L "$1" "$root$1"
}
# Every library a program or library loads.
copy_libs() {
  local lib
  for lib in $(ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
    copy "$lib"
  done
}
copy_with_libs() { copy "$1"; copy_libs "$1"; }

mkdir -p "$root"/{usr/local/bin,etc/bosun,tmp,run,proc,sys,dev,host,var/lib/bosun}
chmod 1777 "$root/tmp"
# Merged /usr (/bin -> usr/bin, ...) as on this host, so every path ldd
# and the scripts name exists once.
for d in bin sbin lib lib32 lib64 libx32; do
  if [ -L "/$d" ]; then
    mkdir -p "$root/$(readlink "/$d")"
    ln -s "$(readlink "/$d")" "$root/$d"
  fi
done
cp "$AGENT" "$root/usr/local/bin/bosun-agent"
copy_libs "$AGENT"
for tool in "${TOOLS[@]}"; do
  path=$(command -v "$tool")
  # xtables-*-multi picks iptables by the name it is called with: keep the
  # real binary and link the tool's name to it.
  real=$(readlink -f "$path")
  copy_with_libs "$real"
  if [ "$real" != "$path" ]; then
    mkdir -p "$root$(dirname "$path")"
    ln -sf "$real" "$root$path"
  fi
done
# iptables' extensions (-m comment, -j MASQUERADE, ...) are loaded at run
# time from their own directory.
xt=$(dirname "$(find /usr/lib /lib -name 'libxt_comment.so' 2>/dev/null | head -1)")
[ -d "$xt" ] || die "iptables extensions (libxt_comment.so) not found"
for so in "$xt"/*.so; do copy_with_libs "$so"; done
for f in /etc/protocols /etc/services /etc/ethertypes /etc/nsswitch.conf; do
  [ -e "$f" ] && copy "$f"
done

cat >"$root/usr/local/bin/entrypoint" <<'SH'
#!/bin/sh
mount -o remount,rw /sys 2>/dev/null || echo "entrypoint: /sys stays read-only (no CAP_SYS_ADMIN?)" >&2
exec /usr/local/bin/bosun-agent "$@"
SH
chmod +x "$root/usr/local/bin/entrypoint"

tar -C "$root" -c . | docker import \
  -c 'ENTRYPOINT ["/usr/local/bin/entrypoint"]' \
  -c 'LABEL io.bosun.image=agent' \
  - "$TAG" >/dev/null
echo "agent-image.sh: built $TAG ($(du -sh "$root" | cut -f1)) on ${DOCKER_HOST:-the local engine}" >&2
