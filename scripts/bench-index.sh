#!/usr/bin/env bash
# Index builds on a loaded table: `basalt create-index` against DuckDB's
# and SQLite's CREATE INDEX, one index at a time on a fresh copy of the
# same N-row table (scripts/gen-table.py: a key,
# two numbers, a 16-character string, a date and a timestamp, in random
# key order), each build in its own process under /usr/bin/time (wall
# seconds, peak RSS). Runs rotate the engines' order; the report gives
# medians and each engine's ratio to DuckDB. Needs the release binary
# (cargo build --release -p basalt-cli), sqlite3 and .venv with duckdb.
#
#   bash scripts/bench-index.sh [ROWS (3000000)] [RUNS (3)]
set -euo pipefail
cd "$(dirname "$0")/.."

rows=${1:-3000000}
runs=${2:-3}
basalt=target/release/basalt
py=.venv/bin/python
work=${BASALT_INDEX_DIR:-target/bench-index}
mkdir -p "$work"
[ -x "$basalt" ] || { echo "build $basalt first: cargo build --release -p basalt-cli"; exit 2; }

csv=$work/gen-$rows.csv
parquet=$work/gen-$rows.parquet
[ -s "$parquet" ] || "$py" scripts/gen-table.py "$rows" "$csv" "$parquet"

# The loaded tables, made once per size.
base=$work/base-$rows
if [ ! -d "$base.basalt" ]; then
  "$basalt" load --create "$base.basalt" g "$parquet" --primary-key id >/dev/null
fi
if [ ! -s "$base.duckdb" ]; then
  "$py" -c "
import duckdb
con = duckdb.connect('$base.duckdb')
con.execute(\"CREATE TABLE g AS SELECT * FROM read_parquet('$parquet')\")
con.execute('ALTER TABLE g ADD PRIMARY KEY (id)')
con.execute('CHECKPOINT')"
fi
if [ ! -s "$base.sqlite" ]; then
  sqlite3 "$base.sqlite" "CREATE TABLE g (id INTEGER PRIMARY KEY, amount INTEGER, price REAL, tag TEXT, day TEXT, at TEXT)" \
    ".import --csv --skip 1 $csv g"
fi

# One build: engine, column; prints "seconds max_rss_kib".
build() {
  local engine=$1 column=$2 out=$work/time.txt
  rm -rf "$work/w.basalt" "$work/w.duckdb" "$work/w.duckdb.wal" "$work/w.sqlite"
  case $engine in
    basalt)
      cp -r "$base.basalt" "$work/w.basalt"
      /usr/bin/time -o "$out" -f "%e %M" "$basalt" create-index "$work/w.basalt" g "by_$column" "$column" >/dev/null ;;
    duckdb)
      cp "$base.duckdb" "$work/w.duckdb"
      /usr/bin/time -o "$out" -f "%e %M" "$py" -c "
import duckdb
con = duckdb.connect('$work/w.duckdb')
con.execute('SET enable_progress_bar = false')
con.execute('CREATE INDEX by_$column ON g($column)')
con.execute('CHECKPOINT')
con.close()" ;;
    sqlite)
      cp "$base.sqlite" "$work/w.sqlite"
      /usr/bin/time -o "$out" -f "%e %M" sqlite3 "$work/w.sqlite" "CREATE INDEX by_$column ON g($column)" ;;
  esac
  cat "$out"
}

results=$work/results.txt
: > "$results"
engines=(basalt duckdb sqlite)
for column in amount tag day price; do
  for run in $(seq 1 "$runs"); do
    for k in 0 1 2; do
      engine=${engines[$(( (run + k) % 3 ))]}
      read -r secs rss <<<"$(build "$engine" "$column")"
      echo "$column $engine $run $secs $rss" | tee -a "$results"
    done
  done
done

"$py" - "$results" "$rows" <<'PY'
import sys, statistics
by = {}
for line in open(sys.argv[1]):
    column, engine, run, secs, rss = line.split()
    by.setdefault((column, engine), []).append((float(secs), int(rss)))
print(f"| index ({int(sys.argv[2]):,} rows) | engine | median s | / DuckDB | peak RSS MiB (max) |")
print("| --- | --- | ---: | ---: | ---: |")
for (column, engine), xs in by.items():
    s = statistics.median(x[0] for x in xs)
    duck = statistics.median(x[0] for x in by[(column, "duckdb")])
    rss = max(x[1] for x in xs) / 1024
    print(f"| {column} | {engine} | {s:.2f} | {s / duck:.2f}x | {rss:.0f} |")
PY
