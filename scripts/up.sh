#!/usr/bin/env bash
# Builds bosun and starts it in the background (`bosun up`): the control
# plane on 127.0.0.1:6443 with its data in ~/.bosun, and a kubeconfig at
# ~/.bosun/kubeconfig. Extra arguments go to `bosun up`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace --quiet
exec target/release/bosun up "$@"
