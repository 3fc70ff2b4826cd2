#!/usr/bin/env bash
# Provisions one VM of examples/vagrant/Vagrantfile (run by Vagrant as root):
#
#   provision.sh control-plane NAME IP CP_IP CP_IPS
#       starts this VM's etcd member (a cluster of one, which the others
#       join), builds bosun, `bosun up --store` with the agent as node NAME,
#       writes the join commands (nodes, control planes)
#   provision.sh control-plane-join NAME IP CP_IP CP_IPS
#       adds this VM's etcd member to the cluster's and joins as a further
#       control plane with the uploaded certificates
#   provision.sh worker NAME IP CP_IP CP_IPS
#       joins as node NAME through scripts/node-join.sh, its agent given
#       every control plane (CP_IPS, comma-separated)
#
# etcd speaks TLS only, to clients and peers alike, and requires a
# certificate of its own CA from both (as kubeadm's etcd): cp makes the CA
# (its key never leaves cp, in /root/etcd-ca), a certificate per
# control-plane VM (serving and peer, for its IP) and the control planes'
# client certificate, and hands each VM its own through
# /vagrant/etcd-pki/IP/. `bosun up --store ... --etcd-cafile ...` keeps the
# client certificate, and a joining control plane is handed it in the
# uploaded bundle.
#
# The repository is at /bosun, the Vagrantfile's folder (shared by every
# VM) at /vagrant. The control-plane VM builds the binaries once and leaves
# them in /vagrant/bin for the workers; the join command (a bootstrap token
# good for 24 h) goes to /vagrant/join-command. Running it again
# (`vagrant provision`) keeps what runs.
set -euo pipefail
ROLE=${1:?control-plane|control-plane-join|worker} NAME=${2:?node name} IP=${3:?node IP}
CP_IP=${4:?control-plane IP} CP_IPS=${5:-$4}
REPO=/bosun
SHARED=/vagrant
BINS=(bosun bosun-agent bosun-control)
export DEBIAN_FRONTEND=noninteractive

log() { echo "provision($NAME): $*"; }

# `etcd://A:2379,B:2379,...` of every control-plane VM, and the API servers.
STORE="etcd://$(echo "$CP_IPS" | sed 's/,/:2379,/g'):2379"
API_SERVERS="https://$(echo "$CP_IPS" | sed 's|,|:6443,https://|g'):6443"

# The etcd PKI, made once on cp (kept if it exists): the CA in
# /root/etcd-ca (0700), and in $SHARED/etcd-pki/IP/ for each control-plane
# IP its member certificate (serving and peer: IP and 127.0.0.1) with the
# CA certificate and the control planes' client certificate.
make_etcd_pki() {
  local ca=/root/etcd-ca out="$SHARED/etcd-pki" ip dir ext
  install -d -m 0700 "$ca"
  if [ ! -s "$ca/ca.key" ]; then
    openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
      -keyout "$ca/ca.key" -out "$ca/ca.crt" -days 3650 -subj "/CN=bosun-vagrant-etcd-ca" 2>/dev/null
  fi
  # sign NAME CN SANS USAGES: $ca/NAME.{key,crt}
  sign() {
    ext=$(mktemp)
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=%s\n' "$4" >"$ext"
    [ -n "$3" ] && printf 'subjectAltName=%s\n' "$3" >>"$ext"
    openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 \
      -keyout "$ca/$1.key" -out "$ca/$1.csr" -subj "/CN=$2" 2>/dev/null
    openssl x509 -req -in "$ca/$1.csr" -CA "$ca/ca.crt" -CAkey "$ca/ca.key" -CAcreateserial \
      -out "$ca/$1.crt" -days 3650 -extfile "$ext" 2>/dev/null
    rm -f "$ext" "$ca/$1.csr"
  }
  [ -s "$ca/client.crt" ] || sign client kube-apiserver-etcd-client "" clientAuth
  for ip in ${CP_IPS//,/ }; do
    [ -s "$ca/member-$ip.crt" ] || sign "member-$ip" "etcd-$ip" "IP:$ip,IP:127.0.0.1" serverAuth,clientAuth
    dir="$out/$ip"
    install -d -m 0700 "$dir"
    install -m 0644 "$ca/ca.crt" "$dir/ca.crt"
    install -m 0644 "$ca/member-$ip.crt" "$dir/member.crt"
    install -m 0600 "$ca/member-$ip.key" "$dir/member.key"
    install -m 0644 "$ca/client.crt" "$dir/client.crt"
    install -m 0600 "$ca/client.key" "$dir/client.key"
  done
}

# This VM's copy of its etcd files (/etc/bosun-etcd: the member's for
# etcd's own user, the client's for root).
ETCD_PKI=/etc/bosun-etcd
install_etcd_pki() {
  local from="$SHARED/etcd-pki/$IP"
  [ -s "$from/member.crt" ] || { log "$from is missing: provision cp first"; exit 1; }
  install -d -m 0755 "$ETCD_PKI"
  install -m 0644 "$from/ca.crt" "$from/member.crt" "$from/client.crt" "$ETCD_PKI/"
  install -m 0600 "$from/client.key" "$ETCD_PKI/client.key"
  install -m 0600 "$from/member.key" "$ETCD_PKI/member.key"
}
ETCD_CLIENT=(--cacert "$ETCD_PKI/ca.crt" --cert "$ETCD_PKI/client.crt" --key "$ETCD_PKI/client.key")
BOSUN_ETCD=(--etcd-cafile "$ETCD_PKI/ca.crt" --etcd-certfile "$ETCD_PKI/client.crt"
  --etcd-keyfile "$ETCD_PKI/client.key")

# This VM's etcd member (Debian's etcd-server, run by its etcd.service,
# which reads /etc/default/etcd): $1 is `new` (the first) or `existing`,
# $2 the initial cluster (NAME=https://IP:2380,...).
etcd_member() {
  apt-get install -y -qq etcd-server etcd-client >/dev/null
  install_etcd_pki
  chown etcd "$ETCD_PKI/member.key"
  cat >/etc/default/etcd <<CONF
ETCD_NAME=$NAME
ETCD_DATA_DIR=/var/lib/etcd/bosun
ETCD_LISTEN_CLIENT_URLS=https://$IP:2379,https://127.0.0.1:2379
ETCD_ADVERTISE_CLIENT_URLS=https://$IP:2379
ETCD_LISTEN_PEER_URLS=https://$IP:2380
ETCD_INITIAL_ADVERTISE_PEER_URLS=https://$IP:2380
ETCD_INITIAL_CLUSTER=$2
ETCD_INITIAL_CLUSTER_STATE=$1
ETCD_INITIAL_CLUSTER_TOKEN=bosun-vagrant
ETCD_CERT_FILE=$ETCD_PKI/member.crt
ETCD_KEY_FILE=$ETCD_PKI/member.key
ETCD_TRUSTED_CA_FILE=$ETCD_PKI/ca.crt
ETCD_CLIENT_CERT_AUTH=true
ETCD_PEER_CERT_FILE=$ETCD_PKI/member.crt
ETCD_PEER_KEY_FILE=$ETCD_PKI/member.key
ETCD_PEER_TRUSTED_CA_FILE=$ETCD_PKI/ca.crt
ETCD_PEER_CLIENT_CERT_AUTH=true
CONF
  systemctl enable etcd >/dev/null
  systemctl restart etcd
  for _ in $(seq 1 60); do
    ETCDCTL_API=3 etcdctl --endpoints "https://127.0.0.1:2379" "${ETCD_CLIENT[@]}" \
      endpoint health >/dev/null 2>&1 && return 0
    sleep 1
  done
  log "etcd did not become healthy: journalctl -u etcd"
  exit 1
}

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
    # A one-member etcd (kept if it exists); cp2 and cp3 add theirs.
    make_etcd_pki
    if [ ! -d /var/lib/etcd/bosun ]; then
      etcd_member new "$NAME=https://$IP:2380"
    fi
    # The control plane listens beyond loopback and its certificate
    # covers CP_IP; this VM's agent is node NAME at IP (never 10.0.2.15).
    # It prints the command further control planes join with (certificates
    # uploaded encrypted, good for 2 h): kept for cp2 and cp3.
    bosun up --store "etcd://$IP:2379" "${BOSUN_ETCD[@]}" --advertise-address "$CP_IP" \
      --node-name "$NAME" --node-ip "$IP" --timeout 120s | tee /root/bosun-up.txt
    rm -f "$SHARED/control-plane-join-command"
    if grep -q -- '--control-plane --certificate-key' /root/bosun-up.txt; then
      grep -- '--control-plane --certificate-key' /root/bosun-up.txt | sed 's/^ *//' \
        >"$SHARED/control-plane-join-command.tmp"
      chmod 0600 "$SHARED/control-plane-join-command.tmp"
      mv "$SHARED/control-plane-join-command.tmp" "$SHARED/control-plane-join-command"
    fi
    bosun token create --ttl 24h --description "vagrant workers" --print-join-command \
      >"$SHARED/join-command.tmp"
    chmod 0600 "$SHARED/join-command.tmp"
    mv "$SHARED/join-command.tmp" "$SHARED/join-command"
    # The vagrant user runs bosun too (`vagrant ssh cp -c 'bosun get nodes'`).
    install -d -o vagrant -g vagrant /home/vagrant/.bosun
    install -m 0600 -o vagrant -g vagrant /root/.bosun/kubeconfig /home/vagrant/.bosun/kubeconfig
    log "control plane up at https://$CP_IP:6443; workers join with $SHARED/join-command"
    ;;
  control-plane-join)
    for b in "${BINS[@]}"; do
      [ -x "$SHARED/bin/$b" ] || { log "$SHARED/bin/$b is missing: provision cp first"; exit 1; }
      install -m 0755 "$SHARED/bin/$b" /usr/local/bin/
    done
    if [ ! -d /var/lib/etcd/bosun ]; then
      # Added to the cluster's etcd first, then started knowing its peers.
      apt-get install -y -qq etcd-client >/dev/null
      install_etcd_pki
      ETCDCTL_API=3 etcdctl --endpoints "https://$CP_IP:2379" "${ETCD_CLIENT[@]}" \
        member add "$NAME" --peer-urls "https://$IP:2380" >/root/etcd-member-add.txt
      initial=$(sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p' /root/etcd-member-add.txt)
      etcd_member existing "$initial"
    fi
    [ -s "$SHARED/control-plane-join-command" ] ||
      { log "$SHARED/control-plane-join-command is missing: provision cp first"; exit 1; }
    # The printed command (`bosun join URL ... --store etcd://CP:2379`) names
    # cp's etcd only; this control plane is given every member.
    read -r -a join <"$SHARED/control-plane-join-command"
    args=()
    skip=0
    for a in "${join[@]:2}"; do
      if [ "$skip" = 1 ]; then skip=0; continue; fi
      if [ "$a" = "--store" ]; then skip=1; continue; fi
      args+=("$a")
    done
    bosun join "${args[@]}" --store "$STORE" --advertise-address "$IP" --timeout 120s
    log "control plane up at https://$IP:6443"
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
      --join-command "$SHARED/join-command" --node-name "$NAME" --node-ip "$IP" \
      --api-servers "$API_SERVERS"
    ;;
  *)
    echo "provision.sh: unknown role $ROLE (control-plane or worker)" >&2
    exit 2
    ;;
esac
