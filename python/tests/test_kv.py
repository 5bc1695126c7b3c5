"""The key-value API: a ``Database`` (and each named ``Keyspace``) is a
``dict`` of ``bytes`` to ``bytes`` iterated in key order, with atomic write
batches, snapshots, persistence and typed errors."""

from __future__ import annotations

import os
import pathlib
import random
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import basalt

# ---------------------------------------------------------------- helpers


@contextmanager
def fresh_db(**options: Any) -> Iterator[basalt.Database]:
    """A database in a new temporary directory (for hypothesis tests, which
    cannot use function-scoped fixtures)."""
    with tempfile.TemporaryDirectory() as tmp:
        with basalt.open(pathlib.Path(tmp) / "db", **options) as d:
            yield d


def fill(db: basalt.Keyspace, pairs: dict[bytes, bytes]) -> None:
    for k, v in pairs.items():
        db[k] = v


SAMPLE = {
    b"a": b"1",
    b"a\x00": b"2",
    b"ab": b"3",
    b"abc": b"4",
    b"b": b"5",
    b"ba": b"6",
    b"c": b"7",
    b"\x00": b"8",
    b"\xff": b"9",
    b"\xff\xff": b"10",
}


# ------------------------------------------------------------- dict-like


def test_setitem_getitem_roundtrip(db: basalt.Database) -> None:
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
    assert isinstance(db[b"k"], bytes)
    db[b"k"] = b"w"
    assert db[b"k"] == b"w"


def test_getitem_missing_raises_keyerror_with_the_key(db: basalt.Database) -> None:
    with pytest.raises(KeyError) as info:
        db[b"absent"]
    assert info.value.args == (b"absent",)


def test_empty_key_and_empty_value(db: basalt.Database) -> None:
    db[b""] = b"empty key"
    db[b"k"] = b""
    assert db[b""] == b"empty key"
    assert db[b"k"] == b""
    assert b"k" in db
    assert list(db.items()) == [(b"", b"empty key"), (b"k", b"")]


def test_large_value_roundtrip(db: basalt.Database) -> None:
    big = os.urandom(1 << 20)
    db[b"big"] = big
    assert db[b"big"] == big


def test_delitem_removes_and_absent_key_is_not_an_error(db: basalt.Database) -> None:
    db[b"k"] = b"v"
    del db[b"k"]
    assert b"k" not in db
    with pytest.raises(KeyError):
        db[b"k"]
    del db[b"never-there"]  # a blind tombstone: no KeyError
    del db[b"k"]  # twice: still fine
    assert len(db) == 0


def test_contains(db: basalt.Database) -> None:
    assert b"k" not in db
    db[b"k"] = b""
    assert b"k" in db
    assert b"k\x00" not in db
    assert b"" not in db


def test_get_with_default(db: basalt.Database) -> None:
    assert db.get(b"k") is None
    assert db.get(b"k", b"dflt") == b"dflt"
    assert db.get(b"k", default=b"dflt") == b"dflt"
    db[b"k"] = b"v"
    assert db.get(b"k") == b"v"
    assert db.get(b"k", b"dflt") == b"v"


def test_put_and_delete_with_sync(db: basalt.Database) -> None:
    db.put(b"a", b"1", sync=True)
    db.put(b"b", b"2", True)
    db.put(b"c", b"3")
    assert db[b"a"] == b"1" and db[b"b"] == b"2" and db[b"c"] == b"3"
    db.delete(b"a", sync=True)
    db.delete(b"b")
    db.delete(b"zzz", sync=True)  # absent: fine
    assert list(db.keys()) == [b"c"]


def test_multi_get_keeps_order_and_gives_none_for_missing(db: basalt.Database) -> None:
    fill(db, {b"a": b"1", b"b": b"2", b"c": b"3"})
    assert db.multi_get([b"c", b"missing", b"a", b"b", b"a"]) == [b"3", None, b"1", b"2", b"1"]
    assert db.multi_get([]) == []
    # Any iterable of bytes-like keys.
    assert db.multi_get(k for k in (bytearray(b"b"), memoryview(b"zz"))) == [b"2", None]


def test_len_is_exact(db: basalt.Database) -> None:
    assert len(db) == 0
    fill(db, SAMPLE)
    assert len(db) == len(SAMPLE)
    db[b"a"] = b"overwritten"
    assert len(db) == len(SAMPLE)
    del db[b"a"]
    del db[b"not there"]
    assert len(db) == len(SAMPLE) - 1


# ------------------------------------------------------------- iteration


def test_iteration_is_in_sorted_bytes_order(db: basalt.Database) -> None:
    fill(db, SAMPLE)
    expected = sorted(SAMPLE)
    assert list(db) == expected
    assert list(db.keys()) == expected
    assert list(db.values()) == [SAMPLE[k] for k in expected]
    assert list(db.items()) == [(k, SAMPLE[k]) for k in expected]
    assert all(isinstance(k, bytes) for k in db)
    it = db.items()
    assert iter(it) is it


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.binary(min_size=1, max_size=8), st.binary(max_size=16), max_size=60))
def test_iteration_order_matches_python_sort(pairs: dict[bytes, bytes]) -> None:
    with fresh_db() as db:
        fill(db, pairs)
        assert list(db.items()) == sorted(pairs.items())
        assert list(db.items(reverse=True)) == sorted(pairs.items(), reverse=True)
        assert len(db) == len(pairs)


def test_iteration_across_chunks_matches_model(db: basalt.Database) -> None:
    # Iterators fetch 16, 32, ... up to 1024 entries at a time into one
    # buffer: walk past several chunk ends, with empty and long values,
    # before and after a flush, and interleave two iterators.
    rng = random.Random(7)
    pairs = {b"k%05d" % i: rng.randbytes(rng.choice([0, 1, 7, 100, 3000])) for i in range(0, 9000, 3)}
    fill(db, pairs)
    for flushed in (False, True):
        if flushed:
            db.flush()
        expected = sorted(pairs.items())
        assert list(db.keys()) == [k for k, _ in expected]
        assert list(db.values()) == [v for _, v in expected]
        assert list(db.items()) == expected
        assert list(db.items(reverse=True)) == expected[::-1]
        assert list(db.values(b"k01000", b"k05000")) == [v for k, v in expected if b"k01000" <= k < b"k05000"]
        a, b = db.items(), db.keys(reverse=True)
        walked = [(next(a), next(b)) for _ in range(len(expected))]
        assert walked == list(zip(expected, [k for k, _ in reversed(expected)]))
        assert next(a, None) is None and next(b, None) is None


def test_range_start_inclusive_end_exclusive(db: basalt.Database) -> None:
    fill(db, SAMPLE)
    keys = sorted(SAMPLE)
    assert list(db.keys(b"ab", b"ba")) == [k for k in keys if b"ab" <= k < b"ba"]
    assert list(db.keys(start=b"ab", end=b"ba")) == [b"ab", b"abc", b"b"]
    assert list(db.keys(start=b"b")) == [k for k in keys if k >= b"b"]
    assert list(db.keys(end=b"b")) == [k for k in keys if k < b"b"]
    assert list(db.keys(b"b", b"b")) == []
    assert list(db.keys(b"c", b"a")) == []  # start after end: empty, not an error
    assert list(db.values(b"a", b"ab")) == [b"1", b"2"]
    assert list(db.items(b"c", b"\xff")) == [(b"c", b"7")]


def test_reverse_iteration(db: basalt.Database) -> None:
    fill(db, SAMPLE)
    keys = sorted(SAMPLE)
    assert list(db.keys(reverse=True)) == keys[::-1]
    assert list(db.keys(b"ab", b"ba", reverse=True)) == [b"b", b"abc", b"ab"]
    assert list(db.values(reverse=True)) == [SAMPLE[k] for k in reversed(keys)]
    assert list(db.items(prefix=b"a", reverse=True)) == [(k, SAMPLE[k]) for k in reversed(keys) if k.startswith(b"a")]


def test_prefix(db: basalt.Database) -> None:
    fill(db, SAMPLE)
    keys = sorted(SAMPLE)
    assert list(db.keys(prefix=b"a")) == [b"a", b"a\x00", b"ab", b"abc"]
    assert list(db.keys(prefix=b"ab")) == [b"ab", b"abc"]
    assert list(db.keys(prefix=b"zz")) == []
    assert list(db.keys(prefix=b"")) == keys
    # Prefix intersected with a range.
    assert list(db.keys(b"ab", prefix=b"a")) == [b"ab", b"abc"]
    assert list(db.keys(b"0", b"ab", prefix=b"a")) == [b"a", b"a\x00"]
    assert list(db.keys(b"b", prefix=b"a")) == []


def test_prefix_of_all_ff_bytes(db: basalt.Database) -> None:
    pairs = {
        b"\xfe": b"0",
        b"\xfe\xff": b"1",
        b"\xff": b"2",
        b"\xff\x00": b"3",
        b"\xff\xfe": b"4",
        b"\xff\xff": b"5",
        b"\xff\xff\x00": b"6",
        b"\xff\xff\xff": b"7",
        b"\xff\xff\xff\xff": b"8",
    }
    fill(db, pairs)
    for prefix in (b"\xff", b"\xff\xff", b"\xff\xff\xff", b"\xfe\xff"):
        expected = sorted(k for k in pairs if k.startswith(prefix))
        assert list(db.keys(prefix=prefix)) == expected, prefix
        assert list(db.keys(prefix=prefix, reverse=True)) == expected[::-1], prefix


# -------------------------------------------------------- bytes-like input


def test_bytes_bytearray_memoryview_keys_and_values_are_equal(db: basalt.Database) -> None:
    db[bytearray(b"k1")] = memoryview(b"v1")
    db[memoryview(b"k2")] = bytearray(b"v2")
    db.put(memoryview(b"xxk3yy")[2:4], memoryview(b"__v3__")[2:4])
    assert db[b"k1"] == b"v1"
    assert db[bytearray(b"k2")] == b"v2"
    assert db[memoryview(b"k3")] == b"v3"
    assert bytearray(b"k1") in db and memoryview(b"k2") in db
    assert db.get(bytearray(b"k3")) == b"v3"
    assert all(type(v) is bytes for v in db.values())
    assert list(db.keys(bytearray(b"k2"), memoryview(b"k4"))) == [b"k2", b"k3"]
    assert list(db.keys(prefix=bytearray(b"k"))) == [b"k1", b"k2", b"k3"]
    del db[bytearray(b"k1")]
    db.delete(memoryview(b"k2"))
    assert list(db.keys()) == [b"k3"]


def test_bytearray_mutated_after_put_does_not_change_stored_value(db: basalt.Database) -> None:
    value = bytearray(b"original")
    db[b"k"] = value
    value[:] = b"changed!"
    assert db[b"k"] == b"original"


BAD_KEYS = ["k", 1, 1.5, None, ["k"], object()]


@pytest.mark.parametrize("bad", BAD_KEYS, ids=lambda b: type(b).__name__)
def test_non_bytes_keys_raise_typeerror_and_change_nothing(db: basalt.Database, bad: Any) -> None:
    fill(db, {b"a": b"1", b"k": b"2"})
    before = list(db.items())
    calls: list[Callable[[], object]] = [
        lambda: db.__setitem__(bad, b"v"),
        lambda: db.__getitem__(bad),
        lambda: db.__delitem__(bad),
        lambda: bad in db,
        lambda: db.get(bad),
        lambda: db.put(bad, b"v"),
        lambda: db.put(bad, b"v", sync=True),
        lambda: db.delete(bad),
        lambda: db.multi_get([b"a", bad]),
    ]
    if bad is not None:  # None is the "no bound" of a range
        calls += [
            lambda: list(db.keys(start=bad)),
            lambda: list(db.items(end=bad)),
            lambda: list(db.values(prefix=bad)),
        ]
    for i, call in enumerate(calls):
        with pytest.raises(TypeError):
            call()
            pytest.fail(f"call #{i} did not raise")
    with db.write_batch() as batch:
        with pytest.raises(TypeError):
            batch.put(bad, b"v")
        with pytest.raises(TypeError):
            batch.delete(bad)
        assert len(batch) == 0
    assert list(db.items()) == before


@pytest.mark.parametrize("bad", ["v", 7, None, 2.0], ids=lambda b: type(b).__name__)
def test_non_bytes_values_raise_typeerror_and_change_nothing(db: basalt.Database, bad: Any) -> None:
    db[b"k"] = b"old"
    with pytest.raises(TypeError):
        db[b"k"] = bad
    with pytest.raises(TypeError):
        db.put(b"new", bad)
    with pytest.raises(TypeError):
        db.write_batch().put(b"k", bad)
    assert list(db.items()) == [(b"k", b"old")]


def test_str_key_error_mentions_encoding(db: basalt.Database) -> None:
    with pytest.raises(TypeError, match="str"):
        db["k"] = b"v"


# ------------------------------------------------------------- keyspaces


def test_keyspace_is_isolated_from_default(db: basalt.Database) -> None:
    ks = db.keyspace("x")
    assert isinstance(ks, basalt.Keyspace)
    assert ks.name == "x"
    assert db.name == "default"
    ks[b"a"] = b"in x"
    assert b"a" not in db
    db[b"a"] = b"in default"
    db[b"only default"] = b"1"
    assert ks[b"a"] == b"in x"
    assert db[b"a"] == b"in default"
    assert list(ks.items()) == [(b"a", b"in x")]
    assert len(ks) == 1
    assert ks.multi_get([b"a", b"only default"]) == [b"in x", None]
    del ks[b"a"]
    assert db[b"a"] == b"in default"
    assert len(ks) == 0
    # Another handle to the same keyspace sees the same keys.
    ks[b"z"] = b"26"
    assert db.keyspace("x")[b"z"] == b"26"


def test_keyspaces_lists_names_default_first(db: basalt.Database) -> None:
    assert db.keyspaces() == ["default"]
    db.keyspace("x")
    db.keyspace("y")
    names = db.keyspaces()
    assert names[0] == "default"
    assert sorted(names) == ["default", "x", "y"]


def test_keyspace_without_create_raises_for_missing(db: basalt.Database) -> None:
    with pytest.raises(basalt.InvalidArgumentError):
        db.keyspace("nope", create=False)
    assert "nope" not in db.keyspaces()
    db.keyspace("yes")
    assert db.keyspace("yes", create=False).name == "yes"


def test_drop_keyspace(db: basalt.Database) -> None:
    ks = db.keyspace("x")
    ks[b"a"] = b"1"
    # A live handle keeps the keyspace busy.
    with pytest.raises(basalt.BusyError):
        db.drop_keyspace("x")
    assert ks[b"a"] == b"1"
    del ks
    db.drop_keyspace("x")
    assert "x" not in db.keyspaces()
    with pytest.raises(basalt.InvalidArgumentError):
        db.keyspace("x", create=False)
    # Made again, it is empty.
    assert len(db.keyspace("x")) == 0


def test_drop_default_or_missing_keyspace_is_refused(db: basalt.Database) -> None:
    db[b"k"] = b"v"
    with pytest.raises(basalt.InvalidArgumentError):
        db.drop_keyspace("default")
    with pytest.raises(basalt.InvalidArgumentError):
        db.drop_keyspace("never made")
    assert db[b"k"] == b"v"


# ------------------------------------------------------------ WriteBatch


def test_write_batch_commits_on_clean_exit(db: basalt.Database) -> None:
    db[b"gone"] = b"x"
    with db.write_batch() as batch:
        assert isinstance(batch, basalt.WriteBatch)
        batch.put(b"a", b"1")
        batch.put(b"b", b"2")
        batch.delete(b"gone")
        assert len(batch) == 3
        # Nothing visible before the block ends.
        assert b"a" not in db and db[b"gone"] == b"x"
    assert list(db.items()) == [(b"a", b"1"), (b"b", b"2")]
    assert len(batch) == 0


def test_write_batch_discards_when_block_raises(db: basalt.Database) -> None:
    db[b"keep"] = b"old"

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with db.write_batch() as batch:
            batch.put(b"a", b"1")
            batch.put(b"keep", b"new")
            batch.delete(b"keep")
            raise Boom()
    assert list(db.items()) == [(b"keep", b"old")]
    # A discarded batch is spent.
    with pytest.raises(basalt.InvalidArgumentError):
        batch.commit()


def test_write_batch_commit_twice_is_invalid(db: basalt.Database) -> None:
    batch = db.write_batch()
    batch.put(b"a", b"1")
    batch.commit()
    assert db[b"a"] == b"1"
    with pytest.raises(basalt.InvalidArgumentError):
        batch.commit()
    with pytest.raises(basalt.InvalidArgumentError):
        batch.put(b"b", b"2")
    with pytest.raises(basalt.InvalidArgumentError):
        batch.delete(b"a")
    assert list(db.items()) == [(b"a", b"1")]


def test_write_batch_commit_inside_with_then_exit_does_not_commit_again(db: basalt.Database) -> None:
    with db.write_batch() as batch:
        batch.put(b"a", b"1")
        batch.commit(sync=True)
    assert db[b"a"] == b"1"
    with pytest.raises(basalt.InvalidArgumentError):
        batch.commit()


def test_write_batch_discard(db: basalt.Database) -> None:
    batch = db.write_batch()
    batch.put(b"a", b"1")
    batch.discard()
    assert len(batch) == 0
    with pytest.raises(basalt.InvalidArgumentError):
        batch.commit()
    assert b"a" not in db


def test_write_batch_last_write_of_a_key_wins(db: basalt.Database) -> None:
    with db.write_batch() as batch:
        batch.put(b"k", b"1")
        batch.put(b"k", b"2")
        batch.delete(b"d")
        batch.put(b"d", b"after delete")
        batch.put(b"e", b"before delete")
        batch.delete(b"e")
    assert list(db.items()) == [(b"d", b"after delete"), (b"k", b"2")]


def test_write_batch_across_keyspaces(db: basalt.Database) -> None:
    ks = db.keyspace("other")
    with db.write_batch() as batch:
        batch.put(b"k", b"default", keyspace=None)
        batch.put(b"k", b"other", keyspace=ks)
        batch.put(b"only-other", b"1", keyspace=ks)
    assert db[b"k"] == b"default"
    assert ks[b"k"] == b"other"
    assert list(ks.keys()) == [b"k", b"only-other"]
    with db.write_batch() as batch:
        batch.delete(b"k", keyspace=ks)
    assert b"k" not in ks and db[b"k"] == b"default"


def test_write_batch_across_keyspaces_is_all_or_nothing(path: pathlib.Path) -> None:
    # A key over key_bytes_max fails the commit: the valid writes of the
    # same batch, in two keyspaces, must not be applied either.
    with basalt.open(path, key_bytes_max=64) as db:
        ks = db.keyspace("other")
        batch = db.write_batch()
        batch.put(b"a", b"1")
        batch.put(b"b", b"2", keyspace=ks)
        batch.put(b"x" * 100, b"too long a key", keyspace=ks)
        with pytest.raises(basalt.InvalidArgumentError):
            batch.commit()
        assert list(db.items()) == []
        assert list(ks.items()) == []


def test_write_batch_atomic_under_concurrent_snapshots(db: basalt.Database) -> None:
    """A reader's snapshot sees both halves of a two-keyspace batch or neither."""
    ks = db.keyspace("mirror")
    stop = threading.Event()
    torn: list[tuple[bytes | None, bytes | None]] = []

    def reader() -> None:
        while not stop.is_set():
            with db.snapshot() as snap:
                a = snap.get(b"counter")
                b = snap.get(b"counter", keyspace=ks)
            if a != b:
                torn.append((a, b))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(300):
            with db.write_batch() as batch:
                batch.put(b"counter", str(i).encode())
                batch.put(b"counter", str(i).encode(), keyspace=ks)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert torn == []
    assert db[b"counter"] == ks[b"counter"] == b"299"


def test_write_batch_refuses_keyspace_of_another_database(db: basalt.Database, tmp_path: pathlib.Path) -> None:
    with basalt.open(tmp_path / "other") as other:
        foreign = other.keyspace("ks")
        batch = db.write_batch()
        with pytest.raises(basalt.InvalidArgumentError):
            batch.put(b"k", b"v", keyspace=foreign)
        batch.commit()
        assert b"k" not in foreign


# -------------------------------------------------------------- snapshots


def test_snapshot_sees_the_old_state(db: basalt.Database) -> None:
    fill(db, {b"a": b"1", b"b": b"2", b"c": b"3"})
    ks = db.keyspace("x")
    ks[b"ka"] = b"old"
    with db.snapshot() as snap:
        assert isinstance(snap, basalt.Snapshot)
        assert isinstance(snap.seqno, int)
        db[b"a"] = b"changed"
        del db[b"b"]
        db[b"d"] = b"new"
        ks[b"ka"] = b"new"
        ks[b"kb"] = b"new"

        assert snap.get(b"a") == b"1"
        assert snap.get(b"b") == b"2"
        assert snap.get(b"d") is None
        assert snap.get(b"d", b"dflt") == b"dflt"
        assert snap[b"a"] == b"1"
        with pytest.raises(KeyError):
            snap[b"d"]
        assert b"b" in snap and b"d" not in snap
        assert list(snap.items()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
        assert list(snap.keys(reverse=True)) == [b"c", b"b", b"a"]
        assert list(snap.values(b"b")) == [b"2", b"3"]
        assert list(snap.keys(prefix=b"a")) == [b"a"]
        assert snap.multi_get([b"d", b"b", b"a"]) == [None, b"2", b"1"]
        assert snap.get(b"ka", keyspace=ks) == b"old"
        assert snap.get(b"kb", keyspace=ks) is None
        assert snap.multi_get([b"ka", b"kb"], keyspace=ks) == [b"old", None]
        assert list(snap.items(keyspace=ks)) == [(b"ka", b"old")]

        # The live database moved on.
        assert list(db.items()) == [(b"a", b"changed"), (b"c", b"3"), (b"d", b"new")]
    # Released: using it is an error.
    with pytest.raises(basalt.ClosedError):
        snap.get(b"a")


def test_snapshot_survives_flush_and_compaction(db: basalt.Database) -> None:
    fill(db, {b"a": b"1", b"b": b"2"})
    with db.snapshot() as snap:
        db[b"a"] = b"changed"
        del db[b"b"]
        db.flush()
        db.compact()
        assert list(snap.items()) == [(b"a", b"1"), (b"b", b"2")]
        assert list(db.items()) == [(b"a", b"changed")]


def test_snapshot_iterator_keeps_reading_after_snapshot_close(db: basalt.Database) -> None:
    fill(db, {b"a": b"1", b"b": b"2"})
    snap = db.snapshot()
    it = snap.items()
    db[b"a"] = b"new"
    snap.close()
    assert list(it) == [(b"a", b"1"), (b"b", b"2")]


def test_snapshot_seqno_grows(db: basalt.Database) -> None:
    with db.snapshot() as s1:
        db[b"k"] = b"v"
        with db.snapshot() as s2:
            assert s2.seqno > s1.seqno


# ---------------------------------------------------- durability, locking


def test_reopen_keeps_data(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        db[b"a"] = b"1"
        db.put(b"b", b"2", sync=True)
        db[b"gone"] = b"x"
        del db[b"gone"]
        db.keyspace("ks")[b"k"] = b"in ks"
        with db.write_batch() as batch:
            batch.put(b"c", b"3")
    with basalt.open(path) as db:
        assert list(db.items()) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
        assert "ks" in db.keyspaces()
        assert db.keyspace("ks", create=False)[b"k"] == b"in ks"


def test_reopen_after_flush_and_compaction(path: pathlib.Path) -> None:
    expected = {f"key{i:05}".encode(): os.urandom(20) for i in range(5000)}
    with basalt.open(path) as db:
        fill(db, expected)
        db.flush()
        for i in range(0, 5000, 2):
            del db[f"key{i:05}".encode()]
            del expected[f"key{i:05}".encode()]
        db.compact()
    with basalt.open(path) as db:
        assert list(db.items()) == sorted(expected.items())


def test_second_open_of_same_path_is_locked(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        db[b"k"] = b"v"
        with pytest.raises(basalt.LockedError):
            basalt.open(path)
        with pytest.raises(basalt.LockedError):
            basalt.open(path, read_only=True)
        # The first handle is unharmed.
        assert db[b"k"] == b"v"
    # Released on close.
    with basalt.open(path) as db:
        assert db[b"k"] == b"v"


def test_open_missing_without_create_fails_and_creates_nothing(path: pathlib.Path) -> None:
    with pytest.raises(basalt.Error):
        basalt.open(path, create=False)
    assert not (path / "CURRENT").exists()


def test_unknown_open_option_is_typeerror(path: pathlib.Path) -> None:
    with pytest.raises(TypeError):
        basalt.open(path, no_such_option=1)
    with pytest.raises(TypeError):
        basalt.open(path, block_cache_bytes="lots")
    with pytest.raises(TypeError):
        basalt.open(path, auto_compaction="yes")
    with pytest.raises(basalt.InvalidArgumentError):
        basalt.open(path, compression="brotli")
    with pytest.raises(basalt.InvalidArgumentError):
        basalt.open(path, settled_compression="zstd9")
    with pytest.raises(TypeError):
        basalt.open(path, string_dictionaries="yes")
    with pytest.raises(TypeError):
        basalt.open(path, index_compression=True)
    assert not path.exists()


def test_known_open_options_are_accepted(path: pathlib.Path) -> None:
    with basalt.open(
        path,
        compression="lz4",
        index_compression="zstd",
        settled_compression="zstd",
        string_dictionaries=False,
        block_cache_bytes=1 << 20,
        auto_compaction=False,
        memtable_bytes_max=1 << 20,
    ) as db:
        db[b"k"] = b"v" * 1000
        db.flush()
        assert db[b"k"] == b"v" * 1000


def test_large_values_in_blob_files(path: pathlib.Path) -> None:
    values = {f"k{i}".encode(): bytes([i]) * (50 + 400 * i) for i in range(8)}
    with basalt.open(path, blob_value_bytes_min=1000, blob_gc_garbage_percent=30) as db:
        for k, v in values.items():
            db[k] = v
        db.flush()
        stats = db.stats()
        assert stats["blob_files"] == 1
        assert stats["blob_live_bytes"] == sum(len(v) for v in values.values() if len(v) >= 1000)
        assert {k: db[k] for k in values} == values
    with basalt.open(path) as db:
        assert dict(db.items()) == values
    with pytest.raises(basalt.InvalidArgumentError):
        basalt.open(path, blob_gc_garbage_percent=0)


def test_database_properties(db: basalt.Database, path: pathlib.Path) -> None:
    assert os.fspath(db.path) == os.fspath(path)
    assert db.closed is False
    assert db.read_only is False
    assert isinstance(db, basalt.Keyspace)
    assert not repr(db).endswith(" closed>")
    stats = db.stats()
    assert isinstance(stats, dict) and "last_seqno" in stats


def test_path_property_is_a_str_as_declared(db: basalt.Database) -> None:
    # _basalt.pyi declares `Database.path -> str`.
    assert isinstance(db.path, str)


def test_error_classes_hierarchy() -> None:
    for cls in (
        basalt.CorruptionError,
        basalt.LockedError,
        basalt.SchemaError,
        basalt.ClosedError,
        basalt.InvalidArgumentError,
        basalt.UniqueViolationError,
        basalt.BusyError,
        basalt.DiskError,
        basalt.ReadOnlyError,
    ):
        assert issubclass(cls, basalt.Error), cls
    assert issubclass(basalt.Error, Exception)
    assert issubclass(basalt.SchemaError, ValueError)
    assert issubclass(basalt.InvalidArgumentError, ValueError)
    assert issubclass(basalt.ClosedError, RuntimeError)
    assert issubclass(basalt.DiskError, OSError)


# ---------------------------------------------------------------- closing


def test_closed_property_and_double_close(path: pathlib.Path) -> None:
    db = basalt.open(path)
    assert not db.closed
    db.close()
    assert db.closed
    db.close()  # a second close does nothing
    assert db.closed
    assert repr(db).endswith(" closed>")


def test_context_manager_closes(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        assert isinstance(db, basalt.Database)
        db[b"k"] = b"v"
    assert db.closed
    with pytest.raises(basalt.ClosedError):
        db[b"k"]


def test_context_manager_closes_and_propagates_exception(path: pathlib.Path) -> None:
    with pytest.raises(ZeroDivisionError):
        with basalt.open(path) as db:
            db[b"k"] = b"v"
            1 / 0
    assert db.closed
    with basalt.open(path) as again:  # not locked any more
        assert again[b"k"] == b"v"


def _closed_calls(db: basalt.Database, ks: basalt.Keyspace) -> dict[str, Callable[[], object]]:
    return {
        "getitem": lambda: db[b"a"],
        "setitem": lambda: db.__setitem__(b"a", b"1"),
        "delitem": lambda: db.__delitem__(b"a"),
        "contains": lambda: b"a" in db,
        "get": lambda: db.get(b"a"),
        "put": lambda: db.put(b"a", b"1"),
        "put sync": lambda: db.put(b"a", b"1", sync=True),
        "delete": lambda: db.delete(b"a"),
        "multi_get": lambda: db.multi_get([b"a"]),
        "len": lambda: len(db),
        "iter": lambda: iter(db),
        "keys": lambda: db.keys(),
        "values": lambda: db.values(),
        "items": lambda: db.items(),
        "snapshot": lambda: db.snapshot(),
        "compact": lambda: db.compact(),
        "write_batch": lambda: db.write_batch(),
        "keyspace": lambda: db.keyspace("ks"),
        "keyspaces": lambda: db.keyspaces(),
        "drop_keyspace": lambda: db.drop_keyspace("ks"),
        "create_table": lambda: db.create_table(
            "t2", pa.schema([pa.field("k", pa.int64(), nullable=False)]), primary_key=["k"]
        ),
        "table": lambda: db.table("t"),
        "tables": lambda: db.tables(),
        "drop_table": lambda: db.drop_table("t"),
        "sql": lambda: db.sql("SELECT 1"),
        "flush": lambda: db.flush(),
        "sync": lambda: db.sync(),
        "wait_for_background_work": lambda: db.wait_for_background_work(),
        "stats": lambda: db.stats(),
        "keyspace getitem": lambda: ks[b"a"],
        "keyspace setitem": lambda: ks.__setitem__(b"a", b"1"),
        "keyspace items": lambda: ks.items(),
        "keyspace len": lambda: len(ks),
    }


CLOSED_CALL_NAMES = list(_closed_calls(None, None).keys())  # type: ignore[arg-type]


@pytest.mark.parametrize("name", CLOSED_CALL_NAMES)
def test_every_method_raises_closederror_after_close(path: pathlib.Path, name: str) -> None:
    db = basalt.open(path)
    db[b"a"] = b"1"
    ks = db.keyspace("ks")
    db.create_table("t", pa.schema([pa.field("k", pa.int64(), nullable=False)]), primary_key=["k"])
    db.close()
    with pytest.raises(basalt.ClosedError):
        _closed_calls(db, ks)[name]()


def test_iterator_made_before_close_raises_closederror(path: pathlib.Path) -> None:
    db = basalt.open(path)
    fill(db, {f"k{i:03}".encode(): b"v" for i in range(100)})
    items = db.items()
    assert next(items) == (b"k000", b"v")  # part of it is buffered already
    keys = db.keys()
    db.close()
    with pytest.raises(basalt.ClosedError):
        next(items)
    with pytest.raises(basalt.ClosedError):
        next(keys)


def test_snapshot_methods_raise_closederror_after_close(path: pathlib.Path) -> None:
    db = basalt.open(path)
    db[b"a"] = b"1"
    snap = db.snapshot()
    db.close()
    for call in (
        lambda: snap.get(b"a"),
        lambda: snap[b"a"],
        lambda: b"a" in snap,
        lambda: snap.multi_get([b"a"]),
        lambda: snap.keys(),
        lambda: snap.values(),
        lambda: snap.items(),
        lambda: snap.seqno,
    ):
        with pytest.raises(basalt.ClosedError):
            call()


def test_write_batch_commit_after_close_raises_closederror(path: pathlib.Path) -> None:
    db = basalt.open(path)
    batch = db.write_batch()
    batch.put(b"a", b"1")
    db.close()
    with pytest.raises(basalt.ClosedError):
        batch.commit()
    with basalt.open(path) as db:
        assert b"a" not in db


def test_table_methods_raise_closederror_after_close(path: pathlib.Path) -> None:
    db = basalt.open(path)
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.utf8())])
    table = db.create_table("t", schema, primary_key=["k"])
    table.write(pa.table({"k": list(range(50)), "v": ["x"] * 50}, schema=schema))
    table.create_index("by_v", ["v"])
    scan = table.scan(batch_size=10)
    first = scan.read_next_batch()
    assert first.num_rows == 10
    db.close()
    calls: list[Callable[[], object]] = [
        lambda: table.get(1),
        lambda: table.get_many([1, 2]),
        lambda: table.write(pa.table({"k": [100], "v": ["y"]}, schema=schema)),
        lambda: table.bulk_load(pa.table({"k": [100], "v": ["y"]}, schema=schema)),
        lambda: table.delete([1]),
        lambda: table.scan(),
        lambda: table.to_arrow(),
        lambda: table.to_pandas(),
        lambda: table.to_polars(),
        lambda: pa.table(table),
        lambda: table.create_index("by_v2", ["v"]),
        lambda: table.drop_index("by_v"),
        lambda: table.indexes(),
        lambda: table.lookup("by_v", eq="x"),
        lambda: table.count("by_v", eq="x"),
        lambda: table.compact(),
        lambda: scan.read_next_batch(),
        lambda: next(scan),
        lambda: scan.read_all(),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(basalt.ClosedError):
            call()
            pytest.fail(f"call #{i} did not raise")


# -------------------------------------------------------------- read-only


def test_read_only_reads_work_and_writes_raise(path: pathlib.Path) -> None:
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.utf8())])
    with basalt.open(path) as db:
        fill(db, {b"a": b"1", b"b": b"2"})
        db.keyspace("ks")[b"x"] = b"y"
        db.create_table("t", schema, primary_key=["k"]).write({"k": [1, 2], "v": ["one", "two"]})
    with basalt.open(path, read_only=True) as db:
        assert db.read_only is True
        # Reads.
        assert db[b"a"] == b"1"
        assert db.get(b"b") == b"2"
        assert b"a" in db
        assert list(db.items()) == [(b"a", b"1"), (b"b", b"2")]
        assert db.multi_get([b"a", b"zz"]) == [b"1", None]
        assert len(db) == 2
        with db.snapshot() as snap:
            assert snap[b"a"] == b"1"
        ks = db.keyspace("ks", create=False)
        assert ks[b"x"] == b"y"
        table = db.table("t")
        assert table.get(1) == {"k": 1, "v": "one"}
        assert table.to_arrow().column("v").to_pylist() == ["one", "two"]
        assert db.sql("SELECT count(*) AS n FROM t").column("n").to_pylist() == [2]
        # Writes.
        writes: list[Callable[[], object]] = [
            lambda: db.__setitem__(b"a", b"x"),
            lambda: db.__delitem__(b"a"),
            lambda: db.put(b"c", b"3"),
            lambda: db.delete(b"a"),
            lambda: ks.__setitem__(b"x", b"z"),
            lambda: db.keyspace("new"),
            lambda: db.drop_keyspace("ks"),
            lambda: db.create_table("t2", schema, primary_key=["k"]),
            lambda: db.drop_table("t"),
            lambda: table.write({"k": [3], "v": ["three"]}),
            lambda: table.delete([1]),
            lambda: table.create_index("by_v", ["v"]),
            lambda: db.flush(),
        ]
        for i, call in enumerate(writes):
            with pytest.raises(basalt.ReadOnlyError):
                call()
                pytest.fail(f"write #{i} did not raise")
        with pytest.raises(basalt.ReadOnlyError):
            with db.write_batch() as batch:
                batch.put(b"c", b"3")
        # Nothing changed.
        assert list(db.items()) == [(b"a", b"1"), (b"b", b"2")]
        assert db.keyspaces() == ["default", "ks"]
        assert db.tables() == ["t"]
        assert table.to_arrow().num_rows == 2
    with basalt.open(path) as db:
        assert list(db.items()) == [(b"a", b"1"), (b"b", b"2")]
        assert db.table("t").to_arrow().num_rows == 2


def test_checkpoint_opens_read_only_in_many_handles_while_the_source_is_written(path: pathlib.Path) -> None:
    cp = path.parent / "checkpoint"
    with basalt.open(path, blob_value_bytes_min=100) as db:
        fill(db, {b"a": b"1", b"big": b"x" * 1000})
        db.checkpoint(cp)
        with pytest.raises(basalt.InvalidArgumentError):
            db.checkpoint(cp)
        db[b"a"] = b"changed after"
        # Any number of read-only handles at once, while the source is open.
        readers = [basalt.open(cp, read_only=True) for _ in range(3)]
        try:
            for r in readers:
                assert dict(r.items()) == {b"a": b"1", b"big": b"x" * 1000}
            # A read-only handle checkpoints too (its WAL held no writes).
            readers[0].checkpoint(path.parent / "other")
        finally:
            for r in readers:
                r.close()
        assert db[b"a"] == b"changed after"
    with basalt.open(path.parent / "other", read_only=True) as other:
        assert dict(other.items()) == {b"a": b"1", b"big": b"x" * 1000}
    with basalt.open(path, read_only=True) as ro:
        with pytest.raises(basalt.ReadOnlyError):
            # The source's WAL holds the last write: it would need a flush.
            ro.checkpoint(path.parent / "third")
    with pytest.raises(basalt.InvalidArgumentError):
        basalt.open(path.parent / "missing", read_only=True)
    assert not (path.parent / "missing").exists()


# ------------------------------------------------------------ compaction


def test_compact_range_keeps_data(db: basalt.Database) -> None:
    pairs = {f"k{i:04}".encode(): f"v{i}".encode() for i in range(2000)}
    fill(db, pairs)
    for i in range(0, 2000, 3):
        del db[f"k{i:04}".encode()]
        del pairs[f"k{i:04}".encode()]
    db.compact(b"k0500", b"k1500")
    assert list(db.items()) == sorted(pairs.items())
    db.compact()
    assert list(db.items()) == sorted(pairs.items())
