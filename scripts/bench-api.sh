#!/usr/bin/env bash
# Benchmarks bosun-control's API: builds release, starts a fresh server in a
# temp dir on a free port (and, when Debian's etcd is installed, a throwaway
# etcd next to it for comparison), runs control/examples/api_bench/ against
# them, samples both servers' memory, stops them with SIGTERM and removes the
# temp dir, also when something fails. Extra arguments go to api_bench
# (e.g. --concurrency 16 --rate 1000 --duration 20). Results are printed and
# written as JSON to $BENCH_JSON (default bench-api.json in the target dir:
# target-rel for release, target for debug).
# BENCH_CONTROL_BIN=PATH runs that bosun-control binary instead of the one
# just built (e.g. a build of an older commit, for before/after figures).
# BENCH_STORE=etcd runs bosun-control on the throwaway etcd (--store
# etcd://..., under its own --etcd-prefix) instead of its embedded store;
# the bare-etcd figures then come from the same etcd. BENCH_STORE=
# etcd-nocache does so with --watch-cache=false (every list and watch read
# from etcd). BENCH_STORE=all runs the embedded store, etcd and
# etcd-nocache one after the other in one run beside the same etcd (the
# bare-etcd figures beside the first on etcd; JSON per store in
# $BENCH_JSON with -STORE before .json). BENCH_PROFILE=debug
# builds and runs debug binaries (quicker to build; slower figures).
# BENCH_PERF=FILE records bosun-control with `perf record -g` into FILE
# while the benchmark runs (read it with `perf report -i FILE --no-children`).
# BENCH_HEAPTRACK=FILE runs bosun-control under Debian's heaptrack, writing
# its heap profile to FILE.zst (read it with `heaptrack_print FILE.zst`);
# the RSS figures of such a run include heaptrack's own cost.
# BENCH_DEBUG=1 is BENCH_PROFILE=debug.
#
#   scripts/bench-api.sh
#   BENCH_NO_ETCD=1 scripts/bench-api.sh --rate 200
#   BENCH_STORE=etcd BENCH_PROFILE=debug scripts/bench-api.sh
#   BENCH_STORE=all BENCH_PROFILE=debug scripts/bench-api.sh --rate 200 --duration 5
#   BENCH_CONTROL_BIN=/work/base/target-rel/release/bosun-control scripts/bench-api.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
profile="${BENCH_PROFILE:-release}"
[ -n "${BENCH_DEBUG:-}" ] && profile=debug
# Release: the build bench-scale.sh shares (scripts/build-release.sh, in
# target-rel); debug: the tests' target.
if [ "$profile" = release ]; then
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target-rel}"
else
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
fi
json_out="${BENCH_JSON:-$CARGO_TARGET_DIR/bench-api.json}"
if [ "$profile" = release ]; then
    scripts/build-release.sh
else
    cargo build --quiet -p bosun-control --bin bosun-control --example api_bench
fi
# The profilers asked for, installed from Debian's packages if missing.
need=()
[ -n "${BENCH_PERF:-}" ] && ! command -v perf >/dev/null && need+=(linux-perf)
[ -n "${BENCH_HEAPTRACK:-}" ] && ! command -v heaptrack >/dev/null && need+=(heaptrack)
if [ "${#need[@]}" -gt 0 ]; then
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
control_bin="${BENCH_CONTROL_BIN:-$CARGO_TARGET_DIR/$profile/bosun-control}"
[ -x "$control_bin" ] || { echo "no bosun-control binary at $control_bin" >&2; exit 1; }
bench_bin="$CARGO_TARGET_DIR/$profile/examples/api_bench"

work=$(mktemp -d -t bosun-bench.XXXXXX)
bosun_pid=""
etcd_pid=""
sampler_pid=""
perf_pid=""
heaptrack_pid=""

# Sends SIGTERM, waits up to 15 s, then SIGKILL. Prints the exit status
# of $3 (default: the pid itself; heaptrack's for a server run under it).
stop() {
    local name=$1 pid=$2 waited=${3:-$2} status
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "$name (pid $pid) ignored SIGTERM for 15 s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    status=0
    wait "$waited" 2>/dev/null || status=$?
    echo "$name stopped (exit status $status)"
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    [ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null && { wait "$sampler_pid" 2>/dev/null || true; }
    [ -n "$perf_pid" ] && kill -INT "$perf_pid" 2>/dev/null && { wait "$perf_pid" 2>/dev/null || true; }
    # Under heaptrack, waiting for heaptrack also waits for its profile.
    [ -n "$bosun_pid" ] && stop bosun-control "$bosun_pid" "$heaptrack_pid"
    [ -n "$etcd_pid" ] && stop etcd "$etcd_pid"
    if [ "$rc" -ne 0 ]; then
        for log in "$work"/bosun.log "$work"/etcd.log; do
            [ -s "$log" ] && { echo "--- last lines of $log" >&2; tail -n 20 "$log" >&2; }
        done
    fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A TCP port nobody listens on now (there is a small race; fine for a bench).
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 40000))
        if ! ss -Htln "sport = :$p" | grep -q .; then
            echo "$p"
            return
        fi
    done
}

# Waits until "$@" succeeds, up to $1 seconds, failing early if pid $2 died.
wait_until() {
    local secs=$1 pid=$2
    shift 2
    for _ in $(seq $((secs * 10))); do
        "$@" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || { echo "process $pid exited while starting" >&2; return 1; }
        sleep 0.1
    done
    echo "timed out after ${secs}s waiting for: $*" >&2
    return 1
}

# The given Vm* field of /proc/PID/status, in KiB (empty once the process is gone).
vm_kib() {
    local key value _
    while read -r key value _; do
        [ "$key" = "$2:" ] && { echo "$value"; return; }
    done <"/proc/$1/status" 2>/dev/null || true
}

# --- etcd, if Debian's etcd-server is installed
etcd_args=()
if [ -n "${BENCH_NO_ETCD:-}" ]; then
    echo "etcd: skipped (BENCH_NO_ETCD is set)"
elif ! command -v etcd >/dev/null; then
    echo "etcd: not installed (apt-get install -y etcd-server etcd-client); bosun only"
else
    client_port=$(free_port)
    peer_port=$(free_port)
    while [ "$peer_port" = "$client_port" ]; do peer_port=$(free_port); done
    etcd --name bench --data-dir "$work/etcd" \
        --listen-client-urls "http://127.0.0.1:$client_port" \
        --advertise-client-urls "http://127.0.0.1:$client_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "bench=http://127.0.0.1:$peer_port" \
        --initial-cluster-state new \
        --logger zap --log-level warn 2>"$work/etcd.log" &
    etcd_pid=$!
    wait_until 30 "$etcd_pid" curl -fsS "http://127.0.0.1:$client_port/health"
    echo "etcd $(etcd --version | head -n1 | awk '{print $3}') pid $etcd_pid on 127.0.0.1:$client_port"
    etcd_args=(--etcd "http://127.0.0.1:$client_port" --etcd-pid "$etcd_pid")
fi

# --- one benchmark of one bosun-control: $1 is its store (embedded, etcd,
# etcd-nocache: on etcd with --watch-cache=false), the rest api_bench's
# arguments. On etcd it runs under a prefix of its own.
run_store() {
    local store=$1
    shift
    local store_args=() bench_etcd_args=() data="$work/bosun-$store" out="$json_out"
    local suffix=""
    [ "$multi" = 1 ] && suffix="-$store" && out="${json_out%.json}-$store.json"
    case "$store" in
        etcd | etcd-nocache)
            [ -n "$etcd_pid" ] || { echo "BENCH_STORE=$BENCH_STORE needs etcd (apt-get install -y etcd-server)" >&2; exit 1; }
            store_args=(--store "etcd://127.0.0.1:$client_port" --etcd-prefix "/bosun-bench-$store")
            [ "$store" = etcd-nocache ] && store_args+=(--watch-cache=false)
            ;;
    esac
    # The bare-etcd figures: once per run, beside the first server on etcd
    # (or the only server).
    if [ "$store" != embedded ] || [ "$multi" = 0 ]; then
        [ "$bare_done" = 0 ] && bench_etcd_args=("${etcd_args[@]}") && bare_done=1
    fi
    echo
    echo "=== bosun-control on store: $store"
    mkdir -p "$data"
    if [ -n "${BENCH_HEAPTRACK:-}" ]; then
        # heaptrack runs the program as its child: that child is the server.
        heaptrack -o "$BENCH_HEAPTRACK$suffix" "$control_bin" --data-dir "$data" --port 0 \
            "${store_args[@]}" >"$work/heaptrack.log" 2>"$work/bosun.log" &
        heaptrack_pid=$!
        comm=$(basename "$control_bin" | cut -c1-15)
        wait_until 30 "$heaptrack_pid" pgrep -P "$heaptrack_pid" -x "$comm"
        bosun_pid=$(pgrep -P "$heaptrack_pid" -x "$comm")
    else
        "$control_bin" --data-dir "$data" --port 0 "${store_args[@]}" 2>"$work/bosun.log" &
        bosun_pid=$!
    fi
    wait_until 30 "$bosun_pid" test -s "$data/address"
    echo "bosun-control ($control_bin) pid $bosun_pid on $(cat "$data/address") store $store"

    # --- memory sampler: the highest VmRSS seen, every 200 ms
    rm -f "$work/rss.bosun" "$work/rss.etcd"
    (
        bosun_peak=0 etcd_peak=0
        while :; do
            v=$(vm_kib "$bosun_pid" VmRSS)
            [ -n "$v" ] && [ "$v" -gt "$bosun_peak" ] && bosun_peak=$v && echo "$v" >"$work/rss.bosun"
            if [ -n "$etcd_pid" ]; then
                v=$(vm_kib "$etcd_pid" VmRSS)
                [ -n "$v" ] && [ "$v" -gt "$etcd_peak" ] && etcd_peak=$v && echo "$v" >"$work/rss.etcd"
            fi
            sleep 0.2
        done
    ) &
    sampler_pid=$!

    # --- the benchmark
    mkdir -p "$(dirname "$out")"
    if [ -n "${BENCH_PERF:-}" ]; then
        perf record -q -F 999 -g -p "$bosun_pid" -o "$BENCH_PERF$suffix" 2>"$work/perf.log" &
        perf_pid=$!
    fi
    "$bench_bin" --kubeconfig "$data/admin.kubeconfig" --server-pid "$bosun_pid" \
        "${bench_etcd_args[@]}" --json "$out" "$@"
    if [ -n "$perf_pid" ]; then
        kill -INT "$perf_pid" 2>/dev/null || true
        wait "$perf_pid" 2>/dev/null || true
        perf_pid=""
        echo "perf profile of bosun-control: $BENCH_PERF$suffix"
    fi

    kill "$sampler_pid" 2>/dev/null && { wait "$sampler_pid" 2>/dev/null || true; }
    sampler_pid=""

    # --- memory, side by side
    local bosun_hwm bosun_rss etcd_hwm="" etcd_rss="" du_bosun du_etcd
    bosun_hwm=$(vm_kib "$bosun_pid" VmHWM)
    bosun_rss=$(cat "$work/rss.bosun" 2>/dev/null || true)
    if [ -n "$etcd_pid" ]; then
        etcd_hwm=$(vm_kib "$etcd_pid" VmHWM)
        etcd_rss=$(cat "$work/rss.etcd" 2>/dev/null || true)
    fi
    echo
    printf '%-34s %14s %14s\n' "server memory ($store)" "bosun-control" "etcd"
    printf '%-34s %14s %14s\n' "peak RSS (VmHWM at the end)" "$(mib "$bosun_hwm")" "$(mib "$etcd_hwm")"
    printf '%-34s %14s %14s\n' "highest VmRSS sampled every 200 ms" "$(mib "$bosun_rss")" "$(mib "$etcd_rss")"
    du_bosun=$(du -sk "$data" | awk '{print $1}')
    du_etcd=$([ -d "$work/etcd" ] && du -sk "$work/etcd" | awk '{print $1}' || true)
    printf '%-34s %14s %14s\n' "data dir on disk" "$(mib "$du_bosun")" "$(mib "$du_etcd")"
    jq --argjson b "${bosun_hwm:-null}" --argjson bs "${bosun_rss:-null}" \
        --argjson e "${etcd_hwm:-null}" --argjson es "${etcd_rss:-null}" \
        --argjson bd "${du_bosun:-null}" --argjson ed "${du_etcd:-null}" --arg st "$store" \
        '.store = $st | .script_memory = {bosun: {vm_hwm_kib: $b, sampled_vm_rss_kib: $bs, data_dir_kib: $bd},
                            etcd: {vm_hwm_kib: $e, sampled_vm_rss_kib: $es, data_dir_kib: $ed}}' \
        "$out" >"$out.tmp" && mv "$out.tmp" "$out"
    echo "JSON results: $out"

    stop bosun-control "$bosun_pid" "$heaptrack_pid"
    bosun_pid=""
    heaptrack_pid=""
}

mib() { [ -n "$1" ] && awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }' || echo "-"; }

# BENCH_STORE=all: the embedded store, etcd with the watch cache and etcd
# without it, one after the other beside the same etcd.
case "${BENCH_STORE:-embedded}" in
    all) stores=(embedded etcd etcd-nocache) multi=1 ;;
    etcd) stores=(etcd) multi=0 ;;
    etcd-nocache) stores=(etcd-nocache) multi=0 ;;
    embedded) stores=(embedded) multi=0 ;;
    *) echo "BENCH_STORE=$BENCH_STORE: use embedded, etcd, etcd-nocache or all" >&2; exit 1 ;;
esac
bare_done=0
for store in "${stores[@]}"; do
    run_store "$store" "$@"
done
