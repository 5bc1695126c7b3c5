"""Type stubs of the extension module ``basalt._basalt`` (re-exported by ``basalt``)."""

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from os import PathLike
from types import TracebackType
from typing import Any, Literal, TypeAlias, final

import pyarrow
from typing_extensions import disjoint_base

__all__ = [
    "Error",
    "CorruptionError",
    "LockedError",
    "SchemaError",
    "ClosedError",
    "InvalidArgumentError",
    "UniqueViolationError",
    "BusyError",
    "DiskError",
    "ReadOnlyError",
    "ConflictError",
    "HistoryUnavailableError",
    "open",
    "Database",
    "Keyspace",
    "KeyIterator",
    "Snapshot",
    "WriteBatch",
    "Transaction",
    "Table",
    "Scan",
    "Statement",
    "ShardMap",
    "ShardedStore",
    "StoreWrite",
    "StorePin",
    "__version__",
]

__version__: str

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""Keys and values of the key-value API."""

KeyPart: TypeAlias = Any
"""One value of a table key or filter: int, float, str, bytes, bool, date, datetime (or an Arrow scalar's Python value)."""

Key: TypeAlias = KeyPart | tuple[KeyPart, ...]
"""A table key: one value, or a tuple for a composite key (a shorter tuple is a prefix where ranges allow it)."""

Condition: TypeAlias = tuple[str, str, Any] | tuple[str, str]
"""``(column, op, value)`` with op one of ``= == != <> < <= > >=``, or ``(column, "is null")`` / ``(column, "is not null")``."""

class Error(Exception):
    """Every error Basalt raises."""

class CorruptionError(Error):
    """Bytes on disk are not what Basalt wrote."""

    file: str
    offset: int

class LockedError(Error):
    """Another handle, in this process or another, holds the database directory."""

class SchemaError(Error, ValueError):
    """Data does not match the table's schema; nothing was written."""

class ClosedError(Error, RuntimeError):
    """The database (or the handle) was closed."""

class InvalidArgumentError(Error, ValueError):
    """An argument Basalt cannot accept; nothing was changed."""

class UniqueViolationError(Error):
    """A write would give two rows the same value in a unique index; nothing was written."""

    index: str
    value: str

class BusyError(Error):
    """The operation cannot run now (a table in use); retry later."""

class ConflictError(Error):
    """A transaction lost to a commit that wrote one of its keys since it began; nothing was written."""

class DiskError(Error, OSError):
    """The operating system refused an I/O operation."""

class ReadOnlyError(Error):
    """A write through a handle opened with ``read_only=True``."""

class HistoryUnavailableError(Error, ValueError):
    """A read as of a past point, a key's history or a change feed that the history window does not (or no longer) hold; ``oldest_seqno`` names the oldest point still readable."""

    oldest_seqno: int | None

HistoryInfo: TypeAlias = dict[str, Any]
"""A history window: ``keep`` (timedelta or None), ``versions``, ``since``, ``oldest_seqno``, ``oldest_time``."""

def open(
    path: str | PathLike[str],
    *,
    create: bool = True,
    read_only: bool = False,
    **options: int | bool | str,
) -> Database:
    """Opens (and with ``create``, creates) the database in directory ``path``.

    Options are keywords named as the engine's ``Options`` fields
    (``block_cache_bytes=...``, ``compression="lz4"``, ``index_compression="lz4"``,
    ``settled_compression="none"``, ``auto_compaction=False``...); compressions
    are ``"none"``, ``"lz4"`` or ``"zstd"``.
    """

@final
class KeyIterator(Iterator[Any]):
    """Keys, values or ``(key, value)`` pairs of a key range, in key order."""

    def __iter__(self) -> KeyIterator: ...
    def __next__(self) -> Any: ...

# A pyo3 class with a layout of its own: no class derives from it and from
# another such base at once.
@disjoint_base
class Keyspace:
    """A ``dict``-like mapping of ``bytes`` to ``bytes`` iterated in key order."""

    @property
    def name(self) -> str: ...
    def __getitem__(self, key: BytesLike, /) -> bytes: ...
    def __setitem__(self, key: BytesLike, value: BytesLike, /) -> None: ...
    def __delitem__(self, key: BytesLike, /) -> None:
        """Deletes ``key``; an absent key is not an error (a blind tombstone)."""
    def __contains__(self, key: BytesLike, /) -> bool: ...
    def __iter__(self) -> KeyIterator: ...
    def __len__(self) -> int:
        """The exact number of keys: reads every key, O(n)."""
    def get(self, key: BytesLike, default: bytes | None = None) -> bytes | None: ...
    def put(self, key: BytesLike, value: BytesLike, sync: bool = False) -> None: ...
    def delete(self, key: BytesLike, sync: bool = False) -> None: ...
    def delete_range(
        self, start: BytesLike | None = None, end: BytesLike | None = None, *, sync: bool = False
    ) -> None: ...
    def set_merge_operator(self, name: str) -> None: ...
    @property
    def merge_operator(self) -> str | None: ...
    def set_ttl(self, ttl: timedelta | float | None) -> None: ...
    @property
    def ttl(self) -> timedelta | None: ...
    def merge(self, key: BytesLike, operand: BytesLike | int, *, sync: bool = False) -> None: ...
    def multi_get(self, keys: Iterable[BytesLike]) -> list[bytes | None]: ...
    def keys(
        self,
        start: BytesLike | None = None,
        end: BytesLike | None = None,
        *,
        prefix: BytesLike | None = None,
        reverse: bool = False,
    ) -> KeyIterator:
        """Keys in ``[start, end)`` starting with ``prefix``; yields ``bytes``."""
    def values(
        self,
        start: BytesLike | None = None,
        end: BytesLike | None = None,
        *,
        prefix: BytesLike | None = None,
        reverse: bool = False,
    ) -> KeyIterator:
        """Values of the keys ``keys()`` yields; yields ``bytes``."""
    def items(
        self,
        start: BytesLike | None = None,
        end: BytesLike | None = None,
        *,
        prefix: BytesLike | None = None,
        reverse: bool = False,
    ) -> KeyIterator:
        """``(key, value)`` pairs; yields ``tuple[bytes, bytes]``."""
    def snapshot(self, as_of: int | datetime | None = None) -> Snapshot: ...
    def set_history(self, keep: timedelta | float | None = None, *, versions: int | None = None) -> None: ...
    @property
    def history_info(self) -> HistoryInfo | None: ...
    def history(
        self,
        key: BytesLike,
        *,
        limit: int | None = None,
        since: int | datetime | None = None,
        until: int | datetime | None = None,
    ) -> list[tuple[int, datetime | None, bytes | None]]: ...
    def changes(
        self, since: int = 0, *, limit: int | None = None
    ) -> list[tuple[int, datetime | None, bytes | tuple[bytes, bytes | None], bytes | None]]: ...
    def compact(self, start: BytesLike | None = None, end: BytesLike | None = None) -> None: ...

@final
class Database(Keyspace):
    """An open database; its mapping methods are the default keyspace's."""

    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def read_only(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Database: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]: ...
    def write_batch(self) -> WriteBatch: ...
    def transaction(self) -> Transaction: ...
    def keyspace(self, name: str, *, create: bool = True) -> Keyspace: ...
    def keyspaces(self) -> list[str]: ...
    def drop_keyspace(self, name: str) -> None: ...
    def create_table(self, name: str, schema: Any, primary_key: Sequence[str]) -> Table:
        """``schema``: a ``pyarrow.Schema`` or anything with ``__arrow_c_schema__``."""
    def table(self, name: str) -> Table: ...
    def tables(self) -> list[str]: ...
    def drop_table(self, name: str) -> None: ...
    def sql(self, query: str, params: Sequence[Any] | None = None) -> pyarrow.Table: ...
    def prepare(self, query: str) -> Statement: ...
    @property
    def last_seqno(self) -> int: ...
    def flush(self) -> None: ...
    def checkpoint(self, path: str | PathLike[str]) -> None: ...
    def sync(self) -> None: ...
    def wait_for_background_work(self) -> None: ...
    def stats(self) -> dict[str, int | float]: ...

@final
class Statement:
    """A SQL statement parsed and planned once (``Database.prepare``)."""

    @property
    def parameter_count(self) -> int: ...
    @property
    def path(self) -> str: ...
    def execute(self, params: Sequence[Any] | None = None) -> pyarrow.Table: ...

@final
class ShardMap:
    """A sharded store's map (``basalt.sharded``): the engine's format,
    keys routed by their encoded bytes."""

    @staticmethod
    def create(table: str, key_schema: pyarrow.Schema, split_points: list[Any]) -> ShardMap: ...
    @staticmethod
    def read(path: str | PathLike[str]) -> ShardMap: ...
    def write(self, path: str | PathLike[str]) -> None: ...
    def with_paths(self, version: int, paths: list[str]) -> ShardMap: ...
    def shard_of(self, key: Any) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def table(self) -> str: ...
    @property
    def primary_key(self) -> list[str]: ...
    @property
    def paths(self) -> list[str]: ...
    @property
    def bounds(self) -> list[Any]: ...
    @property
    def nodes(self) -> list[str | None]: ...
    def with_nodes(self, nodes: list[str | None]) -> ShardMap: ...

@final
class StoreWrite:
    """A write of a sharded store under way, begun against one version."""

    @property
    def base_version(self) -> int: ...
    @property
    def seqno(self) -> int: ...
    @property
    def tag(self) -> str: ...
    @property
    def staging_dir(self) -> str: ...
    @property
    def base(self) -> ShardMap | None: ...
    def next_map(
        self, table: str | None = None, key_schema: pyarrow.Schema | None = None, split_points: list[Any] | None = None
    ) -> ShardMap: ...

@final
class StorePin:
    """A read of one version of a sharded store: its directories stay while it is held."""

    @property
    def map(self) -> ShardMap: ...
    def release(self) -> None: ...

@final
class ShardedStore:
    """A sharded store's life cycle: create, begin a write, commit or abort it, collect leftovers."""

    def __new__(cls, path: str | PathLike[str], **options: Any) -> ShardedStore: ...
    def map(self) -> ShardMap | None: ...
    def pin(self) -> StorePin: ...
    def sql(self, query: str) -> pyarrow.Table:
        """Runs ``query`` over the store's table, read only, at the version current now."""
    def place(self, nodes: list[str | None]) -> ShardMap: ...
    def create(
        self, table: str, schema: pyarrow.Schema, primary_key: list[str], split_points: list[Any]
    ) -> ShardMap: ...
    def begin_write(self) -> StoreWrite: ...
    def commit(self, write: StoreWrite, next: ShardMap) -> None: ...
    def abort(self, write: StoreWrite, next: ShardMap | None = None) -> None: ...
    def collect(self) -> int: ...
    @staticmethod
    def split_points(key_schema: pyarrow.Schema, sample: list[Any], parts: int) -> list[Any]: ...

@final
class Snapshot:
    """A consistent read view of the whole database at one moment."""

    @property
    def seqno(self) -> int: ...
    @property
    def commit_time(self) -> datetime | None: ...
    def get(self, key: BytesLike, default: bytes | None = None, *, keyspace: Keyspace | None = None) -> bytes | None: ...
    def __getitem__(self, key: BytesLike, /) -> bytes: ...
    def __contains__(self, key: BytesLike, /) -> bool: ...
    def multi_get(self, keys: Iterable[BytesLike], *, keyspace: Keyspace | None = None) -> list[bytes | None]: ...
    def keys(
        self,
        start: BytesLike | None = None,
        end: BytesLike | None = None,
        *,
        prefix: BytesLike | None = None,
        reverse: bool = False,
        keyspace: Keyspace | None = None,
    ) -> KeyIterator: ...
    def values(
        self,
        start: BytesLike | None = None,
        end: BytesLike | None = None,
        *,
        prefix: BytesLike | None = None,
        reverse: bool = False,
        keyspace: Keyspace | None = None,
    ) -> KeyIterator: ...
    def items(
        self,
        start: BytesLike | None = None,
        end: BytesLike | None = None,
        *,
        prefix: BytesLike | None = None,
        reverse: bool = False,
        keyspace: Keyspace | None = None,
    ) -> KeyIterator: ...
    def close(self) -> None: ...
    def __enter__(self) -> Snapshot: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...

@final
class WriteBatch:
    """Writes applied atomically: on a clean ``with`` exit, or by ``commit()``."""

    def put(self, key: BytesLike, value: BytesLike, *, keyspace: Keyspace | None = None) -> None: ...
    def delete(self, key: BytesLike, *, keyspace: Keyspace | None = None) -> None: ...
    def delete_range(
        self, start: BytesLike | None = None, end: BytesLike | None = None, *, keyspace: Keyspace | None = None
    ) -> None: ...
    def merge(self, key: BytesLike, operand: BytesLike | int, *, keyspace: Keyspace | None = None) -> None: ...
    def write(self, table: Table, data: Any) -> None: ...
    def delete_rows(self, table: Table, keys: Any) -> None: ...
    def __len__(self) -> int: ...
    def commit(self, sync: bool = False) -> None: ...
    def discard(self) -> None: ...
    def __enter__(self) -> WriteBatch: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...

@final
class Transaction:
    """Snapshot reads plus own writes, committed at once or not at all (first committer wins)."""

    def __getitem__(self, key: BytesLike, /) -> bytes: ...
    def __setitem__(self, key: BytesLike, value: BytesLike, /) -> None: ...
    def __delitem__(self, key: BytesLike, /) -> None: ...
    def get(self, key: BytesLike, default: bytes | None = None, *, keyspace: Keyspace | None = None) -> bytes | None: ...
    def get_for_update(self, key: BytesLike, *, keyspace: Keyspace | None = None) -> bytes | None: ...
    def put(self, key: BytesLike, value: BytesLike, *, keyspace: Keyspace | None = None) -> None: ...
    def delete(self, key: BytesLike, *, keyspace: Keyspace | None = None) -> None: ...
    def get_row(self, table: Table, key: Key) -> dict[str, Any] | None: ...
    def get_row_for_update(self, table: Table, key: Key) -> dict[str, Any] | None: ...
    def to_arrow(
        self,
        table: Table,
        *,
        columns: Sequence[str] | None = None,
        where: Iterable[Condition] | None = None,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
    ) -> pyarrow.Table:
        """The rows of `table` as this transaction sees them: its snapshot with its own writes on top."""
    def write(self, table: Table, data: Any) -> None: ...
    def delete_rows(self, table: Table, keys: Any) -> None: ...
    def __len__(self) -> int: ...
    @property
    def active(self) -> bool: ...
    def commit(self, sync: bool = False) -> None: ...
    def rollback(self) -> None: ...
    def __enter__(self) -> Transaction: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...

@final
class Scan:
    """A stream of record batches, shaped like ``pyarrow.RecordBatchReader``."""

    @property
    def schema(self) -> pyarrow.Schema: ...
    @property
    def plan(self) -> str: ...
    def read_next_batch(self) -> pyarrow.RecordBatch: ...
    def __iter__(self) -> Scan: ...
    def __next__(self) -> pyarrow.RecordBatch: ...
    def read_all(self) -> pyarrow.Table: ...
    def read_pandas(self) -> Any: ...
    def to_reader(self) -> pyarrow.RecordBatchReader: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def __arrow_c_schema__(self) -> object: ...
    def close(self) -> None: ...
    def __enter__(self) -> Scan: ...
    def __exit__(self, *exc: object) -> Literal[False]: ...

@final
class Table:
    """Rows of an Arrow schema in primary-key order, with secondary indexes."""

    @property
    def name(self) -> str: ...
    @property
    def schema(self) -> pyarrow.Schema: ...
    @property
    def primary_key(self) -> list[str]: ...
    def split_points(self, n: int) -> list[Any]:
        """Up to ``n - 1`` primary keys cutting the table into ranges of similar size."""
    def write(self, data: Any, *, sync: bool = False) -> int:
        """Upserts every row of ``data`` atomically; returns the rows written."""
    def bulk_load(self, data: Any, *, sync: bool = True) -> int:
        """Loads ``data`` of any size straight into the engine's files, all or nothing; returns the rows installed."""
    def count_rows(self, *, start: Key | None = None, end: Key | None = None) -> int:
        """How many rows the table holds in ``[start, end)``, exactly, from metadata where it can."""
    def write_sst_files(
        self, directory: str | PathLike[str], data: Any, *, seqno: int, cut_at: Sequence[Key] | None = None
    ) -> list[dict[str, Any]]:
        """Writes ``data`` as finished SST files of this table into ``directory``, for ``ingest_files``."""
    def ingest_files(
        self, paths: Sequence[str | PathLike[str]], *, start: Key | None = None, end: Key | None = None
    ) -> int:
        """Installs the rows in ``[start, end)`` of files ``write_sst_files`` made, in one step; returns the rows."""
    def delete(self, keys: Iterable[Key] | Any, *, sync: bool = False) -> None: ...
    def delete_range(self, start: Key | None = None, end: Key | None = None, *, sync: bool = False) -> None: ...
    def get(
        self, key: Key, *, columns: Sequence[str] | None = None, snapshot: Snapshot | None = None
    ) -> dict[str, Any] | None: ...
    def get_many(self, keys: Iterable[Key] | Any, *, columns: Sequence[str] | None = None) -> pyarrow.Table: ...
    def scan(
        self,
        *,
        columns: Sequence[str] | None = None,
        where: Iterable[Condition] | None = None,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
        batch_size: int | None = None,
        snapshot: Snapshot | None = None,
    ) -> Scan: ...
    def to_arrow(
        self,
        *,
        columns: Sequence[str] | None = None,
        where: Iterable[Condition] | None = None,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
        snapshot: Snapshot | None = None,
    ) -> pyarrow.Table: ...
    def to_pandas(
        self,
        *,
        columns: Sequence[str] | None = None,
        where: Iterable[Condition] | None = None,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
        snapshot: Snapshot | None = None,
    ) -> Any: ...
    def to_polars(
        self,
        *,
        columns: Sequence[str] | None = None,
        where: Iterable[Condition] | None = None,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
        snapshot: Snapshot | None = None,
    ) -> Any: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...
    def create_index(
        self, name: str, columns: Sequence[str], *, unique: bool = False, include: Sequence[str] | None = None
    ) -> None: ...
    def drop_index(self, name: str) -> None: ...
    def add_column(self, field: pyarrow.Field, default: Any = None) -> None:
        """Adds `field` at the end of the schema without rewriting a file.

        Rows already there read `default` in it (any value
        `pyarrow.array([default], type=field.type)` takes), or null without
        one; a field that is not nullable needs a default.
        """
    def drop_column(self, name: str) -> None:
        """Drops a column: not a key column, nor one an index holds."""
    def rename_column(self, old: str, new: str) -> None:
        """Renames a column (key and indexed columns too)."""
    def indexes(self) -> list[dict[str, Any]]: ...
    def lookup(
        self,
        index: str,
        *,
        eq: Key | None = None,
        prefix: Key | None = None,
        range: tuple[Key | None, Key | None] | None = None,
        columns: Sequence[str] | None = None,
        limit: int | None = None,
        reverse: bool = False,
        snapshot: Snapshot | None = None,
    ) -> pyarrow.Table:
        """Rows an index selects: ``eq=`` (``None`` inside a tuple matches null: ``eq=(None,)``), ``prefix=`` (values of the index's leading columns, ``("LGA",)``; not a string prefix: use ``range=("L", "M")``) or ``range=(low, high)``."""
    def count(
        self,
        index: str,
        *,
        eq: Key | None = None,
        prefix: Key | None = None,
        range: tuple[Key | None, Key | None] | None = None,
        snapshot: Snapshot | None = None,
    ) -> int: ...
    def set_ttl(self, ttl: timedelta | float | None) -> None: ...
    @property
    def ttl(self) -> timedelta | None: ...
    def set_history(self, keep: timedelta | float | None = None, *, versions: int | None = None) -> None: ...
    @property
    def history_info(self) -> HistoryInfo | None: ...
    def history(
        self,
        key: Key,
        *,
        limit: int | None = None,
        since: int | datetime | None = None,
        until: int | datetime | None = None,
    ) -> pyarrow.Table: ...
    def changes(self, since: int = 0, *, limit: int | None = None) -> pyarrow.Table: ...
    def compact(self) -> None: ...
    def __datafusion_table_provider__(self, session: Any) -> object: ...
