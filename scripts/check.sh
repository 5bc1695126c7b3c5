#!/usr/bin/env bash
# The one entry point for checks: formatting, lints, then every test.
# CI (.ci/run) calls this verbatim; so does the README.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage prints its name, and the time the previous one took.
stage_started=$SECONDS
stage_name=""
stage() {
  if [ -n "$stage_name" ]; then
    echo "== $stage_name took $((SECONDS - stage_started)) s"
  fi
  stage_name=$1
  stage_started=$SECONDS
  echo "== $1"
}
trap 'rc=$?; echo "== $stage_name took $((SECONDS - stage_started)) s; check.sh exits $rc after $SECONDS s"' EXIT

stage "fmt"
cargo fmt --all -- --check
stage "feature drift"
# maturin must reuse what cargo test builds (no second DataFusion).
python3 scripts/feature_drift.py
stage "clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings
# The engine alone, without the testing and inspect features the workspace
# turns on: code only those modules or tests reach is dead here, and the
# compiler says so.
cargo clippy -p basalt --lib --locked -- -D warnings
stage "docs"
# The engine's API docs build without a warning (broken links, bare URLs);
# their examples run as doc tests in the next stage. basalt-datafusion's
# would check all of DataFusion again (minutes): its doc tests run below.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked -p basalt
stage "tests"
cargo test --workspace --locked
stage "kill test"
# A short series of real SIGKILLs (docs/RELIABILITY.md has a long run's
# figures). A random seed per run widens coverage; it is printed, and
# BASALT_CRASHTEST_SEED replays it. The run's directory is kept on failure.
crash_seed=${BASALT_CRASHTEST_SEED:-$(( (RANDOM << 15) | RANDOM ))}
crash_dir=$(mktemp -d)
echo "basalt-crashtest seed $crash_seed in $crash_dir"
# The binary `cargo test` just built for the crate's own tests (test profile):
# `cargo run` would build every dependency again in the dev profile.
"${CARGO_TARGET_DIR:-target}/debug/basalt-crashtest" \
  --cycles "${BASALT_CRASHTEST_CYCLES:-20}" --seed "$crash_seed" --dir "$crash_dir/run"
rm -rf "$crash_dir"
stage "python"
# The Python package: a virtual environment with python/requirements-dev.txt,
# the package's wheel built with the artifacts `cargo test` just built (the
# same settings: see Cargo.toml's profiles) and installed, then pytest —
# from the repository's root, so `import basalt` is the installed wheel and
# not the python/ tree — and mypy --strict on the examples.
venv=$(bash scripts/python-env.sh)
"$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
(cd python && "$venv/bin/mypy" --strict --no-incremental examples basalt)
"$venv/bin/python" -m mypy.stubtest basalt._basalt --mypy-config-file python/pyproject.toml --allowlist python/stubtest-allowlist.txt
stage "fuzz"
# Each libFuzzer target for a few seconds, built unoptimized (a cold build
# takes about a minute and a half; later runs reuse it). 0 skips.
if [ "${BASALT_FUZZ_SECONDS:-5}" != 0 ]; then
  BASALT_FUZZ_PROFILE=${BASALT_FUZZ_PROFILE:-ci} bash scripts/fuzz.sh "${BASALT_FUZZ_SECONDS:-5}"
fi
