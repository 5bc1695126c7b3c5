"""Values mean exactly what was given: a key, bound, filter literal or
written column that the column's type cannot hold is refused, never
rounded into another row's value; and handles stay within their database."""

from __future__ import annotations

import datetime as dt
import decimal
import pathlib

import pyarrow as pa
import pytest

import basalt


@pytest.fixture
def seconds(db: basalt.Database) -> basalt.Table:
    t = db.create_table("s", pa.schema([pa.field("k", pa.timestamp("s"), nullable=False)]), ["k"])
    t.write(pa.table({"k": pa.array([dt.datetime(2024, 1, 1, 12), dt.datetime(2024, 1, 1, 12, 0, 1)], pa.timestamp("s"))}))
    return t


def test_sub_second_key_is_refused_not_truncated(seconds: basalt.Table) -> None:
    half = dt.datetime(2024, 1, 1, 12, 0, 0, 500000)
    with pytest.raises(TypeError, match="exactly"):
        seconds.get(half)
    with pytest.raises(TypeError, match="exactly"):
        seconds.to_arrow(where=[("k", ">=", half)])
    with pytest.raises(TypeError, match="exactly"):
        seconds.delete([half])
    assert seconds.to_arrow().num_rows == 2
    assert seconds.get(dt.datetime(2024, 1, 1, 12)) == {"k": dt.datetime(2024, 1, 1, 12)}


def test_float32_literal_must_be_exact(db: basalt.Database) -> None:
    t = db.create_table("f", pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("f", pa.float32())]), ["id"])
    t.write(pa.table({"id": [1], "f": pa.array([0.5], pa.float32())}))
    with pytest.raises(TypeError, match="exactly"):
        t.to_arrow(where=[("f", ">", 0.1)])
    with pytest.raises(TypeError, match="exactly"):
        t.to_arrow(where=[("f", "=", 16777217)])
    assert t.to_arrow(where=[("f", "=", 0.5)]).num_rows == 1


def test_mixed_int_and_float_keys_keep_every_digit(db: basalt.Database) -> None:
    t = db.create_table("i", pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.int64())]), ["k"])
    t.write(pa.table({"k": [2**53 + 1, 2**53, 2], "v": [1, 2, 3]}))
    assert t.get_many([2**53 + 1, 2.0]).column("k").to_pylist() == [2**53 + 1, 2]
    t.delete([2**53 + 1, 7.0])
    assert t.to_arrow().column("k").to_pylist() == [2, 2**53]
    with pytest.raises(TypeError, match="not an integer"):
        t.get_many([1, 2.5])


def test_writes_that_would_change_values_are_refused(db: basalt.Database) -> None:
    t = db.create_table("tk", pa.schema([pa.field("k", pa.timestamp("us"), nullable=False), pa.field("f", pa.float32())]), ["k"])
    with pytest.raises(basalt.SchemaError, match="exactly"):
        t.write(pa.table({"k": pa.array([1000, 1001], pa.timestamp("ns")), "f": [1.0, 2.0]}))
    with pytest.raises(basalt.SchemaError, match="exactly"):
        t.write(pa.table({"k": pa.array([1000], pa.timestamp("ns")), "f": pa.array([1e300], pa.float64())}))
    assert t.to_arrow().num_rows == 0
    t.write(pa.table({"k": pa.array([1000, 2000], pa.timestamp("ns")), "f": pa.array([1.5, float("nan")], pa.float64())}))
    assert t.to_arrow().num_rows == 2


def test_decimal_literals_are_exact(db: basalt.Database) -> None:
    t = db.create_table("d", pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("x", pa.decimal128(38, 2))]), ["id"])
    big = decimal.Decimal("12345678901234567.89")
    t.write(pa.table({"id": [1], "x": pa.array([big], pa.decimal128(38, 2))}))
    assert t.to_arrow(where=[("x", "=", decimal.Decimal("12345678901234567.890"))]).num_rows == 1
    with pytest.raises(TypeError, match="digits"):
        t.to_arrow(where=[("x", "=", decimal.Decimal("1.234"))])


def test_naive_datetime_for_a_zoned_column_is_refused(db: basalt.Database) -> None:
    t = db.create_table("z", pa.schema([pa.field("k", pa.timestamp("us", tz="America/New_York"), nullable=False)]), ["k"])
    instant = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc)
    t.write(pa.table({"k": pa.array([instant], pa.timestamp("us", tz="UTC"))}))
    assert t.get(instant) is not None
    with pytest.raises(TypeError, match="aware"):
        t.get(dt.datetime(2024, 1, 1, 12))


def test_a_snapshot_of_another_database_is_refused(db: basalt.Database, tmp_path: pathlib.Path) -> None:
    t = db.create_table("t", pa.schema([pa.field("k", pa.int64(), nullable=False)]), ["k"])
    t.write(pa.table({"k": [1, 2, 3]}))
    ks = db.keyspace("other")
    with basalt.open(tmp_path / "second") as db2, db2.snapshot() as foreign:
        for read in (
            lambda: t.to_arrow(snapshot=foreign),
            lambda: t.get(1, snapshot=foreign),
            lambda: foreign.get(b"a", keyspace=ks),
        ):
            with pytest.raises(basalt.InvalidArgumentError, match="another database"):
                read()


def test_read_only_sql_refuses_writes(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        t = db.create_table("t", pa.schema([pa.field("k", pa.int64(), nullable=False)]), ["k"])
        t.write(pa.table({"k": [1]}))
    with basalt.open(path, read_only=True) as ro:
        assert ro.sql("SELECT count(*) AS n FROM t").to_pydict() == {"n": [1]}
        for statement in (
            "INSERT INTO t VALUES (2)",
            "CREATE INDEX i ON t (k)",
            "CREATE TABLE t2 (a BIGINT NOT NULL PRIMARY KEY)",
            "DELETE FROM t",
            "EXPLAIN ANALYZE INSERT INTO t VALUES (3)",
        ):
            with pytest.raises(basalt.ReadOnlyError):
                ro.sql(statement)
    with basalt.open(path) as db:
        assert db.tables() == ["t"]
        assert db.table("t").to_arrow().to_pydict() == {"k": [1]}
        assert db.table("t").indexes() == []
