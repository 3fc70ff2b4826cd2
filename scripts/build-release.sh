#!/usr/bin/env bash
# The release build the scale and API benchmarks (scripts/bench-scale.sh,
# scripts/bench-api.sh) run: one package and target set for both, so that
# one build serves both (another set unifies the dependencies' features
# differently, api_bench's dev-dependencies among them, and rebuilds them:
# about 30 minutes on 2 cores). Into $CARGO_TARGET_DIR, default target-rel.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target-rel}"
cargo build --release --quiet -p bosun-control -p bosun-agent -p bosun --bins --example api_bench
