"""Zero copy, proved by address: after a flush and a compaction the rows sit
in SST blocks, which the engine memory-maps; a scan's Arrow buffers must
point into those mappings (found in /proc/self/maps), not at copies.

Integer columns that the engine stores packed (``pack_integers``, the
default) are unpacked into buffers of their own: most tests here open
the database without packing, to check every plain column's zero copy;
the last checks that packing leaves the other columns zero-copy."""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import basalt

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")

ROWS = 100_000
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("price", pa.float64(), nullable=False),
        pa.field("qty", pa.int64(), nullable=False),
    ]
)


@dataclass(frozen=True)
class Mapping:
    low: int
    high: int
    file: str

    def holds(self, address: int, size: int) -> bool:
        return self.low <= address and address + size <= self.high


def sst_mappings(directory: str) -> list[Mapping]:
    """The memory mappings of this process backed by ``*.sst`` files of ``directory``."""
    directory = os.path.realpath(directory)
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(maxsplit=5)
            if len(parts) < 6:
                continue
            file = parts[5].strip()
            if file.endswith(" (deleted)"):
                file = file[: -len(" (deleted)")]
            if not file.endswith(".sst") or os.path.dirname(file) != directory:
                continue
            low, high = (int(x, 16) for x in parts[0].split("-"))
            found.append(Mapping(low, high, file))
    return found


@dataclass
class Census:
    buffers: int = 0
    mapped_buffers: int = 0
    rows: int = 0
    mapped_rows: int = 0

    def fraction(self) -> float:
        return self.mapped_buffers / self.buffers if self.buffers else 0.0


def census(batches: Iterable[pa.RecordBatch], maps: list[Mapping]) -> Census:
    """How many value buffers of ``batches`` lie inside an SST mapping."""
    c = Census()
    for batch in batches:
        for column in batch.columns:
            data = column.buffers()[1]  # [0] is the validity bitmap
            assert data is not None
            c.buffers += 1
            c.rows += len(column)
            width = column.type.bit_width // 8
            start = data.address + column.offset * width
            if any(m.holds(start, len(column) * width) for m in maps):
                c.mapped_buffers += 1
                c.mapped_rows += len(column)
    return c


@pytest.fixture
def db(path: pathlib.Path) -> Iterator[basalt.Database]:
    """A fresh database storing every column plain (no packed integers)."""
    database = basalt.open(path, pack_integers=False)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def settled(db: basalt.Database) -> basalt.Table:
    """A 100k-row table whose rows were flushed and compacted into SSTs."""
    table = db.create_table("ticks", SCHEMA, primary_key=["id"])
    ids = pa.array(range(ROWS), pa.int64())
    prices = pa.array([i * 0.5 for i in range(ROWS)], pa.float64())
    qty = pa.array([i % 97 for i in range(ROWS)], pa.int64())
    for start in range(0, ROWS, 25_000):  # several writes, several memtable entries
        chunk = slice(start, start + 25_000)
        table.write(pa.table([ids[chunk], prices[chunk], qty[chunk]], schema=SCHEMA))
    db.flush()
    table.compact()
    return table


def check(db: basalt.Database, batches: list[pa.RecordBatch], what: str) -> None:
    # The data is right.
    assert sum(b.num_rows for b in batches) == ROWS
    table = pa.Table.from_batches(batches, schema=SCHEMA)
    assert table.column("id").to_pylist() == list(range(ROWS))
    assert pc.sum(table.column("qty")).as_py() == sum(i % 97 for i in range(ROWS))
    # And it is read where the engine mapped it.
    maps = sst_mappings(os.fspath(db.path))
    assert maps, f"no mapping of an .sst file of {db.path} in /proc/self/maps"
    c = census(batches, maps)
    print(f"{what}: {c.mapped_buffers}/{c.buffers} value buffers, {c.mapped_rows}/{c.rows} column values in SST maps")
    assert c.fraction() >= 0.9, f"{what}: only {c.mapped_buffers} of {c.buffers} value buffers point into an SST mapping"
    assert c.mapped_rows >= 0.9 * c.rows, f"{what}: only {c.mapped_rows} of {c.rows} values point into an SST mapping"


def test_scan_batches_point_into_sst_mappings(db: basalt.Database, settled: basalt.Table) -> None:
    check(db, list(settled.scan()), "Table.scan()")


def test_scan_with_projection_points_into_sst_mappings(db: basalt.Database, settled: basalt.Table) -> None:
    batches = list(settled.scan(columns=["price", "qty"]))
    maps = sst_mappings(os.fspath(db.path))
    c = census(batches, maps)
    assert sum(b.num_rows for b in batches) == ROWS
    assert c.fraction() >= 0.9, f"{c.mapped_buffers} of {c.buffers}"


def test_pyarrow_table_of_a_table_points_into_sst_mappings(db: basalt.Database, settled: basalt.Table) -> None:
    table = pa.table(settled)  # through __arrow_c_stream__
    check(db, table.to_batches(), "pa.table(table)")


def test_record_batch_reader_from_stream_points_into_sst_mappings(db: basalt.Database, settled: basalt.Table) -> None:
    reader = pa.RecordBatchReader.from_stream(settled.scan())
    check(db, list(reader), "RecordBatchReader.from_stream(scan)")


def test_to_arrow_points_into_sst_mappings(db: basalt.Database, settled: basalt.Table) -> None:
    check(db, settled.to_arrow().to_batches(), "Table.to_arrow()")


def test_to_polars_is_correct(db: basalt.Database, settled: basalt.Table) -> None:
    # polars may copy into its own layout: only the values are checked.
    df = settled.to_polars()
    assert df.height == ROWS
    assert df["id"].to_list() == list(range(ROWS))
    assert df["qty"].sum() == sum(i % 97 for i in range(ROWS))


def test_memtable_rows_are_not_claimed_as_mapped(db: basalt.Database) -> None:
    """Control: rows still in the memtable are not in any SST mapping, so
    the census above does tell mapped from copied buffers apart."""
    table = db.create_table("fresh", SCHEMA, primary_key=["id"])
    table.write(pa.table({"id": range(1000), "price": [1.0] * 1000, "qty": [1] * 1000}, schema=SCHEMA))
    batches = list(table.scan())
    c = census(batches, sst_mappings(os.fspath(db.path)))
    assert c.rows == 3000
    assert c.mapped_buffers == 0


def test_packed_integer_columns_leave_the_others_zero_copy(path: pathlib.Path) -> None:
    # With packing (the default) the qty column (0..96) is stored packed
    # and unpacked per block; price stays where it lies in the mapping.
    with basalt.open(path) as db:
        table = db.create_table("ticks", SCHEMA, primary_key=["id"])
        ids = pa.array(range(ROWS), pa.int64())
        table.write(
            pa.table(
                [ids, pa.array([i * 0.5 for i in range(ROWS)]), pa.array([i % 97 for i in range(ROWS)], pa.int64())],
                schema=SCHEMA,
            )
        )
        db.flush()
        table.compact()
        maps = sst_mappings(os.fspath(db.path))
        price = census([pa.record_batch([b.column("price")], names=["price"]) for b in table.scan()], maps)
        qty = census([pa.record_batch([b.column("qty")], names=["qty"]) for b in table.scan()], maps)
        assert price.fraction() >= 0.9, f"price: {price.mapped_buffers} of {price.buffers} mapped"
        assert qty.mapped_buffers == 0, f"qty is packed, yet {qty.mapped_buffers} buffers are mapped"
        assert table.to_arrow().column("qty").to_pylist() == [i % 97 for i in range(ROWS)]
