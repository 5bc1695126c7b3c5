#!/usr/bin/env bash
# The Python benchmark (python/bench/kv_bench.py) on a release build of the
# package, in its own virtual environment (.venv-bench, or
# $BASALT_BENCH_VENV) so the test environment keeps its development build.
# Arguments go to kv_bench.py: `bash scripts/bench-python.sh --keys 1000000 --runs 3`.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${BASALT_BENCH_VENV:-.venv-bench}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check maturin==1.16.0 pyarrow==26.0.1 -r python/bench/requirements.txt
venv_dir=$(cd "$venv" && pwd)
wheel=$(MATURIN="$venv_dir/bin/maturin" bash scripts/build-wheel.sh)
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
exec "$venv/bin/python" python/bench/kv_bench.py "$@"
