"""Basalt from Python in one page: key-value, a table, an index, SQL.

Run it with ``python python/examples/quickstart.py``; ``mypy --strict``
checks it in CI.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import basalt


def main(directory: Path) -> None:
    with basalt.open(directory / "example.db") as db:
        # The database is a dict of bytes to bytes, iterated in key order.
        db[b"user:1"] = b"ada"
        db.put(b"user:2", b"grace", sync=True)
        assert db[b"user:1"] == b"ada" and b"user:3" not in db
        print("users:", [key.decode() for key in db.keys(prefix=b"user:")])

        # Several writes, atomically (discarded if the block raises).
        with db.write_batch() as batch:
            batch.put(b"user:3", b"edsger")
            batch.delete(b"user:2")

        # A snapshot keeps seeing the database as it was.
        with db.snapshot() as snapshot:
            db[b"user:1"] = b"ada lovelace"
            assert snapshot[b"user:1"] == b"ada"

        # A table of Arrow rows, keyed by (carrier, flight).
        schema = pa.schema(
            [
                pa.field("carrier", pa.string(), nullable=False),
                pa.field("flight", pa.int32(), nullable=False),
                pa.field("origin", pa.string()),
                pa.field("delay", pa.float64()),
            ]
        )
        flights = db.create_table("flights", schema, primary_key=["carrier", "flight"])
        flights.write(
            pa.table(
                {
                    "carrier": ["UA", "UA", "AA", "DL"],
                    "flight": [1545, 1714, 1141, 461],
                    "origin": ["EWR", "LGA", "JFK", "LGA"],
                    "delay": [11.0, 20.0, 33.0, -2.0],
                }
            )
        )
        print("UA 1714:", flights.get(("UA", 1714)))

        # Scans stream zero-copy record batches; filters are pushed down.
        late = flights.to_arrow(where=[("delay", ">", 10.0)], columns=["carrier", "flight"])
        print("late:", late.num_rows, "flights")
        united = flights.to_arrow(start=("UA",), end=("UB",))
        total = pc.sum(united["delay"]).as_py()
        print("UA delay total:", total)

        # A secondary index, queried without a scan.
        flights.create_index("by_origin", ["origin"])
        print("from LGA:", flights.count("by_origin", eq="LGA"))
        print(flights.lookup("by_origin", eq="LGA", columns=["carrier", "flight"]).to_pylist())

        # SQL over every table.
        by_origin = db.sql("SELECT origin, avg(delay) AS delay FROM flights GROUP BY origin ORDER BY origin")
        print(by_origin.to_pylist())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
