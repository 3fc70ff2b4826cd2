#!/usr/bin/env bash
# Runs every test of bosun on this machine: formatting and lints, unit
# tests, and the integration tests that start real bosun processes.
# Installs what the tests need and is missing (the Rust toolchain itself is
# the machine's).
set -euo pipefail
cd "$(dirname "$0")/.."

# Leftovers of earlier test runs that were killed (by a timeout, ^C)
# before their guards could clean up: containers and networks of the test
# nodes (`e2e-<pid>-...` from agent/tests/cluster, `rt-test-<pid>-...` from
# agent/tests/common), labelled io.bosun.node. Only those made before this
# run by a test binary that is no longer running go; a real node's, or a
# running test's, are never touched.
sweep_stale_test_resources() {
  local run_start
  run_start=$(date +%s)
  stale_node() { # node, created (RFC 3339)
    local node=$1 created pid
    created=$(date -d "$2" +%s 2>/dev/null) || return 1
    [ "$created" -lt "$run_start" ] || return 1
    if [[ $node =~ ^(e2e|rt-test)-([0-9]+)- ]]; then
      pid=${BASH_REMATCH[2]}
      ! kill -0 "$pid" 2>/dev/null
    elif [[ $node =~ ^rt-test-[0-9a-f]{8}$ ]]; then
      # Named before the pid was part of the name: stale after an hour.
      [ $((run_start - created)) -gt 3600 ]
    else
      return 1
    fi
  }
  local id node created swept=0
  while read -r id node created; do
    [ -n "$id" ] || continue
    if stale_node "$node" "$created"; then
      docker rm -f -v "$id" >/dev/null 2>&1 && swept=$((swept + 1))
    fi
  done < <(docker ps -aq --filter label=io.bosun.node |
    xargs -r docker inspect -f '{{.Id}} {{index .Config.Labels "io.bosun.node"}} {{.Created}}')
  while read -r id node created; do
    [ -n "$id" ] || continue
    if stale_node "$node" "$created"; then
      docker network rm "$id" >/dev/null 2>&1 && swept=$((swept + 1))
    fi
  done < <(docker network ls -q --filter label=io.bosun.node |
    xargs -r docker network inspect -f '{{.Id}} {{index .Labels "io.bosun.node"}} {{.Created}}')
  # The service proxy's and the network policies' tables (`ip bosun-<node>`,
  # `ip bosun-np-<node>`) of killed test agents.
  local family name pid
  while read -r _ family name; do
    if [[ $family == ip && $name =~ ^bosun-(np-)?e2e-([0-9]+)- ]]; then
      pid=${BASH_REMATCH[2]}
      if ! kill -0 "$pid" 2>/dev/null; then
        nft delete table ip "$name" && swept=$((swept + 1))
      fi
    fi
  done < <(command -v nft >/dev/null 2>&1 && nft list tables)
  # The iptables mode's chains (`BOSUN-<hash>-...`) of killed test agents,
  # found by the comment `bosun-<node>` on the jumps to them: the jumps
  # deleted and the chains flushed, then the chains deleted (iptables-nft
  # cannot do both in one transaction).
  local prefix table flush delete
  while read -r pid prefix; do
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null || continue
    flush="" delete=""
    for table in filter nat; do
      flush+="*$table"$'\n'
      # (A table may hold none of them: grep finding nothing is no error.)
      flush+=$(iptables-save -t "$table" 2>/dev/null | { grep -E "^-A [A-Z-]+ .*-j $prefix" || true; } | sed 's/^-A /-D /')$'\n'
      flush+=$(iptables-save -t "$table" 2>/dev/null | sed -nE "s/^:($prefix[^ ]*) .*/-F \1/p")$'\n'
      flush+="COMMIT"$'\n'
      delete+="*$table"$'\n'
      delete+=$(iptables-save -t "$table" 2>/dev/null | sed -nE "s/^:($prefix[^ ]*) .*/-X \1/p")$'\n'
      delete+="COMMIT"$'\n'
    done
    grep -v '^$' <<<"$flush" | iptables-restore -w --noflush &&
      grep -v '^$' <<<"$delete" | iptables-restore -w --noflush && swept=$((swept + 1))
  done < <(command -v iptables-save >/dev/null 2>&1 && iptables-save 2>/dev/null |
    sed -nE 's/^-A [A-Z-]+ -m comment --comment "?bosun-e2e-([0-9]+)-[^ "]*"? -j (BOSUN-[A-Z2-7]{6}-).*/\1 \2/p' | sort -u)
  echo "== swept $swept stale test containers, networks, nftables tables and iptables chains"
  # The multi-host test's namespaces and engines (scripts/hosts.sh), if a
  # killed run left them.
  if ip netns list 2>/dev/null | grep -q '^bosun-h[0-9]'; then
    bash scripts/hosts.sh down && echo "== took down hosts a killed run left"
  fi
}
# `--store etcd` (or BOSUN_TEST_STORE=etcd): every end-to-end test's
# control plane on a throwaway etcd of its own instead of the embedded
# store; the few that test the embedded store itself stay on it (README,
# "Tests").
if [ "${1:-}" = "--store" ] || [[ ${1:-} == --store=* ]]; then
  if [ "$1" = "--store" ]; then
    store=${2:-}
    shift $(($# < 2 ? 1 : 2))
  else
    store=${1#--store=}
    shift
  fi
  case "$store" in
  etcd | embedded) export BOSUN_TEST_STORE=$store ;;
  *)
    echo "--store ${store}: expected etcd or embedded" >&2
    exit 2
    ;;
  esac
fi
if [ "${1:-}" = "--sweep-only" ]; then
  sweep_stale_test_resources
  exit 0
fi
sweep_stale_test_resources

# The test agents let pods of different nodes on this engine reach each
# other through bosun's filter chain BOSUN-FORWARD, jumped to from
# DOCKER-USER (agent/src/network/firewall.rs). Leave the host as
# found: remove the chain and its jump at the end if this run made them.
forward_chain_present() { iptables -w -S BOSUN-FORWARD >/dev/null 2>&1; }
remove_forward_chain=0
if command -v iptables >/dev/null 2>&1 && ! forward_chain_present; then
  remove_forward_chain=1
fi
# At the end, also after a failure: what the run's killed test agents left
# (their test processes are gone by then), then the forward chain.
cleanup_at_exit() {
  sweep_stale_test_resources || true
  if [ "$remove_forward_chain" = 1 ]; then
    while iptables -w -D DOCKER-USER -j BOSUN-FORWARD 2>/dev/null; do :; done
    iptables -w -F BOSUN-FORWARD 2>/dev/null
    iptables -w -X BOSUN-FORWARD 2>/dev/null || true
  fi
}
trap cleanup_at_exit EXIT

need_apt=()
command -v kubectl >/dev/null 2>&1 || need_apt+=(kubectl)
# The agent's service proxy programs nftables with `nft`.
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
# tests/systemd.rs boots a real systemd in namespaces of its own
# (scripts/systemd-sandbox.sh); its binaries are all it needs.
[ -x /lib/systemd/systemd ] && command -v journalctl >/dev/null 2>&1 || need_apt+=(systemd)
# The etcd store's build compiles etcd's gRPC protos (etcd-client needs
# protoc), and its tests and the etcd e2e test start etcd members.
command -v protoc >/dev/null 2>&1 || need_apt+=(protobuf-compiler)
command -v etcd >/dev/null 2>&1 || need_apt+=(etcd-server)
# agent/tests/webview.rs drives Debian's chromium headless over the
# DevTools protocol.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing ${need_apt[*]}"
  apt-get update -qq
  if [[ " ${need_apt[*]} " == *" nftables "* ]]; then
    apt-get install -y -qq nftables
  fi
  if [[ " ${need_apt[*]} " == *" systemd "* ]]; then
    apt-get install -y -qq systemd
  fi
  for pkg in protobuf-compiler etcd-server chromium; do
    if [[ " ${need_apt[*]} " == *" $pkg "* ]]; then
      apt-get install -y -qq "$pkg"
    fi
  done
  if [[ " ${need_apt[*]} " == *" kubectl "* ]]; then
    # Debian's kubectl is packaged as kubernetes-client.
    apt-get install -y -qq kubectl >/dev/null 2>&1 || apt-get install -y -qq kubernetes-client
  fi
fi

# Two cores: one build job per core, and test binaries that start servers
# run two at a time.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
# The clusters the tests start with `bosun up`/`join` run under bosun's
# own supervisor, also on a host whose service manager is systemd (units
# in /etc/systemd/system are not a test's to make); tests/systemd.rs
# shows the units in a systemd of its own.
export BOSUN_SERVICE_MANAGER=bosun
# A one-off build gains nothing from incremental state, which costs disk
# (over 20 GB for this workspace) and time.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

echo "== control planes on the ${BOSUN_TEST_STORE:-embedded} store"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== module cycles"
python3 scripts/module-cycles.py
echo "== the map of the code (README, docs/code-map.md)"
python3 scripts/code-map.py
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo build"
cargo build --workspace --quiet
echo "== cargo test"
cargo test --workspace --no-run --quiet
# The CronJob e2e waits for real minute boundaries (about 90 s, nearly all
# idle): it runs beside the other tests instead of after them, and its
# output is shown when they are done.
beside=cronjobs_run_on_schedule_on_docker
beside_log=$(mktemp)
# The test binary itself, as cargo would run it (from its package's
# folder), so the two runs do not wait on each other's cargo lock.
beside_exe=$(cargo test -p bosun-agent --test cronjob --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for m in map(json.loads, sys.stdin):
    if m.get("executable") and m["target"]["name"] == "cronjob":
        print(m["executable"])')
[ -x "$beside_exe" ] || { echo "== no cronjob test binary"; exit 1; }
(cd agent && exec "$beside_exe" "$beside") >"$beside_log" 2>&1 &
beside_pid=$!
status=0
# Every test binary runs even after one fails, so a run shows all that
# fail, not only the first.
cargo test --workspace --no-fail-fast -- --test-threads="${BOSUN_TEST_THREADS:-2}" --skip "$beside" || status=$?
beside_status=0
wait "$beside_pid" || beside_status=$?
echo "== agent/tests/cronjob.rs (run beside the others)"
cat "$beside_log"
rm -f "$beside_log"
[ "$beside_status" = 0 ] || echo "== the CronJob e2e failed"
[ "$status" = 0 ] && [ "$beside_status" = 0 ]
