"""SST files written outside a database and ingested into one:
``Table.write_sst_files`` (from a read-only handle too), ``Table.ingest_files``
(hard links, key ranges, refusals) and ``Database.last_seqno``."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import basalt

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.float64()), pa.field("s", pa.utf8())]
)


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([None if i % 5 == 0 else i / 2 for i in ids], pa.float64()),
            "s": pa.array([f"{tag}{i}" for i in ids], pa.utf8()),
        },
        schema=SCHEMA,
    )


def make(path: pathlib.Path) -> basalt.Database:
    db = basalt.open(path)
    db.create_table("t", SCHEMA, primary_key=["id"])
    return db


def scan(db: basalt.Database) -> list[dict[str, object]]:
    return db.table("t").scan().read_all().to_pylist()


def test_files_written_by_a_read_only_handle_are_linked_in(tmp_path: pathlib.Path) -> None:
    with make(tmp_path / "db") as db:
        db.table("t").write(rows(list(range(0, 100, 3)), "old"))
        db.flush()
    # Written while the database is open read-only elsewhere: nothing in it changes.
    with basalt.open(tmp_path / "db", read_only=True, create=False) as ro:
        seqno = ro.last_seqno + 1
        files = ro.table("t").write_sst_files(
            tmp_path / "ext", rows(list(np.random.default_rng(1).permutation(200)), "new"), seqno=seqno
        )
    assert files and all(f["seqno"] == seqno and f["range"] == 0 for f in files)
    assert sum(f["rows"] for f in files) == 200
    with basalt.open(tmp_path / "db", create=False) as db:
        assert db.table("t").ingest_files([f["path"] for f in files]) == 200
        got = scan(db)
        assert [r["id"] for r in got] == list(range(200))
        assert all(r["s"] == f"new{r['id']}" for r in got), "the ingested rows replace the older ones"
        assert db.last_seqno >= seqno
    # Hard links: each written file now has a second name in the database.
    for f in files:
        assert os.stat(f["path"]).st_nlink == 2, f
    # And the rows survive a reopen without any WAL record.
    with basalt.open(tmp_path / "db", create=False) as db:
        assert len(scan(db)) == 200


def test_two_shards_each_keep_their_range_of_files_cut_or_not(tmp_path: pathlib.Path) -> None:
    ids = list(np.random.default_rng(2).permutation(1_000))
    for cut in (True, False):
        root = tmp_path / ("cut" if cut else "uncut")
        low, high = make(root / "low"), make(root / "high")
        with low, high:
            seqno = max(low.last_seqno, high.last_seqno) + 1
            files = low.table("t").write_sst_files(
                root / "ext", rows(ids, "x"), seqno=seqno, cut_at=[500] if cut else None
            )
            if cut:
                assert {f["range"] for f in files} == {0, 1}
                mine = ([f["path"] for f in files if f["range"] == 0], [f["path"] for f in files if f["range"] == 1])
            else:
                mine = ([f["path"] for f in files], [f["path"] for f in files])
            assert low.table("t").ingest_files(mine[0], end=500) == 500
            assert high.table("t").ingest_files(mine[1], start=500) == 500
            assert [r["id"] for r in scan(low)] == list(range(500))
            assert [r["id"] for r in scan(high)] == list(range(500, 1_000))


def test_refused_ingests_change_nothing(tmp_path: pathlib.Path) -> None:
    with make(tmp_path / "db") as db:
        t = db.table("t")
        t.write(rows([1, 2, 3], "old"))
        before = scan(db)
        stale = t.write_sst_files(tmp_path / "stale", rows([2, 4], "new"), seqno=db.last_seqno)
        with pytest.raises(basalt.ConflictError, match="seqno"):
            t.ingest_files([f["path"] for f in stale])
        assert scan(db) == before
        fresh = db.last_seqno + 1
        a = t.write_sst_files(tmp_path / "a", rows([2, 4], "a"), seqno=fresh)
        b = t.write_sst_files(tmp_path / "b", rows([3, 5], "b"), seqno=fresh)
        with pytest.raises(basalt.InvalidArgumentError, match="seqno"):
            t.ingest_files([f["path"] for f in a + b])
        assert scan(db) == before
        (tmp_path / "junk.sst").write_bytes(b"x" * 64)
        with pytest.raises(basalt.CorruptionError, match="junk.sst"):
            t.ingest_files([str(tmp_path / "junk.sst")])
        assert scan(db) == before
        with pytest.raises(basalt.Error):
            t.write_sst_files(tmp_path / "bad", rows([1], "x"), seqno=1, cut_at=[5, 3])
        # Different seqnos: the higher one wins the repeated key 4... and 2.
        later = t.write_sst_files(tmp_path / "later", rows([4], "later"), seqno=fresh + 1)
        t.ingest_files([f["path"] for f in a + later])
        got = {r["id"]: r["s"] for r in scan(db)}
        assert got == {1: "old1", 2: "a2", 3: "old3", 4: "later4"}


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.lists(st.integers(-50, 50), max_size=40), min_size=1, max_size=4),
    st.lists(st.integers(-60, 60), max_size=3),
)
def test_writers_in_seqno_order_read_as_writes(writers: list[list[int]], cuts: list[int]) -> None:
    import tempfile

    cut_at = sorted(set(cuts))
    with tempfile.TemporaryDirectory() as d:
        root = pathlib.Path(d)
        with make(root / "db") as db, make(root / "oracle") as oracle:
            base = db.last_seqno + 1
            paths: list[str] = []
            for w, ids in enumerate(writers):
                data = rows(ids, f"w{w}-")
                paths += [
                    f["path"]
                    for f in db.table("t").write_sst_files(root / f"ext{w}", data, seqno=base + 100 * w, cut_at=cut_at)
                ]
                if ids:
                    oracle.table("t").write(data)
            db.table("t").ingest_files(paths)
            assert scan(db) == scan(oracle)
