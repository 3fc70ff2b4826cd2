#!/usr/bin/env bash
# What serving a custom resource costs next to a built-in kind of the same
# size, on one bosun-control: N (default 2000) creates, one full list, and
# a watch receiving the N creations as events, for a custom resource (a
# CRD with a structural schema and one CEL rule) and for ConfigMaps holding
# the same fields, side by side. The client is a small Python program
# (standard library only) on 8 keep-alive connections with the admin
# token, so the figures are the server's more than kubectl's.
#
#   scripts/bench-crd.sh                 # N=2000, target/debug/bosun-control
#   N=500 BIN=target/release scripts/bench-crd.sh
#
# Prints one line per phase: the phase, the custom resource's figure, the
# ConfigMaps'. Starts its own control plane in a temp dir (bench-lib.sh),
# stops it by pid and removes the dir, also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-2000}
BIN=${BIN:-$PWD/target/debug}
[ -x "$BIN/bosun-control" ] || {
  echo "no $BIN/bosun-control: cargo build -p bosun-control --bin bosun-control" >&2
  exit 1
}
WORK=$(mktemp -d -t bosun-bench-crd.XXXXXX)
CONTROL_PID=""
# shellcheck source=scripts/bench-lib.sh
. scripts/bench-lib.sh
cleanup() {
  local rc=$?
  stop "$CONTROL_PID"
  [ "$rc" -ne 0 ] && [ -s "$WORK/control.log" ] && tail -n 20 "$WORK/control.log" >&2
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_control
export KUBECONFIG=$KC HOME=$WORK
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.bench.bosun.dev
spec:
  group: bench.bosun.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.count >= 0"
              message: count must not be negative
            properties:
              size: {type: string, maxLength: 16}
              color: {type: string, enum: [red, green, blue]}
              count: {type: integer}
              note: {type: string}
EOF
kubectl wait --for=condition=Established --timeout=60s crd/gadgets.bench.bosun.dev >/dev/null

python3 - "$KC" "$N" <<'EOF'
import base64, http.client, json, re, ssl, sys, threading, time

kubeconfig, n = open(sys.argv[1]).read(), int(sys.argv[2])
server = re.search(r"server:\s*https://([^\s]+)", kubeconfig).group(1)
token = re.search(r"token:\s*(\S+)", kubeconfig).group(1)
host, port = server.rsplit(":", 1)
ctx = ssl.create_default_context()
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
HEADERS = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
           "Accept": "application/json"}
CONNECTIONS = 8
NOTE = "x" * 120  # the two kinds' objects weigh about the same

def conn():
    return http.client.HTTPSConnection(host, int(port), context=ctx, timeout=300)

KINDS = {
    "custom resource": ("/apis/bench.bosun.dev/v1/namespaces/default/gadgets",
        lambda i: {"apiVersion": "bench.bosun.dev/v1", "kind": "Gadget",
                   "metadata": {"name": f"g-{i}"},
                   "spec": {"size": str(i % 7), "color": "green", "count": i, "note": NOTE}}),
    "configmap": ("/api/v1/namespaces/default/configmaps",
        lambda i: {"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": f"c-{i}", "labels": {"bench": "crd"}},
                   "data": {"size": str(i % 7), "color": "green", "count": str(i), "note": NOTE}}),
}

def request(c, method, path, body=None):
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=HEADERS)
    r = c.getresponse()
    data = r.read()
    if r.status >= 300:
        raise SystemExit(f"{method} {path}: {r.status} {data[:300]!r}")
    return data

def list_rv(path):
    c = conn()
    body = request(c, "GET", path + "?limit=1" + ("&labelSelector=bench%3Dcrd" if "configmaps" in path else ""))
    return json.loads(body)["metadata"]["resourceVersion"]

def creates(path, make):
    errors = []
    def work(k):
        c = conn()
        try:
            for i in range(k, n, CONNECTIONS):
                request(c, "POST", path, make(i))
        except BaseException as e:  # noqa: reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(CONNECTIONS)]
    start = time.monotonic()
    for t in threads: t.start()
    for t in threads: t.join()
    if errors:
        raise SystemExit(f"creating: {errors[0]}")
    return time.monotonic() - start

def full_list(path, selector):
    c = conn()
    start = time.monotonic()
    body = request(c, "GET", path + selector)
    took = time.monotonic() - start
    items = len(json.loads(body)["items"])
    assert items == n, f"listed {items} of {n}"
    return took, len(body)

def watch(path, selector, rv):
    c = conn()
    sep = "&" if selector else "?"
    start = time.monotonic()
    c.request("GET", f"{path}{selector}{sep}watch=true&resourceVersion={rv}&timeoutSeconds=600",
              headers=HEADERS)
    r = c.getresponse()
    seen = 0
    while seen < n:
        line = r.readline()
        if not line:
            raise SystemExit(f"the watch ended after {seen} of {n} events")
        if json.loads(line)["type"] == "ADDED":
            seen += 1
    return time.monotonic() - start

figures = {}
for kind, (path, make) in KINDS.items():
    selector = "?labelSelector=bench%3Dcrd" if kind == "configmap" else ""
    rv = list_rv(path)
    took = creates(path, make)
    lt, size = full_list(path, selector)
    wt = watch(path, selector, rv)
    figures[kind] = {"create": took, "list": lt, "bytes": size, "watch": wt}

cr, cm = figures["custom resource"], figures["configmap"]
print(f"N={n}, {CONNECTIONS} connections          custom resource        configmap")
print(f"{n} creates                     {cr['create']:6.2f} s ({n/cr['create']:5.0f}/s)   "
      f"{cm['create']:6.2f} s ({n/cm['create']:5.0f}/s)")
print(f"full list ({n} items)            {cr['list']*1000:6.0f} ms ({cr['bytes']//1024} KiB)  "
      f"{cm['list']*1000:6.0f} ms ({cm['bytes']//1024} KiB)")
print(f"watch receiving {n} events       {cr['watch']*1000:6.0f} ms               "
      f"{cm['watch']*1000:6.0f} ms")
EOF
