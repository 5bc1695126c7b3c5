"""Python `Table.get` per call, for before/after comparisons of two builds of
the extension: 200K rows of five columns (int64 key, string, float64,
int32, int64) bulk-loaded, 20,000 random keys, whole rows and a
one-column projection, medians of 5. Usage::

    python python/bench/table_get_ab.py
"""
import tempfile, time, random, statistics
import pyarrow as pa, basalt
n = 200_000
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()), pa.field("a", pa.float64()), pa.field("b", pa.int32()), pa.field("c", pa.int64())])
t = pa.table({"id": pa.array(range(n), pa.int64()), "name": [f"name-{i}" for i in range(n)], "a": [i * 0.5 for i in range(n)], "b": pa.array([i % 1000 for i in range(n)], pa.int32()), "c": pa.array(range(n), pa.int64())}, schema=schema)
db = basalt.open(tempfile.mkdtemp() + "/db")
tab = db.create_table("t", schema, ["id"]); tab.bulk_load(t)
keys = random.Random(1).sample(range(n), 20000)
for cols in [None, ["a"]]:
    ts = []
    for _ in range(5):
        s = time.perf_counter()
        for k in keys: tab.get(k, columns=cols)
        ts.append((time.perf_counter() - s) / len(keys) * 1e6)
    print(cols, f"{statistics.median(ts):.2f} us")
