"""Range-sharded stores: a directory of N Basalt databases, one table each,
and a shard map that names which primary-key range each holds.

``create(path, schema, primary_key, split_points)`` makes one; a
:class:`ShardedDatabase` routes ``get``/``put``/``scan`` to its shards, and
``basalt.ray_data`` reads and writes it in parallel. Layout::

    path/
      SHARDS               the shard map (docs/format.md, "Shard map")
      shard-00000/         a Basalt database holding keys in [lower, upper)
      shard-00001/ ...

The map is the engine's (``basalt._basalt.ShardMap``), and so is the
store's life cycle (``basalt._basalt.ShardedStore``: create, begin a write,
commit it against the version it began from, collect leftovers): written
and read by Rust, replaced atomically (a temporary file, synced, renamed over, the
directory synced), so a reader sees one version or the next, never a mix.
Shard ``i`` holds the keys from its lower bound up to the next shard's;
keys are routed by their encoded bytes, the engine's own key order, for
every key type.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

import basalt
from basalt import _basalt

SHARD_MAP = "SHARDS"


@dataclass(frozen=True)
class Shard:
    """One shard: its directory (relative to the store) and its key range."""

    path: str
    lower: Any
    upper: Any
    #: The node whose disk holds the shard (a Ray node id), or ``None``.
    node: str | None = None


@dataclass(frozen=True, eq=False)
class ShardMap:
    """The store's shard map: which shard holds which key range. A view of
    the engine's map (``native``), which routes keys and writes the file."""

    version: int
    table: str
    primary_key: list[str]
    shards: list[Shard]
    native: Any = field(default=None, repr=False)

    def __eq__(self, other: object) -> bool:
        """Maps are equal when they route alike: the engine compares bounds
        by their encoding (a NaN bound equals itself)."""
        if not isinstance(other, ShardMap):
            return NotImplemented
        if self.native is not None and other.native is not None:
            return bool(self.native == other.native)
        mine = (self.version, self.table, self.primary_key, self.shards)
        return mine == (other.version, other.table, other.primary_key, other.shards)

    __hash__ = None  # type: ignore[assignment]

    @staticmethod
    def of(native: Any) -> ShardMap:
        """The view of an engine map."""
        bounds = native.bounds
        uppers = [*bounds[1:], None]
        shards = [
            Shard(p, lower, upper, node)
            for p, lower, upper, node in zip(native.paths, bounds, uppers, native.nodes)
        ]
        return ShardMap(native.version, native.table, native.primary_key, shards, native)

    @property
    def split_points(self) -> list[Any]:
        """The keys between consecutive shards, ascending."""
        return [s.lower for s in self.shards[1:]]

    def shard_of(self, key: Any) -> int:
        """The index of the shard holding ``key``, by the engine's key order."""
        index: int = self._native().shard_of(key)
        return index

    def with_paths(self, version: int, paths: Sequence[str]) -> ShardMap:
        """This map at ``version``, each shard in the directory ``paths``
        names (the same table, key and split points)."""
        return ShardMap.of(self._native().with_paths(version, list(paths)))

    def with_nodes(self, nodes: Sequence[str | None]) -> ShardMap:
        """This map with shard ``i`` placed on node ``nodes[i]`` (``None``:
        any): its reads and its next versions' ingests run there."""
        return ShardMap.of(self._native().with_nodes(list(nodes)))

    def _native(self) -> Any:
        if self.native is None:
            raise basalt.InvalidArgumentError("a shard map built by hand routes nothing: write it first")
        return self.native


def new_map(table: str, key_schema: pa.Schema, split_points: Sequence[Any]) -> ShardMap:
    """The first version of a map of ``table`` keyed by ``key_schema``'s
    fields (the primary key's columns, in key order), cut at
    ``split_points`` (strictly ascending in the engine's order), its shards
    in ``shard-00000``, ``shard-00001``, …."""
    return ShardMap.of(_basalt.ShardMap.create(table, key_schema, list(split_points)))


def read_map(path: str | os.PathLike[str]) -> ShardMap:
    """The shard map of the store at ``path``."""
    return ShardMap.of(_basalt.ShardMap.read(os.fspath(path)))


def write_map(path: str | os.PathLike[str], m: ShardMap) -> None:
    """Replaces the shard map of the store at ``path`` atomically and
    durably. A map built by hand (no ``native``) takes its key's types
    from the table of its first shard, which must exist."""
    native = m.native
    if native is None:
        for a, b in zip(m.shards, m.shards[1:]):
            if a.upper != b.lower:
                raise basalt.InvalidArgumentError(f"shards {a.path} and {b.path} do not meet")
        if not m.shards or m.shards[0].lower is not None or m.shards[-1].upper is not None:
            raise basalt.InvalidArgumentError("the shards do not cover every key")
        with basalt.open(pathlib.Path(path) / m.shards[0].path, read_only=True, create=False) as db:
            schema = db.table(m.table).schema
        key_schema = pa.schema([schema.field(c) for c in m.primary_key])
        first = _basalt.ShardMap.create(m.table, key_schema, m.split_points)
        native = first.with_paths(m.version, [s.path for s in m.shards])
    native.write(os.fspath(path))


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
    otherwise). ``options`` are ``basalt.open``'s. The engine's
    ``ShardedStore.create`` makes it (every shard's table alike, the map
    last)."""
    directory = pathlib.Path(path)
    if directory.exists():
        raise basalt.InvalidArgumentError(f"{path} already exists")
    _basalt.ShardedStore(directory, **options).create(table, schema, list(primary_key), list(split_points))
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
            # A write that committed a new version since this handle read
            # the map made this shard an old version's (its directory may
            # be gone): its reads would be stale and its writes lost. (A
            # write that commits later finds the shard open or written, and
            # is refused instead.) Checked before the open and after it.
            self._check_current()
            db = basalt.open(self.shard_path(i), read_only=self.read_only, create=False, **self._options)
            try:
                self._check_current()
            except basalt.ConflictError:
                db.close()
                raise
            self._open[i] = db
        return db

    def _check_current(self) -> None:
        if read_map(self.path).version != self.map.version:
            raise basalt.ConflictError(f"{self.path}: a write committed a new version of the store; open it again")

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

    def sql(self, query: str) -> pa.Table:
        """Runs ``query`` (SQL) over the store's table, read only, at the
        version current now (``ShardedStore.sql``: a DataFusion table over
        the shards, one partition each, shards a key filter cannot meet
        left out)."""
        result: pa.Table = _basalt.ShardedStore(self.path, **self._options).sql(query)
        return result

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
