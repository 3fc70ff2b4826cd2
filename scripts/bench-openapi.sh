#!/usr/bin/env bash
# What the OpenAPI documents cost bosun-control: resident memory before any
# document is asked for and after each kind of document is generated, the
# generation time (from the control plane's own log line) and the sizes.
# Usage: scripts/bench-openapi.sh [path/to/bosun-control] (default: target/debug).
set -euo pipefail
BIN=${1:-"$(dirname "$0")/../target/debug/bosun-control"}
DIR=$(mktemp -d)
"$BIN" --data-dir "$DIR/data" --port 0 >"$DIR/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 100); do [ -f "$DIR/data/admin.kubeconfig" ] && break; sleep 0.1; done
export KUBECONFIG="$DIR/data/admin.kubeconfig" HOME="$DIR"
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$PID/status"; }
kubectl get --raw /api >/dev/null
echo "idle:                          RSS $(rss)"
kubectl get --raw /openapi/v3 >/dev/null
echo "after the v3 index (all gvs):  RSS $(rss)"
kubectl get --raw /openapi/v3/apis/apps/v1 | wc -c | xargs echo "  apps/v1 document bytes:"
kubectl get --raw /openapi/v2 | wc -c | xargs echo "  v2 JSON bytes:"
echo "after v2 JSON:                 RSS $(rss)"
kubectl explain deployment --output plaintext-openapiv2 >/dev/null
echo "after v2 protobuf:             RSS $(rss)"
grep -o 'generated the OpenAPI.*' "$DIR/log" | sed 's/\x1b\[[0-9;]*m//g'
