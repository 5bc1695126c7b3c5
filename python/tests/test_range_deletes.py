"""Range deletes from Python: ``delete_range`` on the database, a keyspace,
a write batch and a table — one write however many keys — checked against a
dict model over random ranges, across reopens, with snapshots, index
lookups and the change feed."""

from __future__ import annotations

import pathlib
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import basalt

KEYS = [bytes([a, b]) for a in b"abcd" for b in b"xyz"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["put", "delete_range", "flush"]),
            st.sampled_from(KEYS + [b"", b"a", b"d\xff"]),
            st.sampled_from(KEYS + [b"", b"b", b"e"]),
        ),
        max_size=40,
    )
)
def test_delete_range_matches_a_dict(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, bytes, bytes]]) -> None:
    path = tmp_path_factory.mktemp("db") / "db"
    model: dict[bytes, bytes] = {}
    with basalt.open(path) as db:
        for i, (op, a, b) in enumerate(ops):
            if op == "put" and a:
                db[a] = str(i).encode()
                model[a] = str(i).encode()
            elif op == "delete_range":
                db.delete_range(a or None, b or None)
                model = {k: v for k, v in model.items() if not ((not a or k >= a) and (not b or k < b))}
            elif op == "flush":
                db.flush()
            assert dict(db.items()) == model
    with basalt.open(path) as db:
        assert dict(db.items()) == model


def test_snapshots_keep_and_batches_take_range_deletes(db: basalt.Database) -> None:
    for k in KEYS:
        db[k] = b"v"
    snap = db.snapshot()
    with db.write_batch() as batch:
        batch.delete_range(b"b", b"c")
        batch.put(b"bb", b"again")
    assert [k for k in db.keys() if k.startswith(b"b")] == [b"bb"]
    assert len(list(snap.keys())) == len(KEYS)
    events = db.keyspace("events")
    events[b"e1"] = b"1"
    events.delete_range(b"e", None, sync=True)
    assert list(events.keys()) == []


def test_table_delete_range_keeps_indexes_exact(path: pathlib.Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("city", pa.string())])
    with basalt.open(path) as db:
        table = db.create_table("people", schema, primary_key=["id"])
        table.write(pa.table({"id": list(range(1000)), "city": [f"c{i % 5}" for i in range(1000)]}))
        table.create_index("by_city", ["city"])
        table.delete_range(100, 900)
        ids = table.scan(columns=["id"]).read_all().column("id").to_pylist()
        assert ids == list(range(100)) + list(range(900, 1000))
        found = table.lookup("by_city", eq="c3").column("id").to_pylist()
        assert sorted(found) == [i for i in ids if i % 5 == 3]
    with basalt.open(path) as db:
        table = db.table("people")
        assert table.scan(columns=["id"]).read_all().num_rows == 200


def test_a_range_delete_in_the_feed(db: basalt.Database) -> None:
    events = db.keyspace("events")
    events.set_history(3600.0)
    since = db.stats()["last_seqno"]
    events[b"a"] = b"1"
    events.delete_range(b"a", b"b")
    changes = events.changes(since)
    assert changes[-1][2] == (b"a", b"b") and changes[-1][3] is None


def test_random_table_ranges_match_a_model(path: pathlib.Path) -> None:
    rng = random.Random(7)
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), pa.field("v", pa.int64())])
    model: set[int] = set()
    with basalt.open(path) as db:
        table = db.create_table("t", schema, primary_key=["k"])
        for step in range(60):
            if rng.random() < 0.6:
                keys = [rng.randrange(-500, 500) for _ in range(30)]
                table.write(pa.table({"k": pa.array(keys, pa.int32()), "v": keys}))
                model.update(keys)
            else:
                lo = rng.choice([None, rng.randrange(-500, 500)])
                hi = rng.choice([None, rng.randrange(-500, 500)])
                table.delete_range(lo, hi)
                model = {k for k in model if not ((lo is None or k >= lo) and (hi is None or k < hi))}
            if step % 10 == 0:
                db.flush()
            got = table.scan(columns=["k"]).read_all().column("k").to_pylist()
            assert got == sorted(model), f"step {step}"
