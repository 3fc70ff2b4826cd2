# Shared by the benchmark scripts (sourced, not run): stopping a background
# process, and starting a bosun-control of their own on a free port with
# its data in $WORK/control (sets CONTROL_PID and KC, the admin kubeconfig).

stop() { [ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true; }

# CONTROL_WRAP: words put before the bosun-control command, for a
# profiler that must start with it; they must exec the binary (as `env
# LD_PRELOAD=...` does) so that CONTROL_PID stays the control plane's pid
# (the one stopped and measured). Heaptrack, e.g.:
#   mkfifo D/fifo; /usr/lib/heaptrack/libexec/heaptrack_interpret <D/fifo | zstd >D/control.zst &
#   CONTROL_WRAP="env LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=D/fifo"
# then `heaptrack_print D/control.zst` (one control run per fifo).
start_control() {
  # shellcheck disable=SC2086 # CONTROL_WRAP is words
  ${CONTROL_WRAP:-} "$BIN/bosun-control" --data-dir "$WORK/control" --port 0 "$@" 2>"$WORK/control.log" &
  CONTROL_PID=$!
  for _ in $(seq 200); do [ -s "$WORK/control/address" ] && break; sleep 0.1; done
  KC="$WORK/control/admin.kubeconfig"
}

# bosun's filter chain BOSUN-FORWARD, which an agent on this engine makes
# (agent/src/network/firewall.rs) and leaves when it stops: noted
# when this file is sourced, removed by remove_forward_chain_if_new at the
# end if the run made it.
FORWARD_CHAIN_WAS_THERE=0
iptables -w -S BOSUN-FORWARD >/dev/null 2>&1 && FORWARD_CHAIN_WAS_THERE=1
remove_forward_chain_if_new() {
  [ "$FORWARD_CHAIN_WAS_THERE" = 0 ] || return 0
  while iptables -w -D DOCKER-USER -j BOSUN-FORWARD 2>/dev/null; do :; done
  iptables -w -F BOSUN-FORWARD 2>/dev/null || true
  iptables -w -X BOSUN-FORWARD 2>/dev/null || true
}
