#!/usr/bin/env bash
# Builds the Python package as one wheel for every CPython from 3.11 on
# (the abi3 stable ABI), tagged by maturin with the oldest manylinux
# whose symbols it links (checked as auditwheel does), into
# target/wheels/PROFILE. A user installs it in seconds:
#
#   bash scripts/build-wheel.sh
#   pip install target/wheels/release/basalt-*.whl    # add [ray], [pandas] or [polars] for extras
#
# The release profile (Cargo.toml) keeps no debug information for the
# dependencies; `BASALT_WHEEL_PROFILE=dev` builds with the test profile
# instead (what scripts/check.sh installs and tests, reusing the artifacts
# `cargo test` built). Prints the wheel's path.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${BASALT_WHEEL_PROFILE:-release}
# A wheel leaves out what only unifies features with the rest of the
# workspace (crates/basalt-py/Cargo.toml, `workspace-features`; off in
# python/pyproject.toml); the test-profile wheel keeps it, to reuse what
# `cargo test` compiled.
features=()
if [ "$profile" = dev ]; then
  features=(--features workspace-features)
fi
maturin=${MATURIN:-maturin}
if ! command -v "$maturin" >/dev/null 2>&1; then
  echo "build-wheel.sh: maturin not found: pip install maturin==1.16.0 (or set MATURIN)" >&2
  exit 2
fi
out=target/wheels/$profile
rm -rf "$out"
started=$SECONDS
(cd python && "$maturin" build --locked --quiet --profile "$profile" "${features[@]}" -o "../$out" >&2)
wheel=$(ls "$out"/basalt-*.whl)
echo "== wheel built in $((SECONDS - started)) s: $(du -h "$wheel" | cut -f1)" >&2
echo "$wheel"
