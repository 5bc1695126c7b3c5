"""Basalt: an embedded storage engine whose tables are Apache Arrow.

``basalt.open(path)`` gives a :class:`Database`: a ``dict``-like mapping of
``bytes`` to ``bytes`` (its default keyspace), named keyspaces, atomic
write batches, snapshots, and Arrow tables whose scans hand pyarrow the
engine's own buffers, with secondary indexes and SQL. See
``python/README.md``.
"""

from collections.abc import Callable
from typing import TypeVar

from basalt._basalt import (
    BusyError,
    ClosedError,
    ConflictError,
    CorruptionError,
    Database,
    DiskError,
    Error,
    HistoryUnavailableError,
    InvalidArgumentError,
    KeyIterator,
    Keyspace,
    LockedError,
    ReadOnlyError,
    Scan,
    SchemaError,
    ShardedStore,
    Snapshot,
    Statement,
    StorePin,
    StoreWrite,
    Table,
    Transaction,
    UniqueViolationError,
    WriteBatch,
    __version__,
    open,
)

_R = TypeVar("_R")


def run_transaction(
    db: Database,
    work: Callable[[Transaction], _R],
    *,
    attempts: int = 10,
    sync: bool = False,
) -> _R:
    """Runs ``work(tx)`` in a new transaction of ``db`` and commits it; when
    the commit raises :class:`ConflictError` (another commit wrote one of
    its keys since it began), runs it again in a fresh transaction, up to
    ``attempts`` times in all, then raises the last conflict (also one
    raised by a ``tx.commit()`` inside ``work``). ``work`` must do nothing
    outside the transaction that cannot be repeated. Any other exception
    rolls the transaction back and is raised at once. Returns what
    ``work`` returned in the attempt that ended it (a ``work`` that rolls
    back on its own ends it too)::

        def move(tx):
            a = int(tx.get_for_update(b"alice") or 0)
            b = int(tx.get_for_update(b"bob") or 0)
            tx[b"alice"], tx[b"bob"] = str(a - 7), str(b + 7)

        basalt.run_transaction(db, move)
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    for attempt in range(attempts):
        tx = db.transaction()
        try:
            result = work(tx)
            # `work` may have ended the transaction itself: that stands.
            if tx.active:
                tx.commit(sync=sync)
            return result
        except ConflictError:
            tx.rollback()
            if attempt + 1 == attempts:
                raise
        except BaseException:
            tx.rollback()
            raise
    raise AssertionError("unreachable")  # pragma: no cover

__all__ = [
    "BusyError",
    "ClosedError",
    "ConflictError",
    "CorruptionError",
    "Database",
    "DiskError",
    "Error",
    "HistoryUnavailableError",
    "InvalidArgumentError",
    "KeyIterator",
    "Keyspace",
    "LockedError",
    "ReadOnlyError",
    "Scan",
    "SchemaError",
    "ShardedStore",
    "Snapshot",
    "Statement",
    "StorePin",
    "StoreWrite",
    "Table",
    "Transaction",
    "UniqueViolationError",
    "WriteBatch",
    "__version__",
    "open",
    "run_transaction",
]
