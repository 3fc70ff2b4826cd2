#!/usr/bin/env bash
# Builds bosun and starts it in the background (`bosun up`): the control
# plane on 127.0.0.1:6443 with its data in ~/.bosun, and a kubeconfig at
# ~/.bosun/kubeconfig. Extra arguments go to `bosun up`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The build compiles etcd's gRPC protos (the etcd store, etcd-client) with
# protoc: Debian's protobuf-compiler.
if ! command -v protoc >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq protobuf-compiler
    else
        echo "protoc is needed to build bosun: apt-get install protobuf-compiler (as root)" >&2
        exit 1
    fi
fi
cargo build --release --workspace --quiet
exec target/release/bosun up "$@"
