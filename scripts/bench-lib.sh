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
