"""Range-sharded stores: a directory of N Basalt databases, one table each,
and a small shard map that names which primary-key range each holds.

``create(path, schema, primary_key, split_points)`` makes one; a
:class:`ShardedDatabase` routes ``get``/``put``/``scan`` to its shards, and
``basalt.ray`` reads and writes it in parallel. Layout::

    path/
      shards.json          {"format": 1, "version": V, "table": ..., "primary_key": [...],
                            "shards": [{"path": "shard-00000", "lower": null, "upper": K1}, ...]}
      shard-00000/         a Basalt database holding keys in [lower, upper)
      shard-00001/ ...

The map is replaced atomically (written to a temporary file, fsynced,
renamed over, the directory fsynced), so a reader sees one version or the
next, never a mix. Shard ``i`` holds the keys ``k`` with
``lower <= k < upper`` (``None``: unbounded); the bounds are the split
points, in the engine's key order (for one-column keys of ints, strings or
bytes, Python's own order).
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import json
import os
import pathlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import basalt

SHARD_MAP = "shards.json"
FORMAT = 1


def _encode_key(key: Any) -> Any:
    if key is None:
        return None
    if isinstance(key, bytes):
        return {"bytes": key.hex()}
    if isinstance(key, tuple):
        return {"tuple": [_encode_key(k) for k in key]}
    if isinstance(key, (bool, int, float, str)):
        return key
    raise basalt.InvalidArgumentError(f"a split point of an unsupported type: {type(key).__name__}")


def _decode_key(value: Any) -> Any:
    if isinstance(value, dict):
        if "bytes" in value:
            return bytes.fromhex(value["bytes"])
        if "tuple" in value:
            return tuple(_decode_key(v) for v in value["tuple"])
        raise basalt.CorruptionError(f"{SHARD_MAP}: an unknown key encoding {value!r}")
    return value


@dataclass(frozen=True)
class Shard:
    """One shard: its directory (relative to the store) and its key range."""

    path: str
    lower: Any
    upper: Any


@dataclass(frozen=True)
class ShardMap:
    """The store's shard map: which shard holds which key range."""

    version: int
    table: str
    primary_key: list[str]
    shards: list[Shard]

    @property
    def split_points(self) -> list[Any]:
        """The keys between consecutive shards, ascending."""
        return [s.lower for s in self.shards[1:]]

    def shard_of(self, key: Any) -> int:
        """The index of the shard holding ``key``."""
        return bisect.bisect_right(self.split_points, key)

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "version": self.version,
                "table": self.table,
                "primary_key": self.primary_key,
                "shards": [
                    {"path": s.path, "lower": _encode_key(s.lower), "upper": _encode_key(s.upper)}
                    for s in self.shards
                ],
            },
            indent=1,
        )

    @staticmethod
    def from_json(text: str, where: str) -> ShardMap:
        try:
            raw = json.loads(text)
            if raw.get("format") != FORMAT:
                raise basalt.CorruptionError(f"{where}: unknown shard map format {raw.get('format')!r}")
            shards = [
                Shard(str(s["path"]), _decode_key(s["lower"]), _decode_key(s["upper"])) for s in raw["shards"]
            ]
            result = ShardMap(int(raw["version"]), str(raw["table"]), [str(c) for c in raw["primary_key"]], shards)
        except (ValueError, KeyError, TypeError) as e:
            raise basalt.CorruptionError(f"{where}: not a shard map ({e})") from e
        _check(result, where)
        return result


def _check(m: ShardMap, where: str) -> None:
    if not m.shards:
        raise basalt.CorruptionError(f"{where}: no shards")
    if m.shards[0].lower is not None or m.shards[-1].upper is not None:
        raise basalt.CorruptionError(f"{where}: the shards do not cover every key")
    for a, b in zip(m.shards, m.shards[1:]):
        if a.upper is None or a.upper != b.lower:
            raise basalt.CorruptionError(f"{where}: shards {a.path} and {b.path} do not meet")
    points = m.split_points
    if any(not x < y for x, y in zip(points, points[1:])):
        raise basalt.CorruptionError(f"{where}: split points out of order")


def read_map(path: str | os.PathLike[str]) -> ShardMap:
    """The shard map of the store at ``path``."""
    file = pathlib.Path(path) / SHARD_MAP
    try:
        text = file.read_text()
    except FileNotFoundError:
        raise basalt.InvalidArgumentError(f"{path} holds no sharded store (no {SHARD_MAP})") from None
    return ShardMap.from_json(text, str(file))


def write_map(path: str | os.PathLike[str], m: ShardMap) -> None:
    """Replaces the shard map of the store at ``path`` atomically and durably."""
    _check(m, "the new shard map")
    for s in m.shards:
        _encode_key(s.lower)
        _encode_key(s.upper)
    directory = pathlib.Path(path)
    tmp = directory / f"{SHARD_MAP}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        f.write(m.to_json())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / SHARD_MAP)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


WRITE_LOCK = "write.lock"


@contextlib.contextmanager
def write_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Holds the store's write lock (an exclusive ``flock`` on
    ``write.lock``): one commit of a new version at a time. Raises
    ``BusyError`` at once when another holds it."""
    fd = os.open(pathlib.Path(path) / WRITE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise basalt.BusyError(f"{path}: another write is committing a new version") from None
        yield
    finally:
        os.close(fd)


def create(
    path: str | os.PathLike[str],
    schema: pa.Schema,
    primary_key: Sequence[str],
    split_points: Sequence[Any],
    *,
    table: str = "data",
    **options: Any,
) -> ShardedDatabase:
    """Creates a store of ``len(split_points) + 1`` shards at ``path`` (which
    must not exist), each a Basalt database holding an empty table
    ``table``; returns it open. ``split_points`` are primary keys in strictly
    ascending order (a scalar per point for a one-column key, a tuple
    otherwise). ``options`` are ``basalt.open``'s."""
    directory = pathlib.Path(path)
    points = list(split_points)
    if any(not x < y for x, y in zip(points, points[1:])):
        raise basalt.InvalidArgumentError("split points must be strictly ascending")
    if directory.exists():
        raise basalt.InvalidArgumentError(f"{path} already exists")
    bounds: list[Any] = [None, *points, None]
    shards = [Shard(f"shard-{i:05d}", bounds[i], bounds[i + 1]) for i in range(len(points) + 1)]
    m = ShardMap(1, table, list(primary_key), shards)
    _check(m, "the new shard map")
    directory.mkdir(parents=True)
    for s in shards:
        with basalt.open(directory / s.path, **options) as db:
            db.create_table(table, schema, primary_key=list(primary_key))
    write_map(directory, m)
    return ShardedDatabase(directory, **options)


class ShardedDatabase:
    """A sharded store, open: its shards opened as they are needed.

    ``get`` and ``put`` go to the shard holding each key; ``scan`` reads the
    shards in key order as one Arrow stream. A ``put`` is atomic within
    each shard it touches, not across shards."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False, **options: Any) -> None:
        self.path = pathlib.Path(path)
        self.map = read_map(self.path)
        self.read_only = read_only
        self._options = options
        self._open: dict[int, basalt.Database] = {}

    def __enter__(self) -> ShardedDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes every shard opened; writable ones are flushed first, so
        that their WALs hold nothing and a read-only open (a reader, a Ray
        write's checkpoint of the shard) finds every row in SSTs."""
        for db in self._open.values():
            if not self.read_only:
                db.flush()
            db.close()
        self._open.clear()

    def shard_path(self, i: int) -> pathlib.Path:
        """The directory of shard ``i``."""
        return self.path / self.map.shards[i].path

    def _db(self, i: int) -> basalt.Database:
        db = self._open.get(i)
        if db is None:
            db = basalt.open(self.shard_path(i), read_only=self.read_only, create=False, **self._options)
            self._open[i] = db
        return db

    def table(self, i: int) -> basalt.Table:
        """The table of shard ``i``."""
        return self._db(i).table(self.map.table)

    def get(self, key: Any) -> dict[str, Any] | None:
        """The row with primary key ``key``, or ``None``."""
        row: dict[str, Any] | None = self.table(self.map.shard_of(key)).get(key)
        return row

    def put(self, data: Any) -> int:
        """Upserts rows (a ``pyarrow.Table`` or a dict of columns); each goes
        to the shard holding its key. Returns the rows written."""
        rows = data if isinstance(data, pa.Table) else pa.table(data)
        keys = row_keys(rows, self.map.primary_key)
        by_shard: dict[int, list[int]] = {}
        for i, key in enumerate(keys):
            by_shard.setdefault(self.map.shard_of(key), []).append(i)
        for shard, indices in sorted(by_shard.items()):
            self.table(shard).write(rows.take(pa.array(indices, type=pa.int64())))
        written: int = rows.num_rows
        return written

    def scan(self, columns: Sequence[str] | None = None, where: Any = None) -> pa.RecordBatchReader:
        """Every row (or ``columns`` of it, passing ``where``), in key order,
        as one stream of Arrow batches read shard after shard."""
        cols = list(columns) if columns else None
        first = self.table(0).scan(columns=cols, where=where)

        def batches() -> Iterator[pa.RecordBatch]:
            yield from first
            for i in range(1, len(self.map.shards)):
                yield from self.table(i).scan(columns=cols, where=where)

        return pa.RecordBatchReader.from_batches(first.schema, batches())


def row_keys(rows: pa.Table, primary_key: Sequence[str]) -> list[Any]:
    """The primary key of each row of ``rows``: a value per row for a
    one-column key, a tuple otherwise (the shard map's key form)."""
    columns: list[list[Any]] = [rows.column(c).to_pylist() for c in primary_key]
    if len(columns) == 1:
        return columns[0]
    return list(zip(*columns))
