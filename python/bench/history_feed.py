"""The change feed to pyarrow (issue 59's goal: at least 500K changes/s):
a table keeping history takes `changes` writes of `batch` rows each
(upserts of random keys, a tenth of them deletes), then
`Table.changes(since, limit=part)` is read from 0 to the end, resumed from
each part's last `_seqno`, into pyarrow tables. Also a row's history with
100 versions (`Table.history`). Usage::

    python python/bench/history_feed.py [changes] [rounds]

Prints each round's changes/s and the median, and the median µs of
`Table.history` of a 100-version row.
"""
import datetime as dt
import random
import statistics
import sys
import tempfile
import time

import pyarrow as pa

import basalt

changes = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
batch = 100
part = 100_000

schema = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("name", pa.string()),
        ("score", pa.int64()),
    ]
)

with tempfile.TemporaryDirectory() as tmp, basalt.open(tmp + "/db") as db:
    t = db.create_table("t", schema, primary_key=["id"])
    t.set_history(dt.timedelta(days=1))
    rng = random.Random(59)
    keys = 200_000
    written = 0
    while written < changes:
        ids = rng.sample(range(keys), batch)
        if rng.random() < 0.1:
            t.delete(pa.table({"id": pa.array(ids, pa.int64())}))
        else:
            t.write(
                pa.table(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "name": [f"name-{i}" for i in ids],
                        "score": pa.array([rng.randrange(1000) for _ in ids], pa.int64()),
                    },
                    schema=schema,
                )
            )
        written += batch
    # A row with 100 versions among the others.
    for v in range(100):
        t.write(pa.table({"id": [keys + 1], "name": [f"v{v}"], "score": [v]}, schema=schema))
    db.flush()
    rates = []
    for r in range(rounds):
        start = time.perf_counter()
        since, n = 0, 0
        while True:
            got = t.changes(since, limit=part)
            if got.num_rows == 0:
                break
            n += got.num_rows
            since = got.column("_seqno")[-1].as_py()
        took = time.perf_counter() - start
        rates.append(n / took)
        print(f"round {r}: {n} changes in {took:.3f} s: {n / took:,.0f} changes/s")
    print(f"median {statistics.median(rates):,.0f} changes/s to pyarrow")
    times = []
    for _ in range(2000):
        start = time.perf_counter()
        h = t.history(keys + 1)
        times.append(time.perf_counter() - start)
    assert h.num_rows == 100, h.num_rows
    print(f"Table.history of a 100-version row: median {statistics.median(times) * 1e6:.1f} µs")
