#!/usr/bin/env bash
# Provisions one VM of examples/vagrant/Vagrantfile (run by Vagrant as root):
#
#   provision.sh control-plane NAME IP CP_IP   builds bosun, `bosun up`
#                                              with the agent as node NAME,
#                                              writes the join command
#   provision.sh worker NAME IP CP_IP          joins as node NAME through
#                                              scripts/node-join.sh
#
# The repository is at /bosun, the Vagrantfile's folder (shared by every
# VM) at /vagrant. The control-plane VM builds the binaries once and leaves
# them in /vagrant/bin for the workers; the join command (a bootstrap token
# good for 24 h) goes to /vagrant/join-command. Running it again
# (`vagrant provision`) keeps what runs.
set -euo pipefail
ROLE=${1:?control-plane|worker} NAME=${2:?node name} IP=${3:?node IP} CP_IP=${4:?control-plane IP}
REPO=/bosun
SHARED=/vagrant
BINS=(bosun bosun-agent bosun-control)
export DEBIAN_FRONTEND=noninteractive

log() { echo "provision($NAME): $*"; }

# What every node needs: Docker (Debian's engine), iptables, nftables and
# iproute2 for the agent, busybox-static for the project's images.
log "installing Docker and the agent's tools"
apt-get update -qq
apt-get install -y -qq docker.io iptables nftables iproute2 busybox-static curl ca-certificates >/dev/null
systemctl enable --now docker >/dev/null

case "$ROLE" in
  control-plane)
    # A stale join command from an earlier `vagrant up` must not be read.
    rm -f "$SHARED/join-command"
    if ! command -v cargo >/dev/null && [ ! -x /root/.cargo/bin/cargo ]; then
      log "installing Rust (rustup) and a C toolchain"
      apt-get install -y -qq build-essential pkg-config >/dev/null
      curl -fsSL https://sh.rustup.rs | sh -s -- -y --profile minimal >/dev/null
    fi
    export PATH=/root/.cargo/bin:$PATH
    log "building bosun (release; several minutes the first time)"
    # The target dir on the VM's own disk: the shared folder is slow and
    # cannot hard-link.
    (cd "$REPO" && CARGO_TARGET_DIR=/var/tmp/bosun-target cargo build --release -q \
      -p bosun -p bosun-agent -p bosun-control)
    mkdir -p "$SHARED/bin"
    for b in "${BINS[@]}"; do
      install -m 0755 "/var/tmp/bosun-target/release/$b" /usr/local/bin/
      install -m 0755 "/var/tmp/bosun-target/release/$b" "$SHARED/bin/"
    done
    bash "$REPO/scripts/build-images.sh"
    # The control plane listens beyond loopback and its certificate
    # covers CP_IP; this VM's agent is node NAME at IP (never 10.0.2.15).
    bosun up --advertise-address "$CP_IP" --node-name "$NAME" --node-ip "$IP" --timeout 120s
    bosun token create --ttl 24h --description "vagrant workers" --print-join-command \
      >"$SHARED/join-command.tmp"
    chmod 0600 "$SHARED/join-command.tmp"
    mv "$SHARED/join-command.tmp" "$SHARED/join-command"
    # The vagrant user runs bosun too (`vagrant ssh cp -c 'bosun get nodes'`).
    install -d -o vagrant -g vagrant /home/vagrant/.bosun
    install -m 0600 -o vagrant -g vagrant /root/.bosun/kubeconfig /home/vagrant/.bosun/kubeconfig
    log "control plane up at https://$CP_IP:6443; workers join with $SHARED/join-command"
    ;;
  worker)
    log "waiting for the binaries the control-plane VM builds"
    for _ in $(seq 1 1800); do
      [ -x "$SHARED/bin/bosun-agent" ] && break
      sleep 1
    done
    for b in "${BINS[@]}"; do
      [ -x "$SHARED/bin/$b" ] || { log "$SHARED/bin/$b is missing: provision cp first"; exit 1; }
      install -m 0755 "$SHARED/bin/$b" /usr/local/bin/
    done
    # The same step the namespace hosts of the multi-host tests run
    # (scripts/hosts.sh join): checks, images, `bosun join`.
    BOSUN_BIN=/usr/local/bin bash "$REPO/scripts/node-join.sh" \
      --join-command "$SHARED/join-command" --node-name "$NAME" --node-ip "$IP"
    ;;
  *)
    echo "provision.sh: unknown role $ROLE (control-plane or worker)" >&2
    exit 2
    ;;
esac
