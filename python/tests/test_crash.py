"""A child Python process writes synced batches and prints each key once
its write returned; the parent kills it with SIGKILL at a random moment,
reopens the database and checks that nothing acknowledged was lost (and
that the one write in flight is all there or not there at all)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

import basalt

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

CYCLES = 3

# The child: every write is synced before its line is printed. Operation i
# is a put (i % 3 == 0), a two-keyspace batch (i % 3 == 1) or a table row
# (i % 3 == 2); each prints one line naming i.
CHILD = r"""
import hashlib, sys
import pyarrow as pa
import basalt

path, tag = sys.argv[1], sys.argv[2]
schema = pa.schema([pa.field("tag", pa.utf8(), nullable=False), pa.field("i", pa.int64(), nullable=False),
                    pa.field("digest", pa.binary())])
db = basalt.open(path)
side = db.keyspace("side")
table = db.table("rows") if "rows" in db.tables() else db.create_table("rows", schema, primary_key=["tag", "i"])

def value(key):
    return hashlib.sha256(key).digest() * 8

print("ready", flush=True)
i = 0
while True:
    key = f"{tag}-{i:07}".encode()
    if i % 3 == 0:
        db.put(key, value(key), sync=True)
    elif i % 3 == 1:
        batch = db.write_batch()
        batch.put(key, value(key))
        batch.put(key, value(key + b"/side"), keyspace=side)
        batch.commit(sync=True)
    else:
        table.write(pa.table({"tag": [tag], "i": [i], "digest": [value(key)]}, schema=schema), sync=True)
    print(i, flush=True)
    i += 1
"""


def value(key: bytes) -> bytes:
    return hashlib.sha256(key).digest() * 8


def run_child_and_kill(path: pathlib.Path, tag: str, rng: random.Random) -> list[int]:
    """Starts the child, reads some acknowledgements, kills it; returns every
    operation it acknowledged (lines it printed completely)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, os.fspath(path), tag],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    watchdog = threading.Timer(120, proc.kill)  # a hung child fails the test, not the run
    watchdog.start()
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        assert first == b"ready\n", f"child did not start: {first!r} {proc.stderr.read().decode()}"
        wanted = rng.randint(1, 250)
        read = b""
        for _ in range(wanted):
            line = proc.stdout.readline()
            assert line.endswith(b"\n"), f"child stopped early: {proc.stderr.read().decode()}"
            read += line
        time.sleep(rng.uniform(0, 0.02))  # land the kill somewhere inside a write
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        read += proc.stdout.read()  # printed before the kill: acknowledged too
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    lines = read.split(b"\n")[:-1]  # the last piece is partial (or empty)
    acked = [int(line) for line in lines]
    assert acked == list(range(len(acked))), "acknowledgements out of sequence"
    return acked


def op_present(db: basalt.Database, tag: str, i: int) -> bool:
    """Whether operation ``i`` of ``tag`` is in the database, checking it is whole."""
    key = f"{tag}-{i:07}".encode()
    if i % 3 == 0:
        got = db.get(key)
        assert got in (None, value(key)), f"op {i}: wrong value"
        return got is not None
    if i % 3 == 1:
        main = db.get(key)
        side = db.keyspace("side").get(key)
        assert (main is None) == (side is None), f"op {i}: half a batch survived ({main!r}, {side!r})"
        if main is None:
            return False
        assert main == value(key) and side == value(key + b"/side"), f"op {i}: wrong values"
        return True
    row = db.table("rows").get((tag, i))
    if row is None:
        return False
    assert row == {"tag": tag, "i": i, "digest": value(key)}, f"op {i}: wrong row {row}"
    return True


def test_killed_writer_loses_nothing_acknowledged(path: pathlib.Path) -> None:
    seed = random.randrange(2**32)
    print(f"crash test seed: {seed}")
    rng = random.Random(seed)
    for cycle in range(CYCLES):
        tag = f"c{cycle}"
        acked = run_child_and_kill(path, tag, rng)
        assert acked, f"seed {seed}, cycle {cycle}: nothing acknowledged"
        with basalt.open(path) as db:
            lost = [i for i in acked if not op_present(db, tag, i)]
            assert not lost, f"seed {seed}, cycle {cycle}: acknowledged operations lost: {lost[:20]}"
            # The operation in flight may or may not be there (whole); none after it.
            in_flight = len(acked)
            op_present(db, tag, in_flight)
            for later in range(in_flight + 1, in_flight + 4):
                assert not op_present(db, tag, later), f"seed {seed}, cycle {cycle}: op {later} was never started"
            # Earlier cycles are still whole.
            for earlier in range(cycle):
                assert op_present(db, f"c{earlier}", 0)
        print(f"cycle {cycle}: {len(acked)} acknowledged operations survived SIGKILL")
