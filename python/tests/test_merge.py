"""Merge operators from Python: a counter keyspace merged from several
threads equals the sum of the increments, through reads, flushes,
compactions and a reopen; bad operands and unbound keyspaces are refused."""

from __future__ import annotations

import pathlib
import struct
import threading

import pytest

import basalt


def as_int(v: bytes | None) -> int | None:
    return None if v is None else struct.unpack("<q", v)[0]


def test_counters_from_threads_equal_the_sum(path: pathlib.Path) -> None:
    with basalt.open(path) as db:
        counts = db.keyspace("counts")
        counts.set_merge_operator("add_i64")
        assert counts.merge_operator == "add_i64"

        def work(t: int) -> None:
            for i in range(500):
                counts.merge(f"hot{i % 16}".encode(), t + 1)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        db.flush()
        counts.compact()
        total = sum(as_int(v) or 0 for v in counts.values())
        assert total == 3 * 500
    with basalt.open(path) as db:
        counts = db.keyspace("counts")
        counts.merge(b"hot0", -1)
        per_thread = sum(1 for i in range(500) if i % 16 == 0)
        assert as_int(counts[b"hot0"]) == per_thread * (1 + 2) - 1


def test_merges_are_refused_without_an_operator_or_with_bad_operands(db: basalt.Database) -> None:
    with pytest.raises(basalt.InvalidArgumentError):
        db.merge(b"k", 1)
    db.set_merge_operator("append")
    db.merge(b"k", b"ab")
    with db.write_batch() as batch:
        batch.merge(b"k", b"cd")
    assert db[b"k"] == b"abcd"
    ints = db.keyspace("ints")
    ints.set_merge_operator("max_i64")
    with pytest.raises(basalt.InvalidArgumentError):
        ints.merge(b"k", b"not eight bytes")
    ints.merge(b"k", 5)
    ints.merge(b"k", 3)
    assert as_int(ints[b"k"]) == 5
