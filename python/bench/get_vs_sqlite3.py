"""Python `Table.get` of a 5-column row (int key, two strings, an int, 100
bytes) against `sqlite3`'s `execute(...).fetchone()` of the same row, with
the statement prepared once (sqlite3 caches it) — the goal of issue 58.
Both hold the same rows, loaded then flushed/checkpointed (Basalt reads
SSTs, SQLite its B-tree through its page cache), with a 64 MiB cache
each; random keys; the engines' order alternates each round. Usage::

    python python/bench/get_vs_sqlite3.py [rows] [rounds]

Prints each round's µs per get and the median ratio (sqlite3 ÷ Basalt
time: above 1, Basalt is faster).
"""
import random
import sqlite3
import statistics
import sys
import tempfile
import time

import pyarrow as pa

import basalt

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
gets = 20_000

schema = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("score", pa.int64(), nullable=False),
        pa.field("region", pa.string(), nullable=False),
        pa.field("payload", pa.binary(), nullable=False),
    ]
)
ids = list(range(rows))
names = [f"user-{(i * 7919) % rows:09}" for i in ids]
scores = [(i * 104729) % rows for i in ids]
regions = [f"region-{i % 1000:06}" for i in ids]
payloads = [bytes([i % 251]) * 100 for i in ids]

work = tempfile.mkdtemp()
db = basalt.open(work + "/db", block_cache_bytes=64 << 20)
table = db.create_table("rec", schema, ["id"])
for start in range(0, rows, 10_000):
    end = min(start + 10_000, rows)
    table.write(
        pa.table(
            [ids[start:end], names[start:end], scores[start:end], regions[start:end], payloads[start:end]],
            schema=schema,
        )
    )
db.flush()

con = sqlite3.connect(work + "/bench.sqlite")
con.execute("PRAGMA journal_mode=WAL")
con.execute("PRAGMA synchronous=NORMAL")
con.execute(f"PRAGMA cache_size=-{64 << 10}")
con.execute("CREATE TABLE rec (id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL, "
            "region TEXT NOT NULL, payload BLOB NOT NULL)")
con.executemany("INSERT INTO rec VALUES (?, ?, ?, ?, ?)", zip(ids, names, scores, regions, payloads))
con.commit()
con.execute("PRAGMA wal_checkpoint(TRUNCATE)")

keys = random.Random(1).choices(range(rows), k=gets)
# Both answers checked once, untimed.
for k in keys[:1000]:
    want = {"id": k, "name": names[k], "score": scores[k], "region": regions[k], "payload": payloads[k]}
    assert table.get(k) == want, k
    assert con.execute("SELECT id, name, score, region, payload FROM rec WHERE id = ?", (k,)).fetchone() == tuple(
        want.values()
    ), k


def basalt_gets() -> float:
    get = table.get
    start = time.perf_counter()
    for k in keys:
        get(k)
    return (time.perf_counter() - start) / gets * 1e6


def sqlite_gets() -> float:
    execute = con.execute
    sql = "SELECT id, name, score, region, payload FROM rec WHERE id = ?"
    start = time.perf_counter()
    for k in keys:
        execute(sql, (k,)).fetchone()
    return (time.perf_counter() - start) / gets * 1e6


ratios = []
for r in range(rounds):
    order = [("basalt", basalt_gets), ("sqlite3", sqlite_gets)]
    if r % 2:
        order.reverse()
    took = {name: run() for name, run in order}
    ratios.append(took["sqlite3"] / took["basalt"])
    print(f"round {r}: basalt {took['basalt']:.2f} us, sqlite3 {took['sqlite3']:.2f} us")
print(f"{rows} rows, {gets} gets: median sqlite3/basalt time {statistics.median(ratios):.2f}x")
db.close()
con.close()
