"""An analyst's queries (issue 65) through Python's ``db.sql`` against DuckDB
on the same generated table, in one process, warm.

The table is issue 65's generated flights log: ``--rows`` rows (3M), an
int64 key ``id``, a ``date`` timestamp that follows the key (sorted over
six months), normally distributed ``delay`` and ``distance`` (int64), and
Zipf-distributed three-letter ``origin`` and ``dest``; Basalt bulk-loads it
and builds four secondary indexes (``date``, ``delay``, ``distance``,
``origin``); DuckDB gets it as a native table (``CREATE TABLE … AS``).
Both run with 2 threads and their default options (Basalt's
``block_cache_bytes`` unless ``--cache-mib`` is given). Each query runs
``--runs`` times per engine, the engines alternating, after one warm-up
run each; the answers must agree. Printed: best and median per engine, the
ratio of the medians, and the geometric mean of the ratios over the six
everyday queries (issue 65's goal: ≤ 1.5, none over 3)::

    python python/bench/analyst.py --rows 3000000 --runs 7

``basalt-bench analyst`` runs the same queries in Rust beside DataFusion over
Parquet (the page's figures); this script measures them through Python.
Measure with a release wheel (``bash scripts/build-wheel.sh``): the test
environment's wheel is built in the dev profile.
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

import basalt

#: (name, SQL, one of the six everyday queries of the goal's geomean)
QUERIES = [
    ("filtered count", "SELECT count(*) AS n FROM flights WHERE delay BETWEEN -30 AND -10", True),
    ("two filters", "SELECT count(*) AS n FROM flights WHERE delay = 0 AND distance > 1000", True),
    ("sum", "SELECT sum(delay) AS d, sum(distance) AS m FROM flights", True),
    (
        "group by",
        "SELECT origin, count(*) AS n, avg(delay) AS d, max(distance) AS m FROM flights GROUP BY origin ORDER BY origin",
        True,
    ),
    (
        "date range",
        "SELECT count(*) AS n, avg(delay) AS d FROM flights "
        "WHERE date >= TIMESTAMP '2024-03-01 00:00:00' AND date < TIMESTAMP '2024-03-08 00:00:00'",
        True,
    ),
    ("top 10", "SELECT id, delay FROM flights ORDER BY delay DESC, id LIMIT 10", True),
    ("key desc limit 5", "SELECT * FROM flights ORDER BY id DESC LIMIT 5", False),
    ("key asc limit 5", "SELECT * FROM flights ORDER BY id LIMIT 5", False),
    ("is null", "SELECT count(*) AS n FROM flights WHERE delay IS NULL", False),
]


def flights(rows: int, seed: int = 65) -> pa.Table:
    rng = np.random.default_rng(seed)
    start = np.datetime64("2024-01-01T00:00:00", "us").astype(np.int64)
    six_months = 182 * 24 * 3600 * 1_000_000
    dates = np.sort(rng.integers(start, start + six_months, rows))
    letters = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    airports = np.array(["".join(rng.choice(letters, 3)) for _ in range(300)])
    pick = lambda: airports[np.minimum(rng.zipf(1.3, rows) - 1, len(airports) - 1)]  # noqa: E731
    return pa.table(
        {
            "id": pa.array(np.arange(rows), pa.int64()),
            "date": pa.array(dates, pa.timestamp("us")),
            "delay": pa.array(np.round(rng.normal(5, 40, rows)).astype(np.int64)),
            "distance": pa.array(np.abs(np.round(rng.normal(800, 500, rows))).astype(np.int64)),
            "origin": pa.array(pick(), pa.utf8()),
            "dest": pa.array(pick(), pa.utf8()),
        }
    )


def timed(run, runs: int) -> tuple[list[float], pa.Table]:
    times = []
    result = None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t0)
    assert result is not None
    return times, result


def same(a: pa.Table, b: pa.Table) -> bool:
    if a.num_rows != b.num_rows:
        return False
    for x, y in zip(a.columns, b.columns):
        xs, ys = x.to_pylist(), y.to_pylist()
        for u, v in zip(xs, ys):
            if isinstance(u, float) or isinstance(v, float):
                if not math.isclose(float(u), float(v), rel_tol=1e-9, abs_tol=1e-9):
                    return False
            elif hasattr(v, "to_pydatetime"):
                if u != v.to_pydatetime():
                    return False
            elif u != v:
                return False
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--cache-mib", type=int, default=0, help="Basalt's block_cache_bytes in MiB (0: its default)")
    p.add_argument("--only", default="", help="run only queries whose name contains this")
    p.add_argument("--dir", default=None)
    args = p.parse_args()
    import duckdb

    data = flights(args.rows)
    work = Path(tempfile.mkdtemp(dir=args.dir))
    options = {"block_cache_bytes": args.cache_mib << 20} if args.cache_mib else {}
    db = basalt.open(work / "db", **options)
    schema = data.schema.set(0, pa.field("id", pa.int64(), nullable=False))
    t = db.create_table("flights", schema, primary_key=["id"])
    t.bulk_load(data.cast(schema))
    for column in ["date", "delay", "distance", "origin"]:
        t.create_index(f"by_{column}", [column])
    db.flush()
    db.wait_for_background_work()
    duck = duckdb.connect()
    duck.execute("SET threads = 2")
    duck.register("source", data)
    duck.execute("CREATE TABLE flights AS SELECT * FROM source")
    duck.unregister("source")
    table_mib = sum(f.stat().st_size for f in (work / "db").glob("*.sst")) / (1 << 20)
    cache = f"{args.cache_mib} MiB" if args.cache_mib else "the default"
    print(
        f"{args.rows} rows ({table_mib:.0f} MiB of SSTs with the indexes); block cache {cache}; "
        f"{args.runs} runs per engine, alternating; milliseconds (best / median)"
    )
    ratios = []
    for name, sql, everyday in QUERIES:
        if args.only and args.only not in name:
            continue
        engines = {"basalt": lambda: db.sql(sql), "duckdb": lambda: duck.execute(sql).to_arrow_table()}
        answers = {e: run() for e, run in engines.items()}  # warm-up
        times: dict[str, list[float]] = {e: [] for e in engines}
        for i in range(args.runs):
            order = list(engines) if i % 2 == 0 else list(reversed(engines))
            for e in order:
                t0 = time.perf_counter()
                engines[e]()
                times[e].append(time.perf_counter() - t0)
        agree = same(answers["basalt"], answers["duckdb"])
        b, d = statistics.median(times["basalt"]), statistics.median(times["duckdb"])
        if everyday:
            ratios.append(b / d)
        print(
            f"{name:18} basalt {min(times['basalt']) * 1e3:8.2f} / {b * 1e3:8.2f} ms   "
            f"duckdb {min(times['duckdb']) * 1e3:7.2f} / {d * 1e3:7.2f} ms   "
            f"basalt/duckdb {b / d:6.2f}x{'' if agree else '   ANSWERS DIFFER'}"
        )
    if ratios:
        geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"geomean over {len(ratios)} everyday queries: {geomean:.2f}x DuckDB's time (max {max(ratios):.2f}x)")
    db.close()


if __name__ == "__main__":
    main()
