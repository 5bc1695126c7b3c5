"""Where an index stops paying (issue 65): ``SELECT count(distance) … WHERE
delay BETWEEN a AND b`` through ``db.sql`` on issue 65's generated flights
table, once with an index on ``delay`` and once without, for ranges from
1 % to 68 % of the rows; medians of 5, and the access path EXPLAIN names.
The index cap in ``crates/basalt/src/db/index/plan.rs`` comes from it::

    python python/bench/index_crossover.py 3000000

Measure with a release wheel (``bash scripts/build-wheel.sh``).
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

import basalt

sys.path.insert(0, str(Path(__file__).parent))
from analyst import flights  # noqa: E402

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 3_000_000
data = flights(rows)
schema = data.schema.set(0, pa.field("id", pa.int64(), nullable=False))
db = basalt.open(tempfile.mkdtemp() + "/db")
for name, indexed in [("ix", True), ("plain", False)]:
    t = db.create_table(name, schema, primary_key=["id"])
    t.bulk_load(data.cast(schema))
    if indexed:
        t.create_index("by_delay", ["delay"])
db.flush()
db.wait_for_background_work()
delay = data.column("delay").to_numpy()
for lo, hi in [(0, 0), (10, 11), (0, 4), (-10, 10), (-30, -10), (-40, 40)]:
    want = int(((delay >= lo) & (delay <= hi)).sum())
    medians = {}
    for name in ["ix", "plain"]:
        q = f"SELECT count(distance) FROM {name} WHERE delay BETWEEN {lo} AND {hi}"
        got = db.sql(q).column(0)[0].as_py()
        assert got == want, (got, want)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            db.sql(q)
            times.append(time.perf_counter() - t0)
        medians[name] = statistics.median(times) * 1e3
    plan = db.sql(f"EXPLAIN SELECT count(distance) FROM ix WHERE delay BETWEEN {lo} AND {hi}").column(1)[1].as_py()
    access = plan[plan.find("access=") :].split(",")[0]
    print(
        f"{lo}..{hi}: {want / rows * 100:5.2f}% of rows  with the index {medians['ix']:7.2f} ms ({access})  "
        f"without {medians['plain']:7.2f} ms"
    )
