"""Small SQL queries over the PostgreSQL wire (``basalt serve``) against the
same prepared statements in process, on one table.

One invocation builds a table of ``--rows`` customers (``c_custkey``
int64 primary key, ``c_name`` string, ``c_acctbal`` float64,
``c_nationkey`` int64 with an index), then measures, with ``--queries``
random keys each, ``--runs`` times alternating the two ways, and prints
the medians in µs per query:

- ``in-process``: ``Database.prepare(sql)`` then ``Statement.execute``
  with each key (Python calling the engine's prepared statement: the
  answer as a ``pyarrow.Table``);
- ``wire``: psycopg 3 against ``basalt serve`` (release build, ``--basalt``)
  with server-side prepared statements (``prepare=True``: Parse once, then
  Bind/Execute per call over the extended protocol), rows fetched.

The queries are the tpch bench's small ones on its customer table: a point
query by primary key, a 100-row key range and an indexed equality::

    python bench/wire_bench.py --basalt ../target/release/basalt
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pyarrow as pa

import basalt

QUERIES = [
    ("point", "SELECT c_name, c_acctbal FROM customer WHERE c_custkey = $1", 1),
    ("range100", "SELECT c_custkey, c_acctbal FROM customer WHERE c_custkey BETWEEN $1 AND $2", 2),
    ("indexed", "SELECT c_custkey, c_name FROM customer WHERE c_nationkey = $1 LIMIT 10", 1),
]


def build(path: Path, rows: int) -> None:
    schema = pa.schema(
        [
            pa.field("c_custkey", pa.int64(), nullable=False),
            pa.field("c_name", pa.utf8()),
            pa.field("c_acctbal", pa.float64()),
            pa.field("c_nationkey", pa.int64()),
        ]
    )
    with basalt.open(path) as db:
        t = db.create_table("customer", schema, primary_key=["c_custkey"])
        keys = list(range(1, rows + 1))
        t.write(
            {
                "c_custkey": keys,
                "c_name": [f"Customer#{k:09d}" for k in keys],
                "c_acctbal": [k * 0.37 % 10_000 for k in keys],
                "c_nationkey": [k * 7919 % 25_000 for k in keys],
            }
        )
        t.create_index("by_nation", ["c_nationkey"])
        t.compact()


def params(kind: str, count: int, k: int, rows: int) -> list[int]:
    if kind == "indexed":
        return [k * 7919 % 25_000]
    return [k, k + 99][:count]


def in_process(path: Path, keys: list[int], rows: int) -> dict[str, float]:
    out = {}
    with basalt.open(path) as db:
        for kind, sql, count in QUERIES:
            st = db.prepare(sql)
            st.execute(params(kind, count, keys[0], rows))
            t = time.perf_counter()
            for k in keys:
                st.execute(params(kind, count, k, rows))
            out[kind] = (time.perf_counter() - t) * 1e6 / len(keys)
    return out


def wire(path: Path, binary: str, keys: list[int], rows: int) -> dict[str, float]:
    import psycopg

    server = subprocess.Popen(
        [binary, "serve", str(path), "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        # "basalt: serving DIR on postgres://127.0.0.1:PORT (psql -h … -p PORT)"
        first = server.stdout.readline()
        port = int(first.rsplit("-p ", 1)[1].rstrip(")\n"))
        out = {}
        with psycopg.connect(f"host=127.0.0.1 port={port} user=basalt dbname=basalt", autocommit=True) as conn:
            for kind, sql, count in QUERIES:
                text = sql.replace("$2", "%s").replace("$1", "%s")
                with conn.cursor() as cur:
                    cur.execute(text, params(kind, count, keys[0], rows), prepare=True)
                    cur.fetchall()
                    t = time.perf_counter()
                    for k in keys:
                        cur.execute(text, params(kind, count, k, rows), prepare=True)
                        cur.fetchall()
                    out[kind] = (time.perf_counter() - t) * 1e6 / len(keys)
        return out
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--basalt", required=True, help="the basalt binary (release build)")
    parser.add_argument("--rows", type=int, default=75_000)
    parser.add_argument("--queries", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(42)
    keys = [rng.randint(1, args.rows) for _ in range(args.queries)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "db"
        build(path, args.rows)
        results: dict[str, dict[str, list[float]]] = {"in-process": {}, "wire": {}}
        for run in range(args.runs):
            ways = [("in-process", lambda: in_process(path, keys, args.rows)),
                    ("wire", lambda: wire(path, args.basalt, keys, args.rows))]
            if run % 2:
                ways.reverse()
            for name, measure in ways:
                for kind, us in measure().items():
                    results[name].setdefault(kind, []).append(us)
        print("| query | in-process prepared (Python) µs | wire prepared (psycopg) µs | wire / in-process |")
        print("| --- | ---: | ---: | ---: |")
        for kind, _, _ in QUERIES:
            a = statistics.median(results["in-process"][kind])
            b = statistics.median(results["wire"][kind])
            print(f"| {kind} | {a:.1f} | {b:.1f} | {b / a:.2f}× |")
        print("runs:", results)


if __name__ == "__main__":
    main()
