#!/usr/bin/env python3
"""Builds of the `basalt` command line side by side (issue 62: a smaller or
faster-to-build binary must answer as fast): TPC-H's 22 queries and SQL
point queries, each through one `basalt sql` process per run, the builds'
order rotating every round; prints each build's medians and the ratio to
the first build.

    basalt-bench tpch --sizes-only --engines parquet --scale 0.1 --keep-data --out /tmp/tpch
    python3 scripts/bench-cli.py --parquet /tmp/tpch/RUN-tpch/data/parquet \\
        --work /tmp/bench-cli BEFORE/basalt AFTER/basalt --rounds 5

The database is loaded once, with the first build, by `basalt load`
(every build reads the same files); remove --work to load it again (a
different --scale needs a new one). The queries are the benchmark
crate's (crates/basalt-bench/src/tpch/queries.rs), read from its source.
A query's time is what `basalt sql` prints for it on stderr (in seconds,
to the millisecond); point queries (`SELECT … FROM orders WHERE
o_orderkey = K`, random keys that exist, the same for every build) are
timed as the whole process's wall time divided by their number, so
process start and the database's open are in it.
"""
import argparse
import pathlib
import random
import re
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
PRIMARY_KEYS = {
    "lineitem": "l_orderkey,l_linenumber",
    "orders": "o_orderkey",
    "customer": "c_custkey",
    "part": "p_partkey",
    "partsupp": "ps_partkey,ps_suppkey",
    "supplier": "s_suppkey",
    "nation": "n_nationkey",
    "region": "r_regionkey",
}


def tpch_queries(scale: float) -> list[str]:
    source = (ROOT / "crates/basalt-bench/src/tpch/queries.rs").read_text()
    body = source[source.index("const QUERIES"):]
    body = body[:body.index("\n];")]
    texts = re.findall(r'"((?:[^"\\]|\\.)*)"', body)
    if len(texts) != 22:
        sys.exit(f"bench-cli: found {len(texts)} queries in queries.rs, not 22")
    fraction = f"{0.0001 / scale:.10f}".rstrip("0")
    return [" ".join(t.replace("{fraction}", fraction).split()) for t in texts]


def load(binary: str, parquet: pathlib.Path, db: pathlib.Path) -> None:
    for table, key in PRIMARY_KEYS.items():
        file = parquet / f"{table}.parquet"
        if not file.exists():
            sys.exit(f"bench-cli: no {file}")
        done = subprocess.run([binary, "load", "--create", str(db), table, str(file),
                               "--primary-key", key], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"bench-cli: loading {table} failed: {done.stderr}")


def run_sql(binary: str, db: pathlib.Path, statements: list[str],
            expect_rows: int | None = None) -> tuple[list[float], float]:
    """Each statement's printed time (s) and the process's wall time (s)."""
    started = time.perf_counter()
    done = subprocess.run([binary, "sql", str(db)], input="\n".join(s + ";" for s in statements),
                          capture_output=True, text=True)
    wall = time.perf_counter() - started
    answers = re.findall(r"(\d+) rows? in ([0-9.]+) s", done.stderr)
    times = [float(t) for _, t in answers]
    if done.returncode != 0 or len(times) != len(statements):
        sys.exit(f"bench-cli: {binary} answered {len(times)} of {len(statements)} statements:\n"
                 f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    if expect_rows is not None and any(int(n) != expect_rows for n, _ in answers):
        sys.exit(f"bench-cli: {binary}: a point query did not find its one row")
    return times, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binaries", nargs="+")
    parser.add_argument("--parquet", type=pathlib.Path, required=True)
    parser.add_argument("--work", type=pathlib.Path, required=True)
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--points", type=int, default=2000)
    args = parser.parse_args()
    if len(set(args.binaries)) < len(args.binaries):
        sys.exit("bench-cli: a build named twice")
    db = args.work / "tpch.db"
    if not db.exists():
        args.work.mkdir(parents=True, exist_ok=True)
        load(args.binaries[0], args.parquet, db)
    queries = tpch_queries(args.scale)
    rng = random.Random(62)
    orders = int(1_500_000 * args.scale)
    # TPC-H's order keys: the i-th (from 1) is (i / 8) * 32 + i % 8, so 1-7,
    # 32-39, 64-71, ... (tpchgen's make_order_key).
    keys = [((i >> 3) << 5) + (i & 7) for i in (rng.randrange(orders) + 1 for _ in range(args.points))]
    points = [f"select o_totalprice, o_orderdate from orders where o_orderkey = {k}" for k in keys]
    tpch: dict[str, list[float]] = {b: [] for b in args.binaries}
    per_query: dict[str, list[list[float]]] = {b: [] for b in args.binaries}
    point_us: dict[str, list[float]] = {b: [] for b in args.binaries}
    for binary in args.binaries:  # warm-up: the files in the page cache, each binary read once
        run_sql(binary, db, queries)
    for round_ in range(args.rounds):
        k = round_ % len(args.binaries)
        for binary in args.binaries[k:] + args.binaries[:k]:
            times, _ = run_sql(binary, db, queries)
            tpch[binary].append(sum(times))
            per_query[binary].append(times)
            _, wall = run_sql(binary, db, points, expect_rows=1)
            point_us[binary].append(wall / len(points) * 1e6)
    first = args.binaries[0]
    print(f"{args.rounds} rounds, TPC-H sf {args.scale} (22 queries), {args.points} point queries per run")
    print("| build | TPC-H total, median (s) | × first | point query, median (µs) | × first |")
    print("| --- | ---: | ---: | ---: | ---: |")
    labels = [pathlib.Path(b).name for b in args.binaries]
    if len(set(labels)) < len(labels):
        labels = args.binaries
    for binary, label in zip(args.binaries, labels):
        t, p = statistics.median(tpch[binary]), statistics.median(point_us[binary])
        t0, p0 = statistics.median(tpch[first]), statistics.median(point_us[first])
        print(f"| {label} | {t:.3f} | {t / t0:.3f} | {p:.0f} | {p / p0:.3f} |")
    print("\nper query, median (ms):")
    print("| query | " + " | ".join(labels) + " |")
    print("| --- |" + " ---: |" * len(args.binaries))
    for q in range(22):
        cells = [statistics.median(r[q] for r in per_query[b]) * 1e3 for b in args.binaries]
        print(f"| Q{q + 1} | " + " | ".join(f"{c:.0f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
