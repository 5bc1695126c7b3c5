#!/usr/bin/env bash
# The documented run behind the tables that open docs/BENCHMARKS.md: the
# suite's workloads at the scales the page quotes, medians of three runs
# with the engines' order rotated, into one directory; then the page's
# generated part rewritten from it (scripts/bench_page.py).
#
#   bash scripts/bench-page.sh            # all of it: 22 minutes on 2 cores
#   BENCH=target/release/basalt-bench bash scripts/bench-page.sh
#
# Nothing else should run on the machine meanwhile: the machines here have
# two cores, and a compile beside a benchmark halves it.
set -euo pipefail
cd "$(dirname "$0")/.."

bench=${BENCH:-target/release/basalt-bench}
if [ -z "${BENCH:-}" ]; then
  cargo build --release --locked -p basalt-bench
fi
# TPC-H runs DuckDB from Python: found now, not after an hour of runs.
python=${BENCH_PYTHON:-.venv/bin/python}
if ! "$python" -c "import duckdb" 2>/dev/null; then
  echo "bench-page.sh: $python cannot import duckdb (bash scripts/python-env.sh makes .venv with it)" >&2
  exit 2
fi
out=${BENCH_PAGE_DIR:-bench-results/page-$(date -u +%Y%m%d-%H%M)}
mkdir -p "$out"
runs=${BENCH_RUNS:-3}

step() {
  local started=$SECONDS
  echo "== basalt-bench $*"
  "$bench" "$@" --runs "$runs" --out "$out"
  echo "== took $((SECONDS - started)) s"
}

step omendb --scale 1000000 --distribution random
step ycsb --scale 100000 --workloads a,b,c,d,e,f --threads 1,2
step marbledb --scale 100000
step arrow --scale 1000000,10000000
step resilientdb --scale 1000000
step transactions --scale 100000
# DuckDB runs from Python: the venv scripts/check.sh makes has it.
step tpch --scale 0.1 --python "$python"
step analyst --rows 3000000 --python "$python"

python3 scripts/bench_page.py "$out" --write docs/BENCHMARKS.md
echo "== docs/BENCHMARKS.md rewritten from $out"
