# Shared by the benchmark scripts (sourced, not run): stopping a background
# process, and starting a bosun-control of their own on a free port with
# its data in $WORK/control (sets CONTROL_PID and KC, the admin kubeconfig).

stop() { [ -n "$1" ] && kill "$1" 2>/dev/null && wait "$1" 2>/dev/null || true; }

start_control() {
  "$BIN/bosun-control" --data-dir "$WORK/control" --port 0 "$@" 2>"$WORK/control.log" &
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
