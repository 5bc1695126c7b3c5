"""A table scan into pyarrow at two block sizes: how much of the scan's
time is the per-block record batch (one batch, imported by pyarrow, per
block). Usage: ``python python/bench/scan_blocks.py [ROWS]``."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.compute as pc

import basalt
from kv_bench import scan_table, sst_maps


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    data = scan_table(rows)
    for block in (4096, 65536):
        path = Path(tempfile.mkdtemp()) / "db"
        with basalt.open(path, table_block_bytes_target=block) as db:
            t = db.create_table("t", data.schema, ["id"])
            t.bulk_load(data.to_reader(max_chunksize=65536))
            db.flush()
            t.compact()
        with basalt.open(path, table_block_bytes_target=block) as db:
            t = db.table("t")
            t.to_arrow()
            times = []
            for _ in range(5):
                start = time.perf_counter()
                table = t.to_arrow()
                pc.sum(table["a"]).as_py()
                times.append(time.perf_counter() - start)
            maps = sst_maps(path)
            buffers = [c.chunk(i).buffers()[1] for c in table.columns for i in range(c.num_chunks)]
            inside = sum(1 for b in buffers if any(lo <= b.address < hi for lo, hi in maps))
            print(
                f"block {block}: {rows / statistics.median(times):,.0f} rows/s (median of 5), "
                f"{table['a'].num_chunks} chunks, {inside}/{len(buffers)} buffers in SST maps"
            )


if __name__ == "__main__":
    main()
