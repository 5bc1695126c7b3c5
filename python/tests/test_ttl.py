"""Times to live from Python: a keyspace's and a table's versions vanish
from every read once they are older than the TTL (gets, iteration, index
lookups, SQL), with the real clock; the TTL is kept across a reopen, and a
TTL with a merge operator or a zero TTL is refused."""

from __future__ import annotations

import pathlib
import time
from datetime import timedelta

import pyarrow as pa
import pytest

import basalt

TTL = 0.4


def test_a_keyspace_forgets_what_is_older_than_its_ttl(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        sessions = db.keyspace("sessions")
        assert sessions.ttl is None
        sessions.set_ttl(timedelta(seconds=TTL))
        assert sessions.ttl == timedelta(seconds=TTL)
        sessions.put(b"old", b"1")
        db.flush()
        time.sleep(TTL / 2)
        sessions.put(b"new", b"2")
        assert sessions.get(b"old") == b"1"
        time.sleep(TTL / 2 + 0.05)
        # "old" is past its TTL, "new" is not.
        assert sessions.get(b"old") is None
        assert sessions.get(b"new") == b"2"
        assert list(sessions.keys()) == [b"new"]
    with basalt.open(path) as db:
        sessions = db.keyspace("sessions")
        assert sessions.ttl == timedelta(seconds=TTL)
        time.sleep(TTL)
        assert sessions.get(b"new") is None
        sessions.set_ttl(None)
        assert sessions.ttl is None


def test_a_tables_rows_and_their_index_entries_expire_together(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("user", pa.string())])
        events = db.create_table("events", schema, ["id"])
        events.create_index("by_user", ["user"])
        events.set_ttl(TTL)
        events.write(pa.table({"id": [1, 2, 3], "user": ["ann", "bob", "ann"]}))
        time.sleep(TTL / 2)
        events.write(pa.table({"id": [4], "user": ["ann"]}))
        assert db.sql("SELECT count(*) AS n FROM events").column("n").to_pylist() == [4]
        time.sleep(TTL / 2 + 0.05)
        assert events.lookup("by_user", eq="ann").column("id").to_pylist() == [4]
        assert db.sql("SELECT id FROM events WHERE user = 'ann'").column("id").to_pylist() == [4]
        assert events.to_arrow().column("id").to_pylist() == [4]
        assert db.sql("SELECT count(*) AS n FROM events").column("n").to_pylist() == [1]
        assert events.count("by_user", eq="ann") == 1


def test_bad_ttls_are_refused(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        counts = db.keyspace("counts")
        counts.set_merge_operator("add_i64")
        with pytest.raises(basalt.InvalidArgumentError):
            counts.set_ttl(10)
        other = db.keyspace("other")
        with pytest.raises(basalt.InvalidArgumentError):
            other.set_ttl(0)
        with pytest.raises(basalt.InvalidArgumentError):
            other.set_ttl(-1)
        assert other.ttl is None
