#!/usr/bin/env bash
# Makes the Python virtual environment the Python package is built and
# tested in (.venv, or $BASALT_VENV), with python/requirements-dev.txt
# installed, then builds the package as a wheel (scripts/build-wheel.sh)
# in the `dev` profile — the one `cargo test --profile dev` uses, so
# nothing is compiled twice — and installs that wheel: the tests run
# against what a user installs, not an editable tree. Prints the venv's
# path.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${BASALT_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
stamp="$venv/.requirements-dev.txt"
if ! cmp -s python/requirements-dev.txt "$stamp"; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r python/requirements-dev.txt >&2
  cp python/requirements-dev.txt "$stamp"
fi
venv_dir=$(cd "$venv" && pwd)
wheel=$(BASALT_WHEEL_PROFILE=dev MATURIN="$venv_dir/bin/maturin" bash scripts/build-wheel.sh)
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel" >&2
echo "$venv_dir"
