"""Basalt: an embedded storage engine whose tables are Apache Arrow.

``basalt.open(path)`` gives a :class:`Database`: a ``dict``-like mapping of
``bytes`` to ``bytes`` (its default keyspace), named keyspaces, atomic
write batches, snapshots, and Arrow tables whose scans hand pyarrow the
engine's own buffers, with secondary indexes and SQL. See
``python/README.md``.
"""

from basalt._basalt import (
    BusyError,
    ClosedError,
    CorruptionError,
    Database,
    DiskError,
    Error,
    InvalidArgumentError,
    KeyIterator,
    Keyspace,
    LockedError,
    ReadOnlyError,
    Scan,
    SchemaError,
    Snapshot,
    Statement,
    Table,
    UniqueViolationError,
    WriteBatch,
    __version__,
    open,
)

__all__ = [
    "BusyError",
    "ClosedError",
    "CorruptionError",
    "Database",
    "DiskError",
    "Error",
    "InvalidArgumentError",
    "KeyIterator",
    "Keyspace",
    "LockedError",
    "ReadOnlyError",
    "Scan",
    "SchemaError",
    "Snapshot",
    "Statement",
    "Table",
    "UniqueViolationError",
    "WriteBatch",
    "__version__",
    "open",
]
