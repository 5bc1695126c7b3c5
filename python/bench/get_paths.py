"""Where a `get` from Python spends its time: one call per key, in random
order, from SSTs (written, closed, reopened after a flush), from the
memtable, for absent keys, against lmdb and a `dict` in the same process.
Usage: ``python python/bench/get_paths.py [KEYS]`` (300,000 by default)."""

from __future__ import annotations

import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import lmdb

import basalt


def per_op(label: str, n: int, f: Callable[[], object]) -> None:
    start = time.perf_counter()
    f()
    print(f"{label:28} {(time.perf_counter() - start) / n * 1e9:7.0f} ns/op")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    keys = [b"key%013d" % i for i in range(n)]
    value = b"x" * 100
    root = Path(tempfile.mkdtemp())
    with basalt.open(root / "sst", block_cache_bytes=64 << 20) as db:
        for i in range(0, n, 1000):
            with db.write_batch() as batch:
                for k in keys[i : i + 1000]:
                    batch.put(k, value)
        db.flush()
    random.Random(1).shuffle(keys)
    with basalt.open(root / "sst", block_cache_bytes=64 << 20) as db:
        get = db.get
        per_op("basalt get, from SSTs", n, lambda: [get(k) for k in keys])
        per_op("basalt `in`, from SSTs", n, lambda: [k in db for k in keys])
        per_op("basalt get, absent keys", n, lambda: [get(k + b"!") for k in keys])
    with basalt.open(root / "mem", block_cache_bytes=64 << 20) as db:
        for k in keys:
            db[k] = value
        get = db.get
        per_op("basalt get, from memtable", n, lambda: [get(k) for k in keys])
    env = lmdb.open(str(root / "lmdb"), map_size=1 << 30, sync=False)
    with env.begin(write=True) as txn:
        for k in keys:
            txn.put(k, value)
    with env.begin() as txn:
        get = txn.get
        per_op("lmdb get", n, lambda: [get(k) for k in keys])
    plain = dict.fromkeys(keys, value)
    per_op("dict get", n, lambda: [plain.get(k) for k in keys])


if __name__ == "__main__":
    main()
