"""Basalt from Python against the stores Python users already have.

Side by side in one process, same data, same durability (no fsync per
write: every engine keeps acknowledged writes through a process crash, none
through a power cut), engines in a rotated order each run, medians of
``--runs``:

- ``put``: ``--keys`` keys of 16 bytes with ``--value-bytes`` values, in
  batches of 1000 (each engine's batch API);
- ``get``: every key once, in random order, one call per key (the engine's
  idiomatic single-key read from Python);
- ``items``: one full iteration over (key, value) pairs;
- ``scan``: a ``--keys``-row table (int64 key, two float64 and one int64
  column) read into a ``pyarrow.Table`` and one column summed; Basalt's
  scan, DuckDB's ``to_arrow_table()``, SQLite's rows turned into Arrow.

Peers: rocksdict (RocksDB), plyvel (LevelDB), lmdb, sqlite3 (WAL,
``synchronous=NORMAL``, statements cached), DuckDB (scans). Caches are 64
MiB where the engine has one. Usage::

    python python/bench/kv_bench.py --keys 1000000 --runs 3

Prints one line per (workload, engine) with the median rate, and the ratios
Basalt / best peer.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import basalt

CACHE = 64 << 20
BATCH = 1000


def keys_and_values(n: int, value_bytes: int, seed: int) -> tuple[list[bytes], list[bytes]]:
    rng = random.Random(seed)
    keys = [b"key%013d" % i for i in range(n)]
    values = [rng.randbytes(value_bytes) for _ in range(min(n, 4096))]
    return keys, [values[i % len(values)] for i in range(n)]


def batches(keys: list[bytes], values: list[bytes]) -> Iterator[tuple[list[bytes], list[bytes]]]:
    for i in range(0, len(keys), BATCH):
        yield keys[i : i + BATCH], values[i : i + BATCH]


class Engine:
    name = ""

    def open(self, path: Path) -> None: ...
    def put_batches(self, keys: list[bytes], values: list[bytes]) -> None: ...
    def get_all(self, keys: list[bytes]) -> int: ...
    def iterate(self) -> int: ...
    def close(self) -> None: ...


class Basalt(Engine):
    name = "basalt"

    def open(self, path: Path) -> None:
        self.db = basalt.open(path, block_cache_bytes=CACHE)

    def put_batches(self, keys: list[bytes], values: list[bytes]) -> None:
        db = self.db
        for ks, vs in batches(keys, values):
            b = db.write_batch()
            for k, v in zip(ks, vs):
                b.put(k, v)
            b.commit()

    def get_all(self, keys: list[bytes]) -> int:
        get = self.db.get
        return sum(1 for k in keys if get(k) is not None)

    def iterate(self) -> int:
        return sum(1 for _ in self.db.items())

    def close(self) -> None:
        self.db.close()


class RocksDict(Engine):
    name = "rocksdict"

    def open(self, path: Path) -> None:
        import rocksdict

        opts = rocksdict.Options(raw_mode=True)
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(rocksdict.Cache(CACHE))
        table.set_bloom_filter(10, False)
        opts.set_block_based_table_factory(table)
        opts.create_if_missing(True)
        self.db = rocksdict.Rdict(str(path), options=opts)

    def put_batches(self, keys: list[bytes], values: list[bytes]) -> None:
        import rocksdict

        for ks, vs in batches(keys, values):
            wb = rocksdict.WriteBatch(raw_mode=True)
            for k, v in zip(ks, vs):
                wb.put(k, v)
            self.db.write(wb)

    def get_all(self, keys: list[bytes]) -> int:
        get = self.db.get
        return sum(1 for k in keys if get(k) is not None)

    def iterate(self) -> int:
        return sum(1 for _ in self.db.items())

    def close(self) -> None:
        self.db.close()


class Plyvel(Engine):
    name = "plyvel"

    def open(self, path: Path) -> None:
        import plyvel

        self.db = plyvel.DB(str(path), create_if_missing=True, lru_cache_size=CACHE, bloom_filter_bits=10)

    def put_batches(self, keys: list[bytes], values: list[bytes]) -> None:
        for ks, vs in batches(keys, values):
            with self.db.write_batch() as wb:
                for k, v in zip(ks, vs):
                    wb.put(k, v)

    def get_all(self, keys: list[bytes]) -> int:
        get = self.db.get
        return sum(1 for k in keys if get(k) is not None)

    def iterate(self) -> int:
        return sum(1 for _ in self.db.iterator())

    def close(self) -> None:
        self.db.close()


class Lmdb(Engine):
    name = "lmdb"

    def open(self, path: Path) -> None:
        import lmdb

        # sync=False: commits reach the OS, not the disk, as for the others.
        self.env = lmdb.open(str(path), map_size=16 << 30, sync=False, metasync=False, writemap=False)

    def put_batches(self, keys: list[bytes], values: list[bytes]) -> None:
        for ks, vs in batches(keys, values):
            with self.env.begin(write=True) as txn:
                put = txn.put
                for k, v in zip(ks, vs):
                    put(k, v)

    def get_all(self, keys: list[bytes]) -> int:
        with self.env.begin(buffers=False) as txn:
            get = txn.get
            return sum(1 for k in keys if get(k) is not None)

    def iterate(self) -> int:
        with self.env.begin() as txn:
            return sum(1 for _ in txn.cursor())

    def close(self) -> None:
        self.env.close()


class Sqlite(Engine):
    name = "sqlite3"

    def open(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path / "kv.sqlite", isolation_level=None, cached_statements=16)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(f"PRAGMA cache_size=-{CACHE >> 10}")
        self.db.execute("CREATE TABLE IF NOT EXISTS kv (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID")

    def put_batches(self, keys: list[bytes], values: list[bytes]) -> None:
        for ks, vs in batches(keys, values):
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?)", zip(ks, vs))
            self.db.execute("COMMIT")

    def get_all(self, keys: list[bytes]) -> int:
        ex = self.db.execute
        q = "SELECT v FROM kv WHERE k = ?"
        return sum(1 for k in keys if ex(q, (k,)).fetchone() is not None)

    def iterate(self) -> int:
        return sum(1 for _ in self.db.execute("SELECT k, v FROM kv ORDER BY k"))

    def close(self) -> None:
        self.db.close()


def timed(f: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = f()
    return time.perf_counter() - start, out


def kv_round(engines: list[Engine], keys: list[bytes], values: list[bytes], root: Path, rng: random.Random) -> dict[str, dict[str, float]]:
    shuffled = keys[:]
    rng.shuffle(shuffled)
    out: dict[str, dict[str, float]] = {}
    for e in engines:
        path = root / e.name
        e.open(path)
        t_put, _ = timed(lambda: e.put_batches(keys, values))
        e.close()  # reads from a reopened store: files, not only memtables
        e.open(path)
        t_get, found = timed(lambda: e.get_all(shuffled))
        t_iter, seen = timed(e.iterate)
        e.close()
        assert found == len(keys) and seen == len(keys), (e.name, found, seen)
        out[e.name] = {"put": len(keys) / t_put, "get": len(keys) / t_get, "items": len(keys) / t_iter}
        shutil.rmtree(path, ignore_errors=True)
    return out


def scan_table(n: int) -> pa.Table:
    ids = pa.array(range(n), pa.int64())
    return pa.table(
        {
            "id": ids,
            "a": pc.multiply(pc.cast(ids, pa.float64()), 0.5),
            "b": pc.cast(pc.multiply(ids, 3), pa.float64()),
            "c": pc.bit_wise_and(ids, 1023),
        },
        schema=pa.schema(
            [
                pa.field("id", pa.int64(), False),
                pa.field("a", pa.float64()),
                pa.field("b", pa.float64()),
                pa.field("c", pa.int64()),
            ]
        ),
    )


def sst_maps(directory: Path) -> list[tuple[int, int]]:
    """Address ranges of the process's memory maps of SST files under `directory`."""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith(str(directory)) and parts[5].endswith(".sst"):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                ranges.append((lo, hi))
    return ranges


def scan_round(data: pa.Table, root: Path, order: list[str]) -> tuple[dict[str, float], dict[str, int]]:
    n = data.num_rows
    expected = pc.sum(data["a"]).as_py()
    rates: dict[str, float] = {}
    copies: dict[str, int] = {}
    for name in order:
        path = root / f"scan-{name}"
        if name == "basalt":
            with basalt.open(path, block_cache_bytes=CACHE) as db:
                t = db.create_table("t", data.schema, ["id"])
                t.bulk_load(data.to_reader(max_chunksize=65536))
                db.flush()
                t.compact()
            with basalt.open(path, block_cache_bytes=CACHE) as db:
                t = db.table("t")
                t.to_arrow()  # warm: the page cache holds the files, as for the others
                secs, table = timed(lambda: t.to_arrow())
                total = pc.sum(table["a"]).as_py()
                maps = sst_maps(path)
                buffers = [c.chunk(i).buffers()[1] for c in table.columns for i in range(c.num_chunks)]
                copies["basalt"] = sum(
                    1 for b in buffers if b is not None and not any(lo <= b.address < hi for lo, hi in maps)
                )
                copies["basalt_buffers"] = len(buffers)
                del table
        elif name == "duckdb":
            import duckdb

            con = duckdb.connect(str(path.with_suffix(".duckdb")))
            con.execute("CREATE TABLE t AS SELECT * FROM data")
            con.execute("CHECKPOINT")
            con.execute("SELECT * FROM t").to_arrow_table()
            secs, table = timed(lambda: con.execute("SELECT * FROM t").to_arrow_table())
            total = pc.sum(table["a"]).as_py()
            con.close()
        else:
            path.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(path / "t.sqlite")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, a REAL, b REAL, c INTEGER)")
            db.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", zip(*(data[c].to_pylist() for c in data.column_names)))
            db.commit()

            def sqlite_scan() -> pa.Table:
                rows = db.execute("SELECT id, a, b, c FROM t").fetchall()
                cols = list(zip(*rows))
                return pa.table({name: pa.array(col) for name, col in zip(data.column_names, cols)})

            sqlite_scan()
            secs, table = timed(sqlite_scan)
            total = pc.sum(table["a"]).as_py()
            db.close()
        assert abs(total - expected) < 1e-6 * max(1.0, abs(expected)), (name, total, expected)
        rates[name] = n / secs
        shutil.rmtree(path, ignore_errors=True)
        path.with_suffix(".duckdb").unlink(missing_ok=True)
    return rates, copies


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dir", type=Path, default=None, help="where the stores go (a temporary directory by default)")
    p.add_argument("--json", type=Path, default=None, help="also write the medians here")
    args = p.parse_args()

    root = Path(tempfile.mkdtemp(dir=args.dir))
    rng = random.Random(args.seed)
    keys, values = keys_and_values(args.keys, args.value_bytes, args.seed)
    engines: list[Engine] = [Basalt(), RocksDict(), Plyvel(), Lmdb(), Sqlite()]
    data = scan_table(args.keys)
    kv_runs: list[dict[str, dict[str, float]]] = []
    scan_runs: list[dict[str, float]] = []
    copies: dict[str, int] = {}
    scanners = ["basalt", "duckdb", "sqlite3"]
    try:
        for run in range(args.runs):
            order = engines[run % len(engines) :] + engines[: run % len(engines)]
            kv_runs.append(kv_round(order, keys, values, root, rng))
            s_order = scanners[run % 3 :] + scanners[: run % 3]
            rates, copies = scan_round(data, root, s_order)
            scan_runs.append(rates)
            print(f"run {run + 1}/{args.runs}: " + json.dumps({"kv": kv_runs[-1], "scan": rates}), file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    medians: dict[str, dict[str, float]] = {}
    print(f"# {args.keys} keys, {args.value_bytes}-byte values, {args.runs} runs (medians, ops or rows per second)")
    for workload in ("put", "get", "items"):
        medians[workload] = {e.name: statistics.median(r[e.name][workload] for r in kv_runs) for e in engines}
    medians["scan"] = {s: statistics.median(r[s] for r in scan_runs) for s in scanners}
    for workload, rates in medians.items():
        best_peer = max((v, k) for k, v in rates.items() if k != "basalt")
        line = "  ".join(f"{k} {v:,.0f}" for k, v in rates.items())
        print(f"{workload:6} {line}   basalt/best peer ({best_peer[1]}) {rates['basalt'] / best_peer[0]:.2f}x")
    print(
        "scan: basalt/sqlite3 {:.1f}x, basalt/duckdb {:.2f}x; basalt value buffers not in an SST map: {} of {}".format(
            medians["scan"]["basalt"] / medians["scan"]["sqlite3"],
            medians["scan"]["basalt"] / medians["scan"]["duckdb"],
            copies.get("basalt", -1),
            copies.get("basalt_buffers", -1),
        )
    )
    print("put: basalt/rocksdict {:.2f}x".format(medians["put"]["basalt"] / medians["put"]["rocksdict"]))
    if args.json:
        args.json.write_text(json.dumps(medians, indent=2))


if __name__ == "__main__":
    main()
