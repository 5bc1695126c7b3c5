"""Transactions from Python: the mapping face, commit and rollback (by
hand and by ``with``), ``ConflictError``, table rows, ``run_transaction``
under threads, misuse, and random interleavings of transactions and plain
writes against a small model of snapshot isolation."""

from __future__ import annotations

import pathlib
import tempfile
import threading
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import basalt


def test_reads_see_the_snapshot_and_own_writes(db: basalt.Database) -> None:
    db[b"a"] = b"1"
    tx = db.transaction()
    db[b"a"] = b"outside"
    assert tx[b"a"] == b"1"
    tx[b"b"] = b"2"
    assert tx[b"b"] == b"2" and tx.get(b"b") == b"2"
    del tx[b"b"]
    assert tx.get(b"b", b"gone") == b"gone"
    with pytest.raises(KeyError):
        tx[b"b"]
    tx.put(b"c", b"3")
    assert len(tx) == 3 and b"c" not in db
    tx.commit()
    assert db[b"c"] == b"3" and not tx.active
    with pytest.raises(basalt.InvalidArgumentError, match="already committed"):
        tx[b"d"] = b"4"
    with pytest.raises(basalt.InvalidArgumentError):
        tx.commit()


def test_a_conflict_writes_nothing(db: basalt.Database) -> None:
    db[b"x"] = b"0"
    first, second = db.transaction(), db.transaction()
    first[b"x"] = b"first"
    second[b"x"] = b"second"
    second[b"y"] = b"second's other key"
    first.commit()
    with pytest.raises(basalt.ConflictError, match="keyspace default"):
        second.commit()
    assert db[b"x"] == b"first" and b"y" not in db
    assert issubclass(basalt.ConflictError, basalt.Error)
    # get_for_update makes a read conflict too; a plain get does not.
    for for_update in (False, True):
        tx = db.transaction()
        _ = tx.get_for_update(b"x") if for_update else tx.get(b"x")
        tx[b"z"] = b"1"
        db[b"x"] = b"changed"
        if for_update:
            with pytest.raises(basalt.ConflictError):
                tx.commit()
        else:
            tx.commit()


def test_with_commits_on_success_and_rolls_back_on_an_exception(db: basalt.Database) -> None:
    with db.transaction() as tx:
        tx[b"a"] = b"1"
    assert db[b"a"] == b"1"
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx[b"b"] = b"2"
            raise RuntimeError("boom")
    assert b"b" not in db
    with pytest.raises(basalt.ConflictError):
        with db.transaction() as tx:
            tx.get_for_update(b"a")
            tx[b"c"] = b"3"
            db[b"a"] = b"outside"
    assert b"c" not in db
    with db.transaction() as tx:
        tx[b"d"] = b"4"
        tx.rollback()
    assert b"d" not in db


def test_keyspaces_and_table_rows_in_one_transaction(db: basalt.Database) -> None:
    ks = db.keyspace("sessions")
    schema = pa.schema([("id", pa.int64()), ("owner", pa.string()), ("balance", pa.int64())])
    accounts = db.create_table("accounts", schema, primary_key=["id"])
    accounts.create_index("by_owner", ["owner"], unique=True)
    accounts.write({"id": [1, 2], "owner": ["ann", "bob"], "balance": [100, 50]})
    with db.transaction() as tx:
        row = tx.get_row_for_update(accounts, 1)
        assert row == {"id": 1, "owner": "ann", "balance": 100}
        tx.write(accounts, {"id": [1, 3], "owner": ["ann", "cid"], "balance": [60, 40]})
        tx.delete_rows(accounts, [2])
        tx.put(b"s:1", b"ann", keyspace=ks)
        assert tx.get_row(accounts, 3) == {"id": 3, "owner": "cid", "balance": 40}
        assert tx.get_row(accounts, 2) is None
        assert tx.get(b"s:1", keyspace=ks) == b"ann"
        assert accounts.get(3) is None and ks.get(b"s:1") is None
    assert accounts.get(1) == {"id": 1, "owner": "ann", "balance": 60}
    assert accounts.get(2) is None and ks[b"s:1"] == b"ann"
    assert accounts.count("by_owner", eq="cid") == 1 and accounts.count("by_owner", eq="bob") == 0
    # A unique value taken since the snapshot is refused at commit.
    tx = db.transaction()
    tx.write(accounts, {"id": [7], "owner": ["dee"], "balance": [1]})
    accounts.write({"id": [8], "owner": ["dee"], "balance": [1]})
    with pytest.raises(basalt.UniqueViolationError):
        tx.commit()
    assert accounts.get(7) is None
    # A table of another database is refused.
    with tempfile.TemporaryDirectory() as other_dir, basalt.open(other_dir) as other:
        elsewhere = other.create_table("accounts", schema, primary_key=["id"])
        with db.transaction() as tx, pytest.raises(basalt.InvalidArgumentError, match="another database"):
            tx.write(elsewhere, {"id": [1], "owner": ["x"], "balance": [0]})


def test_a_write_of_many_chunks_is_all_or_nothing(path: pathlib.Path) -> None:
    with basalt.open(path, key_bytes_max=32) as db:
        t = db.create_table("t", pa.schema([("k", pa.string()), ("v", pa.int64())]), primary_key=["k"])
        good = pa.record_batch({"k": ["a", "b"], "v": [1, 2]})
        too_long = pa.record_batch({"k": ["c" * 100], "v": [3]})
        tx = db.transaction()
        tx[b"kept"] = b"1"
        with pytest.raises(basalt.InvalidArgumentError, match="key_bytes_max"):
            tx.write(t, pa.Table.from_batches([good, too_long]))
        assert len(tx) == 1 and tx.get_row(t, "a") is None
        tx.commit()
        assert t.get("a") is None and db[b"kept"] == b"1"


def test_run_transaction_retries_transfers_under_threads(db: basalt.Database) -> None:
    accounts = 8
    for i in range(accounts):
        db[b"acct:%d" % i] = b"100"
    attempts_seen = []

    def transfer(seed: int) -> None:
        for n in range(60):
            a, b = (seed + n) % accounts, (seed * 3 + n + 1) % accounts
            if a == b:
                continue
            calls = 0

            def move(tx: basalt.Transaction, a: int = a, b: int = b) -> None:
                nonlocal calls
                calls += 1
                have = int(tx.get_for_update(b"acct:%d" % a) or b"0")
                other = int(tx.get_for_update(b"acct:%d" % b) or b"0")
                amount = min(have, 7)
                tx[b"acct:%d" % a] = str(have - amount).encode()
                tx[b"acct:%d" % b] = str(other + amount).encode()

            basalt.run_transaction(db, move, attempts=1000)
            attempts_seen.append(calls)

    threads = [threading.Thread(target=transfer, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(int(db[b"acct:%d" % i]) for i in range(accounts)) == accounts * 100
    assert len(attempts_seen) > 200


def test_sql_blocks_are_refused_in_favour_of_db_transaction(db: basalt.Database) -> None:
    # One SQL session serves every thread of a Database: a block there
    # would take in other threads' statements.
    for text in ("BEGIN", "COMMIT", "ROLLBACK", "START TRANSACTION"):
        with pytest.raises(basalt.InvalidArgumentError, match="db.transaction"):
            db.sql(text)
        with pytest.raises(basalt.InvalidArgumentError, match="db.transaction"):
            db.prepare(text)


def test_run_transaction_gives_up_and_raises_other_errors(db: basalt.Database) -> None:
    def always_loses(tx: basalt.Transaction) -> int:
        tx.get_for_update(b"k")
        tx[b"mine"] = b"1"
        db[b"k"] = b"someone else"
        return 1

    with pytest.raises(basalt.ConflictError):
        basalt.run_transaction(db, always_loses, attempts=3)
    assert b"mine" not in db

    def fails(tx: basalt.Transaction) -> None:
        tx[b"half"] = b"1"
        raise KeyError("no")

    with pytest.raises(KeyError):
        basalt.run_transaction(db, fails)
    assert b"half" not in db
    assert basalt.run_transaction(db, lambda tx: tx.get(b"k")) == b"someone else"
    with pytest.raises(ValueError):
        basalt.run_transaction(db, lambda tx: None, attempts=0)


def test_a_closed_or_read_only_database(path: pathlib.Path) -> None:
    db = basalt.open(path)
    tx = db.transaction()
    tx[b"a"] = b"1"
    db.close()
    with pytest.raises(basalt.ClosedError):
        tx.commit()
    with pytest.raises(basalt.ClosedError):
        db.transaction()
    with basalt.open(path, read_only=True) as ro:
        tx = ro.transaction()
        assert tx.get(b"a") is None
        with pytest.raises(basalt.ReadOnlyError):
            tx[b"a"] = b"1"
        assert len(tx) == 0


# ------------------------------------------------------------ model check

KEYS = [b"k0", b"k1", b"k2"]

operations = st.lists(
    st.one_of(
        st.tuples(st.just("begin"), st.integers(0, 2)),
        st.tuples(st.just("get"), st.integers(0, 2), st.sampled_from(KEYS), st.booleans()),
        st.tuples(st.just("put"), st.integers(0, 2), st.sampled_from(KEYS), st.binary(max_size=4)),
        st.tuples(st.just("delete"), st.integers(0, 2), st.sampled_from(KEYS)),
        st.tuples(st.just("commit"), st.integers(0, 2)),
        st.tuples(st.just("rollback"), st.integers(0, 2)),
        st.tuples(st.just("outside"), st.sampled_from(KEYS), st.binary(max_size=4)),
        st.tuples(st.just("flush")),
    ),
    max_size=40,
)


class ModelTx:
    """A transaction in the model: the committed state at its start, its
    own writes, and the keys a commit checks."""

    def __init__(self, committed: dict[bytes, bytes], clock: int) -> None:
        self.snapshot = dict(committed)
        self.start = clock
        self.own: dict[bytes, bytes | None] = {}
        self.checked: set[bytes] = set()

    def read(self, key: bytes) -> bytes | None:
        return self.own[key] if key in self.own else self.snapshot.get(key)


@pytest.fixture
def scratch() -> Iterator[pathlib.Path]:
    with tempfile.TemporaryDirectory() as d:
        yield pathlib.Path(d)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_interleaved_transactions_match_a_model_of_snapshot_isolation(
    scratch: pathlib.Path, ops: list[tuple[object, ...]]
) -> None:
    path = scratch / f"db{len(list(scratch.iterdir()))}"
    with basalt.open(path, memtable_bytes_max=4096) as db:
        committed: dict[bytes, bytes] = {}
        last_write: dict[bytes, int] = {}
        clock = 0
        model: dict[int, ModelTx] = {}
        real: dict[int, basalt.Transaction] = {}
        for op in ops:
            kind = op[0]
            if kind == "outside":
                key, value = op[1], op[2]
                assert isinstance(key, bytes) and isinstance(value, bytes)
                db[key] = value
                clock += 1
                committed[key], last_write[key] = value, clock
                continue
            if kind == "flush":
                db.flush()
                continue
            slot = op[1]
            assert isinstance(slot, int)
            if kind == "begin":
                if slot in real:
                    real.pop(slot).rollback()
                real[slot], model[slot] = db.transaction(), ModelTx(committed, clock)
                continue
            if slot not in real:
                continue
            tx, m = real[slot], model[slot]
            if kind == "get":
                key, for_update = op[2], op[3]
                assert isinstance(key, bytes)
                got = tx.get_for_update(key) if for_update else tx.get(key)
                if for_update:
                    m.checked.add(key)
                assert got == m.read(key), (op, got, m.read(key))
            elif kind == "put":
                key, value = op[2], op[3]
                assert isinstance(key, bytes) and isinstance(value, bytes)
                tx.put(key, value)
                m.own[key] = value
                m.checked.add(key)
            elif kind == "delete":
                key = op[2]
                assert isinstance(key, bytes)
                del tx[key]
                m.own[key] = None
                m.checked.add(key)
            elif kind == "rollback":
                real.pop(slot).rollback()
                del model[slot]
            elif kind == "commit":
                real.pop(slot)
                del model[slot]
                loses = any(last_write.get(k, 0) > m.start for k in m.checked)
                if loses:
                    with pytest.raises(basalt.ConflictError):
                        tx.commit()
                    continue
                tx.commit()
                if m.own:
                    clock += 1
                    for k, v in m.own.items():
                        last_write[k] = clock
                        if v is None:
                            committed.pop(k, None)
                        else:
                            committed[k] = v
        for tx in real.values():
            tx.rollback()
        assert {k: db[k] for k in KEYS if k in db} == committed


def test_a_transactions_scan_sees_its_own_writes_over_its_snapshot(db: basalt.Database) -> None:
    t = db.create_table("t", pa.schema([("id", pa.int64()), ("v", pa.string())]), primary_key=["id"])
    t.write({"id": [1, 2, 3], "v": ["a", "b", "c"]})
    tx = db.transaction()
    t.write({"id": [4], "v": ["after"]})  # another writer, after the snapshot
    tx.write(t, {"id": [2, 5], "v": ["B", "e"]})
    tx.delete_rows(t, [3])
    assert tx.to_arrow(t).to_pylist() == [
        {"id": 1, "v": "a"}, {"id": 2, "v": "B"}, {"id": 5, "v": "e"}]
    assert tx.to_arrow(t, columns=["id"], where=[("v", "=", "e")]).column("id").to_pylist() == [5]
    assert tx.to_arrow(t, start=2, end=5, reverse=True).column("id").to_pylist() == [2]
    assert t.to_arrow().column("id").to_pylist() == [1, 2, 3, 4]
    tx.commit()
    assert t.to_arrow().column("id").to_pylist() == [1, 2, 4, 5]
