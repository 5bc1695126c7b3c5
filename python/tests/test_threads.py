"""Threads: handles are shared between threads, engine calls release the
GIL, and a long scan in one thread does not hold up the others."""

from __future__ import annotations

import faulthandler
import os
import pathlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

import basalt

TIMEOUT = 120  # seconds for any group of threads; a hang fails the test


@pytest.fixture(autouse=True)
def hang_guard() -> Iterator[None]:
    """If a test of this module hangs with the GIL held (so that no Python
    timeout can fire), dump every thread's stack and end the run, rather
    than hang it forever."""
    faulthandler.dump_traceback_later(3 * TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


class Worker(threading.Thread):
    """A thread that keeps the exception of its target for the test to raise."""

    def __init__(self, name: str, target: Callable[[], Any]) -> None:
        super().__init__(name=name, daemon=True)
        self.run_target = target
        self.error: BaseException | None = None
        self.result: Any = None

    def run(self) -> None:
        try:
            self.result = self.run_target()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test
            self.error = e


def run_all(workers: list[Worker], timeout: float = TIMEOUT) -> None:
    for w in workers:
        w.start()
    deadline = time.monotonic() + timeout
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    hung = [w.name for w in workers if w.is_alive()]
    assert not hung, f"threads still running after {timeout}s: {hung}"
    for w in workers:
        if w.error is not None:
            raise AssertionError(f"thread {w.name} failed: {w.error!r}") from w.error


def key_of(writer: int, i: int) -> bytes:
    return f"w{writer}-{i:05}".encode()


def value_of(key: bytes) -> bytes:
    return key[::-1] + b"!"


def test_four_writers_and_two_readers(db: basalt.Database) -> None:
    per_writer = 2500
    writers_done = threading.Event()

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            i = 0
            while i < per_writer:
                if i % 3 == 0:  # a mix of single puts and batches
                    with db.write_batch() as batch:
                        for j in range(i, min(i + 50, per_writer)):
                            batch.put(key_of(w, j), value_of(key_of(w, j)))
                    i = min(i + 50, per_writer)
                else:
                    db[key_of(w, i)] = value_of(key_of(w, i))
                    i += 1

        return run

    def reader() -> int:
        passes = 0
        while not writers_done.is_set() or passes < 2:
            seen = list(db.items())
            keys = [k for k, _ in seen]
            assert keys == sorted(keys), "iteration out of order"
            assert len(set(keys)) == len(keys), "a key seen twice"
            for k, v in seen:
                assert v == value_of(k), (k, v)
            for k, v in zip(keys[::97], db.multi_get(keys[::97])):
                assert v == value_of(k)
            passes += 1
        return passes

    writers = [Worker(f"writer-{w}", writer(w)) for w in range(4)]
    readers = [Worker(f"reader-{r}", reader) for r in range(2)]
    for r in readers:
        r.start()
    run_all(writers)
    writers_done.set()
    for r in readers:
        r.join(TIMEOUT)
        assert not r.is_alive(), "reader hung"
        if r.error is not None:
            raise AssertionError(f"{r.name} failed: {r.error!r}") from r.error
        assert r.result >= 2

    assert len(db) == 4 * per_writer
    for w in range(4):
        keys = [key_of(w, i) for i in range(per_writer)]
        assert db.multi_get(keys) == [value_of(k) for k in keys]
    assert list(db.keys()) == sorted(key_of(w, i) for w in range(4) for i in range(per_writer))


def test_long_scan_does_not_block_others(db: basalt.Database) -> None:
    n = 20_000
    with db.write_batch() as batch:
        for i in range(n):
            batch.put(f"old{i:06}".encode(), b"x" * 20)
    db.flush()
    scan_started = threading.Event()
    others_done = threading.Event()

    def long_scan() -> int:
        count = 0
        for _ in db.keys(prefix=b"old"):
            count += 1
            if count == 100:
                scan_started.set()
                # Parked in the middle of the scan until the others finish.
                assert others_done.wait(TIMEOUT), "the other threads never finished"
        return count

    def writer() -> None:
        assert scan_started.wait(TIMEOUT)
        for i in range(3000):
            db[f"new{i:06}".encode()] = b"y" * 20
        db.flush()
        db.compact()

    def reader() -> None:
        assert scan_started.wait(TIMEOUT)
        for i in range(0, n, 7):
            assert db[f"old{i:06}".encode()] == b"x" * 20
        assert sum(1 for _ in db.keys(prefix=b"old")) == n

    scanner = Worker("long-scan", long_scan)
    scanner.start()
    run_all([Worker("writer", writer), Worker("reader", reader)])
    others_done.set()
    scanner.join(TIMEOUT)
    assert not scanner.is_alive(), "the long scan hung"
    assert scanner.error is None, repr(scanner.error)
    assert scanner.result == n
    assert len(db) == n + 3000


# One handle used by two threads at once: both pulling from the same
# iterator or scan, or one closing a snapshot or scan the other reads.
# Each runs in a child process: a deadlock between a handle's lock and the
# GIL freezes every thread of the process, the test's own timeouts included.
SHARED_ITERATOR = r"""
import sys, threading
import basalt

n = 50_000
db = basalt.open(sys.argv[1])
with db.write_batch() as batch:
    for i in range(n):
        batch.put(f"{i:06}".encode(), b"")
it = db.keys()
got = [[], []]

def consume(slot):
    for key in it:
        got[slot].append(key)

threads = [threading.Thread(target=consume, args=(slot,)) for slot in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
both = got[0] + got[1]
assert len(both) == n, len(both)
assert sorted(both) == [f"{i:06}".encode() for i in range(n)]
assert got[0] == sorted(got[0]) and got[1] == sorted(got[1])
db.close()
print("ok", len(both))
"""

SHARED_SCAN = r"""
import sys, threading
import pyarrow as pa
import basalt

n = 50_000
schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
db = basalt.open(sys.argv[1])
table = db.create_table("t", schema, primary_key=["id"])
table.write(pa.table({"id": range(n)}, schema=schema))
scan = table.scan(batch_size=100)
got = [[], []]

def consume(slot):
    for batch in scan:
        got[slot].extend(batch.column("id").to_pylist())

threads = [threading.Thread(target=consume, args=(slot,)) for slot in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
both = got[0] + got[1]
assert sorted(both) == list(range(n)), len(both)
db.close()
print("ok", len(both))
"""


SNAPSHOT_CLOSED_WHILE_READ = r"""
import sys, threading, time
import basalt

db = basalt.open(sys.argv[1])
for i in range(1000):
    db[f"k{i:04}".encode()] = b"v"
snap = db.snapshot()
reads = [0]

keys = [f"k{i:04}".encode() for i in range(1000)]

def reader():
    while True:
        try:
            assert snap.multi_get(keys) == [b"v"] * 1000
        except basalt.ClosedError:
            return
        reads[0] += 1

thread = threading.Thread(target=reader)
thread.start()
time.sleep(0.2)
snap.close()  # while the reader is inside a read through it
thread.join()
db.close()
print("ok", reads[0] > 0)
"""


SCAN_CLOSED_WHILE_READ = r"""
import sys, threading, time
import pyarrow as pa
import basalt

n = 300_000
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int64(), nullable=False)])
db = basalt.open(sys.argv[1])
table = db.create_table("t", schema, primary_key=["id"])
table.write(pa.table({"id": range(n), "v": [0] * (n - 1) + [1]}, schema=schema))
# Only the last row matches: the first read_next_batch walks every row.
scan = table.scan(where=[("v", "=", 1)])
started = threading.Event()
got = []

def reader():
    started.set()
    got.extend(scan)  # empty or the one row, whether close() lands before or after

thread = threading.Thread(target=reader)
thread.start()
started.wait()
time.sleep(0.005)
scan.close()  # while the reader is inside read_next_batch
thread.join()
db.close()
print("ok", len(got) <= 1)
"""


def run_child(code: str, path: pathlib.Path, timeout: float = 10) -> str:
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, os.fspath(path)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the child process hung for {timeout}s (deadlock); its output: {e.stdout!r} {e.stderr!r}")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_one_iterator_shared_by_two_threads_yields_each_key_once(path: pathlib.Path) -> None:
    assert run_child(SHARED_ITERATOR, path).split() == ["ok", "50000"]


def test_one_scan_shared_by_two_threads_yields_each_row_once(path: pathlib.Path) -> None:
    assert run_child(SHARED_SCAN, path).split() == ["ok", "50000"]


def test_closing_a_snapshot_while_another_thread_reads_through_it(path: pathlib.Path) -> None:
    assert run_child(SNAPSHOT_CLOSED_WHILE_READ, path).split() == ["ok", "True"]


def test_closing_a_scan_while_another_thread_reads_it(path: pathlib.Path) -> None:
    assert run_child(SCAN_CLOSED_WHILE_READ, path).split() == ["ok", "True"]


SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("writer", pa.int32(), nullable=False),
        pa.field("value", pa.float64()),
    ]
)


def test_table_writes_from_threads_with_concurrent_scans(db: basalt.Database) -> None:
    table = db.create_table("t", SCHEMA, primary_key=["id"])
    per_writer, per_batch = 10_000, 500
    writing = threading.Event()
    writing.set()

    def writer(w: int) -> Callable[[], None]:
        def run() -> None:
            for start in range(0, per_writer, per_batch):
                ids = list(range(w * per_writer + start, w * per_writer + start + per_batch))
                table.write(
                    pa.table(
                        {"id": ids, "writer": [w] * per_batch, "value": [i * 0.5 for i in ids]},
                        schema=SCHEMA,
                    )
                )

        return run

    def scanner() -> int:
        scans = 0
        while writing.is_set() or scans == 0:
            got = table.to_arrow(columns=["id", "value"])
            ids = got.column("id").to_pylist()
            assert ids == sorted(ids) and len(set(ids)) == len(ids)
            # Whole batches only: each writer's rows come 500 at a time.
            assert len(ids) % per_batch == 0, len(ids)
            assert got.column("value").to_pylist() == [i * 0.5 for i in ids]
            scans += 1
        return scans

    def index_reader() -> None:
        while writing.is_set():
            table.get(0)
            table.get_many([1, 10_001, 39_999])
            pa.table(table.scan(where=[("writer", "=", 2)], columns=["id"]))

    scanners = [Worker("scanner", scanner), Worker("index-reader", index_reader)]
    for s in scanners:
        s.start()
    run_all([Worker(f"writer-{w}", writer(w)) for w in range(4)])
    writing.clear()
    for s in scanners:
        s.join(TIMEOUT)
        assert not s.is_alive(), f"{s.name} hung"
        assert s.error is None, f"{s.name}: {s.error!r}"

    got = table.to_arrow()
    assert got.num_rows == 4 * per_writer
    assert got.column("id").to_pylist() == list(range(4 * per_writer))
    assert got.column("writer").to_pylist() == [i // per_writer for i in range(4 * per_writer)]


def test_table_scan_parked_mid_stream_while_others_write(db: basalt.Database) -> None:
    table = db.create_table("t", SCHEMA, primary_key=["id"])
    n = 30_000
    table.write(pa.table({"id": range(n), "writer": [0] * n, "value": [1.0] * n}, schema=SCHEMA))
    db.flush()
    scan = table.scan(batch_size=1000)
    first = scan.read_next_batch()

    def writer() -> None:
        for start in range(n, n + 10_000, 1000):
            table.write(
                pa.table({"id": range(start, start + 1000), "writer": [1] * 1000, "value": [2.0] * 1000}, schema=SCHEMA)
            )
        db.flush()
        table.compact()

    def reader() -> None:
        assert table.get(123) == {"id": 123, "writer": 0, "value": 1.0}
        for _ in range(5):
            # Each write of 1000 rows is atomic: a scan sees all of it or none.
            assert table.to_arrow(start=n).num_rows % 1000 == 0

    run_all([Worker("writer", writer), Worker("reader", reader)])
    rest = scan.read_all()
    seen = first.column("id").to_pylist() + rest.column("id").to_pylist()
    assert seen[:n] == list(range(n))
    assert seen == sorted(set(seen))
    assert table.to_arrow().num_rows == n + 10_000


def test_sql_from_threads(db: basalt.Database) -> None:
    table = db.create_table("t", SCHEMA, primary_key=["id"])
    table.write(pa.table({"id": range(1000), "writer": [i % 4 for i in range(1000)], "value": [1.0] * 1000}, schema=SCHEMA))

    def query(w: int) -> Callable[[], None]:
        def run() -> None:
            for _ in range(10):
                got = db.sql(f"SELECT count(*) AS n, sum(value) AS s FROM t WHERE writer = {w}")
                assert got.to_pylist() == [{"n": 250, "s": 250.0}]

        return run

    run_all([Worker(f"sql-{w}", query(w)) for w in range(4)])
