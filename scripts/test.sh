#!/usr/bin/env bash
# Runs every test of bosun on this machine: formatting and lints, unit
# tests, and the integration tests that start real bosun processes.
# Installs what the tests need and is missing (the Rust toolchain itself is
# the machine's).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v kubectl >/dev/null 2>&1 || need_apt+=(kubectl)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "== installing ${need_apt[*]}"
  apt-get update -qq
  # Debian's kubectl is packaged as kubernetes-client.
  apt-get install -y -qq kubectl >/dev/null 2>&1 || apt-get install -y -qq kubernetes-client
fi

# Two cores: one build job per core, and test binaries that start servers
# run two at a time.
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo build"
cargo build --workspace --quiet
echo "== cargo test"
cargo test --workspace -- --test-threads="${BOSUN_TEST_THREADS:-2}"
