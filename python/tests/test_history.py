"""History windows from Python: reads as of a past seqno or time, a key's
versions, the change feed as pyarrow, and refusals outside a window."""

import datetime as dt
import time

import pyarrow as pa
import pytest

import basalt

UTC = dt.timezone.utc


SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("n", pa.int64())])


def make_table(db: basalt.Database) -> basalt.Table:
    return db.create_table("t", SCHEMA, primary_key=["id"])


def rows(*dicts: dict[str, object]) -> pa.Table:
    return pa.Table.from_pylist(list(dicts), schema=SCHEMA)


def test_reads_as_of_a_past_seqno_and_time(tmp_path):
    with basalt.open(tmp_path / "db") as db:
        t = make_table(db)
        t.set_history(dt.timedelta(hours=1))
        t.write(rows({"id": 1, "name": "ada", "n": 1}))
        first = db.snapshot().seqno
        time.sleep(0.01)
        between = dt.datetime.now(UTC)
        time.sleep(0.01)
        t.write(rows({"id": 1, "name": "grace", "n": 2}, {"id": 2, "name": "alan", "n": 3}))
        t.delete(pa.table({"id": [1]}))
        t.compact()
        with db.snapshot(as_of=first) as snap:
            assert snap.seqno == first
            assert t.get(1, snapshot=snap) == {"id": 1, "name": "ada", "n": 1}
            assert t.scan(snapshot=snap).read_all().to_pylist() == [{"id": 1, "name": "ada", "n": 1}]
            assert isinstance(snap.commit_time, dt.datetime)
        with db.snapshot(as_of=between) as snap:
            assert snap.seqno == first
        assert t.get(1) is None
        info = t.history_info
        assert info is not None and info["keep"] == dt.timedelta(hours=1) and info["oldest_seqno"] == info["since"]


def test_history_and_changes_come_as_arrow(tmp_path):
    with basalt.open(tmp_path / "db") as db:
        t = make_table(db)
        t.set_history(dt.timedelta(hours=1))
        for i in range(5):
            t.write(rows({"id": 7, "name": f"v{i}", "n": i}))
        t.delete(pa.table({"id": [7]}))
        h = t.history(7)
        assert h.column_names[:3] == ["_seqno", "_commit_time", "_deleted"]
        assert h.column("_deleted").to_pylist() == [True, False, False, False, False, False]
        assert h.column("name").to_pylist() == [None, "v4", "v3", "v2", "v1", "v0"]
        assert h.column("id").to_pylist() == [7] * 6
        assert t.history(7, limit=2).num_rows == 2
        assert h.schema.field("_commit_time").type == pa.timestamp("ms", tz="UTC")
        changes = t.changes(0)
        assert changes.column("_op").to_pylist() == ["upsert"] * 5 + ["delete"]
        seqnos = changes.column("_seqno").to_pylist()
        assert seqnos == sorted(seqnos)
        resumed = t.changes(seqnos[2])
        assert resumed.column("_seqno").to_pylist() == seqnos[3:]
        assert t.changes(seqnos[-1]).num_rows == 0


def test_keyspace_history_and_feed(tmp_path):
    with basalt.open(tmp_path / "db") as db:
        db.set_history(versions=10)
        db[b"k"] = b"1"
        db[b"k"] = b"2"
        del db[b"k"]
        versions = db.history(b"k")
        assert [v[2] for v in versions] == [None, b"2", b"1"]
        assert all(isinstance(v[1], dt.datetime) for v in versions)
        changes = db.changes()
        assert [(c[2], c[3]) for c in changes] == [(b"k", b"1"), (b"k", b"2"), (b"k", None)]
        assert db.history_info is not None and db.history_info["versions"] == 10


def test_outside_the_window_is_refused(tmp_path):
    with basalt.open(tmp_path / "db") as db:
        t = make_table(db)
        t.write(rows({"id": 1, "name": "long before", "n": 0}))
        before = db.snapshot().seqno
        time.sleep(0.005)
        t.write(rows({"id": 1, "name": "before", "n": 0}))
        # The window holds from here: the version "before" on.
        t.set_history(dt.timedelta(minutes=5))
        t.write(rows({"id": 1, "name": "after", "n": 1}))
        with db.snapshot(as_of=before) as snap:
            with pytest.raises(basalt.HistoryUnavailableError) as e:
                t.get(1, snapshot=snap)
            assert e.value.oldest_seqno is not None and e.value.oldest_seqno > before
        with pytest.raises(basalt.HistoryUnavailableError):
            t.changes(0)
        with pytest.raises(basalt.HistoryUnavailableError):
            db.history(b"k")
        with pytest.raises(basalt.InvalidArgumentError):
            db.snapshot(as_of=dt.datetime(2020, 1, 1))  # naive: names no instant
        with pytest.raises(basalt.InvalidArgumentError):
            t.set_history(-1)
        t.set_history(None)
        assert t.history_info is None
