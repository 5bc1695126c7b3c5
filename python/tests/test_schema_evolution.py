"""Changing a table's columns from Python: ``add_column`` (with a default
or without), ``drop_column``, ``rename_column`` and SQL's ``ALTER TABLE``,
through reopens; refusals that change nothing; and random changes
interleaved with writes, flushes and reopens against a model of the rows
a user expects (a column added later reads its default in older rows; a
dropped column is gone; one added again under its name starts empty)."""

from __future__ import annotations

import pathlib
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import basalt


def test_columns_change_without_a_rewrite_and_survive_a_reopen(path: pathlib.Path) -> None:
    db = basalt.open(path)
    t = db.create_table("t", pa.schema([("id", pa.int64()), ("name", pa.string())]), primary_key=["id"])
    t.write({"id": [1, 2], "name": ["ann", "bob"]})
    db.flush()
    t.add_column(pa.field("score", pa.float64()))
    t.add_column(pa.field("n", pa.int32(), nullable=False), default=7)
    t.write({"id": [3], "name": ["cy"], "score": [1.5], "n": [9]})
    assert t.get(1) == {"id": 1, "name": "ann", "score": None, "n": 7}
    t.rename_column("name", "who")
    t.drop_column("score")
    assert t.schema.names == ["id", "who", "n"]
    db.close()
    db = basalt.open(path)
    t = db.table("t")
    assert t.to_arrow().to_pylist() == [
        {"id": 1, "who": "ann", "n": 7},
        {"id": 2, "who": "bob", "n": 7},
        {"id": 3, "who": "cy", "n": 9},
    ]
    assert t.to_arrow(where=[("n", "=", 7)]).column("id").to_pylist() == [1, 2]
    db.close()


def test_alter_table_in_sql(db: basalt.Database) -> None:
    db.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v VARCHAR)")
    db.sql("INSERT INTO t VALUES (1, 'a')")
    db.sql("ALTER TABLE t ADD COLUMN d INT NOT NULL DEFAULT 5, RENAME COLUMN v TO w")
    db.sql("INSERT INTO t (id, w) VALUES (2, 'b')")
    assert db.sql("SELECT * FROM t ORDER BY id").to_pylist() == [
        {"id": 1, "w": "a", "d": 5},
        {"id": 2, "w": "b", "d": 5},
    ]
    assert db.table("t").schema.names == ["id", "w", "d"]


def test_refused_changes_say_why_and_change_nothing(db: basalt.Database) -> None:
    t = db.create_table("t", pa.schema([("id", pa.int64()), ("v", pa.int64())]), primary_key=["id"])
    t.create_index("by_v", ["v"])
    before = t.schema
    with pytest.raises(basalt.InvalidArgumentError, match="primary key"):
        t.drop_column("id")
    with pytest.raises(basalt.InvalidArgumentError, match="drop the index first"):
        t.drop_column("v")
    with pytest.raises(basalt.InvalidArgumentError, match="NOT NULL"):
        t.add_column(pa.field("x", pa.int64(), nullable=False))
    with pytest.raises(basalt.InvalidArgumentError, match="already exists"):
        t.add_column(pa.field("v", pa.int64()))
    with pytest.raises(pa.ArrowInvalid):
        t.add_column(pa.field("x", pa.int64()), default="not a number")
    with pytest.raises(basalt.InvalidArgumentError, match="how its values are stored"):
        db.sql("ALTER TABLE t ALTER COLUMN v SET DATA TYPE VARCHAR")
    assert t.schema == before


def test_a_read_only_database_refuses_changes(path: pathlib.Path) -> None:
    db = basalt.open(path)
    db.create_table("t", pa.schema([("id", pa.int64())]), primary_key=["id"])
    db.close()
    ro = basalt.open(path, read_only=True)
    with pytest.raises(basalt.ReadOnlyError):
        ro.table("t").add_column(pa.field("x", pa.int64()))
    ro.close()


TYPES = [pa.int64(), pa.string(), pa.float64(), pa.bool_()]


def value(typ: pa.DataType, rnd: object) -> object:
    """A random non-null value of `typ`."""
    if typ == pa.int64():
        return rnd.randint(-(2**63), 2**63 - 1)  # type: ignore[attr-defined]
    if typ == pa.string():
        return "".join(rnd.choice("aé字\x00z") for _ in range(rnd.randint(0, 6)))  # type: ignore[attr-defined]
    if typ == pa.float64():
        return rnd.uniform(-1e12, 1e12)  # type: ignore[attr-defined]
    return rnd.random() < 0.5  # type: ignore[attr-defined]


step = st.one_of(
    st.tuples(st.just("write"), st.lists(st.integers(0, 9), min_size=1, max_size=5), st.randoms()),
    st.tuples(st.just("add"), st.integers(0, 5), st.sampled_from(range(len(TYPES))), st.booleans(), st.randoms()),
    st.tuples(st.just("drop"), st.integers(0, 9)),
    st.tuples(st.just("rename"), st.integers(0, 9), st.integers(0, 99)),
    st.tuples(st.just("flush")),
    st.tuples(st.just("reopen")),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=25))
def test_random_changes_match_a_model(steps: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "db"
        db = basalt.open(path)
        t = db.create_table("t", pa.schema([("id", pa.int64())]), primary_key=["id"])
        # The model: columns as (id, name, type, default) and rows by key
        # holding values by column id.
        columns: list[tuple[int, str, pa.DataType, object]] = []
        rows: dict[int, dict[int, object]] = {}
        next_id = 1
        for s in steps:
            if s[0] == "write":
                keys, rnd = s[1], s[2]
                data: dict[str, list] = {"id": keys}
                for cid, name, typ, _ in columns:
                    data[name] = [value(typ, rnd) if rnd.random() < 0.8 else None for _ in keys]
                t.write(pa.table(data, schema=t.schema))
                for i, k in enumerate(keys):
                    rows[k] = {cid: data[name][i] for cid, name, _, _ in columns}
            elif s[0] == "add":
                name, typ = f"c{s[1]}", TYPES[s[2]]
                default = value(typ, s[4]) if s[3] else None
                if any(c[1] == name for c in columns):
                    with pytest.raises(basalt.InvalidArgumentError):
                        t.add_column(pa.field(name, typ), default=default)
                    continue
                t.add_column(pa.field(name, typ), default=default)
                columns.append((next_id, name, typ, default))
                next_id += 1
            elif s[0] == "drop" and columns:
                cid, name, _, _ = columns.pop(s[1] % len(columns))
                t.drop_column(name)
            elif s[0] == "rename" and columns:
                i = s[1] % len(columns)
                new = f"r{s[2]}"
                if any(c[1] == new for c in columns):
                    continue
                t.rename_column(columns[i][1], new)
                columns[i] = (columns[i][0], new, columns[i][2], columns[i][3])
            elif s[0] == "flush":
                db.flush()
            elif s[0] == "reopen":
                db.close()
                db = basalt.open(path)
                t = db.table("t")
            want = [
                {"id": k, **{name: v.get(cid, default) for cid, name, _, default in columns}}
                for k, v in sorted(rows.items())
            ]
            got = t.to_arrow().to_pylist()
            assert got == want
            assert t.schema.names == ["id", *[c[1] for c in columns]]
        db.close()
