"""Random operation sequences against simple models (hypothesis stateful
testing): the key-value API against two dicts (the default keyspace and a
second one), and a table against a dict of rows. Hypothesis prints the
failing sequence and its seed when a run fails."""

from __future__ import annotations

import operator
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import basalt

# ----------------------------------------------------------------- KV

# A small alphabet, short keys: the same keys come back often, and 0x00 /
# 0xff exercise the edges of ranges and prefixes.
KEYS = st.lists(st.sampled_from([0x00, 0x01, 0x61, 0x62, 0xFE, 0xFF]), min_size=1, max_size=3).map(bytes)
VALUES = st.binary(max_size=8)
BOUNDS = st.none() | st.lists(st.sampled_from([0x00, 0x01, 0x61, 0x62, 0xFE, 0xFF]), max_size=3).map(bytes)

Model = dict[bytes, bytes]


def model_range(
    model: Model, start: bytes | None, end: bytes | None, prefix: bytes | None, reverse: bool
) -> list[tuple[bytes, bytes]]:
    """What ``items(start, end, prefix=, reverse=)`` should yield."""
    pairs = sorted(
        (k, v)
        for k, v in model.items()
        if (start is None or k >= start) and (end is None or k < end) and (prefix is None or k.startswith(prefix))
    )
    return pairs[::-1] if reverse else pairs


class Abort(Exception):
    """Raised inside a ``with write_batch()`` block to discard it."""


class KeyValueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="basalt-kv-machine-")
        self.path = os.path.join(self.dir, "db")
        self.db = basalt.open(self.path)
        self.side = self.db.keyspace("side")
        self.models: dict[str, Model] = {"default": {}, "side": {}}
        # Each live snapshot with frozen copies of the models when taken.
        self.snapshots: list[tuple[basalt.Snapshot, dict[str, Model]]] = []

    def keyspace(self, name: str) -> basalt.Keyspace:
        return self.db if name == "default" else self.side

    def teardown(self) -> None:
        for snap, _ in self.snapshots:
            snap.close()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # Writes.

    @rule(key=KEYS, value=VALUES, space=st.sampled_from(["default", "side"]), how=st.sampled_from(["[]", "put", "sync"]))
    def put(self, key: bytes, value: bytes, space: str, how: str) -> None:
        ks = self.keyspace(space)
        if how == "[]":
            ks[key] = value
        else:
            ks.put(key, value, sync=(how == "sync"))
        self.models[space][key] = value

    @rule(key=KEYS, space=st.sampled_from(["default", "side"]), how=st.sampled_from(["del", "delete"]))
    def delete(self, key: bytes, space: str, how: str) -> None:
        ks = self.keyspace(space)
        if how == "del":
            del ks[key]
        else:
            ks.delete(key)
        self.models[space].pop(key, None)

    @rule(
        ops=st.lists(
            st.tuples(st.sampled_from(["put", "delete"]), KEYS, VALUES, st.sampled_from(["default", "side"])),
            min_size=1,
            max_size=8,
        ),
        abort=st.booleans(),
    )
    def batch(self, ops: list[tuple[str, bytes, bytes, str]], abort: bool) -> None:
        after = {name: dict(m) for name, m in self.models.items()}
        try:
            with self.db.write_batch() as b:
                for kind, key, value, space in ops:
                    target = None if space == "default" else self.side
                    if kind == "put":
                        b.put(key, value, keyspace=target)
                        after[space][key] = value
                    else:
                        b.delete(key, keyspace=target)
                        after[space].pop(key, None)
                if abort:
                    raise Abort()
        except Abort:
            pass
        if not abort:
            self.models = after

    # Snapshots.

    @precondition(lambda self: len(self.snapshots) < 4)
    @rule()
    def take_snapshot(self) -> None:
        frozen = {name: dict(m) for name, m in self.models.items()}
        self.snapshots.append((self.db.snapshot(), frozen))

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data(), start=BOUNDS, end=BOUNDS, reverse=st.booleans(), probe=KEYS)
    def check_snapshot(self, data: st.DataObject, start: bytes | None, end: bytes | None, reverse: bool, probe: bytes) -> None:
        snap, frozen = data.draw(st.sampled_from(self.snapshots))
        for space in ("default", "side"):
            ks = None if space == "default" else self.side
            model = frozen[space]
            assert list(snap.items(keyspace=ks)) == sorted(model.items())
            assert list(snap.items(start, end, reverse=reverse, keyspace=ks)) == model_range(
                model, start, end, None, reverse
            )
            assert snap.get(probe, keyspace=ks) == model.get(probe)
            assert snap.multi_get([probe, b"a", b"\xff"], keyspace=ks) == [
                model.get(probe),
                model.get(b"a"),
                model.get(b"\xff"),
            ]
        assert (probe in snap) == (probe in frozen["default"])
        if probe in frozen["default"]:
            assert snap[probe] == frozen["default"][probe]

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def release_snapshot(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.snapshots) - 1))
        snap, _ = self.snapshots.pop(i)
        snap.close()
        with pytest.raises(basalt.ClosedError):
            snap.get(b"a")

    # Durability and background work.

    @rule()
    def reopen(self) -> None:
        self.db.close()
        for snap, _ in self.snapshots:
            with pytest.raises(basalt.ClosedError):
                snap.get(b"a")
        self.snapshots.clear()
        with pytest.raises(basalt.ClosedError):
            self.side[b"a"]
        self.db = basalt.open(self.path)
        self.side = self.db.keyspace("side", create=False)

    @rule()
    def flush(self) -> None:
        self.db.flush()

    @rule(start=BOUNDS, end=BOUNDS)
    def compact(self, start: bytes | None, end: bytes | None) -> None:
        if start is not None and end is not None and start > end:
            start, end = end, start
        self.db.compact(start, end)
        self.side.compact()

    # Reads.

    @rule(
        start=BOUNDS,
        end=BOUNDS,
        prefix=st.none() | BOUNDS,
        reverse=st.booleans(),
        space=st.sampled_from(["default", "side"]),
        what=st.sampled_from(["items", "keys", "values"]),
    )
    def iterate(self, start: bytes | None, end: bytes | None, prefix: bytes | None, reverse: bool, space: str, what: str) -> None:
        expected = model_range(self.models[space], start, end, prefix, reverse)
        ks = self.keyspace(space)
        if what == "items":
            assert list(ks.items(start, end, prefix=prefix, reverse=reverse)) == expected
        elif what == "keys":
            assert list(ks.keys(start, end, prefix=prefix, reverse=reverse)) == [k for k, _ in expected]
        else:
            assert list(ks.values(start, end, prefix=prefix, reverse=reverse)) == [v for _, v in expected]

    @rule(keys=st.lists(KEYS, max_size=6), space=st.sampled_from(["default", "side"]))
    def multi_get(self, keys: list[bytes], space: str) -> None:
        model = self.models[space]
        assert self.keyspace(space).multi_get(keys) == [model.get(k) for k in keys]

    @rule(key=KEYS, space=st.sampled_from(["default", "side"]))
    def get(self, key: bytes, space: str) -> None:
        ks = self.keyspace(space)
        model = self.models[space]
        assert ks.get(key) == model.get(key)
        assert (key in ks) == (key in model)
        if key in model:
            assert ks[key] == model[key]
        else:
            with pytest.raises(KeyError):
                ks[key]

    @invariant()
    def contents_match(self) -> None:
        assert list(self.db.items()) == sorted(self.models["default"].items())
        assert list(self.side.items()) == sorted(self.models["side"].items())
        assert len(self.db) == len(self.models["default"])


TestKeyValueMachine = KeyValueMachine.TestCase
TestKeyValueMachine.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# -------------------------------------------------------------- table

TABLE_SCHEMA = pa.schema(
    [
        pa.field("k", pa.int64(), nullable=False),
        pa.field("a", pa.utf8()),
        pa.field("b", pa.float64()),
    ]
)
ROW_KEYS = st.integers(-5, 15)
A_VALUES = st.none() | st.sampled_from(["", "x", "y", "xy", "é"])
# No NaN and no -0.0 (Arrow compares floats in total order, Python does not).
B_VALUES = st.none() | st.sampled_from([-1.5, 0.0, 1.0, 2.5]) | st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: x + 0.0)
COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}

Row = tuple[str | None, float | None]


class TableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="basalt-table-machine-")
        self.path = os.path.join(self.dir, "db")
        self.db = basalt.open(self.path)
        self.table = self.db.create_table("t", TABLE_SCHEMA, primary_key=["k"])
        self.table.create_index("by_a", ["a"])
        self.model: dict[int, Row] = {}

    def teardown(self) -> None:
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def rows(self, keys: list[int]) -> list[dict[str, Any]]:
        return [{"k": k, "a": self.model[k][0], "b": self.model[k][1]} for k in keys]

    @rule(
        rows=st.lists(st.tuples(ROW_KEYS, A_VALUES, B_VALUES), min_size=1, max_size=8),
        via=st.sampled_from(["pyarrow", "record batch", "polars", "dict"]),
    )
    def write(self, rows: list[tuple[int, str | None, float | None]], via: str) -> None:
        columns = {"k": [r[0] for r in rows], "a": [r[1] for r in rows], "b": [r[2] for r in rows]}
        data: Any
        if via == "pyarrow":
            data = pa.table(columns, schema=TABLE_SCHEMA)
        elif via == "record batch":
            data = pa.record_batch(columns, schema=TABLE_SCHEMA)
        elif via == "polars":
            data = pl.DataFrame(columns, schema={"k": pl.Int64, "a": pl.Utf8, "b": pl.Float64})
        else:
            data = {"k": pa.array(columns["k"], pa.int64()), "a": pa.array(columns["a"], pa.utf8()), "b": pa.array(columns["b"], pa.float64())}
        assert self.table.write(data) == len(rows)
        for k, a, b in rows:  # the later row of a key wins
            self.model[k] = (a, b)

    @rule(keys=st.lists(ROW_KEYS, max_size=5))
    def delete(self, keys: list[int]) -> None:
        self.table.delete(keys)
        for k in keys:
            self.model.pop(k, None)

    @rule(k=ROW_KEYS, a=A_VALUES)
    def bad_write_changes_nothing(self, k: int, a: str | None) -> None:
        # A null key in the second row: the first must not be written either.
        bad = pa.table({"k": [k, None], "a": [a, a]}, schema=pa.schema([pa.field("k", pa.int64()), pa.field("a", pa.utf8())]))
        with pytest.raises(basalt.SchemaError):
            self.table.write(bad)

    @rule(k=ROW_KEYS)
    def get(self, k: int) -> None:
        expected = self.rows([k])[0] if k in self.model else None
        assert self.table.get(k) == expected

    @rule(keys=st.lists(ROW_KEYS, max_size=6))
    def get_many(self, keys: list[int]) -> None:
        got = self.table.get_many(keys)
        assert got.column("k").to_pylist() == [k for k in keys if k in self.model]

    @rule(op=st.sampled_from(list(COMPARE)), value=st.sampled_from([-1.5, 0.0, 1.0, 2.5, 1e5]), reverse=st.booleans())
    def scan_where_b(self, op: str, value: float, reverse: bool) -> None:
        keys = sorted(k for k, (_, b) in self.model.items() if b is not None and COMPARE[op](b, value))
        got = self.table.to_arrow(where=[("b", op, value)], reverse=reverse)
        assert got.to_pylist() == self.rows(keys[::-1] if reverse else keys)

    @rule(op=st.sampled_from(["is null", "is not null"]), column=st.sampled_from(["a", "b"]))
    def scan_null(self, op: str, column: str) -> None:
        i = 0 if column == "a" else 1
        keys = sorted(k for k, row in self.model.items() if (row[i] is None) == (op == "is null"))
        assert self.table.to_arrow(where=[(column, op)], columns=["k"]).column("k").to_pylist() == keys

    @rule(
        start=st.none() | ROW_KEYS,
        end=st.none() | ROW_KEYS,
        reverse=st.booleans(),
        batch_size=st.none() | st.integers(1, 5),
    )
    def scan_range(self, start: int | None, end: int | None, reverse: bool, batch_size: int | None) -> None:
        keys = sorted(k for k in self.model if (start is None or k >= start) and (end is None or k < end))
        if reverse:
            keys.reverse()
        batches = list(self.table.scan(start=start, end=end, reverse=reverse, batch_size=batch_size))
        if batch_size is not None:
            assert all(b.num_rows <= batch_size for b in batches)
        got = [row for b in batches for row in b.to_pylist()]
        assert got == self.rows(keys)

    @rule(a=A_VALUES)
    def lookup_a(self, a: str | None) -> None:
        keys = sorted(k for k, row in self.model.items() if row[0] == a)
        # A one-value tuple: a bare eq=None reads as "eq not given" (see
        # test_tables.py::test_lookup_eq_none_matches_null).
        assert self.table.lookup("by_a", eq=(a,)).column("k").to_pylist() == keys
        assert self.table.count("by_a", eq=(a,)) == len(keys)

    @rule()
    def reopen(self) -> None:
        self.db.close()
        with pytest.raises(basalt.ClosedError):
            self.table.get(0)
        self.db = basalt.open(self.path)
        self.table = self.db.table("t")

    @rule()
    def flush(self) -> None:
        self.db.flush()

    @rule()
    def compact(self) -> None:
        self.table.compact()

    @invariant()
    def contents_match(self) -> None:
        assert self.table.to_arrow().to_pylist() == self.rows(sorted(self.model))


TestTableMachine = TableMachine.TestCase
TestTableMachine.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
