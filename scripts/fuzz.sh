#!/usr/bin/env bash
# Builds the fuzz targets in fuzz/ with libFuzzer and runs each for a while.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 5 s, every target)
#
# BASALT_FUZZ_PROFILE=ci builds unoptimized (CI: about half the cold build
# time); the default `release` fuzzes several times faster.
# It needs no nightly toolchain and no cargo-fuzz: it passes the coverage
# flags cargo-fuzz would (without a sanitizer; the engine has no unsafe
# code) on the stable toolchain. With nightly and cargo-fuzz installed,
# `cargo fuzz run <target>` in this repository works as well.
#
# Exit status: 0 when every target ran clean; 1 when one crashed, hung,
# ran out of memory or failed to build; 0 with a warning when the fuzz
# crate's dependencies could not be fetched (a network problem, not a bug).
# New inputs go to target/fuzz-corpus/<target> (the committed seed corpus
# in fuzz/corpus is only read); a failing input goes to fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-5}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(wal sst manifest key_codec arrow_schema ops)
fi

host=$(rustc -vV | sed -n 's/^host: //p')
# Outside the clone by default, so repeated runs on one machine (and CI on
# the same machine) reuse the instrumented build of the dependencies.
export CARGO_TARGET_DIR=${BASALT_FUZZ_TARGET_DIR:-$HOME/.cache/basalt/fuzz-target}
# The flags cargo-fuzz sets for libFuzzer's coverage guidance.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"

# Not --locked: fuzz/Cargo.lock may trail the workspace when a dependency is
# added; the fetch then updates it. A failure here is the network.
if ! cargo fetch --manifest-path fuzz/Cargo.toml >/dev/null 2>&1; then
  echo "fuzz: WARNING: could not fetch the fuzz crate's dependencies; fuzz run skipped" >&2
  exit 0
fi
# --target keeps the flags off build scripts and proc macros.
profile=${BASALT_FUZZ_PROFILE:-release}
cargo build --profile "$profile" --manifest-path fuzz/Cargo.toml --target "$host" --bins

bin_dir="$CARGO_TARGET_DIR/$host/$profile"
passed=0
failed=0
for t in "${targets[@]}"; do
  work="target/fuzz-corpus/$t"
  mkdir -p "$work" "fuzz/artifacts/$t"
  echo "== fuzz $t for ${seconds}s"
  if ! "$bin_dir/$t" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
      -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$t/" "$work" "fuzz/corpus/$t" \
      >"target/fuzz-$t.log" 2>&1; then
    echo "fuzz: target $t FAILED; its log follows, the input is in fuzz/artifacts/$t/" >&2
    tail -n 60 "target/fuzz-$t.log" >&2
    failed=$((failed + 1))
  else
    grep -E "^Done" "target/fuzz-$t.log" || true
    passed=$((passed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
