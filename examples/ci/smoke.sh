#!/usr/bin/env bash
# What the CI job checks against bosun whose agent runs on another Docker
# Engine (agent/tests/dind.rs runs the same against a harness engine):
#
#   KUBECONFIG=... DOCKER_HOST=<the agent's engine> examples/ci/smoke.sh
#
# - the seeds' readiness-http pod turns Ready through its HTTP probe, which
#   the agent sends from the engine's network to the pod's IP;
# - `bosun exec` and `bosun logs` reach the pod, and `bosun port-forward`
#   reaches its port (the agent connects to it from the engine's network);
# - a hostPath volume (type: Directory) is the engine's filesystem: a file
#   written there through the engine is what the pod reads, and what the
#   pod writes is there afterwards.
# BOSUN (default: bosun on PATH), HOSTPATH_DIR (default
# /tmp/bosun-ci-hostpath, a path on the engine), WAIT (seconds, default 120).
# Removes its pods at the end, also when a check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."

BOSUN=${BOSUN:-bosun}
DIR=${HOSTPATH_DIR:-/tmp/bosun-ci-hostpath}
WAIT=${WAIT:-120}
BUSYBOX=bosun.local/busybox:1.35

say() { echo "smoke.sh: $*" >&2; }
fail() { say "FAILED: $*"; "$BOSUN" get pods -o wide >&2 || true; exit 1; }
until_ok() { # WHAT CMD...: retries CMD for up to WAIT seconds
  local what=$1 deadline=$((SECONDS + WAIT))
  shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "timed out waiting for $what"
    sleep 0.5
  done
}
column() { "$BOSUN" get pod "$1" | awk -v c="$2" 'NR == 2 {print $c}'; }
ready() { [ "$(column "$1" 2)" = 1/1 ]; }
completed() { [ "$(column "$1" 3)" = Completed ]; }
pf=
cleanup() {
  [ -z "$pf" ] || kill "$pf" 2>/dev/null || true
  "$BOSUN" delete pod readiness-http dind-hostpath --ignore-not-found >/dev/null 2>&1 || true
}
trap cleanup EXIT

say "readiness-http: Ready through its HTTP probe once /www/ready exists"
"$BOSUN" apply -f examples/readiness-http.yaml >/dev/null
until_ok "readiness-http to run (bosun exec)" "$BOSUN" exec readiness-http -- true
ready readiness-http && fail "readiness-http is Ready before /www/ready exists"
"$BOSUN" exec readiness-http -- touch /www/ready
until_ok "readiness-http to turn Ready" ready readiness-http
name=$("$BOSUN" exec readiness-http -- hostname)
[ "$name" = readiness-http ] || fail "bosun exec hostname printed '$name'"
say "readiness-http is Ready; exec printed its hostname"

pf_log=$(mktemp)
"$BOSUN" port-forward readiness-http :80 >"$pf_log" 2>&1 &
pf=$!
until_ok "bosun port-forward to listen" grep -q '^Forwarding from 127.0.0.1:' "$pf_log"
port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) -> 80$/\1/p' "$pf_log" | head -1)
page=$(curl -fsS --max-time 10 "http://127.0.0.1:$port/") || fail "port-forward: $(cat "$pf_log")"
[[ $page == *"web v1"* ]] || fail "port-forward to readiness-http:80 served '$page'"
kill "$pf" 2>/dev/null || true
rm -f "$pf_log"
say "port-forward reached the pod's port 80"

say "hostPath $DIR is the engine's"
docker run --rm -v "$DIR:/d" "$BUSYBOX" sh -c 'echo written-on-the-engine > /d/origin; rm -f /d/visitors'
"$BOSUN" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: dind-hostpath}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: $BUSYBOX
    command: [sh, -c, "cat /data/origin && hostname >> /data/visitors"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    hostPath: {path: $DIR, type: Directory}
YAML
until_ok "dind-hostpath to complete" completed dind-hostpath
logs=$("$BOSUN" logs dind-hostpath)
[ "$logs" = written-on-the-engine ] || fail "bosun logs dind-hostpath printed '$logs'"
seen=$(docker run --rm -v "$DIR:/d" "$BUSYBOX" cat /d/visitors)
[ "$seen" = dind-hostpath ] || fail "the engine's $DIR/visitors holds '$seen'"
say "the pod read the engine's file (logs) and its write is on the engine"
say "all checks passed"
