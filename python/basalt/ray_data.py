"""Ray Data over sharded Basalt stores (``basalt.sharded``), the optional
``ray`` extra (``pip install 'basalt[ray]'``). Named ``ray_data`` so that
``from basalt import ray_data`` never shadows the ``ray`` package.

``read_basalt(path)`` is a ``ray.data.Dataset`` with one read task per key
range: each shard cut into several ranges (``Table.split_points``) when the
requested parallelism asks for more tasks than there are shards. A task
opens its shard read-only (any number of processes may) and streams the
engine's Arrow batches, with the projection and filter applied by the
engine's scan.

``write_basalt(dataset, path, table, primary_key, shards=N)`` (or
``Dataset.write_datasink(BasaltDatasink(...))``) writes a dataset, each row
once: every write task sorts its rows in the engine's key order and writes
them as finished SST files (``Table.write_sst_files``) cut at the shards'
split points, at a seqno of its own above every shard's, and returns their
metadata. A new store's split points come from a sample of the dataset
that ``write_basalt`` takes first (one extra read of the input, nothing
written; ``split_points=`` skips it); a sink given none chooses them from
the rows it wrote, and then its files straddle the shards' edges. Once
every task succeeded, the driver makes the next version of each shard (a
checkpoint of the current one: hard links), one Ray task per shard, its
only writer, ingests the files of its key range into it
(``Table.ingest_files``: hard links again, one MANIFEST edit; a file that
straddles a shard's edge is rewritten with the rows of the shard's range;
overlapping files of several tasks are merged, so that scans read one
run), and only then replaces the shard
map. A failed task, or a failure before the map is replaced, leaves the
previous version as it was (the written files and new shard versions are
removed).
"""

from __future__ import annotations

import math
import os
import pathlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

try:
    import ray
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("basalt.ray_data needs Ray Data: pip install 'basalt[ray]'") from e
from ray.data import Datasink, Datasource
from ray.data.block import BlockMetadata
from ray.data.datasource import ReadTask
from ray.data.expressions import BinaryExpr, ColumnExpr, Expr, LiteralExpr, Operation, UnaryExpr

import basalt
from basalt import _basalt, sharded

#: Rows a read task gathers into one block handed to Ray.
BLOCK_ROWS = 1 << 16
#: One key in this many written rows is sampled to choose split points.
SAMPLE_EVERY = 64


def _files_bytes(directory: str) -> int:
    total = 0
    for entry in os.scandir(directory):
        if entry.name.endswith((".sst", ".blob")):
            total += entry.stat().st_size
    return total


def _scan_args(lower: Any, upper: Any) -> dict[str, Any]:
    args: dict[str, Any] = {}
    if lower is not None:
        args["start"] = lower
    if upper is not None:
        args["end"] = upper
    return args


def _read_range(
    path: str,
    table: str,
    lower: Any,
    upper: Any,
    read: tuple[list[str] | None, list[str] | None],
    where: list[Any] | None,
    predicate: Any,
    options: dict[str, Any],
) -> Callable[[], Iterator[pa.Table]]:
    """A read task's function: the engine's scan of one key range with the
    columns ``read[0]`` (``None``: all) and the conditions ``where``, then
    ``predicate`` (a PyArrow expression, exactly Ray's semantics) and the
    output columns ``read[1]``."""
    columns, output = read

    def finish(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.Table:
        data = pa.Table.from_batches(batches, schema=schema)
        if predicate is not None:
            data = data.filter(predicate)
        return data.select(output) if output is not None else data

    def read_fn() -> Iterator[pa.Table]:
        with basalt.open(path, read_only=True, create=False, **options) as db:
            scan = db.table(table).scan(columns=columns, where=where, **_scan_args(lower, upper))
            batches: list[pa.RecordBatch] = []
            rows = 0
            blocks = 0
            for batch in scan:
                batches.append(batch)
                rows += batch.num_rows
                if rows >= BLOCK_ROWS:
                    yield finish(batches, scan.schema)
                    batches, rows, blocks = [], 0, blocks + 1
            if batches or blocks == 0:
                # A range with no rows still gives a block of the scan's
                # columns: Ray would make it a block with none.
                yield finish(batches, scan.schema)

    return read_fn


#: Ray's comparison operations the engine's scan filter takes, by name.
_ENGINE_OPS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
#: The same comparison with its operands swapped.
_SWAPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _conjuncts(expr: Any) -> Iterator[Any]:
    """The terms of ``expr``'s top-level AND chain."""
    if isinstance(expr, BinaryExpr) and expr.op == Operation.AND:
        yield from _conjuncts(expr.left)
        yield from _conjuncts(expr.right)
    else:
        yield expr


def _columns_of(expr: Any) -> set[str]:
    """The columns ``expr`` reads."""
    if isinstance(expr, ColumnExpr):
        return {expr.name}
    found: set[str] = set()
    for child in ("left", "right", "operand", "expr"):
        sub = getattr(expr, child, None)
        if isinstance(sub, Expr):
            found |= _columns_of(sub)
    return found


def _exact_literal(value: Any, field: pa.Field) -> bool:
    """Whether the engine's scan filter takes ``value`` for ``field`` as
    PyArrow compares them: Python's own ints for integer columns (within
    the column's range), ``str`` for strings, ``bytes`` for binary,
    ``bool`` for booleans and ``datetime.date`` (not a ``datetime``) for
    dates. Anything else stays with PyArrow alone."""
    import datetime

    t = field.type
    if pa.types.is_integer(t):
        if type(value) is not int:
            return False
        info = np.iinfo(t.to_pandas_dtype())
        return int(info.min) <= value <= int(info.max)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return type(value) is str
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return type(value) is bytes
    if pa.types.is_boolean(t):
        return type(value) is bool
    if pa.types.is_date32(t):
        return type(value) is datetime.date
    return False


def _engine_conditions(expr: Any, schema: pa.Schema) -> list[tuple[Any, ...]]:
    """The conjuncts of Ray's predicate ``expr`` the engine's scan filter
    means exactly alike: a comparison of a column with a literal of the
    column's own kind (``_exact_literal``), or a null test. Float columns
    stay with PyArrow, whose comparisons follow IEEE 754 (the engine's,
    like Arrow's Rust kernels, order NaN and -0.0 by totalOrder). The read
    applies the whole predicate again with PyArrow, so a term left out only
    costs the pruning it would have given."""
    out: list[tuple[Any, ...]] = []
    for term in _conjuncts(expr):
        if isinstance(term, UnaryExpr) and isinstance(term.operand, ColumnExpr):
            test = {Operation.IS_NULL: "is null", Operation.IS_NOT_NULL: "is not null"}.get(term.op)
            if test is not None and term.operand.name in schema.names:
                out.append((term.operand.name, test))
            continue
        if not isinstance(term, BinaryExpr) or term.op.value not in _ENGINE_OPS:
            continue
        op = _ENGINE_OPS[term.op.value]
        if isinstance(term.left, ColumnExpr) and isinstance(term.right, LiteralExpr):
            column, value = term.left.name, term.right.value
        elif isinstance(term.right, ColumnExpr) and isinstance(term.left, LiteralExpr):
            column, value, op = term.right.name, term.left.value, _SWAPPED[op]
        else:
            continue
        if column in schema.names and _exact_literal(value, schema.field(column)):
            out.append((column, op, value))
    return out


def _placed(task: Any, node: str | None) -> Any:
    """``task`` scheduled on ``node`` (a Ray node id) when the shard map
    places its shard there: hard affinity, as the shard's files are on that
    node's disk."""
    if node is None:
        return task
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False))


@ray.remote
def _read_placed(
    path: str, table: str, lower: Any, upper: Any, columns: list[str] | None, where: list[Any] | None, options: dict[str, Any]
) -> pa.Table:
    """One key range of a placed shard, read on its node; the schema's
    metadata names the node that read it."""
    parts = list(_read_range(path, table, lower, upper, (columns, None), where, None, options)())
    with basalt.open(path, read_only=True, create=False, **options) as db:
        schema = db.table(table).schema
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    data = pa.concat_tables(parts) if parts else schema.empty_table()
    node = ray.get_runtime_context().get_node_id()
    return data.replace_schema_metadata({b"basalt.node": node.encode()})


def placed_read_refs(
    path: str | os.PathLike[str],
    columns: Sequence[str] | None = None,
    filter: Iterable[Any] | None = None,
    **options: Any,
) -> tuple[Any, list[Any]]:
    """Reads a store whose map places its shards on nodes: one Ray task per
    shard, on the shard's node, each returning its rows as one Arrow table.
    Returns the pin of the version read (hold it until the tables are
    used) and the tables' object refs, in key order."""
    pin = _basalt.ShardedStore(path, **options).pin()
    m = sharded.ShardMap.of(pin.map)
    cols = list(columns) if columns else None
    where = list(filter) if filter is not None else None
    refs = [
        _placed(_read_placed, s.node).remote(
            os.path.join(os.fspath(path), s.path), m.table, s.lower, s.upper, cols, where, options
        )
        for s in m.shards
    ]
    return pin, refs


class BasaltDatasource(Datasource):
    """A sharded Basalt store's table as a Ray Data source. The version read
    is pinned when the source is made (``ShardedStore.pin``): every read
    task reads that version, whatever writes commit meanwhile, until the
    source is dropped. Ray's projection and predicate pushdown go into the
    engine's scans."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        table: str | None = None,
        columns: Sequence[str] | None = None,
        filter: Iterable[Any] | None = None,
        **options: Any,
    ) -> None:
        # Ray's pushdown rules read these attributes.
        self._projection_map = None
        self._predicate_expr = None
        self._path = str(path)
        self._pin = _basalt.ShardedStore(path, **options).pin()
        self._map = sharded.ShardMap.of(self._pin.map)
        if table is not None and table != self._map.table:
            raise basalt.InvalidArgumentError(f"{path} holds table {self._map.table!r}, not {table!r}")
        self._columns = list(columns) if columns else None
        self._filter = list(filter) if filter is not None else None
        self._options = options

    def get_name(self) -> str:
        return "Basalt"

    def supports_projection_pushdown(self) -> bool:
        return True

    def supports_predicate_pushdown(self) -> bool:
        return True

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(_files_bytes(os.path.join(self._path, s.path)) for s in self._map.shards)

    def _output_columns(self, schema: pa.Schema) -> list[str] | None:
        """The columns the dataset has: the caller's, then Ray's projection."""
        columns = self._columns
        projected = self._get_data_columns()
        if projected is not None:
            columns = [c for c in (columns or schema.names) if c in projected]
        return columns

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        shards = self._map.shards
        per_shard = max(1, math.ceil(max(parallelism, 1) / len(shards)))
        predicate = self._predicate_expr
        tasks = []
        for shard in shards:
            path = os.path.join(self._path, shard.path)
            with basalt.open(path, read_only=True, create=False, **self._options) as db:
                t = db.table(self._map.table)
                points = t.split_points(per_shard) if per_shard > 1 else []
                full = t.schema
                bounds = [shard.lower, *points, shard.upper]
                # Rows per task from metadata (the engine's count reads no
                # block where files answer it).
                counts = (
                    [t.count_rows(**_scan_args(lo, hi)) for lo, hi in zip(bounds, bounds[1:])]
                    if predicate is None and self._filter is None
                    else [None] * (len(bounds) - 1)
                )
            output = self._output_columns(full)
            needed = None
            if output is not None:
                wanted = set(output) | (_columns_of(predicate) if predicate is not None else set())
                needed = [c for c in full.names if c in wanted]
            schema = pa.schema([full.field(c) for c in output]) if output is not None else full
            where = list(self._filter or []) + (_engine_conditions(predicate, full) if predicate is not None else [])
            arrow_predicate = predicate.to_pyarrow() if predicate is not None else None
            size = _files_bytes(path) // (len(bounds) - 1)
            if output is not None and len(full.names) > 0:
                size = size * len(output) // len(full.names)
            for (lower, upper), rows in zip(zip(bounds, bounds[1:]), counts):
                metadata = BlockMetadata(num_rows=rows, size_bytes=size, exec_stats=None, input_files=None)
                read = _read_range(
                    path,
                    self._map.table,
                    lower,
                    upper,
                    (needed, output if needed != output else None),
                    where or None,
                    arrow_predicate,
                    self._options,
                )
                tasks.append(ReadTask(read, metadata, schema=schema, per_task_row_limit=per_task_row_limit))
        return tasks


def read_basalt(
    path: str | os.PathLike[str],
    table: str | None = None,
    columns: Sequence[str] | None = None,
    filter: Iterable[Any] | None = None,
    *,
    parallelism: int = -1,
    **options: Any,
) -> ray.data.Dataset:
    """The table of the sharded store at ``path`` as a ``ray.data.Dataset``,
    in key order (with Ray's ``preserve_order``). A store whose map places
    its shards on nodes (``ShardedStore.place``) is read by one task per
    shard on its node, at once (the dataset holds the rows read). ``columns`` and
    ``filter`` (``Table.scan``'s ``where=``: ``[(column, op, value), …]``)
    are applied by the engine; ``options`` are ``basalt.open``'s."""
    if any(s.node is not None for s in sharded.read_map(path).shards):
        # Ray Data schedules a source's read tasks as one operator, not
        # each on a node: a placed store is read by tasks of its own, each
        # on its shard's node, and the dataset made from their tables.
        if table is not None and table != sharded.read_map(path).table:
            raise basalt.InvalidArgumentError(f"{path} holds table {sharded.read_map(path).table!r}, not {table!r}")
        pin, refs = placed_read_refs(path, columns, filter, **options)
        # Every read ended (its version pinned meanwhile); nothing fetched here.
        ray.wait(refs, num_returns=len(refs), fetch_local=False)
        pin.release()
        placed: ray.data.Dataset = ray.data.from_arrow_refs(refs)
        return placed
    source = BasaltDatasource(path, table, columns, filter, **options)
    dataset: ray.data.Dataset = (
        ray.data.read_datasource(source, override_num_blocks=parallelism)
        if parallelism > 0
        else ray.data.read_datasource(source)
    )
    return dataset


def _sample_keys(data: pa.Table, primary_key: Sequence[str]) -> list[Any]:
    """One key in ``SAMPLE_EVERY`` rows of ``data``."""
    picked = data.select(list(primary_key)).take(pa.array(range(0, data.num_rows, SAMPLE_EVERY), pa.int64()))
    return sharded.row_keys(picked, primary_key)


def _chain_first(first: pa.Table, rest: Iterator[pa.Table]) -> Iterator[pa.Table]:
    yield first
    for t in rest:
        if t.num_rows > 0:
            yield t


#: Seqnos each write task may use: its rows get ``base + task index *
#: SEQNOS_PER_TASK`` and up (one more per further sorted run, when its
#: input is larger than the engine's memory budget and out of key order).
SEQNOS_PER_TASK = 1 << 20


def _table_schema(schema: pa.Schema, primary_key: Sequence[str]) -> pa.Schema:
    """``schema`` with the key columns not nullable (the engine requires it)."""
    return pa.schema([f.with_nullable(False) if f.name in primary_key else f for f in schema])


@ray.remote
def _ingest_shard(
    new_dir: str,
    base_dir: str | None,
    table: str,
    schema: pa.Schema,
    primary_key: list[str],
    lower: Any,
    upper: Any,
    files: list[str],
    options: dict[str, Any],
) -> tuple[int, str]:
    """Makes the next version of one shard: its current version (hard
    links) plus the rows of its key range from the written files (hard
    links, or a rewrite of a file that straddles the range's edge).
    Returns the rows ingested and the node it ran on."""
    if base_dir is not None:
        # Read-only: readers of the current version are not locked out.
        try:
            with basalt.open(base_dir, read_only=True, create=False, **options) as base:
                base.checkpoint(new_dir)
        except basalt.ReadOnlyError:
            # Its WAL holds writes (a writable handle closed without a
            # flush): flush them (readers are locked out for that moment).
            with basalt.open(base_dir, create=False, **options) as base:
                base.flush()
            with basalt.open(base_dir, read_only=True, create=False, **options) as base:
                base.checkpoint(new_dir)
    with basalt.open(new_dir, **options) as target:
        if base_dir is None:
            target.create_table(table, schema, primary_key=primary_key)
        rows: int = target.table(table).ingest_files(files, **_scan_args(lower, upper))
    node: str = ray.get_runtime_context().get_node_id()
    return rows, node


class BasaltDatasink(Datasink[dict[str, Any]]):
    """Writes a dataset into a sharded Basalt store (created with ``shards``
    shards, split at sampled keys, when ``path`` holds none yet), each row
    written once as SST files the shards ingest."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        table: str = "data",
        primary_key: Sequence[str] | None = None,
        *,
        shards: int | None = None,
        split_points: Sequence[Any] | None = None,
        **options: Any,
    ) -> None:
        self._path = pathlib.Path(path)
        self._table = table
        self._primary_key = list(primary_key) if primary_key else None
        #: A new store's split points, when known before the write (each
        #: task's files are then cut at them); a store that exists keeps its own.
        self._split_points = list(split_points) if split_points is not None else None
        if shards is None:
            shards = len(self._split_points) + 1 if self._split_points is not None else 4
        elif self._split_points is not None and shards != len(self._split_points) + 1:
            raise basalt.InvalidArgumentError(
                f"{len(self._split_points)} split points make {len(self._split_points) + 1} shards, not {shards}"
            )
        self._shards = shards
        self._options = options
        #: The node each shard's ingest ran on, after a commit (in shard order).
        self.ingest_nodes: list[str | None] = []
        if shards < 1:
            raise basalt.InvalidArgumentError("shards must be at least 1")

    def __getstate__(self) -> dict[str, Any]:
        # Write tasks get the sink without the driver's handles (the
        # write's lock stays in the driver).
        state = dict(self.__dict__)
        state.pop("_store", None)
        state.pop("_write", None)
        state.pop("_pin", None)
        return state

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        del schema
        self._store = _basalt.ShardedStore(self._path, **self._options)
        # The base version stays while this write reads it (its shard 0
        # writes the files, its shards are checkpointed): pinned, and the
        # write begun against that same version.
        self._pin: Any = None
        for _ in range(16):
            pin = self._store.pin() if self._store.map() is not None else None
            write = self._store.begin_write()
            if pin is None or pin.map.version == write.base_version:
                break
            self._store.abort(write)
            pin.release()
        else:
            raise basalt.BusyError(f"{self._path}: other writes kept committing while this one began")
        self._pin = pin
        self._write: Any = write
        self._staging = pathlib.Path(self._write.staging_dir)
        self._seqno: int = self._write.seqno
        self._template: str | None = None
        self._cut_at: list[Any] = []
        base = self._write.base
        if base is not None:
            existing = sharded.ShardMap.of(base)
            if existing.table != self._table:
                self._abort(None)
                raise basalt.InvalidArgumentError(f"{self._path} holds table {existing.table!r}")
            if self._primary_key and self._primary_key != existing.primary_key:
                self._abort(None)
                raise basalt.InvalidArgumentError(
                    f"{self._path} is keyed by {existing.primary_key}, not {self._primary_key}"
                )
            self._primary_key = existing.primary_key
            if self._split_points is not None and self._split_points != existing.split_points:
                self._abort(None)
                raise basalt.InvalidArgumentError(
                    f"{self._path} is split at {existing.split_points}, not at the split points given"
                )
            # The files are written by the store's own table (its schema
            # version, its tree): shard 0, opened read-only by each task.
            self._template = str(self._path / existing.shards[0].path)
            self._cut_at = existing.split_points
        elif self._split_points is not None:
            self._cut_at = self._split_points
        if not self._primary_key:
            self._abort(None)
            raise basalt.InvalidArgumentError("a new store needs primary_key")

    def write(self, blocks: Iterable[Any], ctx: Any) -> dict[str, Any]:
        """Writes this task's blocks as SST files of the store's table."""
        assert self._primary_key is not None
        directory = self._staging / f"task-{uuid.uuid4().hex}"
        task = int(getattr(ctx, "task_idx", 0) or 0)
        sample: list[Any] = []
        schema: pa.Schema | None = None
        files: list[dict[str, Any]] = []
        tables = (block if isinstance(block, pa.Table) else pa.Table.from_pandas(block) for block in blocks)
        first = next((t for t in tables if t.num_rows > 0), None)
        if first is not None:
            key_names = self._primary_key
            if self._template is not None:
                template = basalt.open(self._template, read_only=True, create=False, **self._options)
                schema = template.table(self._table).schema
                base = self._seqno - 1
            else:
                # A new store: a database holding only the table's
                # definition (no rows), as each new shard will.
                schema = _table_schema(first.schema, key_names)
                template = basalt.open(directory / "table", **self._options)
                template.create_table(self._table, schema, primary_key=key_names)
                base = template.last_seqno
            target_schema = schema
            sampling = self._template is None and self._split_points is None

            def batches() -> Iterator[pa.RecordBatch]:
                for data in _chain_first(first, tables):
                    if sampling:
                        sample.extend(_sample_keys(data, key_names))
                    yield from data.cast(target_schema).to_batches()

            try:
                files = template.table(self._table).write_sst_files(
                    directory / "files",
                    pa.RecordBatchReader.from_batches(schema, batches()),
                    seqno=base + 1 + task * SEQNOS_PER_TASK,
                    cut_at=self._cut_at,
                )
            finally:
                template.close()
            limit = base + (task + 1) * SEQNOS_PER_TASK
            if any(f["seqno"] > limit for f in files):
                raise basalt.InvalidArgumentError(f"write task {task} used more than {SEQNOS_PER_TASK} seqnos")
        rows = sum(f["rows"] for f in files)
        return {"task": task, "files": files, "rows": rows, "sample": sample, "schema": schema}

    def on_write_complete(self, write_result: Any) -> None:
        if getattr(self, "_write", None) is None:
            # Ray calls no on_write_start for an input of no blocks.
            if self._store_exists():
                return
            raise basalt.InvalidArgumentError("nothing written: a new store needs rows")
        self._commit(write_result)

    def _store_exists(self) -> bool:
        return (self._path / sharded.SHARD_MAP).exists()

    def on_write_failed(self, error: Exception) -> None:
        del error
        self._abort(None)

    def _abort(self, next_map: Any) -> None:
        write, self._write = getattr(self, "_write", None), None
        try:
            if write is not None:
                self._store.abort(write, next_map)
        finally:
            self._release()

    def _release(self) -> None:
        pin, self._pin = getattr(self, "_pin", None), None
        if pin is not None:
            pin.release()

    def _commit(self, write_result: Any) -> None:
        """The next version of every shard, then the engine's commit: the
        map replaced if no other write committed since this one began.
        Until then nothing the current map names is touched; on a failure
        the write's files and directories are removed."""
        assert self._primary_key is not None and self._write is not None
        write = self._write
        returns = [r for r in write_result.write_returns if r and r["rows"] > 0]
        tasks = [r["task"] for r in returns]
        next_map = None
        try:
            current = self._store.map()
            if (current.version if current is not None else 0) != write.base_version:
                # Refused before any work; the engine's commit checks again.
                raise basalt.ConflictError(
                    f"{self._path}: another write committed version {current.version if current else 0} "
                    f"while this one, begun at version {write.base_version}, ran"
                )
            if len(set(tasks)) != len(tasks):
                raise basalt.InvalidArgumentError("two write tasks reported one task index: their seqnos would collide")
            schemas = [r["schema"] for r in returns]
            schema = schemas[0] if schemas else None
            base = write.base
            if base is None and schema is None:
                raise basalt.InvalidArgumentError("nothing written: a new store needs rows")
            if any(s != schema for s in schemas):
                # The files of a new store were written by each task's own
                # definition of the table: they must agree exactly.
                raise basalt.InvalidArgumentError("write tasks inferred different schemas: cast the dataset first")
            if base is not None:
                next_map = write.next_map()
                assert self._template is not None
                with basalt.open(self._template, read_only=True, create=False) as db:
                    schema = db.table(self._table).schema
            else:
                assert schema is not None
                key_schema = pa.schema([schema.field(c) for c in self._primary_key])
                points = self._split_points
                if points is None:
                    sample = [k for r in returns for k in r["sample"]]
                    points = _basalt.ShardedStore.split_points(key_schema, sample, self._shards)
                next_map = write.next_map(self._table, key_schema, points)
            # Files cut at the split points (the store's, or a new store's
            # given before the write) name their shard; files of a new store
            # whose points were chosen afterwards straddle them and go to
            # every shard, which keeps its part.
            routed = base is not None or self._split_points is not None
            existing = sharded.ShardMap.of(base) if base is not None else None
            view = sharded.ShardMap.of(next_map)
            written = [f for r in returns for f in r["files"]]
            ingests = [
                _placed(_ingest_shard, s.node).remote(
                    str(self._path / s.path),
                    str(self._path / existing.shards[i].path) if existing else None,
                    self._table,
                    schema,
                    self._primary_key,
                    s.lower,
                    s.upper,
                    [f["path"] for f in written if not routed or f["range"] == i],
                    self._options,
                )
                for i, s in enumerate(view.shards)
            ]
            # Every ingest ends (or fails) before anything is cleaned up, so
            # no ingest writes into a directory after its removal.
            failures = []
            self.ingest_nodes = []
            for ingest in ingests:
                try:
                    self.ingest_nodes.append(ray.get(ingest)[1])
                except Exception as e:  # noqa: BLE001 - reported after the cleanup
                    failures.append(e)
                    self.ingest_nodes.append(None)
            if failures:
                raise failures[0]
            # The base version was read (every ingest ended): unpinned, so
            # the commit removes it unless a reader pins it. A refused
            # commit removes the write's own files and directories.
            self._release()
            self._write = None
            self._store.commit(write, next_map)
        except BaseException:
            self._abort(next_map)
            raise


def _key_sample(batch: pa.Table, columns: list[str]) -> pa.Table:
    """One row in ``SAMPLE_EVERY`` of ``batch``'s key columns."""
    return batch.select(columns).take(pa.array(range(0, batch.num_rows, SAMPLE_EVERY), pa.int64()))


def sample_split_points(dataset: Any, primary_key: Sequence[str], shards: int) -> list[Any]:
    """Split points cutting ``dataset``'s keys into ``shards`` ranges of
    about equal row counts, in the engine's key order, from one key in
    ``SAMPLE_EVERY`` rows (a pass over the dataset that writes nothing;
    fewer points when keys repeat; none for an empty dataset)."""
    columns = list(primary_key)
    sample = dataset.map_batches(
        _key_sample, batch_format="pyarrow", batch_size=None, fn_kwargs={"columns": columns}, zero_copy_batch=True
    )
    parts = [t for t in ray.get(sample.to_arrow_refs()) if t.num_rows > 0]
    if not parts:
        return []
    keys = pa.concat_tables(parts, promote_options="permissive")
    key_schema = _table_schema(keys.schema, columns)
    points: list[Any] = _basalt.ShardedStore.split_points(key_schema, sharded.row_keys(keys, columns), shards)
    return points


def write_basalt(
    dataset: Any,
    path: str | os.PathLike[str],
    table: str = "data",
    primary_key: Sequence[str] | None = None,
    *,
    shards: int | None = None,
    split_points: Sequence[Any] | None = None,
    **options: Any,
) -> BasaltDatasink:
    """Writes ``dataset`` into the sharded store at ``path`` (``BasaltDatasink``),
    each row once, and returns the sink. A new store gets ``shards`` shards
    split at ``split_points``, or, without them, at points sampled from
    ``dataset`` first (``sample_split_points``: one more read of the input),
    so that every task's files are cut at the shards' edges and each shard
    ingests them as they are (fewer shards when the sample repeats keys);
    a store that exists keeps its split points (``split_points`` given for
    it must be them)."""
    # Checked before any pass over the data: the sink's own checks.
    sink = BasaltDatasink(path, table, primary_key, shards=shards, split_points=split_points, **options)
    new_store = not (pathlib.Path(path) / sharded.SHARD_MAP).exists()
    schema = dataset.schema() if new_store and primary_key else None
    if schema is not None:
        assert primary_key is not None
        names = schema.names
        missing = [c for c in primary_key if c not in names]
        if missing:
            raise basalt.InvalidArgumentError(f"primary key columns {missing} are not in the dataset ({names})")
        base = getattr(schema, "base_schema", None)
        if split_points is not None and isinstance(base, pa.Schema):
            # Their types and order, as the store's map will check them.
            key_schema = pa.schema([pa.field(c, base.field(c).type, nullable=False) for c in primary_key])
            sharded.new_map(table, key_schema, split_points)
    if split_points is None and primary_key and new_store:
        sampled = sample_split_points(dataset, primary_key, sink._shards)
        if sampled:
            sink = BasaltDatasink(path, table, primary_key, split_points=sampled, **options)
    dataset.write_datasink(sink)
    return sink
