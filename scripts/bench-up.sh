#!/usr/bin/env bash
# Times `bosun up` on this host, as a new user meets it: from the command
# to the node being Ready, and to a first pod Running, for the bosun
# binaries of each BINDIR given (default: this checkout's target/release,
# else target/debug), ROUNDS times each (default 3), alternating between
# them so that both see the same load. Each run has a HOME, data dir and
# node name of its own and is purged (`bosun down --purge --yes`) after.
#
#   scripts/bench-up.sh [BINDIR...]        e.g. target/debug /tmp/old/target/debug
#
# Prints one line per run and the medians per BINDIR. Needs the project's
# images (scripts/build-images.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${ROUNDS:-3}
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
  if [ -x target/release/bosun ]; then dirs=(target/release); else dirs=(target/debug); fi
fi
for d in "${dirs[@]}"; do
  for b in bosun bosun-control bosun-agent; do
    [ -x "$d/$b" ] || { echo "bench-up.sh: no $d/$b" >&2; exit 2; }
  done
done
docker image inspect bosun.local/busybox:1.35 >/dev/null 2>&1 || bash scripts/build-images.sh

work=$(mktemp -d)
current_home="" current_bin=""
cleanup() {
  if [ -n "$current_home" ]; then
    HOME=$current_home "$current_bin/bosun" down --data-dir "$current_home/data" --purge --yes >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
declare -A results
run=0
for round in $(seq 1 "$rounds"); do
  for d in "${dirs[@]}"; do
    run=$((run + 1))
    bin=$(cd "$d" && pwd)
    home=$work/home-$run
    node=benchup-$$-$run
    mkdir -p "$home"
    current_home=$home current_bin=$bin
    export HOME=$home
    t0=$(now)
    "$bin/bosun" up --data-dir "$home/data" --port 0 --node-name "$node" >"$work/up-$run.log" 2>&1 ||
      { cat "$work/up-$run.log"; exit 1; }
    t_up=$(now)
    until [ "$(kubectl --kubeconfig "$home/.bosun/kubeconfig" get node "$node" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; do
      sleep 0.05
    done
    t_ready=$(now)
    cat >"$work/pod-$run.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata: {name: first}
spec:
  containers:
  - {name: c, image: bosun.local/busybox:1.35, command: [sleep, "3600"]}
EOF
    "$bin/bosun" apply -f "$work/pod-$run.yaml" >/dev/null
    until [ "$(kubectl --kubeconfig "$home/.bosun/kubeconfig" get pod first -o 'jsonpath={.status.phase}' 2>/dev/null)" = Running ]; do
      sleep 0.05
    done
    t_pod=$(now)
    up_s=$(echo "$t_up - $t0" | bc)
    ready_s=$(echo "$t_ready - $t0" | bc)
    pod_s=$(echo "$t_pod - $t0" | bc)
    printf '%-40s round %d: up returned %.2f s, node Ready %.2f s, first pod Running %.2f s\n' \
      "$d" "$round" "$up_s" "$ready_s" "$pod_s"
    results[$d]+="$up_s $ready_s $pod_s;"
    "$bin/bosun" down --data-dir "$home/data" --purge --yes >/dev/null 2>&1
    current_home=""
  done
done

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for d in "${dirs[@]}"; do
  IFS=';' read -r -a rows <<<"${results[$d]}"
  col() { for r in "${rows[@]}"; do [ -n "$r" ] && echo "$r" | awk -v c="$1" '{print $c}'; done | median; }
  printf 'median %-33s up returned %.2f s, node Ready %.2f s, first pod Running %.2f s\n' \
    "$d" "$(col 1)" "$(col 2)" "$(col 3)"
done
