#!/usr/bin/env bash
# Bytes on disk (issue 61): the generated table of the load and index
# benchmarks (scripts/gen-table.py: a key, two numbers, a 16-character
# string, a date and a timestamp, in random key order) with the four
# secondary indexes of scripts/bench-index.sh (by_amount, by_tag, by_day,
# by_price), in Basalt and in DuckDB.
#
# Basalt: `basalt load --create … --primary-key id`, then one
# `basalt create-index` per index, each its own process (it closes the
# database); the bytes per table and per index are each tree's SSTs as
# `basalt stats` lists them, the total the directory's files (`du -b`)
# after that `stats` (an open deletes the files a compaction left: right
# after `load` the directory also holds the compaction's inputs).
# DuckDB: CREATE TABLE AS from the Parquet file, ADD PRIMARY KEY (id), the
# same four CREATE INDEX, a CHECKPOINT after each step; the bytes per step
# are the growth of the file's used blocks (PRAGMA database_size), the total
# the file's size (and a WAL's, if any) at the end.
#
# Sizes do not depend on the optimisation level: the dev build will do
# (target/debug/basalt, a few minutes for 3M rows); wall seconds per step are
# printed, but a dev build's are not to be quoted.
#
#   bash scripts/bench-sizes.sh [ROWS (3000000)]
#
# Environment: BASALT_LOAD_FLAGS (extra `basalt load` flags, e.g. --zstd),
# BASALT (the CLI; default $CARGO_TARGET_DIR or target, then
# /debug/basalt), PYTHON (with duckdb; default .venv/bin/python),
# BASALT_SIZES_DIR (work directory; default target/bench-sizes, or under
# $CARGO_TARGET_DIR). The data file is made once per ROWS and kept; the
# databases are made afresh and kept for inspection until the next run.
set -euo pipefail
cd "$(dirname "$0")/.."

rows=${1:-3000000}
target=${CARGO_TARGET_DIR:-target}
basalt=${BASALT:-$target/debug/basalt}
py=${PYTHON:-.venv/bin/python}
work=${BASALT_SIZES_DIR:-$target/bench-sizes}
indexes=(amount tag day price)
mkdir -p "$work"
[ -x "$basalt" ] || { echo "build $basalt first: cargo build -p basalt-cli"; exit 2; }
[ -x "$py" ] || { echo "no $py: set PYTHON to a Python with duckdb"; exit 2; }

csv=$work/gen-$rows.csv
parquet=$work/gen-$rows.parquet
[ -s "$parquet" ] || "$py" scripts/gen-table.py "$rows" "$csv" "$parquet"
rm -f "$csv"

out=$work/sizes-$rows.txt
: > "$out"
now() { date +%s.%N; }

# Basalt: one process per step.
db=$work/g-$rows.basalt
rm -rf "$db"
t=$(now)
# shellcheck disable=SC2086 # BASALT_LOAD_FLAGS is a list of flags, e.g. --zstd
"$basalt" load --create "$db" g "$parquet" --primary-key id ${BASALT_LOAD_FLAGS:-} >/dev/null
secs=$(awk "BEGIN{printf \"%.1f\", $(now) - $t}")
# An open deletes the files no version lists (a compaction's inputs).
"$basalt" stats "$db" >/dev/null
echo "basalt step table $(du -sb "$db" | cut -f1) $secs" >> "$out"
for column in "${indexes[@]}"; do
  t=$(now)
  "$basalt" create-index "$db" g "by_$column" "$column" >/dev/null
  secs=$(awk "BEGIN{printf \"%.1f\", $(now) - $t}")
  "$basalt" stats "$db" >/dev/null
  echo "basalt step by_$column $(du -sb "$db" | cut -f1) $secs" >> "$out"
done
# Each tree's SST bytes, from `basalt stats` ("tree files bytes" lines).
"$basalt" stats "$db" > "$work/basalt-stats-$rows.txt"
awk '/^tree /{on=1; next} on && /^  /{print "basalt tree", $1, $3} on && !/^  /{on=0}' \
  "$work/basalt-stats-$rows.txt" >> "$out"
echo "basalt total $(du -sb "$db" | cut -f1)" >> "$out"
# Every file of the directory, for where the bytes go.
(cd "$db" && for f in *; do echo "basalt file $f $(stat -c %s "$f")"; done) >> "$out"

# DuckDB: one process, a CHECKPOINT after each step.
duck=$work/g-$rows.duckdb
rm -f "$duck" "$duck.wal"
"$py" - "$duck" "$parquet" "${indexes[@]}" >> "$out" <<'PY'
import os, sys, time
import duckdb

path, parquet, columns = sys.argv[1], sys.argv[2], sys.argv[3:]
con = duckdb.connect(path)
con.execute("SET enable_progress_bar = false")

def used():
    block, used = con.execute("SELECT block_size, used_blocks FROM pragma_database_size()").fetchone()
    return block * used

steps = [("table", [f"CREATE TABLE g AS SELECT * FROM read_parquet('{parquet}')"]),
         ("primary_key", ["ALTER TABLE g ADD PRIMARY KEY (id)"])]
steps += [(f"by_{c}", [f"CREATE INDEX by_{c} ON g({c})"]) for c in columns]
before = 0
for name, sqls in steps:
    t = time.perf_counter()
    for sql in sqls:
        con.execute(sql)
    con.execute("CHECKPOINT")
    now = used()
    print(f"duckdb step {name} {now - before} {time.perf_counter() - t:.2f}")
    before = now
block, total, used_, free = con.execute(
    "SELECT block_size, total_blocks, used_blocks, free_blocks FROM pragma_database_size()").fetchone()
con.close()
size = os.path.getsize(path) + (os.path.getsize(path + ".wal") if os.path.exists(path + ".wal") else 0)
print(f"duckdb blocks {block} {used_} {free}")
print(f"duckdb total {size}")
print(f"duckdb version {duckdb.__version__}")
PY

"$py" - "$out" "$rows" <<'PY'
import sys
lines = [l.split() for l in open(sys.argv[1])]
rows = int(sys.argv[2])
mib = lambda b: f"{b / 2**20:,.1f} MiB"
b_steps = [(l[2], int(l[3]), float(l[4])) for l in lines if l[:2] == ["basalt", "step"]]
b_trees = {l[2]: int(l[3]) for l in lines if l[:2] == ["basalt", "tree"]}
b_total = next(int(l[2]) for l in lines if l[:2] == ["basalt", "total"])
d_steps = [(l[2], int(l[3]), float(l[4])) for l in lines if l[:2] == ["duckdb", "step"]]
d_total = next(int(l[2]) for l in lines if l[:2] == ["duckdb", "total"])
block, used, free = next(map(int, l[2:5]) for l in lines if l[:2] == ["duckdb", "blocks"])
version = next(l[2] for l in lines if l[:2] == ["duckdb", "version"])

# Basalt's trees: the table's is named g, each index's by its name. A
# `basalt stats` without the tree list (older than this script) leaves
# each step's growth of the directory instead.
growth, before = {}, 0
for name, size, _ in b_steps:
    growth["g" if name == "table" else name], before = size - before, size
if not b_trees:
    print("basalt stats lists no trees: bytes per table and index are each step's growth of the directory")
def tree_of(name):
    return b_trees.get(name, growth[name])
d = {name: size for name, size, _ in d_steps}
source = "tree's SSTs" if b_trees else "directory growth"
print(f"| {rows:,} rows | Basalt bytes ({source}) | DuckDB bytes (used-block growth) | Basalt ÷ DuckDB |")
print("| --- | ---: | ---: | ---: |")
row = lambda name, b, k: print(f"| {name} | {b:,} ({mib(b)}) | {k:,} ({mib(k)}) | {b / k:.2f} |")
row("table g", tree_of("g"), d["table"])
row("table g with its primary key (DuckDB: + ART index)", tree_of("g"), d["table"] + d["primary_key"])
for name, _, _ in b_steps[1:]:
    row(name, tree_of(name), d[name])
row("indexes", sum(tree_of(n) for n, _, _ in b_steps[1:]), sum(d[n] for n, _, _ in b_steps[1:]))
row("total (every file)", b_total, d_total)
print()
print(f"Basalt ÷ DuckDB, whole database: {b_total / d_total:.3f} ({b_total:,} / {d_total:,} bytes)")
print(f"DuckDB {version}: {used} used and {free} free blocks of {block:,} bytes")
print("Basalt trees: " + ", ".join(f"{t} {s:,}" for t, s in sorted(b_trees.items())))
print("seconds per step (dev build: not to be quoted): basalt "
      + ", ".join(f"{n} {s:.0f}" for n, _, s in b_steps) + "; duckdb " + ", ".join(f"{n} {s:.1f}" for n, _, s in d_steps))
PY
echo "raw figures: $out"
