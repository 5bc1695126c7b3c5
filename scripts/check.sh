#!/usr/bin/env bash
# The one entry point for checks: formatting, lints, then every test.
# CI (.ci/run) calls this verbatim; so does the README.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== fmt"
cargo fmt --all -- --check
echo "== clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== tests"
cargo test --workspace --locked
